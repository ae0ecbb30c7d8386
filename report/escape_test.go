package report_test

import (
	"bytes"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/report"
	"github.com/tmend/tmend/store/model"
)

// hostile would forge a report line, clear the screen, reverse the text and end in bytes
// that are not UTF-8, if printed raw.
const hostile = "s1\nforged  repaired\r\x1b[2J\x07\x7f\u0085\u009b\u2028\u202eevil\u2066\t\xff"

func TestEscape(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":                      "",
		"plain id-42 ünïcödé 😀": "plain id-42 ünïcödé 😀",
		`back\slash`:            `back\slash`,
		"a\nb\r\tc":             `a\nb\r\tc`,
		"\x00\x1b[31m\x7f":      `\x00\x1b[31m\x7f`,
		"\u0085\u009b":          `\u0085\u009b`,
		"\u2028\u2029":          `\u2028\u2029`,
		"\u202a\u202e\u2066\u2069\u200e\u200f\u061c": `\u202a\u202e\u2066\u2069\u200e\u200f\u061c`,
		"ok\xff\xc3": `ok\xff\xc3`,
		"\u200d":     "\u200d", // zero-width joiner: part of emoji, harmless
	} {
		require.Equal(t, want, report.Escape(in), "%q", in)
	}
}

// requireSafe fails on anything a terminal would act on.
func requireSafe(t *testing.T, out string) {
	t.Helper()
	require.True(t, utf8.ValidString(out), "%q", out)
	for _, r := range out {
		bad := r < 0x20 && r != '\n' || r == 0x7f || r >= 0x80 && r <= 0x9f ||
			r == '\u2028' || r == '\u2029' || r >= '\u202a' && r <= '\u202e' || r >= '\u2066' && r <= '\u2069'
		require.False(t, bad, "raw %U in %q", r, out)
	}
	for _, line := range strings.Split(out, "\n") {
		require.False(t, strings.HasPrefix(strings.TrimSpace(line), "forged"), "forged line in %q", out)
	}
}

func TestTextOutputEscapesTranscriptStrings(t *testing.T) {
	t.Parallel()
	action := repair.Action{Stage: repair.StageDropOrphanResults, Action: repair.ActionDrop, MessageIndex: 1,
		CallID: hostile, ToolName: hostile, Detail: hostile}
	run := int64(3)
	now := time.Unix(1e9, 0)
	render := map[string]func(w *bytes.Buffer) error{
		"Session": func(w *bytes.Buffer) error {
			h := report.NewText(w, report.EveryAction)
			return h.Session(&report.Session{Session: hostile, Status: "broken", Dialect: repair.Dialect(hostile), Reason: hostile,
				Issues: []repair.Issue{{Code: repair.IssueCode(hostile)}}, Actions: []repair.Action{action}})
		},
		"RunText": func(w *bytes.Buffer) error {
			return report.RunText(w, &model.RunResult{RunID: 1, Error: hostile, Outcomes: []model.SessionOutcome{{SessionID: hostile,
				Status: hostile, Reason: hostile, Report: repair.Report{Dialect: repair.Dialect(hostile), Actions: []repair.Action{action}}}}})
		},
		"RunsText": func(w *bytes.Buffer) error {
			return report.RunsText(w, []model.RunRow{{ID: 1, Trigger: model.Trigger(hostile), Mode: model.Mode(hostile), Status: hostile, StartedAt: now}})
		},
		"RunSummaryText": func(w *bytes.Buffer) error {
			return report.RunSummaryText(w, model.RunRow{ID: 1, Trigger: model.Trigger(hostile), Mode: model.Mode(hostile), Status: hostile,
				Error: hostile, StartedAt: now, Summary: model.Summary{ByStatus: map[model.SessionStatus]int{hostile: 1}, ByDialect: map[string]int{hostile: 1}}})
		},
		"ReportsText": func(w *bytes.Buffer) error {
			return report.ReportsText(w, []model.ReportRow{{ID: 1, RunID: &run, SessionID: hostile, Status: hostile, Dialect: hostile,
				IssueCodes: []string{hostile}, Reason: hostile, CreatedAt: now}})
		},
		"HistoryText": func(w *bytes.Buffer) error {
			return report.HistoryText(w, hostile, []model.ReportRow{{ID: 1, SessionID: hostile, Status: hostile, Trigger: model.Trigger(hostile),
				IssueCodes: []string{hostile}, Reason: hostile, Actions: []repair.Action{action}, CreatedAt: now}},
				[]model.VersionRow{{Version: 1, Kind: hostile, ContentHash: strings.Repeat("ab", 32), CreatedAt: now}})
		},
		"Diff": func(w *bytes.Buffer) error {
			msg := "{\"role\":\"\u0085\u009b\u2028\u202e\",\"content\":\"x\u009b2J\u2029forged\"}"
			d, err := report.DiffTranscripts([]byte(`[{"role":"user","content":"a"}]`), []byte(`[{"role":"user","content":"a"},`+msg+`]`), nil)
			if err != nil {
				return err
			}
			return report.DiffText(w, d, false)
		},
	}
	for name, fn := range render {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			require.NoError(t, fn(&out))
			requireSafe(t, out.String())
		})
	}
}

func TestJSONOutputKeepsStringsExact(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	require.NoError(t, report.NewJSON(&out).Session(&report.Session{Session: hostile[:len(hostile)-1], Status: "broken"}))
	require.Contains(t, out.String(), `"session_id":"s1\nforged  repaired\r\u001b[2J\u0007`)
	require.NotContains(t, out.String(), `\\n`)
}
