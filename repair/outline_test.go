package repair_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/repair"
)

// TestInspectSeesWhatRepairSees checks Inspect against the engine's own reports on every
// golden case: the same dialect and messages, the results it drops and moves where the
// actions say, and its synthetic results marked in the output.
func TestInspectSeesWhatRepairSees(t *testing.T) {
	t.Parallel()
	var cases []goldenCase
	for _, d := range repair.Dialects() {
		cases = append(cases, readJSONL(t, filepath.Join(goldenDir, string(d)+".jsonl"))...)
	}
	for _, path := range ruleFiles(t) {
		cases = append(cases, readRule(t, path))
	}
	for _, c := range cases {
		opts := c.options(t)
		res, rerr := repair.Repair(c.input(t), opts)
		in, err := repair.Inspect(c.input(t), opts)
		var ue *repair.UnrepairableError
		if errors.As(rerr, &ue) && ue.Status == repair.StatusUnknownDialect {
			require.Error(t, err, c.Name)
			require.Len(t, in.Messages, res.Report.MessagesIn, "%s: the messages are listed anyway", c.Name)
			for _, m := range in.Messages {
				require.Empty(t, m.Parts, c.Name)
			}
			continue
		}
		require.NoError(t, err, c.Name)
		require.Equal(t, res.Report.Dialect, in.Dialect, c.Name)
		require.Len(t, in.Messages, res.Report.MessagesIn, c.Name)
		out, err := repair.Inspect(res.Messages, repair.Options{Dialect: res.Report.Dialect})
		require.NoError(t, err, c.Name)

		has := func(o repair.Outline, msg int, kind repair.PartKind, id string, synthetic bool) bool {
			for i, m := range o.Messages {
				for _, p := range m.Parts {
					if (msg < 0 || i == msg) && p.Kind == kind && p.CallID == id && (!synthetic || p.Synthetic) {
						return true
					}
				}
			}
			return false
		}
		for _, a := range res.Report.Actions {
			switch {
			case a.Action == repair.ActionInsert:
				require.True(t, has(out, -1, repair.PartResult, a.CallID, true), "%s: synthetic result for %q", c.Name, a.CallID)
				require.True(t, has(in, a.MessageIndex, repair.PartCall, a.CallID, false), "%s: call %q", c.Name, a.CallID)
			case a.Stage == repair.StageDropDuplicateResults && res.Report.Dialect.InPlace():
				if a.CallID == "" {
					continue // a step-start marker gone with its message's last tool part
				}
				require.True(t, has(in, a.MessageIndex, repair.PartCall, a.CallID, false), "%s: %+v", c.Name, a)
			case a.Stage == repair.StageDropOrphanResults && a.Action == repair.ActionDrop,
				a.Stage == repair.StageDropDuplicateResults, a.Action == repair.ActionMove:
				require.True(t, has(in, a.MessageIndex, repair.PartResult, a.CallID, false), "%s: %+v", c.Name, a)
			}
		}
		for i, m := range in.Messages {
			require.Equal(t, m.Whole, m.PartsKey == "" && len(m.Parts) == 1, "%s: message %d", c.Name, i)
			if m.Whole {
				require.Equal(t, m.Raw, m.Parts[0].Raw, "%s: a whole message is its part", c.Name)
			}
		}
	}
}

func TestInspectRefusesWhatIsNotATranscript(t *testing.T) {
	t.Parallel()
	for _, in := range []string{``, `{}`, `[1]`, `[{"role":"user"}] x`, `[{"role":`} {
		o, err := repair.Inspect([]byte(in), repair.Options{})
		var ue *repair.UnrepairableError
		require.ErrorAs(t, err, &ue, "%q", in)
		require.Equal(t, repair.StatusUnparseable, ue.Status, "%q", in)
		require.Empty(t, o.Messages, "%q", in)
	}
	o, err := repair.Inspect([]byte(`[{"role":"user","content":"hi"}]`), repair.Options{})
	require.NoError(t, err)
	require.Equal(t, repair.Dialect(""), o.Dialect, "no tool calls: no dialect")
	require.Equal(t, "user", o.Messages[0].Kind)
}
