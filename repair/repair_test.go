package repair_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/repair/gen"
)

// sessions generates n sessions of dialect d with the given faults (none: clean).
func sessions(t testing.TB, d repair.Dialect, n, msgs int, seed uint64, faults ...gen.Fault) []gen.Session {
	t.Helper()
	cfg := gen.Config{Seed: seed, Dialect: d, Sessions: n, Messages: msgs, Faults: faults, MaxFaults: 1}
	if len(faults) > 0 {
		cfg.FaultRate = 1
	}
	var out []gen.Session
	require.NoError(t, gen.Generate(cfg, func(s gen.Session) error { out = append(out, s); return nil }))
	return out
}

func arrayOf(msgs []json.RawMessage) []byte {
	b, _ := json.Marshal(msgs)
	return b
}

// checkInvariants asserts DESIGN.md's invariants 2-5 for one repair of in.
func checkInvariants(t testing.TB, in []byte, opts repair.Options) repair.Result {
	t.Helper()
	res, err := repair.Repair(in, opts)
	require.NoError(t, err)
	require.True(t, json.Valid(res.Messages), "output is not valid JSON")

	// 5. Deterministic.
	again, err := repair.Repair(in, opts)
	require.NoError(t, err)
	require.Equal(t, res.Messages, again.Messages)
	require.Equal(t, res.Report, again.Report)

	// 2. Idempotent: the second pass changes nothing.
	second, err := repair.Repair(res.Messages, opts)
	require.NoError(t, err)
	require.Empty(t, second.Report.Actions, "second pass acted on\n%s", res.Messages)
	require.Equal(t, res.Messages, second.Messages)

	// 3. The output validates.
	v, err := repair.Validate(res.Messages, opts)
	require.NoError(t, err)
	require.Empty(t, v.Issues, "repaired output still has faults\n%s", res.Messages)

	// 4. Conservation: every message no action names is in the output, unchanged and in
	// the same relative order; a slot message that gains results keeps all its blocks.
	named := map[int]bool{}
	for _, a := range res.Report.Actions {
		named[a.MessageIndex] = true
	}
	var inMsgs, outMsgs []json.RawMessage
	require.NoError(t, json.Unmarshal(in, &inMsgs))
	require.NoError(t, json.Unmarshal(res.Messages, &outMsgs))
	var outUnits []json.RawMessage
	for _, m := range outMsgs {
		outUnits = append(outUnits, units(m)...)
	}
	j := 0
	for i, m := range inMsgs {
		if named[i] {
			continue
		}
		for _, u := range units(m) {
			for j < len(outUnits) && !bytes.Equal(outUnits[j], u) {
				j++
			}
			require.Less(t, j, len(outUnits), "message %d lost or reordered: %s", i, u)
			j++
		}
	}
	require.Equal(t, len(outMsgs), res.Report.MessagesOut)

	// 8. No real result lost while its call survives; call ids unique.
	checkConservation(t, in, res.Messages)
	checkPieces(t, in, opts)
	return res
}

// pieces is a repair.Pieces that joins what it is given.
type pieces struct{ in, out []byte }

func (p *pieces) Keep(from, to int) { p.out = append(p.out, p.in[from:to]...) }
func (p *pieces) Write(b []byte)    { p.out = append(p.out, b...) }

// checkPieces asserts that WriteDocument hands over the very document RepairDocument
// builds, for in as it is, inside an envelope, and indented (white space where the
// engine could be tempted to keep the input's bytes).
func checkPieces(t testing.TB, in []byte, opts repair.Options) {
	t.Helper()
	docs := [][]byte{in, []byte(`{"id":"s", "messages" : ` + string(in) + ` , "model":"m"}`)}
	var indented bytes.Buffer
	if json.Indent(&indented, in, "", " ") == nil {
		docs = append(docs, indented.Bytes())
	}
	for _, doc := range docs {
		want, wantErr := repair.RepairDocument(doc, opts)
		p := &pieces{in: doc}
		_, rep, err := repair.WriteDocument(p, doc, opts)
		require.Equal(t, wantErr, err)
		require.Equal(t, want.Report, rep)
		require.Equal(t, string(want.Output), string(p.out), "WriteDocument's pieces differ from RepairDocument's output")
	}
}

