package cli

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// openInput opens a FILE argument, or stdin for none or "-".
func openInput(e *Env, path string) (io.Reader, func(), error) {
	if path == "" || path == "-" {
		return e.Stdin, func() {}, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("open input: %w", err)
	}
	return f, func() { _ = f.Close() }, nil // read only: closing loses nothing
}

// outputFile is where -o and --report write. A regular file (or a new one) is written
// beside itself and renamed over it on commit, so readers never see half of it. A
// symlink is followed: its target is replaced and the link kept. Anything else (a
// device such as /dev/null, a FIFO, a terminal) is written to directly, never replaced,
// and so is a descriptor of this process named by path (/dev/stdout, /dev/stderr,
// /dev/fd/N, /proc/self/fd/N), whatever it is: a pipe, a socket, a file.
type outputFile struct {
	f    *os.File
	dest string // what commit renames the temp file over; empty when writing through
	done bool
}

func createOutput(path string) (*outputFile, error) {
	target, fi, err := resolveOutput(path)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	if fd, ok := descriptorOf(target); ok {
		f, err := openDescriptor(fd)
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", path, err)
		}
		return &outputFile{f: f}, nil
	}
	switch {
	case fi != nil && fi.IsDir():
		return nil, fmt.Errorf("create %s: is a directory", path)
	case fi != nil && !fi.Mode().IsRegular():
		f, err := os.OpenFile(target, os.O_WRONLY, 0)
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", path, err)
		}
		return &outputFile{f: f}, nil
	}
	perm := os.FileMode(0o644) // not CreateTemp's 0600, which is for secrets; a replaced file keeps its own
	if fi != nil {
		perm = fi.Mode().Perm()
	}
	f, err := os.CreateTemp(filepath.Dir(target), "."+filepath.Base(target)+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	if err := f.Chmod(perm); err != nil {
		_ = f.Close() // best effort: the Chmod error is the one to report
		_ = os.Remove(f.Name())
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	return &outputFile{f: f, dest: target}, nil
}

// resolveOutput follows symlinks from path to where they end, which need not exist yet,
// and returns that path with its file info (nil when it does not exist). It stops at a
// path that names one of this process's descriptors (descriptorOf), with no file info.
func resolveOutput(path string) (string, os.FileInfo, error) {
	for range 40 {
		if _, ok := descriptorOf(path); ok {
			return path, nil, nil
		}
		fi, err := os.Lstat(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return path, nil, nil
		case err != nil:
			return "", nil, err
		case fi.Mode()&fs.ModeSymlink == 0:
			return path, fi, nil
		}
		link, err := os.Readlink(path)
		if err != nil {
			return "", nil, err
		}
		if !filepath.IsAbs(link) {
			dir, err := filepath.EvalSymlinks(filepath.Dir(path))
			if err != nil {
				return "", nil, err
			}
			link = filepath.Join(dir, link)
		}
		path = link
	}
	return "", nil, errors.New("too many levels of symbolic links")
}

// namesInput reports whether out names the input file, or for a directory one of the
// *.jsonl files its walk reads: writing there would replace transcripts being read.
func namesInput(input, out string) bool {
	if out == "" || input == "" || input == "-" {
		return false
	}
	fi, err := os.Stat(input)
	switch {
	case err != nil:
		return false
	case fi.IsDir():
		return inTree(input, out)
	}
	return fi.Mode().IsRegular() && sameOutput(input, out)
}

// inTree reports whether out ends at a *.jsonl file under dir.
func inTree(dir, out string) bool {
	p, _, err := resolveOutput(out)
	if err != nil || filepath.Ext(p) != ".jsonl" {
		return false
	}
	parent, err := filepath.EvalSymlinks(filepath.Dir(p))
	if err != nil {
		return false
	}
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return false
	}
	if parent, err = filepath.Abs(parent); err != nil {
		return false
	}
	if root, err = filepath.Abs(root); err != nil {
		return false
	}
	rel, err := filepath.Rel(root, parent)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// sameOutput reports whether two output paths end at the same file.
func sameOutput(a, b string) bool {
	ra, fa, errA := resolveOutput(a)
	rb, fb, errB := resolveOutput(b)
	if errA != nil || errB != nil {
		return filepath.Clean(a) == filepath.Clean(b)
	}
	// A descriptor is what it refers to: stat follows /proc's links to pipes too.
	if _, ok := descriptorOf(ra); ok {
		fa, _ = os.Stat(ra)
	}
	if _, ok := descriptorOf(rb); ok {
		fb, _ = os.Stat(rb)
	}
	if fa != nil && fb != nil {
		return os.SameFile(fa, fb)
	}
	ra, errA = filepath.Abs(ra)
	rb, errB = filepath.Abs(rb)
	return errA == nil && errB == nil && ra == rb
}

// commit makes the output visible: the temp file is synced and renamed over the
// destination (and removed if that fails); a file written through is closed.
func (o *outputFile) commit() error {
	o.done = true
	if o.dest == "" {
		return o.f.Close()
	}
	err := o.f.Sync()
	if cerr := o.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(o.f.Name(), o.dest)
	}
	if err != nil {
		_ = os.Remove(o.f.Name()) // best effort: err says what failed
	}
	return err
}

// abort drops the output of a failed run: the temp file is removed and the destination
// left as it was.
func (o *outputFile) abort() {
	if o.done {
		return
	}
	o.done = true
	// Best effort: the run has failed already, and its error is the one to report.
	_ = o.f.Close()
	if o.dest != "" {
		_ = os.Remove(o.f.Name())
	}
}

// commitOutputs puts a command's -o and --report files in place once it has written
// them (the report's buffer flushed first); either may be nil.
func commitOutputs(out, report *outputFile, reportBuf *bufio.Writer) error {
	if out != nil {
		if err := out.commit(); err != nil {
			return fmt.Errorf("write output: %w", err)
		}
	}
	if report != nil {
		if err := reportBuf.Flush(); err != nil {
			return fmt.Errorf("write report: %w", err)
		}
		if err := report.commit(); err != nil {
			return fmt.Errorf("write report: %w", err)
		}
	}
	return nil
}
