package repair

import (
	"fmt"
	"slices"
	"time"
)

// EnvelopeKeys are the object members a transcript may sit under: "messages" (most
// dialects), "input" (OpenAI Responses), "contents" (Gemini). The one holding an array is
// the transcript; an object with two of them is refused.
var EnvelopeKeys = []string{"messages", "input", "contents"}

// envelopeCodes are EnvelopeKeys' codes.
var envelopeCodes = []keyCode{keyMessages, keyInput, keyContents}

// Document is one transcript as stored or sent: either a bare JSON array of messages or an
// object holding it under one of EnvelopeKeys, with other members (id, updated_at, model
// settings, ...) kept byte for byte.
type Document struct {
	Raw []byte
	// Key is the envelope member holding the messages; "" for a bare array.
	Key string
	// ID is the envelope's "id" as text (string or number); "" when absent.
	ID string
	// UpdatedAt is the envelope's "updated_at" or "updatedAt" (RFC 3339), if any.
	UpdatedAt time.Time
	start     int
	end       int
}

// ParseDocument finds b's messages array and validates the rest of b. The array itself
// is validated by Repair or Validate; RepairDocument and ValidateDocument do both in one
// pass over the bytes.
func ParseDocument(b []byte) (Document, error) {
	return parseDocument(b, func(b []byte, i int) (int, error) { return skip(b, i), nil })
}

// DocumentResult is a repaired document.
type DocumentResult struct {
	Document
	// Output is the whole repaired document; b itself when nothing changed.
	Output []byte
	Report Report
}

// RepairDocument parses and repairs the document b (see ParseDocument), validating it
// in one pass. The document's updated_at, if any, overrides opts.UpdatedAt.
func RepairDocument(b []byte, opts Options) (DocumentResult, error) {
	return repairDocument(b, opts, func(doc Document, p *plan) []byte {
		n := len(b) - (doc.end - doc.start) + OriginsLen(p.out)
		return appendDocument(make([]byte, 0, n), b, doc, p.out)
	})
}

// Pieces receives an output document in order: the runs of the input it keeps as they
// are, by offset, and the bytes a repair made. A writer that sends both to the kernel in
// one call (writev) copies the kept bytes once, rather than first into a buffer of its own.
type Pieces interface {
	Keep(from, to int) // the input's bytes [from, to)
	Write(p []byte)    // new bytes; p is not valid after the call
}

// WriteDocument is RepairDocument handing the output document to w (all of b, kept, when
// nothing changed or b cannot be repaired).
func WriteDocument(w Pieces, b []byte, opts Options) (Document, Report, error) {
	kept := true
	res, err := repairDocument(b, opts, func(doc Document, p *plan) []byte {
		kept = false
		p.writeDocument(w, b, doc)
		return nil
	})
	if kept {
		w.Keep(0, len(b))
	}
	return res.Document, res.Report, err
}

// repairDocument repairs b; when something changed, write builds the output from the
// plan's assembled messages (which live only until it returns).
func repairDocument(b []byte, opts Options, write func(doc Document, p *plan) []byte) (DocumentResult, error) {
	doc, p, err := documentPlan(b, opts)
	defer p.release()
	res := DocumentResult{Document: doc, Output: b, Report: p.report}
	if err != nil {
		return res, err
	}
	res.Report.MessagesOut = res.Report.MessagesIn
	if len(p.report.Actions) > 0 {
		res.Report.MessagesOut = len(p.assemble())
		res.Output = write(doc, p)
	}
	return res, nil
}

// appendDocument appends b with its messages array replaced by msgs.
func appendDocument(dst, b []byte, doc Document, msgs []Origin) []byte {
	dst = append(dst, b[:doc.start]...)
	dst = appendOrigins(dst, msgs)
	return append(dst, b[doc.end:]...)
}

// writeDocument is appendDocument of the assembled messages into w, keeping the runs of
// b that are unchanged: the envelope, and each input message left as it was, with the
// comma or bracket after it when b has the one the output needs there.
func (p *plan) writeDocument(w Pieces, b []byte, doc Document) {
	k := keeper{w: w}
	k.keep(0, doc.start)
	p.writeArray(&k, b, doc.start)
	k.keep(doc.end, len(b))
	k.flush()
}

// writeArray hands k the array of the assembled messages (JoinOrigins' bytes) in place of
// b's array, which starts at start, keeping the runs of b that are unchanged (see
// writeDocument).
func (p *plan) writeArray(k *keeper, b []byte, start int) {
	k.keep(start, start+1) // the '['
	after := -1            // where the message just written ends in b, if it came from b
	sep := func(c []byte) {
		if after >= 0 && b[after] == c[0] {
			k.keep(after, after+1)
		} else {
			k.write(c)
		}
	}
	for i, o := range p.out {
		if i > 0 {
			sep(comma)
		}
		if o.Input >= 0 && !o.Changed {
			at := p.msgs[o.Input].at(b)
			k.keep(at, at+len(o.Msg))
			after = at + len(o.Msg)
		} else {
			k.write(o.Msg)
			after = -1
		}
	}
	sep(closeArray)
}

// keeper hands w the runs of input that continue each other as one: a run of unchanged
// messages costs one call.
type keeper struct {
	w        Pieces
	from, to int // the run not handed over yet
}