// units splits a message into its blocks (content or parts elements), or, when it has no
// such array, the message itself.
func units(m json.RawMessage) []json.RawMessage {
	var o map[string]json.RawMessage
	if json.Unmarshal(m, &o) != nil {
		return []json.RawMessage{m}
	}
	for _, k := range []string{"content", "parts"} {
		var blocks []json.RawMessage
		if json.Unmarshal(o[k], &blocks) == nil && blocks != nil {
			return blocks // an empty array has no blocks to lose
		}
	}
	return []json.RawMessage{m}
}

func TestCleanTranscriptsComeOutByteIdentical(t *testing.T) {
	t.Parallel()
	for _, d := range repair.Dialects() {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			for _, s := range sessions(t, d, 30, 40, 1) {
				in := arrayOf(s.Messages)
				res, err := repair.Repair(in, repair.Options{})
				require.NoError(t, err)
				require.Equal(t, repair.StatusClean, res.Report.Status, "%s: %+v", s.ID, res.Report.Actions)
				require.Equal(t, d, res.Report.Dialect)
				require.Empty(t, res.Report.Actions)
				require.Equal(t, &in[0], &res.Messages[0], "clean input must be returned as is")
				v, err := repair.Validate(in, repair.Options{})
				require.NoError(t, err)
				require.Empty(t, v.Issues)
			}
		})
	}
}

// expectStage is the stage that must act for each injected fault.
var expectStage = map[gen.Fault]repair.Stage{
	gen.FaultMissingResult:     repair.StageSynthesizeMissingResults,
	gen.FaultInterrupted:       repair.StageSynthesizeMissingResults,
	gen.FaultMisplacedResult:   repair.StageMoveResults,
	gen.FaultDuplicateResult:   repair.StageDropDuplicateResults,
	gen.FaultSyntheticThenReal: repair.StageDropDuplicateResults,
	gen.FaultOrphanResult:      repair.StageDropOrphanResults,
	gen.FaultMalformedCall:     repair.StageStripMalformedCalls,
	gen.FaultFailedTurn:        repair.StageFailedTurnCalls,
	gen.FaultPaddedID:          repair.StageNormalizeCallIDs,
	gen.FaultDuplicateCallID:   repair.StageNormalizeCallIDs,
	gen.FaultNoncanonicalCall:  repair.StageNormalizeCallBlocks,
	gen.FaultDanglingReasoning: repair.StageDropDanglingReasoning,
	gen.FaultInvalidCall:       repair.StageStripMalformedCalls,
	gen.FaultRetryDuplicate:    repair.StageDropDuplicateResults,
}

func TestEveryFaultInEveryDialect(t *testing.T) {
	t.Parallel()
	for _, d := range repair.Dialects() {
		for _, f := range gen.Faults() {
			if !gen.Applies(f, d) {
				continue
			}
			t.Run(string(d)+"/"+string(f), func(t *testing.T) {
				t.Parallel()
				want := expectStage[f]
				if f == gen.FaultFailedTurn && d == repair.OpenAIResponses {
					want = repair.StageSynthesizeMissingResults // Responses items carry no stop reason
				}
				applied := 0
				for _, s := range sessions(t, d, 25, 30, 7, f) {
					if len(s.Faults) == 0 {
						continue // no place for the fault in this session
					}
					applied++
					in := arrayOf(s.Messages)
					res := checkInvariants(t, in, repair.Options{})
					require.Equal(t, repair.StatusRepaired, res.Report.Status, "%s\n%s", s.ID, in)
					require.Positive(t, res.Report.StageCounts[want], "%s: no %s action in %+v\n%s", s.ID, want, res.Report.Actions, in)
				}
				require.Greater(t, applied, 10, "the fault was injected into too few sessions")
			})
		}
	}
}

