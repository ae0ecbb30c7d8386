//go:build unix

package files

import (
	"errors"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// mapFile maps in when it is a regular, non-empty file read from its start, so that JSON
// Lines records are processed where the page cache holds them: the kernel copies nothing
// and no read buffers are filled (BENCHMARKS.md). It returns nil for anything else (a
// pipe, a terminal, a file that cannot be mapped), which is then read as a stream. The
// file is read as it is when mapped: what is appended later is not read.
//
// A file truncated while mapped makes reading its lost pages fault; the code that reads
// the mapping runs under guard, which turns that fault into errInputChanged.
func mapFile(in io.Reader) *mapping {
	f, ok := in.(*os.File)
	if !ok {
		return nil
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() == 0 || int64(int(fi.Size())) != fi.Size() {
		return nil
	}
	if off, err := f.Seek(0, io.SeekCurrent); err != nil || off != 0 {
		return nil
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil
	}
	return &mapping{f: f, data: data}
}

// mapping is a file mapped for reading.
type mapping struct {
	f        *os.File
	data     []byte
	released int // data[:released] is given back (release)
}

// release gives back the pages wholly before data[end], which nothing reads again: the
// process's resident memory then stays a few batches, not the file's size. The pages stay
// in the page cache; a read of them would fault them in again.
func (m *mapping) release(end int) {
	end &^= os.Getpagesize() - 1
	if end > m.released {
		_ = unix.Madvise(m.data[m.released:end], unix.MADV_DONTNEED) // advice: nothing to undo on failure
		m.released = end
	}
}

// close unmaps the file and moves the file's offset past what was read, as reading it
// would have. Nothing reads the mapping by then; the engine's pooled slabs may still hold
// stale pointers into it in their spare capacity, which the collector ignores as they
// point outside its heap.
func (m *mapping) close() {
	_ = unix.Munmap(m.data) // fails only for a bad range, which data is not
	_, _ = m.f.Seek(int64(len(m.data)), io.SeekStart)
}

// isEFAULT reports whether err is the kernel refusing an address, as a write straight
// from pages the file lost does.
func isEFAULT(err error) bool { return errors.Is(err, unix.EFAULT) }
