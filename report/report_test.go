package report_test

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/report"
	"github.com/tmend/tmend/store/model"
)

func TestDiffNamesEveryKindOfChange(t *testing.T) {
	t.Parallel()
	before := `[{"role":"user","content":"a"},{"role":"tool","tool_call_id":"x","content":"orphan"},
{"role":"assistant","tool_calls":[{"id":"c1"},{"id":""}]},{"role":"user","content":"b"},{"role":"tool","tool_call_id":"c1","content":"late"}]`
	after := `[{"role":"user","content":"a"},{"role":"assistant","tool_calls":[{"id":"c1"}]},
{"role":"tool","tool_call_id":"c1","content":"late"},{"role":"user","content":"b"}]`
	var out bytes.Buffer
	require.NoError(t, report.Diff(&out, []byte(before), []byte(after), false))
	got := out.String()
	require.Contains(t, got, `- #1      removed    tool`)
	require.Contains(t, got, `~ #2  →#1   rewritten assistant`)
	require.Contains(t, got, `> #4  →#2   moved    tool`)
	require.Contains(t, got, "5 → 4 messages")
	require.Contains(t, got, "unchanged message")
	require.NotContains(t, got, "\x1b[")

	out.Reset()
	require.NoError(t, report.Diff(&out, []byte(before), []byte(after), true))
	require.Contains(t, out.String(), "\x1b[31m")

	require.Error(t, report.Diff(&out, []byte(`{`), []byte(after), false))
}

func TestRunTextShowsTotalsAndOutcomes(t *testing.T) {
	t.Parallel()
	res := &model.RunResult{RunID: 7, Mode: model.ModeSession, Trigger: model.TriggerCLI, Status: "completed",
		Counts:  model.RunCounts{Scanned: 1, Repaired: 1},
		ByStage: map[repair.Stage]int{repair.StageDropOrphanResults: 2},
		Outcomes: []model.SessionOutcome{{SessionID: "s1", Status: "repaired", BytesBefore: 100, BytesAfter: 80, FromVersion: 1, ToVersion: 2,
			Report: repair.Report{Dialect: repair.OpenClaw, MessagesIn: 5, MessagesOut: 4,
				Actions: []repair.Action{{Stage: repair.StageDropOrphanResults, Action: repair.ActionDrop, MessageIndex: 3, CallID: "x"}}}}},
	}
	var out bytes.Buffer
	require.NoError(t, report.RunText(&out, res))
	for _, s := range []string{"7 (session, cli)", "drop_orphan_results", "session s1: repaired (openclaw), 100 → 80 bytes, 5 → 4 messages, versions 1 (before) and 2 (after)", "msg 3"} {
		require.Contains(t, out.String(), s)
	}
	out.Reset()
	require.NoError(t, report.RunJSON(&out, res))
	require.True(t, strings.HasPrefix(out.String(), `{"run_id":7`))
}

// failAfter accepts n bytes, then fails every write.
type failAfter struct{ n int }

var errDiskFull = errors.New("disk full")

func (f *failAfter) Write(p []byte) (int, error) {
	if len(p) > f.n {
		n := f.n
		f.n = 0
		return n, errDiskFull
	}
	f.n -= len(p)
	return len(p), nil
}

func TestTextRenderersReturnWriteErrors(t *testing.T) {
	t.Parallel()
	run := int64(7)
	res := &model.RunResult{RunID: 7, Mode: model.ModeSession, Trigger: model.TriggerCLI, Status: "completed",
		Counts: model.RunCounts{Scanned: 1, Repaired: 1},
		Outcomes: []model.SessionOutcome{{SessionID: "s1", Status: "repaired", Reason: "why",
			Report: repair.Report{Actions: []repair.Action{{Stage: repair.StageDropOrphanResults, Action: repair.ActionDrop, CallID: "x"}}}}},
	}
	reports := []model.ReportRow{{ID: 1, RunID: &run, SessionID: "s1", Status: "repaired", Reason: "why",
		Actions: []repair.Action{{Stage: repair.StageDropOrphanResults, Action: repair.ActionDrop, CallID: "x"}}}}
	versions := []model.VersionRow{{Version: 1, Kind: "original", ContentHash: "abcdef"}}
	summary := &report.Summary{Sessions: 1, ByStatus: map[model.SessionStatus]int{model.StatusRepaired: 1}}
	renderers := map[string]func(io.Writer) error{
		"RunText":        func(w io.Writer) error { return report.RunText(w, res) },
		"RunsText":       func(w io.Writer) error { return report.RunsText(w, []model.RunRow{{ID: 7}}) },
		"RunSummaryText": func(w io.Writer) error { return report.RunSummaryText(w, model.RunRow{ID: 7}) },
		"ReportsText":    func(w io.Writer) error { return report.ReportsText(w, reports) },
		"HistoryText":    func(w io.Writer) error { return report.HistoryText(w, "s1", reports, versions) },
		"Diff": func(w io.Writer) error {
			return report.Diff(w, []byte(`[{"role":"user","content":"a"}]`), []byte(`[{"role":"user","content":"b"}]`), false)
		},
		"Summary": func(w io.Writer) error { return report.NewText(w, report.EveryAction).Summary(summary) },
		"VersionDiff": func(w io.Writer) error {
			return report.VersionDiff(w, "s1", model.VersionRow{Version: 1, Content: `[{"role":"user","content":"a"}]`},
				model.VersionRow{Version: 2, Content: `[{"role":"user","content":"b"}]`}, false)
		},
		"RollbackText": func(w io.Writer) error {
			return report.RollbackText(w, model.RollbackOutcome{Restored: 1, Refused: 1, Sessions: []model.RollbackResult{
				{SessionID: "s1", Restored: true, To: 1, Written: 3, Preserved: 2}, {SessionID: "s2", Reason: "changed"}}}, false)
		},
	}
	for name, render := range renderers {
		var full bytes.Buffer
		require.NoError(t, render(&full), name)
		for _, n := range []int{0, full.Len() / 2, full.Len() - 1} {
			require.ErrorIs(t, render(&failAfter{n: n}), errDiskFull, "%s failing after %d of %d bytes", name, n, full.Len())
		}
	}
}
