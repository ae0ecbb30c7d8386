//go:build unix

package cli

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// closedAtStart reports whether descriptor fd (0, 1 or 2) was closed when the process
// started. The Go runtime puts /dev/null, opened read-write, in place of a closed
// standard descriptor before any of tmend's code runs (runtime.checkfds), so that is
// what a closed one looks like: a shell's '>/dev/null' opens it write-only. (A parent
// that hands down /dev/null opened read-write, as Python's subprocess.DEVNULL does,
// looks the same.)
func closedAtStart(fd int) bool {
	var st, null unix.Stat_t
	if unix.Fstat(fd, &st) != nil || unix.Stat(os.DevNull, &null) != nil {
		return false
	}
	if st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != null.Rdev {
		return false
	}
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	return err == nil && flags&unix.O_ACCMODE == unix.O_RDWR
}

// openDescriptor returns a file that writes to descriptor fd of this process: a
// duplicate, which closing leaves fd open.
func openDescriptor(fd int) (*os.File, error) {
	if fd <= 2 && closedAtStart(fd) {
		return nil, fmt.Errorf("descriptor %d was closed when tmend started", fd)
	}
	nfd, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 3)
	if err != nil {
		return nil, fmt.Errorf("descriptor %d: %w", fd, err)
	}
	return os.NewFile(uintptr(nfd), fmt.Sprintf("/dev/fd/%d", fd)), nil
}
