package cli

import (
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFloorPercent(t *testing.T) {
	t.Parallel()
	const mib = 1 << 20
	for _, tc := range []struct {
		name        string
		live, floor int64
		base, want  int
	}{
		{"SmallHeapGrowsToTheFloor", 4 * mib, 16 * mib, 100, 300},
		{"MinimumHeapBoundsIt", 2 * mib, 16 * mib, 100, 400},
		{"Capped", 1 * mib, 1024 * mib, 100, maxFloorPercent},
		{"LargeHeapKeepsBase", 12 * mib, 16 * mib, 100, 100},
		{"AboveTheFloorKeepsBase", 64 * mib, 16 * mib, 100, 100},
		{"HigherBaseKept", 2 * mib, 16 * mib, 800, 800},
		{"OffStaysOff", 2 * mib, 16 * mib, -1, -1},
		{"NothingLiveYet", 0, 16 * mib, 100, 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, floorPercent(uint64(tc.live), tc.floor, tc.base))
		})
	}
}

// Not parallel: the GC percent is the process's, and the parallel tests' runs hold
// floors of their own.
func TestHoldHeapFloor(t *testing.T) {
	gcPercent := func() int { p := debug.SetGCPercent(100); debug.SetGCPercent(p); return p }
	before := gcPercent()
	tuned := make(chan int, 16)
	heapFloor.mu.Lock()
	heapFloor.tuned = func(p int) {
		select {
		case tuned <- p:
		default:
		}
	}
	heapFloor.mu.Unlock()
	t.Cleanup(func() {
		heapFloor.mu.Lock()
		heapFloor.tuned = nil
		heapFloor.mu.Unlock()
	})

	release := holdHeapFloor(&Env{Getenv: noEnv}, 1<<30)
	<-tuned // on the hold
	runtime.GC()
	p := <-tuned // after a collection, from its live heap
	require.Greater(t, p, before, "a small live heap may grow to the floor")
	require.Equal(t, p, gcPercent())
	release()
	release()
	require.Equal(t, before, gcPercent(), "the percent before the hold comes back")

	release = holdHeapFloor(&Env{Getenv: func(k string) string {
		if k == "GOGC" {
			return "100"
		}
		return ""
	}}, 1<<30)
	defer release()
	require.Equal(t, before, gcPercent(), "GOGC in the environment turns the floor off")
}

// Not parallel: the memory limit is the process's.
func TestHoldHeapCeiling(t *testing.T) {
	const mib = 1 << 20
	limit := func() int64 { return debug.SetMemoryLimit(-1) }
	before := limit()
	env := &Env{Getenv: noEnv}

	release := holdHeapCeiling(env, 100*mib)
	heapCeiling.mu.Lock()
	base := heapCeiling.base
	heapCeiling.mu.Unlock()
	require.InDelta(t, heldMemory(), base, 64*mib, "the base is what the process holds")
	require.Equal(t, base+350*mib, limit(), "and 3.5 times the session")
	second := holdHeapCeiling(env, 20*mib)
	require.Equal(t, base+420*mib, limit(), "sessions in flight alone add up")
	release()
	release()
	require.Equal(t, base+70*mib, limit())
	second()
	require.Equal(t, before, limit(), "the limit before the holds comes back")

	debug.SetMemoryLimit(200 * mib)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	release = holdHeapCeiling(env, 100*mib)
	require.Equal(t, int64(200*mib), limit(), "a lower limit is kept")
	release()

	release = holdHeapCeiling(&Env{Getenv: func(k string) string {
		if k == "GOMEMLIMIT" {
			return "1GiB"
		}
		return ""
	}}, 10*mib)
	defer release()
	require.Equal(t, int64(200*mib), limit(), "GOMEMLIMIT in the environment turns the ceiling off")
}
