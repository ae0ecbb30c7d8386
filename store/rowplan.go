package store

import (
	"fmt"
	"math"
	"slices"

	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/store/model"
)

// How a table kept one row per message orders a session's rows, for new order values.
type orderKind int

const (
	// orderSequence: integers from a sequence (a SERIAL id), unique across the table, so
	// there is never room between two rows: new values are the next ones, and every
	// row from the first one placed anew to the end of the session gets one.
	orderSequence orderKind = iota
	// orderTime: timestamps in microseconds; a new value goes between its neighbours,
	// and a row is moved only when there is no room.
	orderTime
)

// rowPlan is how a session's rows change so that, read in order, their messages are
// the repaired transcript. Rows before the first change are never in it.
type rowPlan struct {
	inserts []rowInsert
	deletes []string // keys of rows whose message was dropped
	updates []rowUpdate
	// fresh is how many new order values a sequence order must supply (orderSequence);
	// fill sets them.
	fresh int
}

// rowInsert is a message tmend made, as a new row. It copies the columns tmend does not
// set from template, an existing row of the session (the one before it, when there is
// one).
type rowInsert struct {
	template string
	msg      []byte
	order    int64
	slot     int // orderSequence: which of the fresh values it takes
}

// rowUpdate changes an existing row: its message (msg non-nil), its order (reorder).
type rowUpdate struct {
	key     string
	msg     []byte
	order   int64
	reorder bool
	slot    int
}

// writes reports whether the plan adds rows or gives rows new positions, the changes a
// message appended meanwhile could end up before.
func (p *rowPlan) places() bool {
	if len(p.inserts) > 0 {
		return true
	}
	for _, u := range p.updates {
		if u.reorder {
			return true
		}
	}
	return false
}

// fill gives the plan's fresh slots their values, which must be ascending and greater
// than every order value in the table (a sequence's next values).
func (p *rowPlan) fill(values []int64) error {
	if len(values) != p.fresh {
		return fmt.Errorf("want %d new order values, got %d", p.fresh, len(values))
	}
	for i := range p.inserts {
		if p.inserts[i].slot >= 0 {
			p.inserts[i].order = values[p.inserts[i].slot]
		}
	}
	for i := range p.updates {
		if p.updates[i].reorder && p.updates[i].slot >= 0 {
			p.updates[i].order = values[p.updates[i].slot]
		}
	}
	return nil
}

// planRows matches the repaired messages (origins) to the session's rows as read, by
// the engine's map of where each message came from: a message left in place keeps its
// row (updated when it changed), a dropped one loses its row, one tmend made gets a new
// row, and a message whose row is out of order (a result moved up to its call) gets a
// new order value, or, when the order leaves no room, every row from it on does.
func planRows(rows *model.Rows, origins []repair.Origin, kind orderKind) (rowPlan, error) {
	var p rowPlan
	used := make([]bool, rows.Len())
	for k, o := range origins {
		if int(o.Input) >= rows.Len() || o.Input >= 0 && used[o.Input] {
			return p, fmt.Errorf("message %d: bad origin %d for %d rows", k, o.Input, rows.Len())
		}
		if o.Msg == nil {
			return p, fmt.Errorf("message %d: no bytes", k)
		}
		if o.Input >= 0 {
			used[o.Input] = true
		}
	}
	// The untouched head: messages in their own row, unchanged.
	head := 0
	for head < len(origins) && int(origins[head].Input) == head && !origins[head].Changed {
		head++
	}
	keep := increasing(origins[head:])
	var next []int32
	if kind == orderTime {
		next = nextKept(origins, keep, head)
	}
	prev, havePrev := int64(0), head > 0
	// placed: prev is a value tmend gave; a kept row may tie with a row it kept (the
	// primary key orders those, as it did), not with one it placed.
	placed := false
	if havePrev {
		prev = rows.Order(head - 1)
	}
	tail := false // orderSequence: every message from here on takes a fresh value
	// A new row's template is the row of the closest message before it that has one (the
	// first after it when none does), kept as the loop goes: searched for each new row,
	// a run of them took the square of its length.
	last := head - 1 // the head's messages are their own rows
	first := slices.IndexFunc(origins, func(o repair.Origin) bool { return o.Input >= 0 })
	template := func() string {
		switch {
		case last >= 0:
			return rows.Key(last)
		case first >= 0:
			return rows.Key(int(origins[first].Input))
		}
		return rows.Key(0)
	}
	for k := head; k < len(origins); k++ {
		o := origins[k]
		if o.Input >= 0 {
			last = int(o.Input)
		}
		var msg []byte
		if o.Input < 0 || o.Changed {
			msg = o.Msg
		}
		if !tail && o.Input >= 0 && keep[k-head] {
			if ord := rows.Order(int(o.Input)); !havePrev || ord > prev || ord == prev && !placed {
				if msg != nil {
					p.updates = push(p.updates, rowUpdate{key: rows.Key(int(o.Input)), msg: msg})
				}
				prev, havePrev, placed = ord, true, false
				continue
			}
		}
		var order int64
		slot := -1
		switch kind {
		case orderSequence:
			tail = true
			slot = p.fresh
			p.fresh++
		case orderTime:
			order = between(rows, origins, next[k-head], k, prev, havePrev)
			prev, havePrev, placed = order, true, true
		}
		if o.Input < 0 {
			p.inserts = push(p.inserts, rowInsert{template: template(), msg: msg, order: order, slot: slot})
		} else {
			p.updates = push(p.updates, rowUpdate{key: rows.Key(int(o.Input)), msg: msg, order: order, reorder: true, slot: slot})
		}
	}
	for i := head; i < rows.Len(); i++ {
		if !used[i] {
			p.deletes = push(p.deletes, rows.Key(i))
		}
	}
	return p, nil
}

