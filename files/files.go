// Package files checks and repairs transcripts in files and pipes, with no database:
// one document, JSON Lines streamed through a bounded worker pool, or a pi session file.
// A regular file is mapped and read in place; the output is written in vectored writes.
package files

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"

	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/report"
	"github.com/tmend/tmend/store/model"
)

// Options say how Run checks or repairs.
type Options struct {
	Repair repair.Options
	// Fix repairs: every transcript goes to the output in the shape it came in, byte for
	// byte where nothing changed. Without it Run only checks and writes no output.
	Fix bool
	// MaxBytes is the largest transcript processed; a larger one is reported too_large
	// and passed through unread. Default 64 MiB. Repair.MaxMemory defaults to
	// repair.DefaultMaxMemory of it.
	MaxBytes int64
	// Workers repair JSON Lines records in parallel. Default GOMAXPROCS.
	Workers int
}

// Result sums up a check or fix.
type Result struct {
	Summary report.Summary
	// Broken counts transcripts with problems (a check); Failed counts those that could
	// not be processed (passed through unchanged).
	Broken, Failed int
}

// Run checks or repairs the transcripts read from in: one document (a JSON array of
// messages, or an object holding them), or JSON Lines, one session per line, streamed
// and repaired in parallel, never loaded whole. A UTF-8 byte order mark is skipped (and
// kept in the output). Each transcript's outcome goes to every handler in input order,
// then the summary. With o.Fix, out receives the transcripts. A transcript that cannot be
// processed is reported, counted in Failed and passed through; the error is for the run
// as a whole (reading, writing, ctx). An *os.File that is a regular file is mapped and
// read in place (mapFile), up to the size it had when the run started.
func Run(ctx context.Context, in io.Reader, out io.Writer, o Options, handlers ...report.Handler) (Result, error) {
	if o.MaxBytes < 1 {
		o.MaxBytes = 64 << 20
	}
	if o.Workers < 1 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	if o.Repair.MaxMemory < 1 {
		o.Repair.MaxMemory = repair.DefaultMaxMemory(o.MaxBytes)
	}
	var res Result
	var bw *bufio.Writer
	var w io.Writer // nil: a check writes no output
	if o.Fix {
		if f, ok := out.(*os.File); ok {
			w = f // written with vectored writes of whole batches (writeBuffers)
		} else {
			bw = bufio.NewWriterSize(out, 1<<20)
			w = bw
		}
	}
	emit := func(r *fileRecord) error {
		if r.line < 0 {
			return nil
		}
		s := r.outcome
		if r.tooLarge {
			s = &report.Session{Line: r.line, Status: model.StatusTooLarge, BytesIn: int(r.size), BytesOut: int(r.size),
				Reason: fmt.Sprintf("session is %d bytes, over the %d-byte limit; passed through unchanged", r.size, o.MaxBytes)}
		}
		switch s.Status {
		case model.StatusClean, model.StatusRepaired, model.StatusPending:
		case model.StatusBroken:
			res.Broken++
		default:
			res.Failed++
		}
		res.Summary.Add(s)
		for _, h := range handlers {
			if err := h.Session(s); err != nil {
				return fmt.Errorf("write report: %w", err)
			}
		}
		return nil
	}
	process := func(r *fileRecord, out *output) {
		r.outcome = processRecord(out, r.data, r.line, o.Repair)
	}

	cfg := streamConfig{in: in, out: w, maxBytes: o.MaxBytes, workers: o.Workers, process: process, emit: emit}
	var mapped []byte
	m := mapFile(in)
	if m != nil {
		defer m.close()
		cfg.in, mapped = bytes.NewReader(m.data), m.data
	}
	if err := guard(mapped, func() error { return dispatch(ctx, cfg, m, o.Repair) }); err != nil {
		return res, err
	}
	for _, h := range handlers {
		if err := h.Summary(&res.Summary); err != nil {
			return res, fmt.Errorf("write report: %w", err)
		}
	}
	if bw != nil {
		if err := bw.Flush(); err != nil {
			return res, fmt.Errorf("write output: %w", err)
		}
	}
	return res, nil
}

// utf8BOM is the byte order mark some Windows tools put before UTF-8 text.
var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// dispatch sends a session file (sessionfile.go) and a single document (an array, or a
// multi-line object) through their repair directly, and JSON Lines through the parallel stream, which reads them in place when
// the input is mapped (m, whose data cfg.in reads). A byte order mark is skipped, and
// kept in the output.
func dispatch(ctx context.Context, cfg streamConfig, m *mapping, opts repair.Options) error {
	out, maxBytes := cfg.out, cfg.maxBytes
	br := bufio.NewReaderSize(cfg.in, 256<<10)
	start := 0 // where the text starts, after a byte order mark
	if b, _ := br.Peek(len(utf8BOM)); bytes.Equal(b, utf8BOM) {
		_, _ = br.Discard(len(utf8BOM))
		start = len(utf8BOM)
		if out != nil {
			if _, err := out.Write(utf8BOM); err != nil {
				return fmt.Errorf("write output: %w", err)
			}
		}
	}
	switch _, err := peekNonSpace(br); {
	case err == io.EOF, errors.Is(err, errSpaceFull):
		return passSpace(br, out)
	case err != nil:
		return fmt.Errorf("read input: %w", err)
	}
	if looksLikeSessionFile(br) {
		return sessionFileRecord(cfg, br, opts)
	}
	if LooksLikeJSONLines(br) {
		cfg.in = br
		if m != nil {
			cfg.mapped = m.data[start:]
			cfg.release = func(end int) { m.release(start + end) }
		}
		return runStream(ctx, cfg)
	}
	data, err := io.ReadAll(io.LimitReader(br, maxBytes+1))
	if err != nil {
		return fmt.Errorf("read input: %w", err)
	}
	r := &fileRecord{data: data, src: data}
	if int64(len(data)) > maxBytes {
		r.tooLarge, r.size = true, int64(len(data))
		if out != nil {
			if _, err := out.Write(data); err != nil {
				return fmt.Errorf("write output: %w", err)
			}
			if _, err := io.Copy(out, br); err != nil {
				return fmt.Errorf("copy input: %w", err)
			}
		}
		return cfg.emit(r)
	}
	if out == nil {
		cfg.process(r, nil)
		return cfg.emit(r)
	}
	o := &output{}
	o.record(r)
	cfg.process(r, o)
	if err := o.writeTo(out, new([][]byte)); err != nil {
		return err
	}
	return cfg.emit(r)
}

