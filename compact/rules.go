package compact

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode/utf8"
)

// marker starts every text tmend writes into a transcript, so that a later run knows
// a content is already compacted and leaves it alone (compaction is idempotent).
const marker = "[tmend "

// plan decides every edit: for each history use, the first rule that applies to its
// result and the first that applies to its input.
func (t *transcript) plan() []edit {
	var edits []edit
	o := t.opts
	// Every decision looks only at what lies before the boundary (the turn it starts,
	// later uses), so that while the boundary stays, a compacted prefix is a fixed point
	// however many turns are appended: a provider's cached prefix stays valid.
	bturn := 0
	for bturn < len(t.turns) && t.turns[bturn] < t.boundary {
		bturn++
	}
	for i, u := range t.uses {
		if !t.history(u) {
			continue
		}
		if u.result.ok && !strings.Contains(u.result.text, marker) {
			if e, ok := t.resultEdit(i, u); ok {
				edits = append(edits, e)
			}
		}
		if u.input.ok && !strings.Contains(u.input.text, marker) {
			var rule Rule
			limit := 0
			switch {
			case o.Rules[RuleSupersedeWrites] && u.category == CategoryWrite && t.laterTouch(i):
				rule, limit = RuleSupersedeWrites, clipKeep*4
			case o.Rules[RulePurgeErrors] && u.isError && bturn-u.turn >= o.ErrorTurns:
				rule, limit = RulePurgeErrors, clipKeep*4
			case o.Rules[RuleClearInputs] && o.ClearInputsOver > 0:
				rule, limit = RuleClearInputs, o.ClearInputsOver
			}
			if rule != "" {
				if data, ok := clipInput(u.input, limit); ok {
					edits = append(edits, t.edit(u, rule, "input", u.input, data))
				}
			}
		}
	}
	return edits
}

// resultEdit picks the rule for u's result, if any.
func (t *transcript) resultEdit(i int, u *use) (edit, bool) {
	o := t.opts
	text := u.result.text
	big := utf8.RuneCountInString(text) > o.SoftTrimMax
	stub := func(rule Rule, note string) (edit, bool) {
		data := writeResult(u.result.form, stubText(u, note), u.isError)
		if len(data) >= u.result.end-u.result.start {
			return edit{}, false
		}
		return t.edit(u, rule, "result", u.result, data), true
	}
	if o.Rules[RuleDedupe] && !u.isError {
		if j := t.sameLater(i); j >= 0 {
			if e, ok := stub(RuleDedupe, "same result as the later call"+idNote(t.uses[j])); ok {
				return e, true
			}
		} else if j := t.sameCallLater(i); j >= 0 {
			if e, ok := stub(RuleDedupe, "superseded by the later call"+idNote(t.uses[j])); ok {
				return e, true
			}
		}
	}
	if u.isError {
		// The error text is what a model learns from: only a long one is trimmed.
		if o.Rules[RuleSoftTrim] && big {
			return t.trim(u)
		}
		return edit{}, false
	}
	if o.Rules[RuleClearOld] && o.ClearCategories[u.category] && (u.category != CategoryExec || big) {
		if e, ok := stub(RuleClearOld, ""); ok {
			return e, true
		}
	}
	if o.Rules[RuleSoftTrim] && big && u.category != CategoryWrite {
		return t.trim(u)
	}
	return edit{}, false
}

// idNote names a call by its id, for a stub; calls without ids (Gemini) go unnamed.
func idNote(u *use) string {
	if u.id == "" {
		return ""
	}
	return " " + u.id
}

// trim keeps the head and tail of u's result.
func (t *transcript) trim(u *use) (edit, bool) {
	o := t.opts
	r := []rune(u.result.text)
	head, tail := string(r[:min(o.SoftTrimHead, len(r))]), string(r[len(r)-min(o.SoftTrimTail, len(r)):])
	note := fmt.Sprintf("\n...\n[tmend trimmed: kept the first %d and last %d of %d characters, %s, sha256:%s]\n...\n",
		len([]rune(head)), len([]rune(tail)), len(r), lines(u.result.text), shortHash(u.result.text))
	text := head + note + tail
	data := writeResult(u.result.form, text, u.isError)
	if len(data) >= u.result.end-u.result.start {
		return edit{}, false
	}
	return t.edit(u, RuleSoftTrim, "result", u.result, data), true
}

