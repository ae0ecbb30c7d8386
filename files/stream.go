package files

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/tmend/tmend/report"
)

// fileRecord is one input record (a JSON Lines line, or the whole input as one document)
// on its way through the pipeline.
type fileRecord struct {
	line int    // 1-based line number; 0 for a single document
	data []byte // the record without its line terminator
	eol  []byte // the terminator to write back ("\n", "\r\n" or nothing)
	// src is the chunk (or mapping) holding the record: data is src[at:at+len(data)],
	// and eol follows it.
	src []byte
	at  int
	// tooLarge marks a record over the size limit: it is not held in memory but copied
	// from input to output unchanged when its turn comes.
	tooLarge bool
	size     int64
	outcome  *report.Session
}

// recordBatch is a run of records a worker processes and the writer writes together.
type recordBatch struct {
	seq   int
	items []*fileRecord
	// out is what to write for all items but a too-large one, built by the worker: the
	// records' bytes where they lie, and what repairs made in a recycled buffer.
	out *output
	// retired are input chunks that no record after this batch uses: free once it is
	// written.
	retired []*[]byte
	// end is, in mapped input, where the records read so far end.
	end int
	// passthrough, when set, asks the writer to hand it the output at this point.
	passthrough func(w io.Writer) error
}

// streamConfig wires the pipeline: read records from in, process them on workers in
// parallel, and hand results to emit in input order.
type streamConfig struct {
	in       io.Reader
	mapped   []byte        // the whole input, when the file is mapped (mapFile); in is then unused
	release  func(end int) // with mapped: nothing reads mapped[:end] again
	out      io.Writer     // nil: no output (check)
	maxBytes int64
	workers  int
	// process sets it.outcome for a record with data and adds what to write for it to out
	// (nil when there is no output); it must not touch shared state.
	process func(it *fileRecord, out *output)
	// emit is called in input order from a single goroutine, for every record (blank
	// lines have line < 0; oversized ones have tooLarge and size set).
	emit func(it *fileRecord) error
}

const batchLines = 128

// runStream reads JSON Lines records until EOF. Records over maxBytes are reported (via
// process with tooLarge set) and, when there is output, copied through unchanged.
func runStream(ctx context.Context, cfg streamConfig) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	batches := make(chan *recordBatch, cfg.workers*2)
	done := make(chan *recordBatch, cfg.workers*2)
	// Outputs go round: a worker takes one, the writer gives it back once written. Unlike
	// a sync.Pool, a collection does not empty it, so the run's repairs are not written in
	// fresh memory again and again.
	outs := make(chan *output, 4*cfg.workers+2)
	var wg sync.WaitGroup
	for range cfg.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := guard(cfg.mapped, func() error { work(ctx, cfg, batches, done, outs); return nil }); err != nil {
				cancel(err)
			}
		}()
	}

	// The writer puts batches back in order.
	writeErr := make(chan error, 1)
	go func() {
		pending := map[int]*recordBatch{}
		next := 0
		var scratch [][]byte
		for b := range done {
			pending[b.seq] = b
			for b, ok := pending[next]; ok; b, ok = pending[next] {
				delete(pending, next)
				next++
				// Under guard: the kernel reads the mapping when it writes the records.
				if err := guard(cfg.mapped, func() error { return writeBatch(cfg, b, outs, &scratch) }); err != nil {
					cancel(err)
					writeErr <- err
					for range done { // drain so workers can finish
					}
					return
				}
			}
		}
		writeErr <- nil
	}()

	readErr := guard(cfg.mapped, func() error { return readBatches(ctx, cfg, batches) })
	if errors.Is(readErr, errInputChanged) {
		cancel(readErr) // the fault may have left the writer waiting for a passthrough
	}
	close(batches)
	wg.Wait()
	close(done)
	werr := <-writeErr
	switch {
	case werr != nil:
		return werr
	case readErr != nil:
		return readErr
	}
	return context.Cause(ctx)
}

