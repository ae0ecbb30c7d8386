package repair

import (
	"cmp"
	"slices"
	"unsafe"
)

// Origin says where one message of a repaired transcript came from, so that a caller
// keeping each message apart (one database row per message) can change only the rows
// whose message changed, by this map rather than by comparing contents.
//
// Its fields are ordered to make it 32 bytes: a repair holds one per message, and a
// session of half a million tiny rows has as many.
type Origin struct {
	// Msg is the message's bytes: a slice of the input when it is unchanged.
	Msg []byte
	// Input is the index of the input message this one came from: the same message,
	// possibly changed or moved. -1 when tmend made it: a synthetic result, or a new
	// message holding results moved out of other messages.
	Input int32
	// Changed is set when its bytes differ from the input message's (parts removed,
	// results moved in, a message merged into it, ids rewritten). An unchanged message
	// is the input message's exact bytes.
	Changed bool
}

// RepairWithOrigins is Repair that returns the repaired transcript as its messages in
// order, each with its Origin, rather than joined: a caller that writes only the
// messages that changed needs no copy of the rest (for a session of hundreds of
// thousands of rows, the joined array was another copy of it at the peak of memory).
// Result.Messages is msgs when nothing changed, and nil otherwise; JoinOrigins joins
// the messages into Repair's array. Input messages that have no Origin were dropped (or
// merged into the message before them, whose Origin is then Changed). Messages may come
// out of their input order (a result moved to after its call); Input then decreases
// somewhere. When Repair returns an error, the origins are nil.
func RepairWithOrigins(msgs []byte, opts Options) (Result, []Origin, error) {
	p, err := newPlan(msgs, opts)
	defer p.release()
	if err != nil {
		return Result{Messages: msgs, Report: p.report}, nil, err
	}
	if len(p.report.Actions) == 0 {
		p.report.MessagesOut = p.report.MessagesIn
		origins := make([]Origin, len(p.msgs))
		for i := range p.msgs {
			m := &p.msgs[i]
			origins[i] = Origin{Msg: m.raw(), Input: int32(i)}
		}
		return Result{Messages: msgs, Report: p.report}, origins, nil
	}
	out := p.assemble()
	p.report.MessagesOut = len(out)
	p.findMoved(out)
	p.out = nil // the caller's now: not for the pool
	return Result{Report: p.report}, out, nil
}

// JoinOrigins is the JSON array of the origins' messages, as Repair gives it.
func JoinOrigins(origins []Origin) []byte {
	return appendOrigins(make([]byte, 0, OriginsLen(origins)), origins)
}

func appendOrigins(out []byte, origins []Origin) []byte {
	out = append(out, '[')
	for i, o := range origins {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, o.Msg...)
	}
	return append(out, ']')
}

// OriginsLen is the length of JoinOrigins(origins).
func OriginsLen(origins []Origin) int {
	n := 1 + len(origins)
	for _, o := range origins {
		n += len(o.Msg)
	}
	return max(n, 2)
}

// findMoved completes assemble's origins with the results moved after their call's turn
// (whole-message dialects), which assemble places as new messages: they are found by
// their bytes, which are the moved result's own.
func (p *plan) findMoved(out []Origin) {
	var moved []movedResult
	listed := false
	for k := range out {
		o := &out[k]
		if o.Input >= 0 || len(o.Msg) == 0 {
			continue
		}
		if !listed {
			moved, listed = p.movedResults(), true
		}
		if j, ok := slices.BinarySearchFunc(moved, &o.Msg[0], byAddress); ok {
			m := &p.msgs[moved[j].msg]
			o.Input, o.Changed = moved[j].msg, len(o.Msg) != len(m.raw()) || &o.Msg[0] != &m.raw()[0]
		}
	}
}

// movedResult is the first byte of a result's current bytes, and its message.
type movedResult struct {
	at  *byte
	msg int32
}

func byAddress(r movedResult, at *byte) int {
	return cmp.Compare(uintptr(unsafe.Pointer(r.at)), uintptr(unsafe.Pointer(at)))
}

// movedResults lists the results by the address of their current bytes' first byte,
// for a dialect whose results are whole messages: a list sorted once, as a map of
// 450,000 results took 35 MB.
func (p *plan) movedResults() []movedResult {
	if p.spec == nil || p.spec.block {
		return nil
	}
	m := make([]movedResult, 0, len(p.results))
	for ri := range p.results {
		if raw := p.resPart(ri).raw(); len(raw) > 0 {
			m = append(m, movedResult{&raw[0], p.results[ri].msg})
		}
	}
	slices.SortFunc(m, func(a, b movedResult) int { return byAddress(a, b.at) })
	return m
}
