package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/report"
	"github.com/tmend/tmend/store/model"
)

// diffView is a report.TranscriptDiff laid out as the side-by-side table shows it.
type diffView struct {
	*report.TranscriptDiff
	Rows   []diffRow
	Totals []countRow
	// By is the report that wrote the later version (ReportID), which the page names by
	// its run and time.
	By *model.ReportRow
}

// diffRow is one message row of the table, or a run of unchanged messages folded into one.
type diffRow struct {
	Same []contentView
	// SameFirst and SameLast are the earlier version's indexes of a folded run.
	SameFirst, SameLast int
	Msg                 *report.MessageDiff
	Before, After       *contentView
	Blocks              []blockRow
	Actions             []repair.Action
}

type blockRow struct {
	*report.BlockDiff
	Before, After *contentView
	Where         string
	Actions       []repair.Action
}

// contentView is a message's or block's JSON, indented; long ones are folded behind
// their first characters, never cut.
type contentView struct {
	Label   string
	Text    string
	Preview string
	Fold    bool
	Lines   int
	Bytes   int
}

// foldLines and foldBytes are where content starts folded.
const (
	foldLines = 12
	foldBytes = 800
	previewAt = 100 // characters of a folded content's preview
)

func newContent(label string, raw json.RawMessage) *contentView {
	if raw == nil {
		return nil
	}
	var buf bytes.Buffer
	if json.Indent(&buf, raw, "", "  ") != nil {
		buf.Reset()
		buf.Write(raw)
	}
	cv := &contentView{Label: label, Text: buf.String(), Bytes: len(raw), Lines: strings.Count(buf.String(), "\n") + 1}
	cv.Fold = cv.Lines > foldLines || cv.Bytes > foldBytes
	if cv.Fold {
		var compact bytes.Buffer
		if json.Compact(&compact, raw) != nil {
			compact.Write(raw)
		}
		p := compact.String()
		if utf8.RuneCountInString(p) > previewAt {
			p = string([]rune(p)[:previewAt]) + "…"
		}
		cv.Preview = p
	}
	return cv
}

func toolLabel(t *report.Tool) string {
	if t == nil || t.Kind == "" {
		return ""
	}
	s := string(t.Kind)
	if t.CallID != "" {
		s += " " + t.CallID
	}
	if t.NewCallID != "" {
		s += " → " + t.NewCallID
	}
	if t.ToolName != "" {
		s += " (" + t.ToolName + ")"
	}
	return s
}

func messageLabel(i int, md *report.MessageDiff) string {
	s := fmt.Sprintf("#%d %s", i, md.Kind)
	if l := toolLabel(md.Tool); l != "" {
		s += " · " + l
	}
	return s
}

func actionsOf(d *report.TranscriptDiff, idx []int) []repair.Action {
	var out []repair.Action
	for _, i := range idx {
		out = append(out, d.Actions[i])
	}
	return out
}

func newDiffView(d *report.TranscriptDiff) *diffView {
	v := &diffView{TranscriptDiff: d}
	for _, c := range report.Changes() {
		if n := d.Counts[c]; n > 0 {
			v.Totals = append(v.Totals, countRow{Name: string(c), N: n})
		}
	}
	for i := range d.Messages {
		md := &d.Messages[i]
		if md.Change == report.ChangeUnchanged && len(md.Actions) == 0 {
			cv := newContent(messageLabel(md.Before, md), md.Content)
			if n := len(v.Rows); n > 0 && v.Rows[n-1].Same != nil {
				v.Rows[n-1].Same = append(v.Rows[n-1].Same, *cv)
				v.Rows[n-1].SameLast = md.Before
				continue
			}
			v.Rows = append(v.Rows, diffRow{Same: []contentView{*cv}, SameFirst: md.Before, SameLast: md.Before})
			continue
		}
		row := diffRow{Msg: md, Actions: actionsOf(d, md.Actions)}
		switch {
		case md.Content != nil && md.Change == report.ChangeMoved:
			row.After = newContent(messageLabel(md.After, md), md.Content)
		case md.Content != nil:
			row.Before = newContent(messageLabel(md.Before, md), md.Content)
			row.After = newContent(messageLabel(md.After, md), md.Content)
		default:
			row.Before = newContent(messageLabel(md.Before, md), md.BeforeContent)
			row.After = newContent(messageLabel(md.After, md), md.AfterContent)
		}
		for k := range md.Blocks {
			b := &md.Blocks[k]
			br := blockRow{BlockDiff: b, Actions: actionsOf(d, b.Actions)}
			label := func(i int) string { return fmt.Sprintf("block %d · %s", i, toolLabel(&b.Tool)) }
			switch {
			case b.Content != nil && b.Change == report.ChangeMoved && b.MovedFrom != nil:
				br.After = newContent(label(b.After), b.Content)
				br.Where = fmt.Sprintf("from message #%d, block %d", b.MovedFrom.Message, b.MovedFrom.Block)
			case b.Content != nil && b.Change == report.ChangeMoved && b.Before >= 0:
				br.Before = newContent(label(b.Before), b.Content)
				br.After = newContent(label(b.After), b.Content)
				br.Where = "within the message"
			case b.Content != nil:
				br.Before = newContent(label(b.Before), b.Content)
				br.After = newContent(label(b.After), b.Content)
			default:
				if b.MovedTo != nil {
					br.Where = fmt.Sprintf("to message #%d, block %d", b.MovedTo.Message, b.MovedTo.Block)
				}
				br.Before = newContent(label(b.Before), b.BeforeContent)
				br.After = newContent(label(b.After), b.AfterContent)
			}
			row.Blocks = append(row.Blocks, br)
		}
		v.Rows = append(v.Rows, row)
	}
	return v
}