func TestCombinedFaults(t *testing.T) {
	t.Parallel()
	for _, d := range repair.Dialects() {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			cfg := gen.Config{Seed: 99, Dialect: d, Sessions: 60, Messages: 45, FaultRate: 1, MaxFaults: 4}
			require.NoError(t, gen.Generate(cfg, func(s gen.Session) error {
				checkInvariants(t, arrayOf(s.Messages), repair.Options{})
				return nil
			}))
		})
	}
}

func TestTargetsRewriteIDsConsistently(t *testing.T) {
	t.Parallel()
	for _, tg := range repair.Targets() {
		for _, d := range []repair.Dialect{repair.OpenAIChat, repair.Anthropic, repair.OpenClaw, repair.Bedrock} {
			t.Run(string(tg)+"/"+string(d), func(t *testing.T) {
				t.Parallel()
				cfg := gen.Config{Seed: 5, Dialect: d, Sessions: 20, Messages: 30, FaultRate: 0.5}
				require.NoError(t, gen.Generate(cfg, func(s gen.Session) error {
					checkInvariants(t, arrayOf(s.Messages), repair.Options{Target: tg})
					return nil
				}))
			})
		}
	}
}

func TestMistralIDsAndCollisions(t *testing.T) {
	t.Parallel()
	// Two calls share an id; both ids are too long for OpenAI and invalid for Mistral.
	in := []byte(`[{"role":"user","content":"go"},
{"role":"assistant","content":null,"tool_calls":[{"id":"call|with/odd:chars-and-a-very-long-tail-0001","type":"function","function":{"name":"f","arguments":"{}"}}]},
{"role":"tool","tool_call_id":"call|with/odd:chars-and-a-very-long-tail-0001","content":"one"},
{"role":"assistant","content":null,"tool_calls":[{"id":"call|with/odd:chars-and-a-very-long-tail-0001","type":"function","function":{"name":"g","arguments":"{}"}}]},
{"role":"tool","tool_call_id":"call|with/odd:chars-and-a-very-long-tail-0001","content":"two"}]`)
	v, err := repair.Validate(in, repair.Options{})
	require.NoError(t, err)
	require.Equal(t, []string{string(repair.IssueDuplicateCallID)}, v.IssueCodeSet())

	res := checkInvariants(t, in, repair.Options{Target: repair.TargetMistral})
	var msgs []struct {
		ToolCalls []struct {
			ID string `json:"id"`
		} `json:"tool_calls"`
		ToolCallID string `json:"tool_call_id"`
		Content    string `json:"content"`
	}
	require.NoError(t, json.Unmarshal(res.Messages, &msgs))
	require.Len(t, msgs, 5)
	a, b := msgs[1].ToolCalls[0].ID, msgs[3].ToolCalls[0].ID
	require.Regexp(t, `^[a-zA-Z0-9]{9}$`, a)
	require.Regexp(t, `^[a-zA-Z0-9]{9}$`, b)
	require.NotEqual(t, a, b)
	require.Equal(t, a, msgs[2].ToolCallID)
	require.Equal(t, b, msgs[4].ToolCallID)
	require.Equal(t, "two", msgs[4].Content)
}

