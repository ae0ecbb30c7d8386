package repair

import (
	"runtime"
	"testing"
)

// A plan that analysed a large transcript is not pooled: its slabs would stay live while
// the caller writes the result.
func TestLargePlansAreNotPooled(t *testing.T) {
	big := denseBlocks(30000)
	if len(big) <= poolMax {
		t.Fatalf("input of %d bytes, want over %d", len(big), poolMax)
	}
	runtime.GC() // twice: empties the pool and its victims
	runtime.GC()
	if _, err := Repair(big, Options{}); err != nil {
		t.Fatal(err)
	}
	p := plans.Get().(*plan)
	defer plans.Put(p)
	if n := cap(p.msgs) + cap(p.ps.parts); n > 0 {
		t.Fatalf("pooled plan holds room for %d records, want a new one", n)
	}
}
