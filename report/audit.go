package report

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/store/model"
)

// JSONLines writes each item as one JSON object per line.
func JSONLines[T any](w io.Writer, items []T) error {
	enc := json.NewEncoder(w)
	for _, it := range items {
		if err := enc.Encode(it); err != nil {
			return err
		}
	}
	return nil
}

func ts(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05") }

// RunsText lists runs, one line each.
func RunsText(w io.Writer, runs []model.RunRow) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	p := &errWriter{w: tw}
	// SOURCE last: the list holds the runs of every table, and its names are long.
	p.println("RUN\tSTARTED (UTC)\tTRIGGER\tACTOR\tMODE\tSTATUS\tSCANNED\tREPAIRED\tCONFLICT\tFAILED\tDURATION\tSOURCE")
	for _, r := range runs {
		mode := string(r.Mode)
		if r.DryRun {
			mode += " (dry)"
		}
		dur := "-"
		if r.FinishedAt != nil {
			dur = r.FinishedAt.Sub(r.StartedAt).Round(time.Millisecond).String()
		}
		p.printf("%d\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\n", r.ID, ts(r.StartedAt), Escape(string(r.Trigger)),
			Escape(dash(r.Actor)), Escape(mode), Escape(r.Status),
			r.Counts.Scanned, r.Counts.Repaired, r.Counts.Conflict, r.Counts.Failed, dur, Escape(dash(r.Source)))
	}
	return p.flush(tw)
}

// RunSummaryText shows one run: counts by status, stage, dialect and issue code.
func RunSummaryText(w io.Writer, r model.RunRow) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	p := &errWriter{w: tw}
	p.printf("run\t%d\n", r.ID)
	p.printf("trigger\t%s\n", Escape(string(r.Trigger)))
	p.printf("actor\t%s\n", Escape(dash(r.Actor)))
	p.printf("mode\t%s%s\n", Escape(string(r.Mode)), map[bool]string{true: " (dry run)"}[r.DryRun])
	p.printf("source\t%s\n", Escape(dash(r.Source)))
	if r.Mode == model.ModeRollback {
		if of, ok := r.Options["rollback_of_run"].(float64); ok {
			p.printf("rolls back\trun %d\n", int64(of))
		} else if id, ok := r.Options["session_id"].(string); ok {
			p.printf("rolls back\tsession %s\n", Escape(id))
		}
	}
	p.printf("status\t%s\n", Escape(r.Status))
	if r.Error != "" {
		p.printf("error\t%s\n", Escape(r.Error))
	}
	p.printf("started\t%s UTC\n", ts(r.StartedAt))
	if r.TmendVersion != "" || r.Host != "" {
		p.printf("by\ttmend %s on %s\n", Escape(dash(r.TmendVersion)), Escape(dash(r.Host)))
	}
	if r.FinishedAt != nil {
		p.printf("duration\t%s\n", r.FinishedAt.Sub(r.StartedAt).Round(time.Millisecond))
	}
	c := r.Counts
	if r.Mode == model.ModeRollback {
		p.printf("sessions\t%d (restored %d, refused %d, failed %d)\n", c.Scanned, c.Restored, c.Refused, c.Failed)
	} else {
		p.printf("scanned\t%d (clean %d, %s %d, pending %d, conflict %d, skipped %d, failed %d)\n",
			c.Scanned, c.Clean, map[bool]string{false: "repaired", true: "would repair"}[r.DryRun], c.Repaired,
			c.Pending, c.Conflict, c.Skipped, c.Failed)
	}
	if cc := r.Summary.Compaction; cc != (model.CompactionCounts{}) {
		p.printf("%s\t%s, compact_rejected %d\n", map[bool]string{false: "compacted", true: "would compact"}[r.DryRun],
			compactionTotal(cc, r.DryRun), cc.Rejected)
	}
	section := func(title string, m map[string]int, order []string) {
		if len(m) == 0 {
			return
		}
		p.printf("%s\t\n", title)
		for _, k := range order {
			if n, ok := m[k]; ok {
				p.printf("  %s\t%d\n", Escape(k), n)
			}
		}
	}
	byStatus := map[string]int{}
	for st, n := range r.Summary.ByStatus {
		byStatus[string(st)] = n
	}
	section("by status", byStatus, sortedKeys(byStatus))
	var stages []string
	for _, st := range repair.Stages() {
		stages = append(stages, string(st))
	}
	section("actions by stage", r.Summary.ByStage, stages)
	section("sessions by dialect", r.Summary.ByDialect, sortedKeys(r.Summary.ByDialect))
	var codes []string
	for _, c := range repair.IssueCodes() {
		codes = append(codes, string(c.Code))
	}
	section("sessions by issue", r.Summary.ByIssue, codes)
	return p.flush(tw)
}

