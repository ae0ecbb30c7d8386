package report_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/report"
	"github.com/tmend/tmend/store/model"
)

// goldenPair is one of the repair package's golden cases: an input and the output and
// report the engine gives for it.
type goldenPair struct {
	Name          string
	Input, Output json.RawMessage
	Report        repair.Report
}

// goldenPairs reads every golden case of every dialect, generated and hand-written.
func goldenPairs(t *testing.T) []goldenPair {
	t.Helper()
	dir := filepath.Join("..", "repair", "testdata", "golden")
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	require.NoError(t, err)
	var pairs []goldenPair
	for _, f := range files {
		fh, err := os.Open(f)
		require.NoError(t, err)
		sc := bufio.NewScanner(fh)
		sc.Buffer(nil, 1<<24)
		for sc.Scan() {
			var p goldenPair
			require.NoError(t, json.Unmarshal(sc.Bytes(), &p))
			p.Name = strings.TrimSuffix(filepath.Base(f), ".jsonl") + "/" + p.Name
			pairs = append(pairs, p)
		}
		require.NoError(t, sc.Err())
		require.NoError(t, fh.Close())
	}
	rules, err := filepath.Glob(filepath.Join(dir, "rules", "*.json"))
	require.NoError(t, err)
	for _, f := range rules {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		var p goldenPair
		require.NoError(t, json.Unmarshal(b, &p))
		p.Name = "rules/" + strings.TrimSuffix(filepath.Base(f), ".json")
		pairs = append(pairs, p)
	}
	require.Greater(t, len(pairs), 80, "golden cases not found")
	return pairs
}

func messages(t *testing.T, b []byte) []string {
	t.Helper()
	var raw []json.RawMessage
	require.NoError(t, json.Unmarshal(b, &raw))
	out := make([]string, len(raw))
	for i, m := range raw {
		out[i] = compactJSON(t, m)
	}
	return out
}

func compactJSON(t *testing.T, b []byte) string {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, json.Compact(&buf, b))
	return buf.String()
}

// requireComplete checks that each side of the diff holds every message of its version
// once, in order, with its content: nothing is left out or shown twice.
func requireComplete(t *testing.T, d *report.TranscriptDiff, before, after []byte) {
	t.Helper()
	for _, s := range []struct {
		name string
		want []string
		idx  func(report.MessageDiff) int
		text func(report.MessageDiff) json.RawMessage
	}{
		{"before", messages(t, before), func(m report.MessageDiff) int { return m.Before },
			func(m report.MessageDiff) json.RawMessage { return m.BeforeContent }},
		{"after", messages(t, after), func(m report.MessageDiff) int { return m.After },
			func(m report.MessageDiff) json.RawMessage { return m.AfterContent }},
	} {
		var got []string
		var order []int
		for _, md := range d.Messages {
			i := s.idx(md)
			if i < 0 {
				continue
			}
			order = append(order, i)
			text := s.text(md)
			if md.Content != nil {
				require.Nil(t, text, "a message with content has no sides")
				text = md.Content
			}
			require.NotNil(t, text, "%s message %d has no content", s.name, i)
			got = append(got, compactJSON(t, text))
		}
		// The after side is in order; the before side is too, except that a moved message
		// is shown where it went.
		if s.name == "after" {
			require.IsIncreasing(t, order)
		}
		require.Len(t, got, len(s.want), "%s side", s.name)
		byIdx := map[int]string{}
		for k, i := range order {
			_, dup := byIdx[i]
			require.False(t, dup, "%s message %d shown twice", s.name, i)
			byIdx[i] = got[k]
		}
		for i, w := range s.want {
			require.Equal(t, w, byIdx[i], "%s message %d", s.name, i)
		}
	}
}

