package report

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/tmend/tmend/repair"
)

// Escape makes a string from a transcript or the database safe to print in text meant for
// people: control characters (C0, DEL, C1), line and paragraph separators, bidirectional
// overrides and isolates, and bytes that are not UTF-8 are written as Go escapes (\n,
// \x1b, \u202e), so no id can start a forged line, move the cursor or reorder what the
// terminal shows. Everything else, backslashes included, is left as it is. JSON output
// needs none of this: the encoder escapes what JSON requires and keeps the value exact.
func Escape[S ~string](str S) string {
	s := string(str)
	i := 0
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if mustEscape(r, size) {
			break
		}
		i += size
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case !mustEscape(r, size):
			b.WriteString(s[i : i+size])
		case r == utf8.RuneError:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		i += size
	}
	return b.String()
}

func mustEscape(r rune, size int) bool {
	switch {
	case r == utf8.RuneError && size <= 1: // not UTF-8
		return true
	case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f: // C0, DEL, C1
		return true
	}
	switch r {
	case '\u061c', '\u200e', '\u200f', // bidi marks
		'\u2028', '\u2029', // line and paragraph separators
		'\u202a', '\u202b', '\u202c', '\u202d', '\u202e', // bidi embeddings and overrides
		'\u2066', '\u2067', '\u2068', '\u2069': // bidi isolates
		return true
	}
	return false
}

// actionLine is one repair action as text lines show it, with every transcript string
// escaped.
func actionLine(indent string, a repair.Action) string {
	return fmt.Sprintf("%s%-27s %-7s msg %-4d %s %s %s\n", indent, Escape(string(a.Stage)), Escape(string(a.Action)), a.MessageIndex,
		Escape(a.CallID), Escape(a.ToolName), Escape(a.Detail))
}
