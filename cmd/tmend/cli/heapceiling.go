package cli

import (
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// A session larger than the in-flight budget is handled alone, and its repair holds a
// record of every message and block it read: a one-row-per-message session of 562,002
// messages of 130 bytes has about 3.9 times its bytes live at once. Go lets the heap grow to
// twice what was live at its last collection, which made that scan's peak 6.4 times
// the session (BENCHMARKS.md). So while such a session is in flight the heap has a soft
// limit (Go's memory limit): what the process holds besides garbage when the session
// comes, plus ceilingRatio times its bytes. For that densest session the limit is a
// little below what its repair holds at its peak, so the collector runs often there
// (Go caps it at half the CPU): 5% more of tmend's CPU for a peak 4.2 times the
// session rather than 4.5 at 4 times. Sessions of several runs in one process add up; a
// lower limit already set is kept, and GOMEMLIMIT in the environment turns the ceiling
// off.

// ceilingRatio, in halves: 3.5 times a session's bytes.
const ceilingRatio = 7

type heapCeilingState struct {
	mu   sync.Mutex
	held int64 // the bytes of the sessions in flight alone
	base int64 // what the process held when the first came
	prev int64 // the limit before it
}

var heapCeiling heapCeilingState

// holdHeapCeiling caps the heap for a session of size bytes until release.
func holdHeapCeiling(e *Env, size int64) (release func()) {
	if e.Getenv("GOMEMLIMIT") != "" || size <= 0 {
		return func() {}
	}
	h := &heapCeiling
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held == 0 {
		h.prev, h.base = debug.SetMemoryLimit(-1), heldMemory()
	}
	h.held += size
	h.set()
	return sync.OnceFunc(func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.held -= size
		h.set()
	})
}

// set applies the limit for the sessions held; h.mu is held.
func (h *heapCeilingState) set() {
	if h.held == 0 {
		debug.SetMemoryLimit(h.prev)
		return
	}
	debug.SetMemoryLimit(min(h.prev, h.base+h.held*ceilingRatio/2))
}

var memoryClasses = []metrics.Sample{
	{Name: "/memory/classes/total:bytes"},
	{Name: "/memory/classes/heap/released:bytes"},
	{Name: "/memory/classes/heap/objects:bytes"},
	{Name: "/gc/heap/live:bytes"},
}

// heldMemory is the memory Go's limit counts, less the heap's garbage: the runtime's
// own and the heap found live at the last collection.
func heldMemory() int64 {
	metrics.Read(memoryClasses)
	v := func(i int) int64 { return int64(memoryClasses[i].Value.Uint64()) }
	return v(0) - v(1) - v(2) + v(3)
}
