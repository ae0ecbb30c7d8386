package report

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/store/model"
)

// RunJSON writes a run's result as one JSON object.
func RunJSON(w io.Writer, r *model.RunResult) error {
	return json.NewEncoder(w).Encode(r)
}

// RunText writes a run's result for people: the totals, then each kept outcome with its
// actions.
func RunText(w io.Writer, r *model.RunResult) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	verb := "repaired"
	if r.DryRun {
		verb = "would repair"
	}
	fmt.Fprintf(tw, "run\t%d (%s, %s%s)\n", r.RunID, Escape(string(r.Mode)), Escape(string(r.Trigger)), map[bool]string{true: ", dry run"}[r.DryRun])
	fmt.Fprintf(tw, "status\t%s\n", Escape(r.Status))
	if r.Error != "" {
		fmt.Fprintf(tw, "error\t%s\n", Escape(r.Error))
	}
	c := r.Counts
	fmt.Fprintf(tw, "scanned\t%d\n", c.Scanned)
	fmt.Fprintf(tw, "  clean\t%d\n", c.Clean)
	fmt.Fprintf(tw, "  %s\t%d\n", verb, c.Repaired)
	for _, row := range []struct {
		name string
		n    int
	}{{"pending (may still be running)", c.Pending}, {"conflict (changed meanwhile; next run)", c.Conflict},
		{"skipped (unparseable, unknown dialect, too large)", c.Skipped}, {"failed", c.Failed}} {
		if row.n > 0 {
			fmt.Fprintf(tw, "  %s\t%d\n", row.name, row.n)
		}
	}
	if len(r.ByStage) > 0 {
		fmt.Fprintf(tw, "actions by stage\t\n")
		for _, st := range repair.Stages() {
			if n := r.ByStage[st]; n > 0 {
				fmt.Fprintf(tw, "  %s\t%d\n", st, n)
			}
		}
	}
	if len(r.ByIssue) > 0 {
		fmt.Fprintf(tw, "sessions by issue\t\n")
		for _, ic := range repair.IssueCodes() {
			if n := r.ByIssue[string(ic.Code)]; n > 0 {
				fmt.Fprintf(tw, "  %s\t%d\n", ic.Code, n)
			}
		}
	}
	fmt.Fprintf(tw, "duration\t%s\n", r.Duration.Round(time.Millisecond))
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, o := range r.Outcomes {
		fmt.Fprintf(w, "\nsession %s: %s", Escape(o.SessionID), Escape(o.Status))
		if o.Report.Dialect != "" {
			fmt.Fprintf(w, " (%s)", Escape(string(o.Report.Dialect)))
		}
		fmt.Fprintf(w, ", %d → %d bytes, %d → %d messages", o.BytesBefore, o.BytesAfter, o.Report.MessagesIn, o.Report.MessagesOut)
		if o.ToVersion > 0 {
			fmt.Fprintf(w, ", versions %d (before) and %d (after)", o.FromVersion, o.ToVersion)
		}
		fmt.Fprintln(w)
		if o.Reason != "" {
			fmt.Fprintf(w, "  %s\n", Escape(o.Reason))
		}
		for _, a := range o.Report.Actions {
			io.WriteString(w, actionLine("  ", a))
		}
	}
	return nil
}