// work repairs batches until there are none, each into an output from outs (when there
// is output), and hands them to the writer through done.
func work(ctx context.Context, cfg streamConfig, batches <-chan *recordBatch, done chan<- *recordBatch, outs chan *output) {
	for b := range batches {
		var out *output
		if cfg.out != nil {
			select {
			case out = <-outs:
			default:
				out = &output{}
			}
		}
		for _, it := range b.items {
			switch {
			case it.tooLarge: // copied through by the writer
			case out == nil: // a check
				if it.line >= 0 {
					cfg.process(it, nil)
				}
			default:
				out.record(it)
				if it.line >= 0 {
					cfg.process(it, out)
				} else { // a blank line, kept as it is
					out.Keep(0, len(it.data))
				}
				out.Keep(len(it.data), len(it.data)+len(it.eol))
			}
		}
		b.out = out
		select {
		case done <- b:
		case <-ctx.Done():
			return
		}
	}
}

// writeBatch writes b, then gives its output back to outs and, in mapped input, the
// pages of its records to the kernel. scratch is the writer's, for the output's buffers.
func writeBatch(cfg streamConfig, b *recordBatch, outs chan<- *output, scratch *[][]byte) error {
	// A too-large record is always its batch's last: everything before it goes first.
	if b.out != nil {
		if err := b.out.writeTo(cfg.out, scratch); err != nil {
			return err
		}
		b.out.reset()
		select {
		case outs <- b.out:
		default:
		}
	}
	for _, it := range b.items {
		if it.tooLarge && b.passthrough != nil {
			if err := b.passthrough(cfg.out); err != nil {
				return err
			}
		}
		if err := cfg.emit(it); err != nil {
			return err
		}
	}
	for _, c := range b.retired {
		chunks.Put(c)
	}
	if cfg.release != nil {
		cfg.release(b.end)
	}
	return nil
}

func readBatches(ctx context.Context, cfg streamConfig, batches chan<- *recordBatch) error {
	seq, line := 0, 0
	cur := &recordBatch{}
	lr := &lineReader{r: cfg.in}
	if cfg.mapped != nil {
		lr.buf, lr.err = cfg.mapped, io.EOF // one chunk, never refilled
	}
	send := func() bool {
		cur.seq, cur.end = seq, lr.pos
		cur.retired, lr.retired = lr.retired, nil
		seq++
		select {
		case batches <- cur:
			cur = &recordBatch{}
			return true
		case <-ctx.Done():
			return false
		}
	}
	for {
		data, eol, full, err := lr.next(cfg.maxBytes)
		if len(data) == 0 && len(eol) == 0 && err == io.EOF {
			break
		}
		if err != nil && err != io.EOF && !full {
			return fmt.Errorf("read input: %w", err)
		}
		line++
		if full {
			// Too large to hold: report it, then copy it through at its turn in the output.
			it := &fileRecord{line: line, tooLarge: true, size: int64(len(data))}
			cur.items = append(cur.items, it)
			prefix := data
			ready, finished := make(chan struct{}), make(chan error, 1)
			cur.passthrough = func(io.Writer) error {
				close(ready)
				select {
				case err := <-finished:
					return err
				case <-ctx.Done():
					return context.Cause(ctx)
				}
			}
			if !send() {
				return nil
			}
			select {
			case <-ready:
			case <-ctx.Done():
				return nil
			}
			n, cerr := lr.copyRest(cfg.out, prefix)
			it.size = n
			finished <- cerr
			if cerr != nil {
				return cerr
			}
			continue
		}
		it := &fileRecord{line: line, data: data, eol: eol, src: lr.buf, at: lr.pos - len(data) - len(eol)}
		if len(bytes.TrimSpace(data)) == 0 {
			it.line = -line // blank lines are kept as they are and not counted as sessions
		}
		cur.items = append(cur.items, it)
		if len(cur.items) >= batchLines && !send() {
			return nil
		}
		if err == io.EOF {
			break
		}
	}
	if len(cur.items) > 0 {
		send()
	}
	return nil
}

// lineReader splits its input into lines that point into large chunks it reads, so no
// line is copied or allocated on its own. A chunk it has moved on from is retired: it is
// reused once the records read so far are written (reading into memory that is still in
// the CPU's caches is much cheaper than into fresh memory).
type lineReader struct {
	r       io.Reader
	buf     []byte // the current chunk; buf[pos:] is not handed out yet
	pos     int
	scanned int   // buf[pos:scanned] holds no newline
	err     error // the reader's error once it stops
	retired []*[]byte
}

