package cli

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"sync"
)

// A run allocates each session's content and the engine's records and drops them a
// moment later, while its live heap stays a few MiB: at Go's default (collect once the
// heap doubles, from 4 MiB) a dry run of a million message rows collected 217 times and
// the collector took a quarter of tmend's CPU, taken from the database on the same cores.
// So while a run is open the heap may grow to a floor (the run's --max-inflight-bytes,
// which it may hold live anyway) before it is collected; above the floor Go's own rule
// (twice the live heap) is unchanged, and a soft limit (GOMEMLIMIT) still caps both. Go
// has no such setting: after each collection the GC percent is set from the live heap.
// GOGC in the environment turns the floor off.

// maxFloorPercent bounds the percent, which applies to the live heap until the cleanup
// after the next collection resets it: a live heap that grew meanwhile gets at most 17
// times itself. 400 to 1600 took the same CPU on that dry run.
const maxFloorPercent = 1600

type heapFloorState struct {
	mu    sync.Mutex
	holds []int64 // each open run's floor
	base  int     // the GC percent before the first hold
	epoch int     // counts first holds: a cleanup armed before the last release stops
	tuned func(percent int)
}

var heapFloor heapFloorState

// holdHeapFloor keeps the heap from being collected below floor bytes until release.
// Runs in one process share the highest floor.
func holdHeapFloor(e *Env, floor int64) (release func()) {
	if e.Getenv("GOGC") != "" || floor <= 0 {
		return func() {}
	}
	h := &heapFloor
	h.mu.Lock()
	defer h.mu.Unlock()
	h.holds = append(h.holds, floor)
	if len(h.holds) == 1 {
		h.base = debug.SetGCPercent(100)
		h.epoch++
		h.tune()
		armHeapFloor(h.epoch)
	}
	return sync.OnceFunc(func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.holds = slices.Delete(h.holds, slices.Index(h.holds, floor), slices.Index(h.holds, floor)+1)
		if len(h.holds) == 0 {
			debug.SetGCPercent(h.base)
		}
	})
}

// armHeapFloor retunes the percent after the next collection, and again after each.
func armHeapFloor(epoch int) {
	type sentinel struct{ _ *byte } // a pointer keeps it out of the tiny allocator
	runtime.AddCleanup(new(sentinel), func(epoch int) {
		h := &heapFloor
		h.mu.Lock()
		defer h.mu.Unlock()
		if epoch != h.epoch || len(h.holds) == 0 {
			return
		}
		h.tune()
		armHeapFloor(epoch)
	}, epoch)
}

var liveHeap = []metrics.Sample{{Name: "/gc/heap/live:bytes"}}

// tune sets the GC percent for the live heap; h.mu is held.
func (h *heapFloorState) tune() {
	metrics.Read(liveHeap)
	p := floorPercent(liveHeap[0].Value.Uint64(), slices.Max(h.holds), h.base)
	debug.SetGCPercent(p)
	if h.tuned != nil {
		h.tuned(p)
	}
}

// floorPercent is the GC percent that lets a live heap grow to floor bytes, and not
// less than base, the percent otherwise in effect. Go's minimum heap (4 MiB at 100) grows
// with the percent too, so the percent is also at most the one that makes it the floor.
func floorPercent(live uint64, floor int64, base int) int {
	if base < 0 || uint64(floor) <= live {
		return base
	}
	p := min((uint64(floor)-live)*100/max(live, 1), uint64(floor)*100/(4<<20), maxFloorPercent)
	return max(base, int(p))
}
