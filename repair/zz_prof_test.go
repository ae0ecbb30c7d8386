package repair

import (
	"os"
	"runtime"
	"testing"
	"unsafe"
)

type discard struct{}

func (discard) Keep(from, to int) {}
func (discard) Write(p []byte)    {}

func TestZZProf(t *testing.T) {
	f := os.Getenv("ZZ_FILE")
	if f == "" {
		t.Skip()
	}
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, rep, err := WriteDocument(discard{}, b[:len(b)-1], Options{})
	runtime.ReadMemStats(&after)
	t.Logf("status %s err %v total alloc %d MB, mallocs %d", rep.Status, err, (after.TotalAlloc-before.TotalAlloc)>>20, after.Mallocs-before.Mallocs)
}

func TestZZSizes(t *testing.T) {
	t.Logf("member %d block %d part %d message %d callRef %d keyChain %d resultRef %d turnRef %d edit %d fieldsObj %d",
		unsafe.Sizeof(member{}), unsafe.Sizeof(block{}), unsafe.Sizeof(part{}), unsafe.Sizeof(message{}), unsafe.Sizeof(callRef{}),
		unsafe.Sizeof(keyChain{}), unsafe.Sizeof(resultRef{}), unsafe.Sizeof(turnRef{}), unsafe.Sizeof(edit{}), unsafe.Sizeof(fieldsObj{}))
}
