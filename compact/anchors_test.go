package compact

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/repair/gen"
)

// The anchors' rules, re-implemented from their sources (docs/research/compaction.md
// sections 1a, 3a, 4b, 5b) with their defaults, on the same parsed transcript tmend
// uses, so that BENCHMARKS.md compares rules rather than parsers.

// anchor compacts one repaired transcript.
type anchor struct {
	name string
	run  func(msgs []byte) []byte
}

// clearUses is Anthropic's clear_tool_uses_20250919 and LangChain's ClearToolUsesEdit:
// past trigger tokens (bytes/4), every result but those of the last keep tool uses
// becomes placeholder; inputs stay.
func clearUses(trigger, keep int, placeholder string) func([]byte) []byte {
	return func(msgs []byte) []byte {
		if len(msgs)/4 <= trigger {
			return msgs
		}
		t := parse(msgs)
		if t == nil {
			return msgs
		}
		var edits []edit
		for i, u := range t.uses {
			if i >= len(t.uses)-keep || u.resultMsg < 0 || !u.result.ok {
				continue
			}
			if data := writeResult(u.result.form, placeholder, u.isError); len(data) < u.result.end-u.result.start {
				edits = append(edits, edit{start: u.result.start, end: u.result.end, data: data})
			}
		}
		return apply(msgs, edits)
	}
}

// openClawPrune is OpenClaw's context pruning with DEFAULT_CONTEXT_PRUNING_SETTINGS and a
// 200k-token window: results after the third-last assistant message and before the
// first user message are protected; at 30% of the window results over 4000 characters
// keep 1500 + 1500; at 50%, with at least 50k prunable characters, the oldest are
// cleared until under 50%.
func openClawPrune(msgs []byte) []byte {
	const window = 200_000 * 4
	t := parse(msgs)
	if t == nil {
		return msgs
	}
	ol, _ := repair.Inspect(msgs, repair.Options{Dialect: t.d})
	assistants := 0
	protectFrom := len(ol.Messages)
	for i := len(ol.Messages) - 1; i >= 0; i-- {
		if k := ol.Messages[i].Kind; k == "assistant" || k == "model" || k == "ai" {
			if assistants++; assistants == 3 {
				protectFrom = i
				break
			}
		}
	}
	if assistants < 3 || len(t.turns) == 0 {
		return msgs
	}
	total := len(msgs)
	var prunable []*use
	chars := 0
	for _, u := range t.uses {
		if u.resultMsg >= protectFrom || u.resultMsg < t.turns[0] || !u.result.ok {
			continue
		}
		prunable = append(prunable, u)
		chars += len(u.result.text)
	}
	if float64(total)/window < 0.3 {
		return msgs
	}
	repl := map[*use][]byte{}
	for _, u := range prunable {
		r := []rune(u.result.text)
		if len(r) > 4000 {
			text := string(r[:1500]) + "\n...\n" + string(r[len(r)-1500:]) +
				fmt.Sprintf("\n\n[Tool result trimmed: kept first 1500 chars and last 1500 chars of %d chars.]", len(r))
			data := writeResult(u.result.form, text, u.isError)
			total -= (u.result.end - u.result.start) - len(data)
			repl[u] = data
		}
	}
	if float64(total)/window >= 0.5 && chars >= 50_000 {
		for _, u := range prunable {
			if float64(total)/window < 0.5 {
				break
			}
			data := writeResult(u.result.form, "[Old tool result content cleared]", u.isError)
			cur := u.result.end - u.result.start
			if r, ok := repl[u]; ok {
				cur = len(r)
			}
			total -= cur - len(data)
			repl[u] = data
		}
	}
	var edits []edit
	for _, u := range prunable {
		if data, ok := repl[u]; ok && len(data) < u.result.end-u.result.start {
			edits = append(edits, edit{start: u.result.start, end: u.result.end, data: data})
		}
	}
	return apply(msgs, edits)
}