// LooksLikeJSONLines decides from the start of the input, peeking as far as it needs (at
// most the read buffer), whether it is JSON Lines or one document; tmend compact reads
// its input by the same rule.
func LooksLikeJSONLines(br *bufio.Reader) bool {
	for n := max(br.Buffered(), 4096); ; n = min(n*2, br.Size()) {
		b, err := br.Peek(n)
		eof, full := err != nil, n == br.Size()
		if jsonLines, decided := sniffJSONLines(b, eof, full); decided || eof || full {
			return jsonLines
		}
	}
}

// sniffJSONLines looks at the start of the input (all of it when eof; as much as fits in
// the read buffer when full):
//   - its first JSON value parses and ends on the line it started on: JSON Lines (a single
//     line holding an array is a document, unless more follows);
//   - the first value spans lines: a pretty-printed document;
//   - the first value is broken (a truncated or malformed first line), and some later
//     line is a whole JSON object: JSON Lines whose first record is bad, which the stream
//     reports on its own while it goes on with the rest;
//   - a first line longer than the read buffer: JSON Lines too, the stream handles long
//     lines and a pretty-printed document never starts with one.
//
// decided is false while more input could change the answer.
func sniffJSONLines(b []byte, eof, full bool) (jsonLines, decided bool) {
	start := len(b) - len(bytes.TrimLeft(b, " \t\r\n"))
	b = b[start:]
	dec := json.NewDecoder(bytes.NewReader(b))
	var v json.RawMessage
	err := dec.Decode(&v)
	switch {
	case err == nil:
		if bytes.IndexByte(v, '\n') >= 0 {
			return false, true
		}
		more := len(bytes.TrimSpace(b[dec.InputOffset():])) > 0
		if v[0] == '{' || more {
			return true, true
		}
		return false, eof
	case errors.Is(err, io.ErrUnexpectedEOF) && !eof:
		// A valid start of a value that goes on beyond what is buffered.
		if full {
			return bytes.IndexByte(b, '\n') < 0, true
		}
		return false, false
	}
	// The first value is broken: JSON Lines if a later line is a record.
	lines := bytes.Split(b, []byte("\n"))
	if !eof {
		lines = lines[:len(lines)-1] // the last one may be incomplete
	}
	for _, l := range lines[min(1, len(lines)):] {
		if l = bytes.TrimSpace(l); len(l) > 0 && l[0] == '{' && json.Valid(l) {
			return true, true
		}
	}
	if len(lines) <= 1 && full {
		return true, true // a long first line
	}
	return false, eof || full
}

// errSpaceFull is peekNonSpace's error for a read buffer full of white space.
var errSpaceFull = errors.New("input starts with a buffer full of white space")

// passSpace reads an input that is white space, or starts with more of it than the read
// buffer holds, writing it to out when there is one: an input of nothing else is zero
// sessions, as an empty one is; anything after it is an error.
func passSpace(br *bufio.Reader, out io.Writer) error {
	for {
		b, err := br.Peek(br.Buffered())
		if err == nil && len(b) == 0 {
			b, err = br.Peek(1)
		}
		if len(bytes.TrimLeft(b, " \t\r\n")) > 0 {
			return fmt.Errorf("input starts with over %d bytes of white space before its first value", br.Size())
		}
		if out != nil {
			if _, werr := out.Write(b); werr != nil {
				return fmt.Errorf("write output: %w", werr)
			}
		}
		_, _ = br.Discard(len(b))
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read input: %w", err)
		}
	}
}

func peekNonSpace(br *bufio.Reader) (byte, error) {
	for n := 1; ; n++ {
		b, err := br.Peek(n)
		if err != nil {
			return 0, err
		}
		if c := b[n-1]; c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return c, nil
		}
		if n >= br.Size() {
			return 0, errSpaceFull
		}
	}
}

// processRecord checks or, when there is output, repairs one document and reports on
// it. The output (the input itself unless a repair changed it) goes to out, whose record
// it must be.
func processRecord(out *output, data []byte, line int, opts repair.Options) *report.Session {
	s := &report.Session{Line: line, BytesIn: len(data), BytesOut: len(data)}
	var doc repair.Document
	var rep repair.Report
	if out != nil {
		n := out.n
		doc, rep, _ = repair.WriteDocument(out, data, opts)
		s.BytesOut = out.n - n
	} else {
		doc, rep, _ = repair.ValidateDocument(data, opts)
	}
	s.Session = doc.ID
	s.Status, s.Reason, s.Dialect = model.EngineStatus(rep.Status), rep.Reason, rep.Dialect
	s.MessagesIn, s.MessagesOut, s.PendingCalls = rep.MessagesIn, rep.MessagesOut, rep.PendingCalls
	s.StageCounts, s.Issues, s.Actions = rep.StageCounts, rep.Issues, rep.Actions
	return s
}