func TestExactBytesSurvive(t *testing.T) {
	t.Parallel()
	// Numbers beyond float64, exponent forms, key order, unknown fields and escapes must
	// come out exactly as they went in, in touched and untouched messages alike.
	in := []byte(`[
  {"role":"user","content":"n=12345678901234567890","x-custom":{"z":1.0e-7,"a":[1,2.50]}},
  {"zeta":true,"role":"assistant","content":[{"type":"text","text":"caf\u00e9 \"quoted\""},{"type":"tool_use","id":"t1","name":"calc","input":{"big":12345678901234567890,"tiny":1.0e-7,"neg":-0.0}},{"type":"tool_use","id":"","name":"broken","input":{}}],"usage":{"in":1E+3}},
  {"role":"user","content":[{"type":"text","text":"later"}],"meta":{"k":1.10}}
]`)
	res := checkInvariants(t, in, repair.Options{})
	out := string(res.Messages)
	for _, s := range []string{
		`{"role":"user","content":"n=12345678901234567890","x-custom":{"z":1.0e-7,"a":[1,2.50]}}`,
		`{"zeta":true,"role":"assistant","content":[{"type":"text","text":"caf\u00e9 \"quoted\""},{"type":"tool_use","id":"t1","name":"calc","input":{"big":12345678901234567890,"tiny":1.0e-7,"neg":-0.0}}],"usage":{"in":1E+3}}`,
		`{"role":"user","content":[{"type":"text","text":"later"}],"meta":{"k":1.10}}`,
	} {
		require.Contains(t, out, s)
	}
}

func TestQuietPeriod(t *testing.T) {
	t.Parallel()
	in := arrayOf(sessions(t, repair.OpenClaw, 1, 20, 3, gen.FaultInterrupted)[0].Messages)
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

	recent := repair.Options{Now: now, UpdatedAt: now.Add(-2 * time.Minute)}
	res, err := repair.Repair(in, recent)
	require.NoError(t, err)
	require.Equal(t, repair.StatusPending, res.Report.Status)
	require.Positive(t, res.Report.PendingCalls)
	require.Equal(t, in, res.Messages)
	require.Empty(t, res.Report.Reason)
	v, err := repair.Validate(in, recent)
	require.NoError(t, err)
	require.Empty(t, v.Issues, "pending calls are not faults yet")

	// A writer's clock a little ahead still counts as recent.
	res, err = repair.Repair(in, repair.Options{Now: now, UpdatedAt: now.Add(repair.MaxClockSkew)})
	require.NoError(t, err)
	require.Equal(t, repair.StatusPending, res.Report.Status)
	require.Empty(t, res.Report.Reason)

	for name, opts := range map[string]repair.Options{
		"Old":    {Now: now, UpdatedAt: now.Add(-11 * time.Minute)},
		"Forced": {Now: now, UpdatedAt: now.Add(-2 * time.Minute), Force: true},
		"Short":  {Now: now, UpdatedAt: now.Add(-2 * time.Minute), QuietPeriod: time.Minute},
		// Dated beyond the skew: no turn is in flight until year 9999.
		"FarFuture": {Now: now, UpdatedAt: time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)},
		"Future":    {Now: now, UpdatedAt: now.Add(repair.MaxClockSkew + time.Second)},
	} {
		res, err := repair.Repair(in, opts)
		require.NoError(t, err, name)
		require.Equal(t, repair.StatusRepaired, res.Report.Status, name)
		require.Positive(t, res.Report.StageCounts[repair.StageSynthesizeMissingResults], name)
		if strings.HasSuffix(name, "Future") {
			require.Contains(t, res.Report.Reason, "is more than 5m0s ahead of the clock (2026-05-01T12:00:00Z)", name)
		} else {
			require.Empty(t, res.Report.Reason, name)
		}
	}
	res, err = repair.Repair(in, repair.Options{Now: now, UpdatedAt: time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)})
	require.NoError(t, err)
	require.Contains(t, res.Report.Reason, "updated_at 9999-12-31T00:00:00Z is more than")
}