// piDCP is Pi-DCP's default rules, which prune whole messages: deduplication (a hash of
// the text parts, a call counted as [tool:NAME] and a result as [result:ID]; later
// duplicates of non-user messages pruned), superseded writes and error purging (by tool
// and path), tool pairing (a pruned call prunes its results; a kept call protects
// them), then recency (the last 10 messages un-pruned), in that order.
func piDCP(msgs []byte) []byte {
	ol, err := repair.Inspect(msgs, repair.Options{})
	if err != nil {
		return msgs
	}
	n := len(ol.Messages)
	prune := make([]bool, n)
	seen := map[uint32]bool{}
	callAt := map[string]int{}
	var writes = map[string]int{} // path → message of the latest write result
	var lastOK = map[string]int{} // tool+path → latest successful result message
	t := parse(msgs)
	useOf := map[string]*use{}
	if t != nil {
		for _, u := range t.uses {
			useOf[u.id] = u
		}
	}
	for i := n - 1; i >= 0; i-- { // later first, for superseded writes and error purging
		for _, p := range ol.Messages[i].Parts {
			u := useOf[p.CallID]
			if p.Kind != repair.PartResult || u == nil || u.path == "" {
				continue
			}
			key := u.tool + " " + u.path
			switch {
			case u.category == CategoryWrite:
				if _, later := writes[u.path]; later {
					prune[i] = true
				}
				writes[u.path] = i
			case u.isError:
				if _, later := lastOK[key]; later {
					prune[i] = true
				}
			default:
				lastOK[key] = i
			}
		}
	}
	for i, m := range ol.Messages {
		h := fnv.New32a()
		for _, p := range m.Parts {
			switch p.Kind {
			case repair.PartCall:
				fmt.Fprintf(h, "[tool:%s]", p.ToolName)
				callAt[p.CallID] = i
			case repair.PartResult:
				fmt.Fprintf(h, "[result:%s]", p.CallID)
			default:
				h.Write(p.Raw)
			}
		}
		if len(m.Parts) == 0 {
			h.Write(m.Raw)
		}
		sum := h.Sum32()
		if seen[sum] && m.Kind != "user" && m.Kind != "human" {
			prune[i] = true
		}
		seen[sum] = true
	}
	for i, m := range ol.Messages { // forward cascade: a result follows its call
		for _, p := range m.Parts {
			if c, ok := callAt[p.CallID]; ok && p.Kind == repair.PartResult && c != i {
				prune[i] = prune[c]
			}
		}
	}
	for i := max(0, n-10); i < n; i++ {
		prune[i] = false
	}
	var kept [][]byte
	for i, m := range ol.Messages {
		if !prune[i] {
			kept = append(kept, m.Raw)
		}
	}
	return append(append([]byte{'['}, bytes.Join(kept, []byte{','})...), ']')
}

// parse reads msgs as compaction does, with nothing protected (the anchors decide).
func parse(msgs []byte) *transcript {
	ol, err := repair.Inspect(msgs, repair.Options{})
	if err != nil || !supported(ol.Dialect) {
		return nil
	}
	o, _ := ForProfile(Standard)
	t := newTranscript(msgs, ol, &o)
	for _, u := range t.uses {
		if u.resultMsg >= t.boundary {
			u.result.readText(msgs)
		}
	}
	return t
}

var anchors = []anchor{
	{"anthropic clear_tool_uses (100k, keep 3)", clearUses(100_000, 3, "[Tool result cleared]")},
	{"langchain ClearToolUsesEdit (100k, keep 3)", clearUses(100_000, 3, "[cleared]")},
	{"openclaw contextPruning (200k window)", openClawPrune},
	{"pi-dcp (whole messages, keep 10)", piDCP},
}

var (
	pathRe  = regexp.MustCompile(`/src/[a-z]+\.go`)
	errRe   = regexp.MustCompile(`error: [a-z ./-]+ failed: exit status 1`)
	idRe    = regexp.MustCompile(`call_[0-9]+_[0-9]+_[0-9a-f]+`)
	benchOn = os.Getenv("TMEND_COMPACT_BENCH") != ""
)

// distinct returns the distinct matches of re in b.
func distinct(re *regexp.Regexp, b []byte) map[string]bool {
	out := map[string]bool{}
	for _, m := range re.FindAll(b, -1) {
		out[string(m)] = true
	}
	return out
}

type tally struct {
	before, after, sessions, valid, callsKept, newIssues, idem int
	kept, total                                                [3]int // paths, ids, error lines
}