// ReportsText lists audit rows, one line each.
func ReportsText(w io.Writer, rows []model.ReportRow) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	p := &errWriter{w: tw}
	p.println("ID\tTIME (UTC)\tRUN\tACTOR\tSESSION\tSTATUS\tDIALECT\tISSUES\tVERSIONS\tREASON")
	for _, r := range rows {
		run := "-"
		if r.RunID != nil {
			run = fmt.Sprint(*r.RunID)
		}
		vers := "-"
		if r.ToVersion > 0 {
			vers = fmt.Sprintf("%d→%d", r.FromVersion, r.ToVersion)
		}
		p.printf("%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, ts(r.CreatedAt), run, Escape(dash(r.Actor)), Escape(r.SessionID), Escape(r.Status),
			Escape(dash(r.Dialect)), Escape(dash(strings.Join(r.IssueCodes, ","))), vers, Escape(r.Reason))
	}
	return p.flush(tw)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// HistoryText shows everything tmend did to a session: its reports (oldest first, with
// their actions) and its saved versions.
func HistoryText(w io.Writer, sessionID string, reports []model.ReportRow, versions []model.VersionRow) error {
	p := &errWriter{w: w}
	p.printf("session %s\n\nreports\n", Escape(sessionID))
	sort.Slice(reports, func(i, j int) bool { return reports[i].ID < reports[j].ID })
	for _, r := range reports {
		run := "no run"
		if r.RunID != nil {
			run = fmt.Sprintf("run %d", *r.RunID)
		}
		p.printf("  %s UTC  %-16s %s, %s", ts(r.CreatedAt), Escape(r.Status), run, Escape(string(r.Trigger)))
		if r.Actor != "" {
			p.printf(" by %s", Escape(r.Actor))
		}
		if r.ToVersion > 0 {
			p.printf(", versions %d→%d", r.FromVersion, r.ToVersion)
		}
		if len(r.IssueCodes) > 0 {
			p.printf(", %s", Escape(strings.Join(r.IssueCodes, " ")))
		}
		p.println()
		if r.Reason != "" {
			p.printf("      %s\n", Escape(r.Reason))
		}
		for _, a := range r.Actions {
			p.print(actionLine("      ", a))
		}
	}
	p.println("\nversions")
	tw := tabwriter.NewWriter(p, 0, 4, 2, ' ', 0)
	tp := &errWriter{w: tw}
	tp.println("  VERSION\tKIND\tSAVED (UTC)\tRUN\tBYTES\tHASH")
	for _, v := range versions {
		run := "-"
		if v.RunID != nil {
			run = fmt.Sprint(*v.RunID)
		}
		tp.printf("  %d\t%s\t%s\t%s\t%d\t%s\n", v.Version, Escape(v.Kind), ts(v.CreatedAt), run, v.SizeBytes, Escape(v.ContentHash[:min(12, len(v.ContentHash))]))
	}
	if err := tp.flush(tw); err != nil {
		return err
	}
	return p.err
}