func TestDocumentUpdatedAtErrorsShowTheValue(t *testing.T) {
	t.Parallel()
	for value, want := range map[string]string{
		`1700000000`:   `updated_at 1700000000 is a JSON number, not an RFC 3339 time string such as "2024-05-01T12:00:00Z"`,
		`null`:         `updated_at null is a JSON null, not an RFC 3339 time string`,
		`{"s":1}`:      `updated_at is a JSON object, not an RFC 3339 time string`,
		`"yesterday"`:  `updated_at "yesterday" is not an RFC 3339 time`,
		`"2024-05-01"`: `updated_at "2024-05-01" is not an RFC 3339 time`,
	} {
		_, err := repair.ParseDocument([]byte(`{"id":"s","updated_at":` + value + `,"messages":[]}`))
		require.ErrorContains(t, err, want, value)
	}
	doc, err := repair.ParseDocument([]byte(`{"id":"s","updatedAt":"2024-05-01T12:00:00Z","messages":[]}`))
	require.NoError(t, err)
	require.Equal(t, time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC), doc.UpdatedAt)
}

// An object with two envelope arrays is refused: a provider is sent one of them, and the
// first need not be it (an empty "messages" beside a Responses "input" must not be clean).
func TestTwoEnvelopeArraysAreRefused(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		`{"messages":[],"input":[{"type":"function_call","call_id":"c","name":"f","arguments":"{}"}]}`,
		`{"contents" : [{"role":"user","parts":[{"text":"hi"}]}], "id":"s", "messages" :  []}`,
	} {
		res, err := repair.RepairDocument([]byte(in), repair.Options{})
		require.Error(t, err, in)
		require.Equal(t, repair.StatusUnparseable, res.Report.Status, in)
		require.Contains(t, res.Report.Reason, "both hold an array: which one is the transcript is unclear", in)
	}
	// One array beside another envelope key that holds none is the transcript, as before.
	res, err := repair.RepairDocument([]byte(`{"input":"hi","messages":[{"role":"user","content":"hi"}]}`), repair.Options{})
	require.NoError(t, err)
	require.Equal(t, repair.StatusClean, res.Report.Status)
}

func TestFailedTurnPolicy(t *testing.T) {
	t.Parallel()
	in := []byte(`[{"role":"user","content":[{"type":"text","text":"go"}]},
{"role":"assistant","content":[{"type":"toolCall","id":"a","name":"bash","arguments":{}},{"type":"toolCall","id":"b","name":"bash","arguments":{}}],"stopReason":"aborted"},
{"role":"toolResult","toolCallId":"a","toolName":"bash","content":[{"type":"text","text":"done"}],"isError":false}]`)

	keep := checkInvariants(t, in, repair.Options{})
	require.Equal(t, map[repair.Stage]int{repair.StageFailedTurnCalls: 1}, keep.Report.StageCounts)
	require.Contains(t, string(keep.Messages), `"id":"a"`)
	require.NotContains(t, string(keep.Messages), `"id":"b"`)
	require.NotContains(t, string(keep.Messages), repair.SyntheticResultText, "failed turns are never answered synthetically")

	strip := checkInvariants(t, in, repair.Options{FailedTurns: repair.FailedTurnsStrip})
	require.Equal(t, 3, strip.Report.StageCounts[repair.StageFailedTurnCalls])
	require.Equal(t, 1, strip.Report.MessagesOut, "the assistant message left empty is removed, and a's result with it")
}

func TestRealResultBeatsSynthetic(t *testing.T) {
	t.Parallel()
	// tmend's own text and the texts other repairers insert (research/provider-rules.md).
	for _, text := range []string{
		repair.SyntheticResultText,
		"No result provided",
		"aborted",
		"[Tool call was interrupted and did not return a result.]",
		"[openclaw] missing tool result for call c1",
		"[System: Tool execution skipped/interrupted by user. No result provided for tool 'f']",
		"Tool call f with id c1 was cancelled - another message came in before it could be completed.",
	} {
		content, err := json.Marshal(text)
		require.NoError(t, err)
		// As written by JSON encoders, and with its first character escaped.
		escaped := fmt.Sprintf(`"\u%04x`, text[0]) + string(content[2:])
		for _, content := range []string{string(content), escaped} {
			in := []byte(`[{"role":"user","content":"go"},
{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},
{"role":"tool","tool_call_id":"c1","content":` + content + `},
{"role":"user","content":"hello?"},
{"role":"tool","tool_call_id":"c1","content":"the real output"}]`)
			res := checkInvariants(t, in, repair.Options{})
			require.JSONEq(t, `[{"role":"user","content":"go"},
{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},
{"role":"tool","tool_call_id":"c1","content":"the real output"},
{"role":"user","content":"hello?"}]`, string(res.Messages), content)
			require.Equal(t, 1, res.Report.StageCounts[repair.StageMoveResults], content)
			require.Equal(t, 1, res.Report.StageCounts[repair.StageDropDuplicateResults], content)
		}
	}
}