// nextKept returns, for each message from head on, the first message after it whose
// row keeps its place, or -1: found once from the end, not searched for each message
// placed anew (a run of such messages took the square of its length).
func nextKept(origins []repair.Origin, keep []bool, head int) []int32 {
	next := make([]int32, len(origins)-head)
	n := int32(-1)
	for k := len(origins) - 1; k >= head; k-- {
		next[k-head] = n
		if origins[k].Input >= 0 && keep[k-head] {
			n = int32(k)
		}
	}
	return next
}

// between returns a time order value for message k after prev: spread evenly up to the
// next message whose row keeps its place (next, -1 when none) when there is room, else
// a microsecond after prev (the rows after it then move as needed).
func between(rows *model.Rows, origins []repair.Origin, next int32, k int, prev int64, havePrev bool) int64 {
	if next < 0 {
		if !havePrev {
			return 0
		}
		return prev + 1
	}
	upper := rows.Order(int(origins[next].Input))
	if !havePrev {
		prev = upper - int64(int(next)-k) - 1
	}
	gaps := int64(int(next) - k + 1)
	if upper-prev < gaps || upper-prev > math.MaxInt64/2 {
		return prev + 1
	}
	return prev + (upper-prev)/gaps
}

// increasing marks a longest run of origins whose inputs increase (an existing row's
// message kept in order); the others are messages tmend made or moved.
func increasing(origins []repair.Origin) []bool {
	// Patience sorting over the inputs, remembering predecessors.
	var tails []int // tails[l]: index of the smallest last input of an increasing run of length l+1
	prevOf := make([]int, len(origins))
	for k, o := range origins {
		prevOf[k] = -1
		if o.Input < 0 {
			continue
		}
		lo, hi := 0, len(tails)
		for lo < hi {
			mid := (lo + hi) / 2
			if origins[tails[mid]].Input < o.Input {
				lo = mid + 1
			} else {
				hi = mid
			}
		}
		if lo > 0 {
			prevOf[k] = tails[lo-1]
		}
		if lo == len(tails) {
			tails = append(tails, k)
		} else {
			tails[lo] = k
		}
	}
	keep := make([]bool, len(origins))
	if len(tails) > 0 {
		for k := tails[len(tails)-1]; k >= 0; k = prevOf[k] {
			keep[k] = true
		}
	}
	return keep
}

// push appends v to s, doubling s when it is full: append grows a large slice by a
// quarter, which for a session of hundreds of thousands of rows left about four times
// the slice's final size as garbage, and doubling about once.
func push[T any](s []T, v ...T) []T {
	if len(s)+len(v) > cap(s) {
		s = slices.Grow(s, max(len(s), len(v)))
	}
	return append(s, v...)
}