func (t *transcript) edit(u *use, rule Rule, target string, s slot, data []byte) edit {
	msg, part := u.resultMsg, u.resPart
	if target == "input" {
		msg, part = u.callMsg, u.callPart
	}
	return edit{start: s.start, end: s.end, data: data, action: Action{Rule: rule, Target: target, CallID: u.id,
		Tool: u.tool, Category: u.category, MessageIndex: msg, PartIndex: part,
		BytesBefore: s.end - s.start, BytesAfter: len(data)}}
}

// sameLater returns the first later use before the boundary of the same call whose
// result is byte for byte the same; -1 when none.
func (t *transcript) sameLater(i int) int {
	u := t.uses[i]
	if u.canonical == "" {
		return -1
	}
	for j := i + 1; j < len(t.uses) && t.uses[j].callMsg < t.boundary; j++ {
		v := t.uses[j]
		if v.canonical == u.canonical && v.result.ok && !v.isError &&
			bytes.Equal(v.result.raw(t.msgs), u.result.raw(t.msgs)) {
			return j
		}
	}
	return -1
}

// sameCallLater (SameCall) returns the last later use of the same read or query call.
func (t *transcript) sameCallLater(i int) int {
	u := t.uses[i]
	if !t.opts.SameCall || u.canonical == "" || (u.category != CategoryRead && u.category != CategoryQuery) {
		return -1
	}
	for j := len(t.uses) - 1; j > i; j-- {
		if v := t.uses[j]; v.callMsg < t.boundary && v.canonical == u.canonical && v.resultMsg >= 0 && !v.isError {
			return j
		}
	}
	return -1
}

// laterTouch reports a later write or read of the file u wrote.
func (t *transcript) laterTouch(i int) bool {
	u := t.uses[i]
	if u.path == "" {
		return false
	}
	for _, v := range t.uses[i+1:] {
		if v.callMsg < t.boundary && v.path == u.path && (v.category == CategoryWrite || v.category == CategoryRead) {
			return true
		}
	}
	return false
}

// stubText is what a cleared result becomes: the facts a model needs to call again.
func stubText(u *use, note string) string {
	var b strings.Builder
	b.WriteString("[tmend cleared: ")
	b.WriteString(u.tool)
	if args := identifying(u); args != "" {
		b.WriteByte(' ')
		b.WriteString(args)
	}
	fmt.Fprintf(&b, " → %s, %s, sha256:%s", size(len(u.result.text)), lines(u.result.text), shortHash(u.result.text))
	if note != "" {
		b.WriteString("; ")
		b.WriteString(note)
	} else {
		b.WriteString("; call again if needed")
	}
	b.WriteByte(']')
	return b.String()
}

// clipKeep is how many characters of a clipped argument are kept.
const clipKeep = 64

// clipInput clips the string arguments of in longer than limit (identifying ones
// excepted), keeping the rest of the object byte for byte; ok is false when nothing is
// clipped or the result would not be shorter.
func clipInput(in slot, limit int) ([]byte, bool) {
	obj := []byte(in.text)
	ms, ok := members(obj)
	if !ok {
		return nil, false
	}
	var out []byte
	at := 0
	for _, m := range ms {
		s, isStr := str(obj[m.start:m.end])
		if !isStr || identifyingKeys[m.key] || utf8.RuneCountInString(s) <= max(limit, clipKeep) {
			continue
		}
		r := []rune(s)
		clipped := fmt.Sprintf("%s…[tmend clipped %d characters, %s, sha256:%s]", string(r[:clipKeep]),
			len(r)-clipKeep, lines(s), shortHash(s))
		out = append(out, obj[at:m.start]...)
		out = append(out, quote(clipped)...)
		at = m.end
	}
	if out == nil {
		return nil, false
	}
	out = append(out, obj[at:]...)
	if in.argsString {
		out = quote(string(out))
	}
	if len(out) >= in.end-in.start {
		return nil, false
	}
	return out, true
}

func shortHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:6])
}

func lines(s string) string {
	n := strings.Count(s, "\n")
	if s != "" && !strings.HasSuffix(s, "\n") {
		n++
	}
	if n == 1 {
		return "1 line"
	}
	return fmt.Sprintf("%d lines", n)
}

// size prints a byte count in SI units, as a person reads it.
func size(n int) string {
	switch {
	case n < 1000:
		return fmt.Sprintf("%d B", n)
	case n < 1_000_000:
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	}
	return fmt.Sprintf("%.1f MB", float64(n)/1e6)
}

// cut returns s's first n characters.
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}
