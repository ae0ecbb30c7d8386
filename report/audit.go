package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

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
	p.println("RUN\tSTARTED (UTC)\tTRIGGER\tMODE\tSTATUS\tSCANNED\tREPAIRED\tCONFLICT\tFAILED\tDURATION")
	for _, r := range runs {
		mode := string(r.Mode)
		if r.DryRun {
			mode += " (dry)"
		}
		dur := "-"
		if r.FinishedAt != nil {
			dur = r.FinishedAt.Sub(r.StartedAt).Round(time.Millisecond).String()
		}
		p.printf("%d\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\n", r.ID, ts(r.StartedAt), Escape(string(r.Trigger)), Escape(mode), Escape(r.Status),
			r.Counts.Scanned, r.Counts.Repaired, r.Counts.Conflict, r.Counts.Failed, dur)
	}
	return p.flush(tw)
}

// RunSummaryText shows one run: counts by status, stage, dialect and issue code.
func RunSummaryText(w io.Writer, r model.RunRow) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	p := &errWriter{w: tw}
	p.printf("run\t%d\n", r.ID)
	p.printf("trigger\t%s\n", Escape(string(r.Trigger)))
	p.printf("mode\t%s%s\n", Escape(string(r.Mode)), map[bool]string{true: " (dry run)"}[r.DryRun])
	p.printf("status\t%s\n", Escape(r.Status))
	if r.Error != "" {
		p.printf("error\t%s\n", Escape(r.Error))
	}
	p.printf("started\t%s UTC\n", ts(r.StartedAt))
	if r.FinishedAt != nil {
		p.printf("duration\t%s\n", r.FinishedAt.Sub(r.StartedAt).Round(time.Millisecond))
	}
	c := r.Counts
	if r.Mode == model.ModeRollback {
		p.printf("sessions\t%d (restored %d, refused %d, failed %d)\n", c.Scanned, c.Restored, c.Refused, c.Failed)
	} else {
		p.printf("scanned\t%d (clean %d, repaired %d, pending %d, conflict %d, skipped %d, failed %d)\n",
			c.Scanned, c.Clean, c.Repaired, c.Pending, c.Conflict, c.Skipped, c.Failed)
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
	p.println("ID\tTIME (UTC)\tRUN\tSESSION\tSTATUS\tDIALECT\tISSUES\tVERSIONS\tREASON")
	for _, r := range rows {
		run := "-"
		if r.RunID != nil {
			run = fmt.Sprint(*r.RunID)
		}
		vers := "-"
		if r.ToVersion > 0 {
			vers = fmt.Sprintf("%d→%d", r.FromVersion, r.ToVersion)
		}
		p.printf("%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, ts(r.CreatedAt), run, Escape(r.SessionID), Escape(r.Status),
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

// Diff writes what changed between two versions of a transcript, message by message:
// removed (-), inserted (+), moved (>) and rewritten (~); unchanged runs are collapsed.
// color adds ANSI colours (for terminals only).
func Diff(w io.Writer, before, after []byte, color bool) error {
	a, err := messagesOf(before)
	if err != nil {
		return fmt.Errorf("read earlier version: %w", err)
	}
	b, err := messagesOf(after)
	if err != nil {
		return fmt.Errorf("read later version: %w", err)
	}
	ops := diffOps(a, b)
	paint := func(code, s string) string {
		if !color {
			return s
		}
		return "\x1b[" + code + "m" + s + "\x1b[0m"
	}
	p := &errWriter{w: w}
	same := 0
	flush := func() {
		if same > 0 {
			p.printf("    … %d unchanged message%s\n", same, map[bool]string{true: "s"}[same > 1])
			same = 0
		}
	}
	for _, op := range ops {
		switch op.kind {
		case '=':
			same++
			continue
		case '-':
			flush()
			p.println(paint("31", fmt.Sprintf("- #%-3d    removed    %s", op.i, describe(a[op.i]))))
		case '+':
			flush()
			p.println(paint("32", fmt.Sprintf("+     #%-3d inserted   %s", op.j, describe(b[op.j]))))
		case '>':
			flush()
			p.println(paint("33", fmt.Sprintf("> #%-3d→#%-3d moved    %s", op.i, op.j, describe(b[op.j]))))
		case '~':
			flush()
			p.println(paint("33", fmt.Sprintf("~ #%-3d→#%-3d rewritten %s", op.i, op.j, describe(b[op.j]))))
		}
	}
	flush()
	p.printf("%d → %d messages\n", len(a), len(b))
	return p.err
}

func messagesOf(b []byte) ([][]byte, error) {
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, err
	}
	out := make([][]byte, len(raw))
	for i, m := range raw {
		var buf bytes.Buffer
		if err := json.Compact(&buf, m); err != nil {
			return nil, err
		}
		out[i] = buf.Bytes()
	}
	return out, nil
}

type op struct {
	kind byte
	i, j int
}

// diffOps aligns two message lists by their heaviest common subsequence, where
// conversation messages weigh more than tool results, so that when either could have
// moved it is the result (as tmend moves results, never turns). A removed message that is
// inserted elsewhere unchanged is a move; removals followed by insertions of the same
// role are rewrites.
func diffOps(a, b [][]byte) []op {
	n, m := len(a), len(b)
	weight := make([]int32, n)
	for i := range a {
		weight[i] = 2
		if isResult(a[i]) {
			weight[i] = 1
		}
	}
	lcs := make([][]int32, n+1)
	for i := range lcs {
		lcs[i] = make([]int32, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if bytes.Equal(a[i], b[j]) {
				lcs[i][j] = lcs[i+1][j+1] + weight[i]
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var ops []op
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && bytes.Equal(a[i], b[j]) && lcs[i][j] == lcs[i+1][j+1]+weight[i]:
			ops = append(ops, op{'=', i, j})
			i, j = i+1, j+1
		case j < m && (i == n || lcs[i][j+1] > lcs[i+1][j]):
			ops = append(ops, op{'+', -1, j})
			j++
		default:
			ops = append(ops, op{'-', i, -1})
			i++
		}
	}
	// A removed message that is inserted elsewhere unchanged was moved.
	for x := range ops {
		if ops[x].kind != '-' {
			continue
		}
		for y := range ops {
			if ops[y].kind == '+' && bytes.Equal(a[ops[x].i], b[ops[y].j]) {
				ops[y] = op{'>', ops[x].i, ops[y].j}
				ops[x].kind = 0
				break
			}
		}
	}
	// Removals followed by insertions are messages rewritten in place, pairwise.
	var kept []op
	for _, o := range ops {
		if o.kind != 0 {
			kept = append(kept, o)
		}
	}
	var out []op
	for x := 0; x < len(kept); {
		if kept[x].kind != '-' {
			out = append(out, kept[x])
			x++
			continue
		}
		dels := x
		for x < len(kept) && kept[x].kind == '-' {
			x++
		}
		ins := x
		for x < len(kept) && kept[x].kind == '+' {
			x++
		}
		used := make([]bool, x-ins)
		for _, d := range kept[dels:ins] {
			paired := false
			for k, in := range kept[ins:x] {
				if !used[k] && kindOf(a[d.i]) == kindOf(b[in.j]) {
					out = append(out, op{'~', d.i, in.j})
					used[k], paired = true, true
					break
				}
			}
			if !paired {
				out = append(out, d)
			}
		}
		for k, in := range kept[ins:x] {
			if !used[k] {
				out = append(out, in)
			}
		}
	}
	return out
}

// kindOf is a message's role, else its type.
func kindOf(m []byte) string {
	var f struct{ Role, Type string }
	_ = json.Unmarshal(m, &f)
	if f.Role != "" {
		return f.Role
	}
	return f.Type
}

// isResult reports a message that is a tool result as a whole.
func isResult(m []byte) bool {
	k := kindOf(m)
	return k == "tool" || k == "toolResult" || strings.HasSuffix(k, "_output")
}

// describe summarises a message in one line: its role or type and a preview.
func describe(m []byte) string {
	kind := kindOf(m)
	preview := string(m)
	if len(preview) > 90 {
		cut := 87
		for cut > 0 && !utf8.RuneStart(preview[cut]) {
			cut--
		}
		preview = preview[:cut] + "..."
	}
	return fmt.Sprintf("%-10s %s", Escape(dash(kind)), Escape(preview))
}

// VersionDiff names two versions of a session and writes what changed between them, as
// Diff does.
func VersionDiff(w io.Writer, sessionID string, before, after model.VersionRow, color bool) error {
	if _, err := fmt.Fprintf(w, "session %s: version %d (%s) → version %d (%s)\n", Escape(sessionID), before.Version,
		Escape(before.Kind), after.Version, Escape(after.Kind)); err != nil {
		return err
	}
	return Diff(w, []byte(before.Content), []byte(after.Content), color)
}
