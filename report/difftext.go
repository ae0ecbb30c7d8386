package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tmend/tmend/repair"
)

// DiffText writes a diff for people: a line for each message and block that changed,
// with the actions that explain it and its full content below (long lines folded, never
// cut); runs of unchanged messages are counted. color adds ANSI colours (terminals only).
func DiffText(w io.Writer, d *TranscriptDiff, color bool) error {
	p := &errWriter{w: w}
	paint := func(c Change, s string) string {
		if !color || c == ChangeUnchanged {
			return s
		}
		code := map[string]string{"-": "31", "+": "32"}[symbol(c)]
		if code == "" {
			code = "33"
		}
		return "\x1b[" + code + "m" + s + "\x1b[0m"
	}
	if d.SessionID != "" {
		p.printf("session %s: ", Escape(d.SessionID))
	}
	if d.From != nil && d.To != nil {
		p.printf("version %d (%s) → version %d (%s)", d.From.Version, Escape(d.From.Kind), d.To.Version, Escape(d.To.Kind))
	} else {
		p.print("earlier → later")
	}
	if d.Dialect != "" {
		p.printf(", %s", Escape(string(d.Dialect)))
	}
	p.printf(", %d → %d messages\n", d.MessagesBefore, d.MessagesAfter)
	same := 0
	flush := func() {
		if same > 0 {
			p.printf("    … %d unchanged message%s\n", same, map[bool]string{true: "s"}[same > 1])
			same = 0
		}
	}
	for _, md := range d.Messages {
		if md.Change == ChangeUnchanged {
			same++
			continue
		}
		flush()
		p.println(paint(md.Change, fmt.Sprintf("%s %-15s %-17s %s%s", symbol(md.Change), positions(md.Before, md.After),
			md.Change, Escape(dash(md.Kind)), toolText(md.Tool))))
		actionsText(p, d, md.Actions, "      ")
		switch {
		case md.Change == ChangeMoved || len(md.Blocks) > 0:
		case md.BeforeContent != nil && md.AfterContent != nil:
			contentText(p, "before", md.BeforeContent)
			contentText(p, "after", md.AfterContent)
		case md.BeforeContent != nil:
			contentText(p, "", md.BeforeContent)
		default:
			contentText(p, "", md.AfterContent)
		}
		for _, bd := range md.Blocks {
			where := ""
			switch {
			case bd.MovedFrom != nil:
				where = fmt.Sprintf(" from #%d block %d", bd.MovedFrom.Message, bd.MovedFrom.Block)
			case bd.MovedTo != nil:
				where = fmt.Sprintf(" to #%d block %d", bd.MovedTo.Message, bd.MovedTo.Block)
			}
			t := bd.Tool
			p.println(paint(bd.Change, fmt.Sprintf("    %s block %-9s %-17s %s%s%s", symbol(bd.Change),
				strings.ReplaceAll(positions(bd.Before, bd.After), "#", ""), bd.Change, dash(string(t.Kind)), toolText(&t), where)))
			actionsText(p, d, bd.Actions, "          ")
			switch {
			case bd.Change == ChangeUnchanged || bd.Change == ChangeMoved:
			case bd.BeforeContent != nil && bd.AfterContent != nil:
				contentText(p, "before", bd.BeforeContent)
				contentText(p, "after", bd.AfterContent)
			case bd.BeforeContent != nil:
				contentText(p, "", bd.BeforeContent)
			default:
				contentText(p, "", bd.AfterContent)
			}
		}
	}
	flush()
	var parts []string
	for _, c := range Changes() {
		if n := d.Counts[c]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, c))
		}
	}
	if len(parts) == 0 {
		parts = append(parts, "none")
	}
	p.printf("changes: %s\n", strings.Join(parts, ", "))
	if len(d.Actions) > 0 {
		p.print("actions")
		if d.ReportID > 0 {
			p.printf(" (report %d)", d.ReportID)
		}
		p.println()
		for _, a := range d.Actions {
			p.print(actionLine("  ", a))
		}
	}
	return p.err
}

func symbol(c Change) string {
	switch c {
	case ChangeUnchanged:
		return "="
	case ChangeInserted, ChangeSynthesized:
		return "+"
	case ChangeRemoved, ChangeDroppedOrphan, ChangeDroppedDuplicate:
		return "-"
	case ChangeMoved:
		return ">"
	}
	return "~"
}

// positions shows where something is in the earlier and the later version.
func positions(before, after int) string {
	switch {
	case before < 0:
		return fmt.Sprintf("→ #%d", after)
	case after < 0:
		return fmt.Sprintf("#%d →", before)
	}
	return fmt.Sprintf("#%d → #%d", before, after)
}

func toolText(t *Tool) string {
	if t == nil || t.Kind == "" || t.Kind == repair.PartOther {
		return ""
	}
	s := ""
	if t.CallID != "" {
		s += " " + idText(t.CallID)
	}
	if t.NewCallID != "" {
		s += " → " + idText(t.NewCallID)
	}
	if t.ToolName != "" {
		s += " (" + Escape(t.ToolName) + ")"
	}
	return s
}

// idText quotes an id whose white space would not show.
func idText(id string) string {
	if strings.TrimSpace(id) != id || id == "" {
		return Escape(strconv.Quote(id))
	}
	return Escape(id)
}

func actionsText(p *errWriter, d *TranscriptDiff, actions []int, indent string) {
	for _, i := range actions {
		a := d.Actions[i]
		p.printf("%s[%s %s", indent, Escape(string(a.Stage)), Escape(string(a.Action)))
		if a.Detail != "" {
			p.printf(": %s", Escape(a.Detail))
		}
		p.println("]")
	}
}

// foldWidth is where contentText folds long lines.
const foldWidth = 100

// contentText writes a message's or block's JSON indented, one member a line, every
// line escaped and folded at foldWidth characters (continuations marked ↪).
func contentText(p *errWriter, label string, content json.RawMessage) {
	if label != "" {
		p.printf("        %s:\n", label)
	}
	var buf bytes.Buffer
	if json.Indent(&buf, content, "", "  ") != nil {
		buf.Reset()
		buf.Write(content)
	}
	for line := range strings.SplitSeq(buf.String(), "\n") {
		line = Escape(line)
		prefix := "        │ "
		for {
			cut := len(line)
			if utf8.RuneCountInString(line) > foldWidth {
				cut = 0
				for n := 0; n < foldWidth; n++ {
					_, size := utf8.DecodeRuneInString(line[cut:])
					cut += size
				}
			}
			p.printf("%s%s\n", prefix, line[:cut])
			line = line[cut:]
			if line == "" {
				break
			}
			prefix = "        ↪ "
		}
	}
}