func TestUnrepairableInputIsLeftAlone(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		in     string
		status repair.Status
		reason string
	}{
		{"NotJSON", `[{"role":"user"`, repair.StatusUnparseable, "invalid JSON"},
		{"Object", `{"messages":[]}`, repair.StatusUnparseable, "not an array"},
		{"ArrayOfStrings", `["hi"]`, repair.StatusUnparseable, "message 0 is a JSON string"},
		{"DuplicateKey", `[{"role":"user","role":"assistant"}]`, repair.StatusUnparseable, "duplicate key"},
		{"InvalidUTF8", "[{\"role\":\"user\",\"content\":\"\xff\"}]", repair.StatusUnparseable, "invalid UTF-8"},
		{"TooDeep", "[" + strings.Repeat(`{"a":`, 600) + "1" + strings.Repeat("}", 600) + "]", repair.StatusUnparseable, "nesting deeper"},
		{"Trailing", `[] []`, repair.StatusUnparseable, "after the top-level value"},
		{"Mixed", `[{"role":"assistant","content":[{"type":"toolCall","id":"a","name":"f","arguments":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"a"}]}]`,
			repair.StatusUnknownDialect, "openclaw, and anthropic (message 1)"},
		{"AnthropicBlocksInOpenAIChat", `[{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"f","input":{}}],"tool_calls":[{"id":"b","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"b","content":"ok"}]`,
			repair.StatusUnknownDialect, "openai-chat, and anthropic (message 0)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res, err := repair.Repair([]byte(tt.in), repair.Options{})
			var ue *repair.UnrepairableError
			require.ErrorAs(t, err, &ue)
			require.Equal(t, tt.status, ue.Status)
			require.Contains(t, ue.Reason, tt.reason)
			require.Equal(t, tt.status, res.Report.Status)
			require.Equal(t, tt.in, string(res.Messages))
		})
	}
}

func TestNoToolActivityIsClean(t *testing.T) {
	t.Parallel()
	in := []byte(`[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}]`)
	res, err := repair.Repair(in, repair.Options{})
	require.NoError(t, err)
	require.Equal(t, repair.StatusClean, res.Report.Status)
	require.Empty(t, res.Report.Dialect)
}

func TestGeminiWithoutIDsPairsByNameAndOrder(t *testing.T) {
	t.Parallel()
	in := []byte(`[{"role":"user","parts":[{"text":"weather in two cities"}]},
{"role":"model","parts":[{"functionCall":{"name":"weather","args":{"city":"Oslo"}}},{"functionCall":{"name":"weather","args":{"city":"Rome"}}},{"functionCall":{"name":"time","args":{}}}]},
{"role":"user","parts":[{"functionResponse":{"name":"weather","response":{"t":3}}},{"functionResponse":{"name":"time","response":{"t":"12:00"}}}]}]`)
	res := checkInvariants(t, in, repair.Options{})
	require.Equal(t, map[repair.Stage]int{repair.StageSynthesizeMissingResults: 1}, res.Report.StageCounts)
	require.Equal(t, "weather", res.Report.Actions[0].ToolName)
	require.Contains(t, string(res.Messages), `{"functionResponse":{"name":"weather","response":{"error":"[tmend]`)
}