// wantChange is the change an action's effect must show as; issues are its report's.
func wantChange(a repair.Action, issues []repair.Issue) []report.Change {
	switch {
	case a.Action == repair.ActionMerge:
		// Merged into the message before it: removed, or, when that one is a response
		// turn tmend made, paired with the merged message and changed.
		return []report.Change{report.ChangeRemoved, report.ChangeChanged}
	case a.Action == repair.ActionDrop && a.CallID == "" && a.ToolName == "" && a.Stage != repair.StageDropOrphanResults:
		// A part that is no call or result, gone with the one its message lost (a
		// step-start marker of ai-sdk-ui and mastra).
		return []report.Change{report.ChangeRemoved}
	case a.Action == repair.ActionInsert:
		return []report.Change{report.ChangeSynthesized}
	case a.Stage == repair.StageDropOrphanResults:
		return []report.Change{report.ChangeDroppedOrphan}
	case a.Stage == repair.StageDropDuplicateResults:
		return []report.Change{report.ChangeDroppedDuplicate}
	case a.Action == repair.ActionDrop:
		return []report.Change{report.ChangeRemoved}
	case a.Action == repair.ActionMove:
		// A result moved next to its call by dropping what stood between them is unchanged
		// in place.
		return []report.Change{report.ChangeMoved, report.ChangeUnchanged}
	case a.Stage == repair.StageNormalizeCallBlocks, a.Stage == repair.StageNormalizeArguments:
		return []report.Change{report.ChangeRewritten}
	case a.Stage == repair.StageDropProviderCalls && a.Action == repair.ActionRewrite:
		// --target openai writes a LangChain AI message's content ChatOpenAI would send
		// empty as "" (empty_content): the message changed, its calls did not.
		return []report.Change{report.ChangeChanged}
	case a.Stage == repair.StageSynthesizeMissingResults && a.Action == repair.ActionRewrite:
		// A call answered in place (ai-sdk-ui, mastra): the same call in another shape.
		return []report.Change{report.ChangeRewritten}
	case a.Action == repair.ActionRewrite && filledToolName(a, issues):
		// --target gemini fills a result's blank tool name from its call (a rewrite in
		// rewrite_call_ids, but of its tool name): the same id in another shape.
		return []report.Change{report.ChangeRewritten}
	case a.Action == repair.ActionRewrite:
		return []report.Change{report.ChangeRewrittenID}
	}
	return nil
}

// filledToolName reports whether rewrite a filled in a result's missing tool name.
func filledToolName(a repair.Action, issues []repair.Issue) bool {
	for _, is := range issues {
		if is.Code == repair.IssueMissingToolName && is.MessageIndex == a.MessageIndex && is.CallID == a.CallID {
			return true
		}
	}
	return false
}

// TestDiffOfEveryGoldenPair diffs each golden case's input with its repaired output, in
// every dialect: both versions are in the diff whole, every action shows beside a change
// of the kind it made, and every change has an action.
func TestDiffOfEveryGoldenPair(t *testing.T) {
	t.Parallel()
	for _, p := range goldenPairs(t) {
		t.Run(p.Name, func(t *testing.T) {
			t.Parallel()
			d, err := report.DiffTranscripts(p.Input, p.Output, p.Report.Actions)
			require.NoError(t, err)
			requireComplete(t, d, p.Input, p.Output)
			require.Equal(t, p.Report.MessagesIn, d.MessagesBefore)
			if p.Report.Dialect != "" {
				require.Equal(t, p.Report.Dialect, d.Dialect)
			}

			linked := map[int][]report.Change{}
			var unexplained []string
			for _, md := range d.Messages {
				for _, ai := range md.Actions {
					linked[ai] = append(linked[ai], md.Change)
				}
				// A message that changed around its blocks is explained by them.
				if len(md.Blocks) == 0 && md.Change != report.ChangeUnchanged && len(md.Actions) == 0 {
					unexplained = append(unexplained, string(md.Change)+" message")
				}
				for _, bd := range md.Blocks {
					for _, ai := range bd.Actions {
						linked[ai] = append(linked[ai], bd.Change)
					}
					if bd.Change != report.ChangeUnchanged && len(bd.Actions) == 0 && len(md.Actions) == 0 {
						unexplained = append(unexplained, string(bd.Change)+" block")
					}
				}
			}
			for ai, a := range p.Report.Actions {
				require.NotEmpty(t, linked[ai], "action %d %+v shows nowhere", ai, a)
				for _, c := range linked[ai] {
					require.Contains(t, wantChange(a, p.Report.Issues), c, "action %d %+v", ai, a)
				}
			}
			if len(p.Report.Actions) == 0 {
				require.Empty(t, d.Counts, "no actions, no changes")
			}
			// A merged message's blocks move into the message before it: the merge explains them.
			if !hasMerge(p.Report.Actions) {
				require.Empty(t, unexplained, "changes no action explains")
			}

			// The other way round (what a rollback does) is a diff too, of the same messages.
			back, err := report.DiffTranscripts(p.Output, p.Input, nil)
			require.NoError(t, err)
			requireComplete(t, back, p.Output, p.Input)
		})
	}
}

