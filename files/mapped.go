package files

import (
	"errors"
	"runtime/debug"
	"unsafe"
)

// errInputChanged ends a run whose mapped input file lost pages while it was read.
var errInputChanged = errors.New("read input: the file was truncated (or became unreadable) while it was read")

// guard runs fn, which reads mapped (nil when the input is not mapped). Should the file
// lose pages meanwhile, a read of them faults and a write straight from them fails with
// EFAULT: either ends fn with errInputChanged, rather than ending the process or passing
// for a write error. Any other panic, a fault elsewhere included, goes on.
func guard(mapped []byte, fn func() error) (err error) {
	if mapped == nil {
		return fn()
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if f, ok := r.(interface{ Addr() uintptr }); !ok || !within(mapped, f.Addr()) {
				panic(r)
			}
			err = errInputChanged
		}
	}()
	if err = fn(); isEFAULT(err) {
		err = errInputChanged
	}
	return err
}

// within reports whether addr is the address of one of b's bytes.
func within(b []byte, addr uintptr) bool {
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return addr >= start && addr-start < uintptr(len(b))
}