// TestGeminiWithoutIDsEveryFault: Gemini sessions whose calls and responses carry no ids
// (gen's OmitIDs) are repaired by position and name whatever the fault, never refused:
// with one fault there is only one reading.
func TestGeminiWithoutIDsEveryFault(t *testing.T) {
	t.Parallel()
	for _, f := range gen.Faults() {
		want := []repair.Stage{expectStage[f]}
		switch f {
		case gen.FaultPaddedID, gen.FaultDuplicateCallID, gen.FaultNoncanonicalCall, gen.FaultDanglingReasoning,
			gen.FaultRetryDuplicate, gen.FaultInvalidCall:
			continue // they need ids, or are not Gemini's
		case gen.FaultDuplicateResult:
			// A second response of one name in a turn that made one such call is, by
			// position, one no call of that rank asked for.
			want = append(want, repair.StageDropOrphanResults)
		}
		t.Run(string(f), func(t *testing.T) {
			t.Parallel()
			cfg := gen.Config{Seed: 11, Dialect: repair.Gemini, Sessions: 40, Messages: 30, FaultRate: 1, MaxFaults: 1,
				Faults: []gen.Fault{f}, OmitIDs: true}
			applied := 0
			require.NoError(t, gen.Generate(cfg, func(s gen.Session) error {
				if len(s.Faults) == 0 {
					return nil
				}
				applied++
				in := arrayOf(s.Messages)
				res := checkInvariants(t, in, repair.Options{})
				require.Equal(t, repair.StatusRepaired, res.Report.Status, "%s\n%s", s.ID, in)
				acted := false
				for _, st := range want {
					acted = acted || res.Report.StageCounts[st] > 0
				}
				require.True(t, acted, "%s: none of %v in %+v\n%s", s.ID, want, res.Report.Actions, in)
				return nil
			}))
			require.Greater(t, applied, 10)
		})
	}
	t.Run("Combined", func(t *testing.T) {
		t.Parallel()
		cfg := gen.Config{Seed: 12, Dialect: repair.Gemini, Sessions: 60, Messages: 45, FaultRate: 1, MaxFaults: 4, OmitIDs: true}
		require.NoError(t, gen.Generate(cfg, func(s gen.Session) error {
			in := arrayOf(s.Messages)
			if r, err := repair.Validate(in, repair.Options{}); err != nil {
				// Only a response that two calls may take is refused.
				require.Contains(t, r.Issues[0].Detail, "may answer any of", "%s\n%s", s.ID, in)
				return nil
			}
			checkInvariants(t, in, repair.Options{})
			return nil
		}))
	})
}

func TestDialectForcedAndDetected(t *testing.T) {
	t.Parallel()
	for _, d := range repair.Dialects() {
		in := arrayOf(sessions(t, d, 1, 12, 11, gen.FaultMissingResult)[0].Messages)
		detected, err := repair.Repair(in, repair.Options{})
		require.NoError(t, err)
		require.Equal(t, d, detected.Report.Dialect)
		forced, err := repair.Repair(in, repair.Options{Dialect: d})
		require.NoError(t, err)
		require.Equal(t, d, forced.Report.Dialect)
		require.Equal(t, detected.Messages, forced.Messages)

		// Forcing another dialect on it is refused, and the transcript left alone.
		other := repair.Anthropic
		if d == other {
			other = repair.OpenAIChat
		}
		res, err := repair.Repair(in, repair.Options{Dialect: other})
		var ue *repair.UnrepairableError
		require.ErrorAs(t, err, &ue, "%s forced on %s", other, d)
		require.Equal(t, repair.StatusUnknownDialect, ue.Status)
		require.Contains(t, ue.Reason, "not the forced "+string(other))
		require.Equal(t, in, res.Messages)

		got, err := repair.ParseDialect(string(d))
		require.NoError(t, err)
		require.Equal(t, d, got)
	}
	_, err := repair.ParseDialect("cohere")
	require.ErrorContains(t, err, `unknown dialect "cohere"`)
}

