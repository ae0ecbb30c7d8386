package repair

import (
	"cmp"
	"slices"
	"unsafe"
)

// Origin says where one message of a repaired transcript came from, so that a caller
// keeping each message apart (one database row per message) can change only the rows
// whose message changed, by this map rather than by comparing contents.
type Origin struct {
	// Input is the index of the input message this one came from: the same message,
	// possibly changed or moved. -1 when tmend made it: a synthetic result, or a new
	// message holding results moved out of other messages.
	Input int
	// Changed is set when its bytes differ from the input message's (parts removed,
	// results moved in, a message merged into it, ids rewritten). An unchanged message
	// is the input message's exact bytes.
	Changed bool
	// Msg is the message's bytes: a slice of the input when it is unchanged.
	Msg []byte
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
			origins[i] = Origin{Input: i, Msg: m.raw}
		}
		return Result{Messages: msgs, Report: p.report}, origins, nil
	}
	out := p.assemble()
	p.report.MessagesOut = len(out)
	return Result{Report: p.report}, p.origins(out), nil
}

// JoinOrigins is the JSON array of the origins' messages, as Repair gives it.
func JoinOrigins(origins []Origin) []byte {
	out := make([]byte, 0, OriginsLen(origins))
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

// origins maps assemble's output to the input messages: assemble records which input
// message each output message stands for (plan.origin) and which it left as it was
// (plan.from); results moved after their call's turn (whole-message dialects) are found
// by their bytes, which are the moved result's own.
func (p *plan) origins(out [][]byte) []Origin {
	var moved []movedResult
	listed := false
	origins := make([]Origin, len(out))
	for k, raw := range out {
		o := Origin{Input: int(p.origin[k]), Changed: p.from[k] < 0, Msg: raw}
		if o.Input < 0 && len(raw) > 0 {
			if !listed {
				moved, listed = p.movedResults(), true
			}
			if j, ok := slices.BinarySearchFunc(moved, &raw[0], byAddress); ok {
				i := int(moved[j].msg)
				m := &p.msgs[i]
				o.Input, o.Changed = i, len(raw) != len(m.raw) || &raw[0] != &m.raw[0]
			}
		}
		if o.Input < 0 {
			o.Changed = false
		}
		origins[k] = o
	}
	return origins
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
