package scanner

import (
	"errors"
	"runtime/debug"
)

// errInputChanged ends a run whose mapped input file lost pages while it was read.
var errInputChanged = errors.New("read input: the file was truncated while it was read")

// guard runs fn. With mapped input, a fault reading the mapping (its file was truncated
// meanwhile) ends fn with errInputChanged instead of ending the process; any other
// panic goes on.
func guard(mapped bool, fn func() error) (err error) {
	if !mapped {
		return fn()
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if _, fault := r.(interface{ Addr() uintptr }); !fault {
				panic(r)
			}
			err = errInputChanged
		}
	}()
	return fn()
}