// TestAnchors compares tmend's profiles with the anchors on long coding sessions in
// every dialect: it asserts that tmend keeps every pair, adds no issue and is
// idempotent, and with TMEND_COMPACT_BENCH=1 prints BENCHMARKS.md's table.
func TestAnchors(t *testing.T) {
	sessions, msgs := 1, 200
	if benchOn {
		sessions, msgs = 4, 800
	}
	type method struct {
		name  string
		run   func([]byte) []byte
		tmend bool
	}
	var methods []method
	for _, p := range Profiles() {
		o, _ := ForProfile(p)
		o.IdleFor = 0
		methods = append(methods, method{"tmend " + string(p), func(b []byte) []byte { return Compact(b, o).Messages }, true})
	}
	for _, a := range anchors {
		methods = append(methods, method{a.name, a.run, false})
	}
	res := map[string]map[repair.Dialect]*tally{}
	for _, d := range repair.Dialects() {
		var corpus [][]byte
		err := gen.Generate(gen.Config{Seed: 1, Dialect: d, Sessions: sessions, Messages: msgs, Workload: gen.WorkloadCoding,
			FaultRate: 0.2}, func(s gen.Session) error {
			b, _ := json.Marshal(s.Messages)
			if r, err := repair.Repair(b, repair.Options{Force: true}); err == nil {
				corpus = append(corpus, r.Messages)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range methods {
			if res[m.name] == nil {
				res[m.name] = map[repair.Dialect]*tally{}
			}
			tl := &tally{}
			res[m.name][d] = tl
			for _, in := range corpus {
				out := m.run(in)
				tl.sessions++
				tl.before += len(in)
				tl.after += len(out)
				v, err := repair.Validate(out, repair.Options{QuietPeriod: -1})
				if err == nil && len(v.Issues) == 0 {
					tl.valid++
				}
				if sameCalls(in, out) {
					tl.callsKept++
				}
				tl.newIssues += len(v.Issues)
				if bytes.Equal(m.run(out), out) {
					tl.idem++
				}
				for k, re := range []*regexp.Regexp{pathRe, idRe, errRe} {
					b, a := distinct(re, in), distinct(re, out)
					tl.total[k] += len(b)
					for s := range b {
						if a[s] {
							tl.kept[k]++
						}
					}
				}
			}
			if m.tmend && (tl.valid != tl.sessions || tl.callsKept != tl.sessions || tl.newIssues != 0 || tl.idem != tl.sessions) {
				t.Errorf("%s on %s: %d of %d sessions valid, %d kept every call, %d new issues, %d idempotent", m.name, d, tl.valid, tl.callsKept,
					tl.sessions, tl.newIssues, tl.idem)
			}
		}
	}
	if !benchOn {
		return
	}
	var b strings.Builder
	b.WriteString("| method | saved bytes | saved est. tokens | valid after | every call and result kept | new issues | paths kept | ids kept | error lines kept | idempotent |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, m := range methods {
		var all tally
		for _, d := range repair.Dialects() {
			tl := res[m.name][d]
			all.before += tl.before
			all.after += tl.after
			all.sessions += tl.sessions
			all.valid += tl.valid
			all.callsKept += tl.callsKept
			all.newIssues += tl.newIssues
			all.idem += tl.idem
			for k := range all.kept {
				all.kept[k] += tl.kept[k]
				all.total[k] += tl.total[k]
			}
		}
		pct := func(a, b int) string { return fmt.Sprintf("%.1f%%", 100*float64(a)/float64(max(b, 1))) }
		fmt.Fprintf(&b, "| %s | %s | %d | %d/%d | %d/%d | %d | %s | %s | %s | %d/%d |\n", m.name, pct(all.before-all.after, all.before),
			(all.before-all.after)/4, all.valid, all.sessions, all.callsKept, all.sessions, all.newIssues, pct(all.kept[0], all.total[0]),
			pct(all.kept[1], all.total[1]), pct(all.kept[2], all.total[2]), all.idem, all.sessions)
	}
	b.WriteString("\nSaved bytes per dialect:\n\n| method |")
	for _, d := range repair.Dialects() {
		fmt.Fprintf(&b, " %s |", d)
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(repair.Dialects())) + "\n")
	for _, m := range methods {
		fmt.Fprintf(&b, "| %s |", m.name)
		for _, d := range repair.Dialects() {
			tl := res[m.name][d]
			fmt.Fprintf(&b, " %.1f%% |", 100*float64(tl.before-tl.after)/float64(max(tl.before, 1)))
		}
		b.WriteString("\n")
	}
	t.Log("\n" + b.String())
}

// sameCalls reports whether out holds every call id of in (a content rewrite keeps them
// all; a message removal may not).
func sameCalls(in, out []byte) bool {
	a, err1 := repair.Inspect(in, repair.Options{})
	b, err2 := repair.Inspect(out, repair.Options{})
	if err1 != nil || err2 != nil {
		return false
	}
	ids := func(o repair.Outline) map[string]int {
		m := map[string]int{}
		for _, msg := range o.Messages {
			for _, p := range msg.Parts {
				if p.Kind != repair.PartOther {
					m[string(p.Kind)+p.CallID]++
				}
			}
		}
		return m
	}
	x, y := ids(a), ids(b)
	if len(x) != len(y) {
		return false
	}
	for k, v := range x {
		if y[k] != v {
			return false
		}
	}
	return true
}
