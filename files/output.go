package files

import (
	"fmt"
	"io"
)

// output is what a batch writes: spans of the input, written from where they lie, and
// the bytes repairs made, in buf. Written with one vectored write (writeBuffers), the
// input's bytes are copied once, into the kernel, rather than first into a buffer of ours
// (BENCHMARKS.md). It is the repair.Pieces of the record being added.
type output struct {
	buf   []byte
	spans []span
	n     int // bytes in all spans
	// The record being added: its input (a chunk, the mapping or the whole document) and
	// where it starts there; Keep's offsets are the record's.
	in []byte
	at int
}

// span is in[from:to], or buf[from:to] when in is nil: buf may move as it grows.
type span struct {
	in       []byte
	from, to int
}

// record makes it the record that Keep's offsets refer to.
func (o *output) record(it *fileRecord) { o.in, o.at = it.src, it.at }

func (o *output) Keep(from, to int) { o.add(o.in, o.at+from, o.at+to) }

func (o *output) Write(p []byte) {
	from := len(o.buf)
	o.buf = append(o.buf, p...)
	o.add(nil, from, len(o.buf))
}

// add appends a span, or extends the last one when the new one continues it: a run of
// unchanged messages and records becomes one span.
func (o *output) add(in []byte, from, to int) {
	if from == to {
		return
	}
	o.n += to - from
	if k := len(o.spans) - 1; k >= 0 && o.spans[k].to == from && sameArray(o.spans[k].in, in) {
		o.spans[k].to = to
		return
	}
	o.spans = append(o.spans, span{in: in, from: from, to: to})
}

// sameArray reports whether a and b start at the same byte (or are both nil: buf).
func sameArray(a, b []byte) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return &a[:1][0] == &b[:1][0]
}

// buffers returns the spans as byte slices, appended to dst.
func (o *output) buffers(dst [][]byte) [][]byte {
	for _, s := range o.spans {
		if s.in == nil {
			dst = append(dst, o.buf[s.from:s.to])
		} else {
			dst = append(dst, s.in[s.from:s.to])
		}
	}
	return dst
}

// reset empties o, keeping its capacity, and drops its references to the input.
func (o *output) reset() {
	clear(o.spans)
	*o = output{buf: o.buf[:0], spans: o.spans[:0]}
}

// writeTo writes o to w: in one vectored write per up to a thousand spans when w is a
// file (writeBuffers), else span by span.
func (o *output) writeTo(w io.Writer, scratch *[][]byte) error {
	bufs := o.buffers((*scratch)[:0])
	defer func() { clear(bufs); *scratch = bufs[:0] }()
	if err := writeBuffers(w, bufs); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}

func writeEach(w io.Writer, bufs [][]byte) error {
	for _, b := range bufs {
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	return nil
}