// chunkSize is how much each read asks for at least: more than the bufio.Reader in front
// (256 KiB), so reads go straight into the chunk, and small enough that the few chunks in
// flight keep memory low. Pooled chunks hold twice that, for a line's start carried over.
const chunkSize = 1 << 20

var chunks = sync.Pool{New: func() any { b := make([]byte, 0, 2*chunkSize); return &b }}

// next returns the next line without its terminator. full reports a line longer than max;
// data then holds its first bytes and the rest is still unread.
func (lr *lineReader) next(max int64) (data, eol []byte, full bool, err error) {
	for {
		if i := bytes.IndexByte(lr.buf[lr.scanned:], '\n'); i >= 0 {
			end := lr.scanned + i
			data, eol = lr.buf[lr.pos:end:end], lr.buf[end:end+1:end+1]
			if len(data) > 0 && data[len(data)-1] == '\r' {
				data, eol = data[:len(data)-1:len(data)-1], lr.buf[end-1:end+1:end+1]
			}
			lr.pos, lr.scanned = end+1, end+1
			if int64(len(data)) > max {
				return lr.buf[lr.pos-len(data)-len(eol) : lr.pos], nil, true, nil
			}
			return data, eol, false, nil
		}
		lr.scanned = len(lr.buf)
		unread := lr.buf[lr.pos:]
		if int64(len(unread)) > max+2 {
			lr.pos, lr.scanned = len(lr.buf), len(lr.buf)
			return unread, nil, true, nil
		}
		if lr.err != nil {
			lr.pos, lr.scanned = len(lr.buf), len(lr.buf)
			if lr.err == io.EOF {
				return unread[:len(unread):len(unread)], nil, false, io.EOF
			}
			return nil, nil, false, lr.err
		}
		lr.fill()
	}
}

// fill reads more input behind the unread bytes, into a new chunk when the current one
// has little room left.
func (lr *lineReader) fill() {
	if cap(lr.buf)-len(lr.buf) < chunkSize/4 {
		unread := lr.buf[lr.pos:]
		var nb []byte
		if len(unread) <= chunkSize {
			nb = (*chunks.Get().(*[]byte))[:len(unread)]
		} else { // a long line: a chunk of its own, not pooled
			nb = make([]byte, len(unread), len(unread)+chunkSize)
		}
		copy(nb, unread)
		if old := lr.buf; cap(old) == 2*chunkSize {
			lr.retired = append(lr.retired, &old)
		}
		lr.buf, lr.scanned, lr.pos = nb, lr.scanned-lr.pos, 0
	}
	n, err := lr.r.Read(lr.buf[len(lr.buf):cap(lr.buf)])
	lr.buf = lr.buf[:len(lr.buf)+n]
	if err != nil {
		lr.err = err
	}
}

// copyRest writes prefix and the rest of the current line (terminator included) to w,
// which may be nil to discard, and returns the line's length. It runs once every record
// before the line is written, so the chunks it moves through are free at once: a line of
// any length costs a chunk or two of memory.
func (lr *lineReader) copyRest(w io.Writer, prefix []byte) (int64, error) {
	if w == nil {
		w = io.Discard
	}
	n := int64(len(prefix))
	if _, err := w.Write(prefix); err != nil {
		return n, fmt.Errorf("write output: %w", err)
	}
	if bytes.HasSuffix(prefix, []byte("\n")) {
		return n, nil
	}
	for {
		rest := lr.buf[lr.pos:]
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			rest = rest[:i+1]
		}
		lr.pos += len(rest)
		lr.scanned = lr.pos
		n += int64(len(rest))
		if _, err := w.Write(rest); err != nil {
			return n, fmt.Errorf("write output: %w", err)
		}
		switch {
		case bytes.HasSuffix(rest, []byte("\n")), lr.err == io.EOF && lr.pos == len(lr.buf):
			return n, nil
		case lr.err != nil && lr.pos == len(lr.buf):
			return n, fmt.Errorf("read input: %w", lr.err)
		}
		lr.fill()
		for _, c := range lr.retired {
			chunks.Put(c)
		}
		lr.retired = lr.retired[:0]
	}
}
