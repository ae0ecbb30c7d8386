package report_test

import (
	"bytes"
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