func hasMerge(actions []repair.Action) bool {
	for _, a := range actions {
		if a.Action == repair.ActionMerge {
			return true
		}
	}
	return false
}

// TestDiffMarksWhatTheRepairDid pins the marks of a few cases, one per kind of change.
func TestDiffMarksWhatTheRepairDid(t *testing.T) {
	t.Parallel()
	byName := map[string]goldenPair{}
	for _, p := range goldenPairs(t) {
		byName[p.Name] = p
	}
	for name, want := range map[string]map[report.Change]int{
		"anthropic/missing_result":          {report.ChangeSynthesized: 1},
		"openai-chat/orphan_result":         {report.ChangeDroppedOrphan: 1},
		"gemini/synthetic_then_real":        {report.ChangeDroppedDuplicate: 1, report.ChangeMoved: 1},
		"openai-responses/misplaced_result": {report.ChangeMoved: 1},
		"bedrock/duplicate_call_id":         {report.ChangeRewrittenID: 2},
		"langchain/malformed_call":          {report.ChangeRemoved: 1, report.ChangeDroppedOrphan: 1},
		"rules/openclaw-legacy-tool-call":   {report.ChangeRewritten: 2},
		"openclaw/clean":                    {},
	} {
		p, ok := byName[name]
		require.True(t, ok, name)
		d, err := report.DiffTranscripts(p.Input, p.Output, p.Report.Actions)
		require.NoError(t, err)
		require.Equal(t, want, d.Counts, name)
	}

	// Where the parts are: the synthesized result is the new last block of message 4,
	// after the two results that were there, and carries the call's id and tool.
	p := byName["anthropic/missing_result"]
	d, err := report.DiffTranscripts(p.Input, p.Output, p.Report.Actions)
	require.NoError(t, err)
	var got []report.BlockDiff
	for _, md := range d.Messages {
		if md.Change != report.ChangeUnchanged {
			require.Equal(t, report.ChangeChanged, md.Change)
			require.Equal(t, []int{4, 4}, []int{md.Before, md.After})
			got = md.Blocks
		}
	}
	require.Len(t, got, 3)
	require.Equal(t, []report.Change{report.ChangeUnchanged, report.ChangeUnchanged}, []report.Change{got[0].Change, got[1].Change})
	syn := got[2]
	require.Equal(t, report.ChangeSynthesized, syn.Change)
	require.Equal(t, repair.PartResult, syn.Kind)
	require.Equal(t, p.Report.Actions[0].CallID, syn.CallID)
	require.Equal(t, []int{-1, 2}, []int{syn.Before, syn.After})
	require.Contains(t, string(syn.AfterContent), repair.SyntheticResultText)
	require.Equal(t, []int{0}, syn.Actions)
}

