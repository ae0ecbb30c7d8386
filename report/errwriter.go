package report

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// errWriter lets a render function print line after line and check for a write error
// once, at the end: it keeps the first error and writes nothing after it.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

// The print methods drop the error only because e has kept it.

func (e *errWriter) printf(format string, args ...any) { _, _ = fmt.Fprintf(e, format, args...) }
func (e *errWriter) println(args ...any)               { _, _ = fmt.Fprintln(e, args...) }
func (e *errWriter) print(s string)                    { _, _ = io.WriteString(e, s) }

// flush flushes tw, which e writes to, and returns the first error of the two.
func (e *errWriter) flush(tw *tabwriter.Writer) error {
	err := tw.Flush()
	if e.err != nil {
		return e.err
	}
	return err
}
