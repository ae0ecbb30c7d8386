package report_test

import (
	"bytes"
	"errors"
	"io"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/report"
	"github.com/tmend/tmend/store/model"
)

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
		"DiffText": func(w io.Writer) error {
			d, err := report.DiffTranscripts([]byte(`[{"role":"user","content":"a"}]`), []byte(`[{"role":"user","content":"b"}]`), nil)
			if err != nil {
				return err
			}
			return report.DiffText(w, d, false)
		},
		"Summary": func(w io.Writer) error { return report.NewText(w, report.EveryAction).Summary(summary) },
		"RollbackText": func(w io.Writer) error {
			return report.RollbackText(w, model.RollbackOutcome{Restored: 1, Refused: 1, Sessions: []model.RollbackResult{
				{SessionID: "s1", Status: model.RollbackRestored, To: 1, Written: 3, Preserved: 2},
				{SessionID: "s2", Status: model.RollbackRefused, Reason: "changed"}}})
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

// TestDryRunTextSaysWouldRepair: a dry run repaired nothing, and its texts say so; the
// skipped line names every status it counts, rolled-back (held) sessions too.
func TestDryRunTextSaysWouldRepair(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	require.NoError(t, report.RunSummaryText(&out, model.RunRow{ID: 7, Mode: model.ModeFull, DryRun: true,
		Counts: model.RunCounts{Scanned: 50, Clean: 23, Repaired: 25, Pending: 2}}))
	require.Contains(t, out.String(), "(clean 23, would repair 25, pending 2,")
	require.NotContains(t, out.String(), "repaired 25")

	out.Reset()
	res := &model.RunResult{RunID: 8, Mode: model.ModeFull, Trigger: model.TriggerCLI, Status: "completed",
		Counts: model.RunCounts{Scanned: 3, Clean: 2, Skipped: 1}, ByStatus: map[model.SessionStatus]int{model.StatusHeld: 1}}
	require.NoError(t, report.RunText(&out, res))
	require.Contains(t, out.String(), "rolled back")
}

// TestRefusedSessionShowsNoLostMessages: a session tmend left alone keeps its messages; the
// engine's zero messages out must not read as "1 → 0 messages".
func TestRefusedSessionShowsNoLostMessages(t *testing.T) {
	t.Parallel()
	res := &model.RunResult{RunID: 9, Mode: model.ModeSession, Trigger: model.TriggerCLI, Status: "completed",
		Counts: model.RunCounts{Scanned: 1, Skipped: 1},
		Outcomes: []model.SessionOutcome{{SessionID: "bad", Status: model.StatusUnknownDialect, BytesBefore: 12, BytesAfter: 12,
			Report: repair.Report{MessagesIn: 1, MessagesOut: 0}}},
	}
	var out bytes.Buffer
	require.NoError(t, report.RunText(&out, res))
	require.Contains(t, out.String(), "session bad: unknown_dialect, 12 bytes, 1 messages, unchanged")
	require.NotContains(t, out.String(), "1 → 0 messages")
}

// TestRunsNameTheirSource: runs of every table are listed together, so each names its
// source, in the list and alone.
func TestRunsNameTheirSource(t *testing.T) {
	t.Parallel()
	run := model.RunRow{ID: 3, Mode: model.ModeFull, Status: "completed", Source: `"Message_v2"(messages:"chatId","createdAt",{id=id,role=role,parts=parts},)`}
	var out bytes.Buffer
	require.NoError(t, report.RunsText(&out, []model.RunRow{run}))
	require.Contains(t, out.String(), "SOURCE")
	require.Contains(t, out.String(), run.Source)
	out.Reset()
	require.NoError(t, report.RunSummaryText(&out, run))
	require.Regexp(t, `(?m)^source +`+regexp.QuoteMeta(run.Source)+`$`, out.String())
}
