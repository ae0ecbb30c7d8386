package report

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/store/model"
)

// RunText writes a run's result for people: the totals, then each kept outcome with its
// actions.
func RunText(w io.Writer, r *model.RunResult) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	p := &errWriter{w: tw}
	verb := "repaired"
	if r.DryRun {
		verb = "would repair"
	}
	p.printf("run\t%d (%s, %s%s)\n", r.RunID, Escape(string(r.Mode)), Escape(string(r.Trigger)), map[bool]string{true: ", dry run"}[r.DryRun])
	p.printf("status\t%s\n", Escape(r.Status))
	if r.Error != "" {
		p.printf("error\t%s\n", Escape(r.Error))
	}
	c := r.Counts
	p.printf("scanned\t%d\n", c.Scanned)
	p.printf("  clean\t%d\n", c.Clean)
	p.printf("  %s\t%d\n", verb, c.Repaired)
	for _, row := range []struct {
		name string
		n    int
	}{{"pending (may still be running)", c.Pending}, {"conflict (changed meanwhile; next run)", c.Conflict},
		{"skipped (unreadable, unsupported, too large, rolled back)", c.Skipped}, {"failed", c.Failed}} {
		if row.n > 0 {
			p.printf("  %s\t%d\n", row.name, row.n)
		}
	}
	if cc := r.Compaction; cc != (model.CompactionCounts{}) {
		p.printf("  %s\t%s\n", map[bool]string{false: "compacted", true: "would compact"}[r.DryRun], compactionTotal(cc, r.DryRun))
		if cc.Rejected > 0 {
			p.printf("  compact_rejected (failed a check; compaction not written)\t%d\n", cc.Rejected)
		}
	}
	if len(r.ByStage) > 0 {
		p.printf("actions by stage\t\n")
		for _, st := range repair.Stages() {
			if n := r.ByStage[st]; n > 0 {
				p.printf("  %s\t%d\n", st, n)
			}
		}
	}
	if len(r.ByIssue) > 0 {
		p.printf("sessions by issue\t\n")
		for _, ic := range repair.IssueCodes() {
			if n := r.ByIssue[string(ic.Code)]; n > 0 {
				p.printf("  %s\t%d\n", ic.Code, n)
			}
		}
	}
	p.printf("duration\t%s\n", r.Duration.Round(time.Millisecond))
	if err := p.flush(tw); err != nil {
		return err
	}
	p = &errWriter{w: w}
	for _, o := range r.Outcomes {
		p.printf("\nsession %s: %s", Escape(o.SessionID), Escape(o.Status))
		if o.Dialect != "" {
			p.printf(" (%s)", Escape(string(o.Dialect)))
		}
		if len(o.Actions) == 0 && o.BytesBefore == o.BytesAfter {
			// Left as it was: a session refused has no messages out, which is no loss.
			p.printf(", %d bytes, %d messages, unchanged", o.BytesBefore, o.MessagesIn)
		} else {
			p.printf(", %d → %d bytes, %d → %d messages", o.BytesBefore, o.BytesAfter, o.MessagesIn, o.MessagesOut)
		}
		if o.ToVersion > 0 {
			p.printf(", versions %d (before) and %d (after)", o.FromVersion, o.ToVersion)
		}
		p.println()
		if o.Reason != "" {
			p.printf("  %s\n", Escape(o.Reason))
		}
		for _, a := range o.Actions {
			p.print(actionLine("  ", a))
		}
		if c := o.Compaction; c != nil {
			p.printf("  compaction: %s", Escape(string(c.Status)))
			if c.Reason != "" {
				p.printf(" (%s)", Escape(c.Reason))
			}
			p.printf(", %d → %d bytes, boundary at message %d\n", c.BytesBefore, c.BytesAfter, c.Boundary)
			for _, a := range c.Actions {
				p.printf("    compact_%s\t%s %s of %s", a.Rule, a.Category, a.Target, Escape(a.Tool))
				if a.CallID != "" {
					p.printf(" (%s)", Escape(a.CallID))
				}
				p.printf(" at message %d: %d → %d bytes\n", a.MessageIndex, a.BytesBefore, a.BytesAfter)
			}
		}
	}
	return p.err
}

// compactionTotal is a run's compaction line: sessions, and bytes and estimated tokens
// saved (to save, in a dry run).
func compactionTotal(c model.CompactionCounts, dryRun bool) string {
	verb := map[bool]string{false: "saved", true: "to save"}[dryRun]
	return fmt.Sprintf("%d (%d bytes %s, about %d tokens)", c.Compacted, c.SavedBytes, verb, c.SavedBytes/4)
}