func (k *keeper) keep(from, to int) {
	if from != k.to {
		k.flush()
		k.from = from
	}
	k.to = to
}

func (k *keeper) write(p []byte) {
	k.flush()
	k.w.Write(p)
}

func (k *keeper) flush() {
	if k.to > k.from {
		k.w.Keep(k.from, k.to)
	}
	k.from, k.to = 0, 0
}

var comma, closeArray = []byte(","), []byte("]")

// ValidateDocument is Validate for a document (see RepairDocument).
func ValidateDocument(b []byte, opts Options) (Document, Report, error) {
	doc, p, err := documentPlan(b, opts)
	defer p.release()
	r := p.report
	if err == nil {
		r.MessagesOut = r.MessagesIn
		if len(r.Issues) > 0 {
			r.Status = StatusBroken
		}
	}
	return doc, r, err
}

func documentPlan(b []byte, opts Options) (Document, *plan, error) {
	p := plans.Get().(*plan)
	p.opts = opts
	doc, err := parseDocument(b, p.scan)
	if err != nil {
		if p.report.Status == "" {
			err = p.fail(StatusUnparseable, "%v", err)
		}
		return doc, p, err
	}
	if !doc.UpdatedAt.IsZero() {
		p.opts.UpdatedAt = doc.UpdatedAt
	}
	return doc, p, p.analyze()
}

// parseDocument validates b's envelope and hands its messages array to scanArray, which
// returns the array's end (and validates it, or not).
func parseDocument(b []byte, scanArray func(b []byte, i int) (int, error)) (Document, error) {
	if len(b) > MaxSize {
		return Document{}, fmt.Errorf("document of %d bytes is over the engine's limit of %d bytes", len(b), MaxSize)
	}
	d := Document{Raw: b}
	i := skipSpace(b, 0)
	if i == len(b) {
		return Document{}, &SyntaxError{i, "empty document"}
	}
	switch b[i] {
	case '[':
		end, err := scanArray(b, i)
		if err != nil {
			return Document{}, err
		}
		if j := skipSpace(b, end); j != len(b) {
			return Document{}, &SyntaxError{j, "unexpected data after the top-level value"}
		}
		d.start, d.end = i, end
		return d, nil
	case '{':
	default:
		if err := validate(b); err != nil {
			return Document{}, err
		}
		return Document{}, fmt.Errorf("document is a JSON %s; want an array of messages or an object holding one", kindOf(b[i]))
	}
	chosen, second := keyOther, keyOther
	var envelope [8]member // most envelopes: no allocation
	// The slab starts empty, so the members start at 0 in it.
	ms, _, end, err := scanMembersWith(b, i, 1, envelope[:0], func(code keyCode, vstart int) (int, bool, error) {
		if !slices.Contains(envelopeCodes, code) {
			return 0, false, nil
		}
		if chosen != keyOther {
			if second == keyOther && code != chosen && b[vstart] == '[' {
				second = code
			}
			return 0, false, nil
		}
		chosen = code
		vend, err := scanArray(b, vstart)
		return vend, true, err
	})
	if err != nil {
		return Document{}, err
	}
	if j := skipSpace(b, end); j != len(b) {
		return Document{}, &SyntaxError{j, "unexpected data after the top-level value"}
	}
	obj := b[i:end]
	if chosen == keyOther {
		for _, key := range EnvelopeKeys {
			if m, ok := findMember(obj, ms, key); ok {
				return Document{}, fmt.Errorf("%q is a JSON %s, not an array of messages", key, kindOf(m.val(obj)[0]))
			}
		}
		return Document{}, fmt.Errorf("object has no messages, input or contents array")
	}
	if second != keyOther {
		// A provider is sent one of them; which one, tmend cannot tell.
		return Document{}, fmt.Errorf("%q and %q both hold an array: which one is the transcript is unclear", keyNames[chosen], keyNames[second])
	}
	d.Key = keyNames[chosen]
	m, _ := findCode(ms, chosen)
	d.start, d.end = i+m.valStart(), i+m.valEnd()
	if m, ok := findMember(obj, ms, "id"); ok {
		v := m.val(obj)
		if s, ok := stringValue(v); ok {
			d.ID = s
		} else if v[0] != '{' && v[0] != '[' && string(v) != "null" {
			d.ID = string(v)
		}
	}
	for _, k := range []string{"updated_at", "updatedAt"} {
		if m, ok := findMember(obj, ms, k); ok {
			v := m.val(obj)
			s, ok := stringValue(v)
			if !ok {
				shown := string(v) + " " // a number, true, false or null, as written
				if v[0] == '{' || v[0] == '[' {
					shown = ""
				}
				return Document{}, fmt.Errorf("%s %sis a JSON %s, not an RFC 3339 time string such as \"2024-05-01T12:00:00Z\"", k, shown, kindOf(v[0]))
			}
			t, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				return Document{}, fmt.Errorf("%s %q is not an RFC 3339 time such as \"2024-05-01T12:00:00Z\"", k, s)
			}
			d.UpdatedAt = t
		}
	}
	return d, nil
}

// Messages returns the messages array's bytes.
func (d Document) Messages() []byte { return d.Raw[d.start:d.end] }