func TestDiffVersionsTakesTheActionsOfTheReportThatWroteThem(t *testing.T) {
	t.Parallel()
	from := model.VersionRow{SessionID: "s", Version: 1, Kind: "original", Content: `[{"role":"user","content":"a"},{"role":"tool","tool_call_id":"x","content":"orphan"}]`}
	to := model.VersionRow{SessionID: "s", Version: 2, Kind: "repaired", Content: `[{"role":"user","content":"a"}]`}
	drop := repair.Action{Stage: repair.StageDropOrphanResults, Action: repair.ActionDrop, MessageIndex: 1, CallID: "x"}
	reports := []model.ReportRow{
		{ID: 7, FromVersion: 2, ToVersion: 3, Status: model.StatusRolledBack},
		{ID: 5, FromVersion: 1, ToVersion: 2, Status: model.StatusRepaired, Actions: []repair.Action{drop}},
	}
	d, err := report.DiffVersions(from, to, reports)
	require.NoError(t, err)
	require.Equal(t, int64(5), d.ReportID)
	require.Equal(t, []repair.Action{drop}, d.Actions)
	require.Equal(t, "s", d.SessionID)
	require.Empty(t, d.From.Content, "the versions' content is in the messages, not repeated")
	require.Equal(t, report.ChangeDroppedOrphan, d.Messages[1].Change)
	require.Equal(t, []int{0}, d.Messages[1].Actions)

	var out bytes.Buffer
	require.NoError(t, json.NewEncoder(&out).Encode(d))
	for _, s := range []string{`"session_id":"s"`, `"report_id":5`, `"change":"dropped_orphan"`, `"messages_before":2`,
		`"before_content":{"role":"tool","tool_call_id":"x","content":"orphan"}`, `"call_id":"x"`} {
		require.Contains(t, out.String(), s)
	}

	// Versions of other reports (a rollback's) come without actions.
	d, err = report.DiffVersions(to, from, reports)
	require.NoError(t, err)
	require.Empty(t, d.Actions)
	require.Zero(t, d.ReportID)

	_, err = report.DiffVersions(model.VersionRow{Content: `{"not":"an array"}`}, to, nil)
	require.ErrorContains(t, err, "earlier version")
}

func TestDiffTextShowsFullContentFolded(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("0123456789", 40) + "THE-END"
	before := `[{"role":"user","content":"a"},{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}]`
	after := `[{"role":"user","content":"a"},{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},` +
		`{"role":"tool","tool_call_id":"c1","content":"` + long + `"}]`
	d, err := report.DiffTranscripts([]byte(before), []byte(after), nil)
	require.NoError(t, err)
	var out bytes.Buffer
	require.NoError(t, report.DiffText(&out, d, false))
	got := out.String()
	require.Contains(t, got, "inserted")
	require.Contains(t, got, "… 2 unchanged messages")
	require.Contains(t, got, "changes: 1 inserted")
	require.Contains(t, got, "↪ ", "a long line is folded")
	// Folded, not cut: the pieces put together give the whole text.
	var joined strings.Builder
	for _, line := range strings.Split(got, "\n") {
		require.LessOrEqual(t, utf8.RuneCountInString(line), 130, "line not folded: %q", line)
		if _, rest, ok := strings.Cut(line, "│ "); ok {
			joined.WriteString(rest)
		} else if _, rest, ok := strings.Cut(line, "↪ "); ok {
			joined.WriteString(rest)
		}
	}
	require.Contains(t, joined.String(), long)
	require.NotContains(t, got, "\x1b[")

	out.Reset()
	require.NoError(t, report.DiffText(&out, d, true))
	require.Contains(t, out.String(), "\x1b[32m")
}

// TestDiffLinksActionsWithLoneSurrogateIDs: the engine keeps a lone surrogate in an id
// apart from U+FFFD, and an action read back from the database has U+FFFD in its place;
// either way the action shows beside the result it inserted.
func TestDiffLinksActionsWithLoneSurrogateIDs(t *testing.T) {
	t.Parallel()
	in := []byte(`[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[{"id":"call_\ud83d","type":"function","function":{"name":"f","arguments":"{}"}}]}]`)
	res, err := repair.Repair(in, repair.Options{})
	require.NoError(t, err)
	require.Len(t, res.Report.Actions, 1)
	var stored []repair.Action
	b, err := json.Marshal(res.Report.Actions)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &stored))
	require.NotEqual(t, res.Report.Actions[0].CallID, stored[0].CallID)
	for _, actions := range [][]repair.Action{res.Report.Actions, stored} {
		d, err := report.DiffTranscripts(in, res.Messages, actions)
		require.NoError(t, err)
		last := d.Messages[len(d.Messages)-1]
		require.Equal(t, report.ChangeSynthesized, last.Change)
		require.Equal(t, []int{0}, last.Actions)
	}
}

