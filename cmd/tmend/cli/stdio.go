package cli

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// OSEnv is the Env of the tmend process: its standard streams and environment.
func OSEnv() Env {
	return Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv,
		StdoutClosed: closedAtStart(1)}
}

// errStdoutClosed is what check, fix and gen say when their output would go to a
// standard output that was closed: their result would be lost.
var errStdoutClosed = errors.New("standard output is closed (tmend started with descriptor 1 closed): " +
	"nothing written there would be kept; give -o FILE, or redirect it (to /dev/null to discard it)")

// checkStdout is errStdoutClosed when standard output was closed, for a command whose
// result goes there.
func (e *Env) checkStdout() error {
	if e.StdoutClosed {
		return errStdoutClosed
	}
	return nil
}

// descriptorOf returns the descriptor an output path names, when it names one of this
// process's: /dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N (and
// /proc/thread-self/fd/N, /proc/PID/fd/N for this PID). Such a path is written straight
// to the descriptor, whatever it is (a pipe, a socket, a file, a terminal): following
// it to what it links to goes wrong for all but files (a pipe's link names no path).
func descriptorOf(path string) (int, bool) {
	path = filepath.Clean(path)
	switch path {
	case "/dev/stdout":
		return 1, true
	case "/dev/stderr":
		return 2, true
	}
	var rest string
	for _, dir := range []string{"/dev/fd/", "/proc/self/fd/", "/proc/thread-self/fd/",
		"/proc/" + strconv.Itoa(os.Getpid()) + "/fd/"} {
		if r, ok := strings.CutPrefix(path, dir); ok {
			rest = r
			break
		}
	}
	if rest == "" {
		return 0, false
	}
	fd, err := strconv.Atoi(rest)
	if err != nil || fd < 0 || strconv.Itoa(fd) != rest {
		return 0, false
	}
	return fd, true
}