func ExampleRepair() {
	in := []byte(`[{"role":"user","content":"list files"},
{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"ls","arguments":"{}"}}]},
{"role":"user","content":"are you there?"}]`)
	res, err := repair.Repair(in, repair.Options{})
	if err != nil {
		panic(err)
	}
	for _, a := range res.Report.Actions {
		fmt.Println(a.Stage, a.Action, a.CallID)
	}
	fmt.Println(res.Report.MessagesIn, "->", res.Report.MessagesOut)
	// Output:
	// synthesize_missing_results insert call_1
	// 3 -> 4
}

func TestUnterminatedStringEndingOnAWordBoundary(t *testing.T) {
	t.Parallel()
	// The 8-byte fast path once read past the end here (found by FuzzRepair).
	for _, in := range []string{`  "00000000`, `"abcdefgh`, `["abcdefghabcdefgh`} {
		_, err := repair.Repair([]byte(in), repair.Options{})
		require.ErrorContains(t, err, "unterminated string", in)
	}
}

// TestLangChainEveryVariantAndFault: every fault in every stored form and with every chat
// model's copies of the calls is repaired with the invariants kept (the copies in step
// with their calls: checkConservation), and clean sessions come out as they went in.
func TestLangChainEveryVariantAndFault(t *testing.T) {
	t.Parallel()
	for _, v := range gen.Variants(repair.LangChain) {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			clean := gen.Config{Seed: 21, Dialect: repair.LangChain, Variant: v, Sessions: 4, Messages: 30}
			require.NoError(t, gen.Generate(clean, func(s gen.Session) error {
				in := arrayOf(s.Messages)
				res, err := repair.Repair(in, repair.Options{})
				require.NoError(t, err)
				require.Equal(t, repair.StatusClean, res.Report.Status, "%s: %+v", s.ID, res.Report.Actions)
				require.Equal(t, &in[0], &res.Messages[0])
				return nil
			}))
			for _, f := range gen.Faults() {
				if !gen.Applies(f, repair.LangChain) {
					continue
				}
				applied := 0
				cfg := gen.Config{Seed: 22, Dialect: repair.LangChain, Variant: v, Sessions: 8, Messages: 24,
					FaultRate: 1, MaxFaults: 1, Faults: []gen.Fault{f}}
				require.NoError(t, gen.Generate(cfg, func(s gen.Session) error {
					if len(s.Faults) == 0 {
						return nil
					}
					applied++
					res := checkInvariants(t, arrayOf(s.Messages), repair.Options{})
					require.Positive(t, res.Report.StageCounts[expectStage[f]], "%s %s: %+v", f, s.ID, res.Report.Actions)
					return nil
				}))
				require.Positive(t, applied, f)
			}
			// Targets rewrite ids in the calls and their copies alike.
			cfg := gen.Config{Seed: 23, Dialect: repair.LangChain, Variant: v, Sessions: 4, Messages: 30, FaultRate: 1, MaxFaults: 3}
			require.NoError(t, gen.Generate(cfg, func(s gen.Session) error {
				checkInvariants(t, arrayOf(s.Messages), repair.Options{Target: repair.TargetMistral})
				return nil
			}))
		})
	}
}

// RepairedSize reports what Repair does, and the length of the array Repair builds.
func TestRepairedSizeIsRepairsLength(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		`[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}}]}]`,
		`[{"role":"user","content":"hi"}, {"role":"assistant","content":"ok"}]`,
		`[{"role":"tool","tool_call_id":"x","content":"orphan"}, {"role":"user","content":"hi"}]`,
		`not json`,
	} {
		r, err := repair.Repair([]byte(in), repair.Options{})
		report, n, serr := repair.RepairedSize([]byte(in), repair.Options{})
		require.Equal(t, err, serr, in)
		require.Equal(t, r.Report, report, in)
		require.Equal(t, len(r.Messages), n, in)
	}
}