// TestDiffOfALongTranscript: past what an exact alignment may cost, a greedy one still
// finds the few messages a repair changed among thousands.
func TestDiffOfALongTranscript(t *testing.T) {
	t.Parallel()
	var head, tail strings.Builder
	for i := range 2100 {
		fmt.Fprintf(map[bool]*strings.Builder{true: &head, false: &tail}[i < 1000], `,{"role":"user","content":"message %d"}`, i)
	}
	orphan := func(id string) string { return `{"role":"tool","tool_call_id":"` + id + `","content":"late"}` }
	before := "[" + orphan("x") + head.String() + tail.String() + "," + orphan("y") + "]"
	after := "[" + head.String()[1:] + `,{"role":"user","content":"new"}` + tail.String() + "]"
	d, err := report.DiffTranscripts([]byte(before), []byte(after), nil)
	require.NoError(t, err)
	requireComplete(t, d, []byte(before), []byte(after))
	require.Equal(t, map[report.Change]int{report.ChangeDroppedOrphan: 2, report.ChangeInserted: 1}, d.Counts)
	require.Equal(t, 1000, d.Messages[1001].After, "the new message is where it was inserted")
}

// TestDiffPairsIdlessGeminiPartsByPositionAndName: Gemini parts without ids pair by
// position and name, as the engine pairs them. Two calls of one name get a synthetic
// response each, and each insert shows beside the one after its own call; two orphans of
// one response turn are orphans (every id-less response shares the id ""), each beside
// the drop that names its tool. (The first response turn and the user turn after it stay
// apart: a function response and text in one content mislead Gemini.)
func TestDiffPairsIdlessGeminiPartsByPositionAndName(t *testing.T) {
	t.Parallel()
	in := []byte(`[{"role":"user","parts":[{"text":"Weather?"}]},` +
		`{"role":"model","parts":[{"functionCall":{"name":"get_weather","args":{"city":"Oslo"}}}]},` +
		`{"role":"user","parts":[{"text":"And Bergen?"}]},` +
		`{"role":"model","parts":[{"functionCall":{"name":"get_weather","args":{"city":"Bergen"}}},{"functionCall":{"name":"get_time","args":{}}}]},` +
		`{"role":"user","parts":[{"functionResponse":{"name":"get_time","response":{"t":"9"}}},` +
		`{"functionResponse":{"name":"get_news","response":{"n":1}}},{"functionResponse":{"name":"get_tide","response":{"h":2}}}]},` +
		`{"role":"model","parts":[{"text":"done"}]}]`)
	res, err := repair.Repair(in, repair.Options{})
	require.NoError(t, err)
	byTool := map[string]int{}
	for ai, a := range res.Report.Actions {
		byTool[fmt.Sprintf("%s %s %d", a.Action, a.ToolName, a.MessageIndex)] = ai
	}
	require.Len(t, byTool, 4)
	d, err := report.DiffTranscripts(in, res.Messages, res.Report.Actions)
	require.NoError(t, err)
	type mark struct {
		Change  report.Change
		Actions []int
	}
	got := map[string]mark{} // tool name and after (or before) message
	for _, md := range d.Messages {
		for _, bd := range md.Blocks {
			if bd.Change != report.ChangeUnchanged {
				at := md.After
				if bd.After < 0 {
					at = md.Before
				}
				got[fmt.Sprintf("%s %d", bd.ToolName, at)] = mark{bd.Change, bd.Actions}
			}
		}
	}
	require.Equal(t, map[string]mark{
		"get_weather 2": {report.ChangeSynthesized, []int{byTool["insert get_weather 1"]}},
		"get_weather 5": {report.ChangeSynthesized, []int{byTool["insert get_weather 3"]}},
		"get_news 4":    {report.ChangeDroppedOrphan, []int{byTool["drop get_news 4"]}},
		"get_tide 4":    {report.ChangeDroppedOrphan, []int{byTool["drop get_tide 4"]}},
	}, got)
}
