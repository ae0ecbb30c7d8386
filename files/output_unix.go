//go:build unix

package files

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// iovMax is the most buffers one writev takes (IOV_MAX on Linux and the BSDs).
const iovMax = 1024

// maxWrite is the most bytes one writev is given: Darwin fails a write of over 2 GiB
// with EINVAL (Linux writes less and says so), and internal/poll caps writes at 1 GiB
// for the same reason. Joined spans of unchanged records can reach that.
const maxWrite = 1 << 30

// writeBuffers writes bufs in order: to a file with writev, so the kernel gathers them
// (os.File has no vectored write of its own, and net.Buffers writes to a file one buffer
// at a time), else one Write each.
func writeBuffers(w io.Writer, bufs [][]byte) error {
	f, ok := w.(*os.File)
	if !ok {
		return writeEach(w, bufs)
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return writeEach(w, bufs)
	}
	for len(bufs) > 0 {
		var n int
		var werr error
		if err := rc.Write(func(fd uintptr) bool {
			n, werr = unix.Writev(int(fd), window(bufs))
			return werr != unix.EAGAIN // not ready: wait and try again
		}); err != nil {
			return err
		}
		if werr == unix.EINTR {
			continue
		}
		if werr != nil {
			return &os.PathError{Op: "writev", Path: f.Name(), Err: werr}
		}
		if n == 0 {
			return io.ErrShortWrite
		}
		bufs = advance(bufs, n)
	}
	return nil
}

// window is what one writev takes from the front of bufs: at most iovMax buffers and
// maxWrite bytes, the first buffer cut short when it alone is larger.
func window(bufs [][]byte) [][]byte {
	w, total := bufs[:min(len(bufs), iovMax)], 0
	for i, b := range w {
		if total += len(b); total > maxWrite {
			if i == 0 {
				return [][]byte{b[:maxWrite]}
			}
			return w[:i]
		}
	}
	return w
}

// advance drops the first n bytes of bufs, which a (maybe short) write took.
func advance(bufs [][]byte, n int) [][]byte {
	for len(bufs) > 0 && n >= len(bufs[0]) {
		n -= len(bufs[0])
		bufs = bufs[1:]
	}
	if len(bufs) > 0 {
		bufs[0] = bufs[0][n:]
	}
	return bufs
}
