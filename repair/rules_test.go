package repair_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/repair"
)

// Hand-written cases for the rules of issue 10 and the id rules, each with the output it
// must give. The golden files hold more of them per dialect.

func TestOpenClawToolUseAndFunctionCallBlocksAreCalls(t *testing.T) {
	t.Parallel()
	// 1,000 completed calls written as toolUse / functionCall blocks: nothing to repair,
	// and above all no result may be taken for an orphan.
	var b strings.Builder
	b.WriteString(`[{"role":"user","content":[{"type":"text","text":"go"}]}`)
	for i := range 1000 {
		typ, args := "toolUse", "input"
		if i%2 == 1 {
			typ, args = "functionCall", "arguments"
		}
		fmt.Fprintf(&b, `,{"role":"assistant","content":[{"type":%q,"id":"c%d","name":"exec",%q:{"cmd":"ls"}}]}`, typ, i, args)
		fmt.Fprintf(&b, `,{"role":"toolResult","toolCallId":"c%d","toolName":"exec","content":[{"type":"text","text":"out %d"}],"isError":false}`, i, i)
	}
	b.WriteString(`]`)
	in := []byte(b.String())
	res, err := repair.Repair(in, repair.Options{})
	require.NoError(t, err)
	require.Equal(t, repair.StatusClean, res.Report.Status, "%+v", res.Report.Actions)
	require.Equal(t, repair.OpenClaw, res.Report.Dialect)
	require.Equal(t, in, res.Messages)
}

func TestOpenClawLegacyCallsAreRewritten(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, block, want string }{
		{"ToolUseID", `{"type":"tool_use","id":"a1","name":"exec","input":{"cmd":"ls","n":1.50}}`,
			`{"type":"toolCall","id":"a1","name":"exec","arguments":{"cmd":"ls","n":1.50}}`},
		{"ToolCallToolCallID", `{"type":"tool_call","tool_call_id":"a1","name":"exec","arguments":{"cmd":"ls"},"x-extra":[1]}`,
			`{"type":"toolCall","id":"a1","name":"exec","arguments":{"cmd":"ls"},"x-extra":[1]}`},
		{"FunctionCallCallIDStringArgs", `{"type":"function_call","call_id":"a1","name":"exec","arguments":"{\"cmd\":\"ls\"}"}`,
			`{"type":"toolCall","id":"a1","name":"exec","arguments":{"cmd":"ls"}}`},
		// An empty id member beside the real one, and input and arguments that agree.
		{"NullIDBesideCallID", `{"type":"tool_call","id":null,"call_id":"a1","name":"exec","arguments":{"cmd":"ls"}}`,
			`{"type":"toolCall","id":"a1","name":"exec","arguments":{"cmd":"ls"}}`},
		{"BlankIDBesideToolCallID", `{"type":"function_call","id":"","tool_call_id":"a1","name":"exec","input":{},"arguments":{}}`,
			`{"type":"toolCall","id":"a1","name":"exec","arguments":{}}`},
		{"DeepStringArgs", `{"type":"tool_use","id":"a1","name":"exec","input":"` + strings.Repeat("[", 504) + strings.Repeat("]", 504) + `"}`,
			`{"type":"toolCall","id":"a1","name":"exec","arguments":` + strings.Repeat("[", 504) + strings.Repeat("]", 504) + `}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := []byte(`[{"role":"user","content":"go"},{"role":"assistant","content":[{"type":"text","text":"ok"},` + tt.block + `]},
{"role":"toolResult","toolCallId":"a1","toolName":"exec","content":[{"type":"text","text":"file.txt"}],"isError":false}]`)
			res := checkInvariants(t, in, repair.Options{})
			require.Equal(t, map[repair.Stage]int{repair.StageNormalizeCallBlocks: 1}, res.Report.StageCounts)
			require.Equal(t, []string{string(repair.IssueNoncanonicalCall)}, res.Report.IssueCodeSet())
			require.Equal(t, `[{"role":"user","content":"go"},{"role":"assistant","content":[{"type":"text","text":"ok"},`+tt.want+`]},{"role":"toolResult","toolCallId":"a1","toolName":"exec","content":[{"type":"text","text":"file.txt"}],"isError":false}]`,
				string(res.Messages))
		})
	}
	t.Run("StringArgsNotJSONAreMalformed", func(t *testing.T) {
		t.Parallel()
		in := []byte(`[{"role":"user","content":"go"},{"role":"assistant","content":[{"type":"text","text":"ok"},{"type":"tool_call","id":"a1","name":"exec","arguments":"{cmd: ls"}]},
{"role":"toolResult","toolCallId":"a1","toolName":"exec","content":"error: bad arguments"}]`)
		res := checkInvariants(t, in, repair.Options{})
		require.Equal(t, map[repair.Stage]int{repair.StageStripMalformedCalls: 1, repair.StageDropOrphanResults: 1}, res.Report.StageCounts)
		require.Equal(t, `[{"role":"user","content":"go"},{"role":"assistant","content":[{"type":"text","text":"ok"}]}]`, string(res.Messages))
	})
}

// A transcript is clean only when every message is one tmend reads with certainty: a
// message it does not recognise (in the detected dialect, or in none) makes the whole
// transcript unknown_dialect, reported with its index, never clean and never repaired.
func TestUnrecognizedMessageIsNeverClean(t *testing.T) {
	t.Parallel()
	tests := map[string]struct{ in, reason string }{
		"NoDialect": {`[{"foo":1},{"bar":2}]`, "message 0 (no role or type) is not a message tmend can read"},
		"UnknownRole": {`[{"role":"user","content":"hi"},{"role":"robot","content":"beep"}]`,
			`message 1 (role "robot") is not a message tmend can read`},
		"ToolishBlock": {`[{"role":"user","content":"go"},{"role":"assistant","content":[{"type":"function-request","ref":"c1","fn":"f"}]}]`,
			`message 1 (role "assistant") is not a message tmend can read`},
		"ContentObject": {`[{"role":"assistant","content":{"format":3,"parts":[]}}]`,
			`message 0 (role "assistant") is not a message tmend can read`},
		"LegacyFunctionCall": {`[{"role":"user","content":"hi"},{"role":"assistant","content":null,"function_call":{"name":"f","arguments":"{}"}},{"role":"user","content":"x"}]`,
			`message 1 (role "assistant") is not a message tmend can read`},
		"UntypedFunctionCallBlock": {`[{"role":"assistant","content":[{"functionCall":{"name":"f","args":{}}}]}]`,
			`message 0 (role "assistant") is not a message tmend can read`},
		"CamelToolCalls": {`[{"role":"assistant","content":"","toolCalls":[{"id":"a","name":"f","args":{}}]}]`,
			`message 0 (role "assistant") is not a message tmend can read`},
		"TopLevelResultID": {`[{"role":"user","content":"x","tool_call_id":"c1"}]`, `message 0 (role "user") is not a message tmend can read`},
		"Responses": {`[{"type":"message","role":"user","content":"go"},{"type":"shell_exec","call_id":"c9","command":["ls"]},
{"type":"function_call_output","call_id":"c9","output":"real output"}]`, `message 1 (type "shell_exec") is not a message of the openai-responses dialect that tmend knows`},
		"Anthropic": {`[{"role":"user","content":"go"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{}}]},{"kind":"note"}]`,
			`message 2 (no role or type) is not a message of the anthropic dialect that tmend knows`},
		"OpenAIChat": {`[{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"ok"},{"role":"bot","content":"x"}]`,
			`message 2 (role "bot") is not a message of the openai-chat dialect that tmend knows`},
		"Gemini": {`[{"role":"model","parts":[{"functionCall":{"name":"f","args":{}}}]},{"role":"critic","parts":[{"text":"x"}]}]`,
			`message 1 (role "critic") is not a message of the gemini dialect that tmend knows`},
		"LangChain": {`[{"type":"ai","content":"","tool_calls":[{"id":"c1","name":"f","args":{}}]},{"type":"remark","content":"x"}]`,
			`message 1 (type "remark") is not a message of the langchain dialect that tmend knows`},
		// A dialect's transcript with a block that names a call the dialect does not read: a
		// fix that removed the dialect's own blocks would otherwise leave one that a second
		// pass, finding no dialect, refuses.
		"AnthropicToolishBlock": {`[{"role":"user","content":"go"},{"role":"assistant","content":[{"type":"CAll"},{"type":"tool_use","id":"t1","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]}]`,
			`message 1: a block of type "CAll", which the anthropic dialect does not know`},
		"OpenClaw": {`[{"role":"toolResult","toolCallId":"c1","toolName":"f","content":[]},{"role":"oracle","content":"x"}]`,
			`message 1 (role "oracle") is not a message of the openclaw dialect that tmend knows`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			res, err := repair.Repair([]byte(tt.in), repair.Options{})
			var ue *repair.UnrepairableError
			require.ErrorAs(t, err, &ue)
			require.Equal(t, repair.StatusUnknownDialect, res.Report.Status)
			require.Contains(t, res.Report.Reason, tt.reason)
			require.Equal(t, tt.in, string(res.Messages))

			v, err := repair.Validate([]byte(tt.in), repair.Options{})
			require.ErrorAs(t, err, &ue)
			require.Equal(t, repair.StatusUnknownDialect, v.Status)
		})
	}
}

// Messages that hold no tool call in any dialect, in the shapes the dialects write them,
// are clean.
func TestPlainTranscriptsAreClean(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		`[]`,
		`[{"role":"system","content":"be brief"},{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"text","text":"hello"}]}]`,
		`[{"role":"user","parts":[{"text":"hi"}]},{"role":"model","parts":[{"text":"hello"}]}]`,
		`[{"type":"human","content":"hi"},{"type":"ai","content":"hello"}]`,
		`[{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}]`,
		`[{"role":"developer","content":"x"},{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:"}}]}]`,
		// Server-run tools (call and result in the one assistant message) are no client calls.
		`[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"mcp_tool_use","id":"m1","name":"n","server_name":"s","input":{}},{"type":"mcp_tool_result","tool_use_id":"m1","content":[]}]}]`,
	} {
		r, err := repair.Validate([]byte(in), repair.Options{})
		require.NoError(t, err, in)
		require.Equal(t, repair.StatusClean, r.Status, in)
	}
}

func TestUnrecognizedCallShapeLeavesTranscriptUntouched(t *testing.T) {
	t.Parallel()
	tests := map[string]string{
		"OpenClaw": `[{"role":"user","content":"go"},{"role":"assistant","content":[{"type":"toolCall","id":"c1","name":"f","arguments":{}},{"type":"tool_invocation","id":"c9","tool":"g"}]},
{"role":"toolResult","toolCallId":"c1","toolName":"f","content":"ok"},{"role":"toolResult","toolCallId":"c9","toolName":"g","content":"real output"}]`,
		"Anthropic": `[{"role":"user","content":"go"},{"role":"assistant","content":[{"type":"mystery_call","id":"toolu_9","name":"g"},{"type":"tool_use","id":"toolu_1","name":"f","input":{}}]},
{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"ok"},{"type":"tool_result","tool_use_id":"toolu_9","content":"real output"}]}]`,
		"OpenAIChat": `[{"role":"user","content":"go"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}],"x_calls":[{"tool_call_id":"c9"}]},
{"role":"tool","tool_call_id":"c1","content":"ok"},{"role":"tool","tool_call_id":"c9","content":"real output"}]`,
		"Nested": `[{"role":"user","content":"go"},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"f","input":{}},{"type":"wrapper","call":{"toolUseId":"toolu_9"}}]},
{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"ok"},{"type":"tool_result","tool_use_id":"toolu_9","content":"real output"}]}]`,
		// The key below the unknown block spelled with escapes ("toolUseId").
		"NestedEscapedKey": `[{"role":"user","content":"go"},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"f","input":{}},{"type":"wrapper","call":{"toolUseI\u0064":"toolu_9"}}]},
{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"ok"},{"type":"tool_result","tool_use_id":"toolu_9","content":"real output"}]}]`,
		// A result whose id is under a key its dialect does not use (tool_call_id, not
		// toolCallId): a result without an id tmend knows, but with an id-like member.
		"ResultIDUnderAnotherKey": `[{"role":"user","content":"go"},{"role":"assistant","content":[{"type":"toolCall","id":"c1","name":"f","arguments":{}}]},
{"role":"toolResult","tool_call_id":"c1","toolName":"f","content":[{"type":"text","text":"real output"}]},{"role":"user","content":"next"}]`,
		// A LangChain provider copy of a call (a tool_use block, a Responses output item)
		// that no tool_calls entry has: a call tmend does not know, in each stored form.
		"LangChainUnmatchedToolUse": `[{"type":"human","content":"go"},{"type":"ai","content":[{"type":"tool_use","id":"toolu_9","name":"g","input":{}}],"tool_calls":[]},
{"type":"tool","content":"real output","tool_call_id":"toolu_9","name":"g"}]`,
		"LangChainDataUnmatchedOutputItem": `[{"type":"human","data":{"content":"go"}},{"type":"ai","data":{"content":"","tool_calls":[{"id":"c1","name":"f","args":{}}],"response_metadata":{"output":[{"type":"function_call","id":"fc_1","call_id":"c1","name":"f","arguments":"{}"},{"type":"function_call","id":"fc_2","call_id":"c2","name":"g","arguments":"{}"}]}}},
{"type":"tool","data":{"tool_call_id":"c1","content":"ok"}}]`,
		"LangChainConstructorUnmatchedKwargsCall": `[{"lc":1,"type":"constructor","id":["langchain_core","messages","AIMessage"],"kwargs":{"content":"","tool_calls":[],"additional_kwargs":{"tool_calls":[{"id":"c9","type":"function","function":{"name":"g","arguments":"{}"}}]}}}]`,
		// A LangChain tool message's id under a key tmend does not read.
		"LangChainDataResultIDUnderAnotherKey": `[{"type":"human","data":{"content":"go"}},{"type":"ai","data":{"content":"","tool_calls":[{"id":"c1","name":"f","args":{}}]}},
{"type":"tool","data":{"toolCallId":"c1","content":"real output"}}]`,
		// Calls where blocks were expected: content an object, or arrays in the array.
		"ContentAnObject": `[{"role":"user","content":"go"},{"role":"assistant","content":{"type":"tool_use","id":"c1","name":"f","input":{}}},
{"role":"user","content":[{"type":"tool_result","tool_use_id":"c1","content":"real output"}]}]`,
		"ContentArraysInTheArray": `[{"role":"user","content":"go"},{"role":"assistant","content":[[{"type":"tool_use","id":"c1","name":"f","input":{}}]]},
{"role":"user","content":[{"type":"tool_result","tool_use_id":"c1","content":"real output"}]}]`,
		// An unknown block whose keys cannot be read (one repeated), and one that holds
		// the id deep down.
		"UnknownBlockRepeatsAKey": `[{"role":"user","content":"go"},{"role":"assistant","content":[{"type":"mystery_call","call":{"id":"c1","name":"f","a":1,"a":1}}]},
{"role":"user","content":[{"type":"tool_result","tool_use_id":"c1","content":"real output"}]}]`,
		"IDDeepDown": `[{"role":"user","content":"go"},{"role":"assistant","content":[{"type":"mystery_call","a":{"b":{"c":{"d":{"id":"c1"}}}}}]},
{"role":"user","content":[{"type":"tool_result","tool_use_id":"c1","content":"real output"}]}]`,
		// OpenAI's custom tool calls are not function calls: not guessed at.
		"OpenAIChatCustomToolCall": `[{"role":"user","content":"go"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"custom","custom":{"name":"f","input":"raw"}}]},
{"role":"tool","tool_call_id":"c1","content":"real output"}]`,
		// The id spelled with escapes in the unknown block, then in the result.
		"EscapedID": `[{"role":"user","content":"go"},{"role":"assistant","content":[{"type":"toolCall","id":"c1","name":"f","arguments":{}},{"type":"tool_invocation","id":"\u0063\u0039","tool":"g"}]},
{"role":"toolResult","toolCallId":"c1","toolName":"f","content":"ok"},{"role":"toolResult","toolCallId":"c9","toolName":"g","content":"real output"}]`,
		// Legacy blocks that say two things, or whose arguments can't be written exactly.
		"LegacyTwoIDs": `[{"role":"user","content":"go"},{"role":"assistant","content":[{"type":"tool_call","id":"item_1","call_id":"c1","name":"f","arguments":{}}]},
{"role":"toolResult","toolCallId":"c1","toolName":"f","content":"real output"}]`,
		"LegacyInputAndArguments": `[{"role":"user","content":"go"},{"role":"assistant","content":[{"type":"tool_use","id":"c1","name":"f","input":{},"arguments":{"x":1}}]},
{"role":"toolResult","toolCallId":"c1","toolName":"f","content":"real output"}]`,
		"LegacyLoneSurrogateInStringArgs": `[{"role":"user","content":"go"},{"role":"assistant","content":[{"type":"tool_use","id":"c1","name":"f","input":"[\"\ud800\"]"}]},
{"role":"toolResult","toolCallId":"c1","toolName":"f","content":"real output"}]`,
		"LegacyStringArgsTooDeep": `[{"role":"user","content":"go"},{"role":"assistant","content":[{"type":"tool_use","id":"c1","name":"f","input":"` + strings.Repeat("[", 505) + strings.Repeat("]", 505) + `"}]},
{"role":"toolResult","toolCallId":"c1","toolName":"f","content":"real output"}]`,
		"LegacyNumberIDBesideCallID": `[{"role":"user","content":"go"},{"role":"assistant","content":[{"type":"tool_call","id":5,"call_id":"c1","name":"f","arguments":{}}]},
{"role":"toolResult","toolCallId":"c1","toolName":"f","content":"real output"}]`,
		// Ids that are not strings.
		"NumberIDs": `[{"role":"user","content":"go"},{"role":"assistant","content":null,"tool_calls":[{"id":7,"type":"function","function":{"name":"f","arguments":"{}"}}]},
{"role":"tool","tool_call_id":7,"content":"real output"}]`,
		// A call tmend reads as malformed and id-less, whose shape holds the id.
		"BedrockToolUseArray": `[{"role":"user","content":[{"text":"go"}]},{"role":"assistant","content":[{"toolUse":[{"toolUseId":"c1","name":"f","input":{}}]}]},
{"role":"user","content":[{"toolResult":{"toolUseId":"c1","content":[{"text":"real output"}]}}]}]`,
		"ResponsesCallWithItemIDOnly": `[{"type":"message","role":"user","content":"go"},{"type":"function_call","id":"fc_1","name":"f","arguments":"{}"},
{"type":"function_call_output","call_id":"fc_1","output":"real output"}]`,
		// An orphan that may answer a call left without a result, had an id been written
		// differently: blank or missing on one side, a tool name with padding, or none.
		"BlankResultIDTwoOpenCalls": `[{"role":"user","content":"go"},{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"c2","type":"function","function":{"name":"f","arguments":"{}"}}]},
{"role":"tool","tool_call_id":"","content":"real output"}]`,
		"TwoBlankResultIDsOneOpenCall": `[{"role":"user","content":"go"},{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},
{"role":"tool","tool_call_id":"","content":"real output"},{"role":"tool","tool_call_id":" ","content":"other output"}]`,
		"GeminiResponseWithoutID": `[{"role":"user","parts":[{"text":"go"}]},{"role":"model","parts":[{"functionCall":{"id":"c1","name":"f","args":{}}}]},
{"role":"user","parts":[{"functionResponse":{"name":"f","response":{"out":"real output"}}}]}]`,
		"GeminiCallWithoutID": `[{"role":"user","parts":[{"text":"go"}]},{"role":"model","parts":[{"functionCall":{"name":"f","args":{}}}]},
{"role":"user","parts":[{"functionResponse":{"id":"c1","name":"f","response":{"out":"real output"}}}]}]`,
		"GeminiPaddedName": `[{"role":"user","parts":[{"text":"go"}]},{"role":"model","parts":[{"functionCall":{"name":"f","args":{}}}]},
{"role":"user","parts":[{"functionResponse":{"name":"f ","response":{"out":"real output"}}}]}]`,
		"GeminiResponseWithoutName": `[{"role":"user","parts":[{"text":"go"}]},{"role":"model","parts":[{"functionCall":{"name":"f","args":{}}}]},
{"role":"user","parts":[{"functionResponse":{"response":{"out":"real output"}}}]}]`,
		"EscapedResultID": `[{"role":"user","content":"go"},{"role":"assistant","content":[{"type":"toolCall","id":"c1","name":"f","arguments":{}},{"type":"tool_invocation","id":" c9","tool":"g"}]},
{"role":"toolResult","toolCallId":"c1","toolName":"f","content":"ok"},{"role":"toolResult","toolCallId":"\u00639","toolName":"g","content":"real output"}]`,
	}
	for name, in := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			res, err := repair.Repair([]byte(in), repair.Options{})
			var ue *repair.UnrepairableError
			require.ErrorAs(t, err, &ue)
			require.Equal(t, repair.StatusUnsupported, ue.Status)
			require.Equal(t, repair.StatusUnsupported, res.Report.Status)
			require.Equal(t, []string{string(repair.IssueUnrecognizedCall)}, res.Report.IssueCodeSet())
			require.Empty(t, res.Report.Actions)
			require.Equal(t, in, string(res.Messages))

			v, err := repair.Validate([]byte(in), repair.Options{})
			require.ErrorAs(t, err, &ue)
			require.Equal(t, repair.StatusUnsupported, v.Status)
		})
	}
}

func TestPaddedIDsPairAndAreTrimmed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		dialect repair.Dialect
		in      string
		want    string
	}{
		{"OpenAIChatResultPadded", repair.OpenAIChat,
			`[{"role":"user","content":"go"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_7","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":" call_7","content":"real"}]`,
			`[{"role":"user","content":"go"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_7","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"call_7","content":"real"}]`},
		{"AnthropicCallPadded", repair.Anthropic,
			`[{"role":"user","content":"go"},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_x\t","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_x","content":"real"}]}]`,
			`[{"role":"user","content":"go"},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_x","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_x","content":"real"}]}]`},
		{"BedrockBothPadded", repair.Bedrock,
			`[{"role":"user","content":[{"text":"go"}]},{"role":"assistant","content":[{"toolUse":{"toolUseId":" t1","name":"f","input":{}}}]},{"role":"user","content":[{"toolResult":{"toolUseId":"t1 ","content":[{"text":"real"}]}}]}]`,
			`[{"role":"user","content":[{"text":"go"}]},{"role":"assistant","content":[{"toolUse":{"toolUseId":"t1","name":"f","input":{}}}]},{"role":"user","content":[{"toolResult":{"toolUseId":"t1","content":[{"text":"real"}]}}]}]`},
		{"ResponsesResultPadded", repair.OpenAIResponses,
			`[{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c1\n","output":"real"}]`,
			`[{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"real"}]`},
		{"OpenClawResultPadded", repair.OpenClaw,
			`[{"role":"assistant","content":[{"type":"toolCall","id":"c1","name":"f","arguments":{}}]},{"role":"toolResult","toolCallId":" c1","toolName":"f","content":"real"}]`,
			`[{"role":"assistant","content":[{"type":"toolCall","id":"c1","name":"f","arguments":{}}]},{"role":"toolResult","toolCallId":"c1","toolName":"f","content":"real"}]`},
		{"GeminiResultPadded", repair.Gemini,
			`[{"role":"user","parts":[{"text":"go"}]},{"role":"model","parts":[{"functionCall":{"id":"g1","name":"f","args":{}}}]},{"role":"user","parts":[{"functionResponse":{"id":"g1 ","name":"f","response":{"ok":true}}}]}]`,
			`[{"role":"user","parts":[{"text":"go"}]},{"role":"model","parts":[{"functionCall":{"id":"g1","name":"f","args":{}}}]},{"role":"user","parts":[{"functionResponse":{"id":"g1","name":"f","response":{"ok":true}}}]}]`},
		{"LangChainCallPadded", repair.LangChain,
			`[{"type":"ai","content":"","tool_calls":[{"id":" l1","name":"f","args":{}}]},{"type":"tool","tool_call_id":"l1","content":"real"}]`,
			`[{"type":"ai","content":"","tool_calls":[{"id":"l1","name":"f","args":{}}]},{"type":"tool","tool_call_id":"l1","content":"real"}]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := checkInvariants(t, []byte(tt.in), repair.Options{})
			require.Equal(t, tt.dialect, res.Report.Dialect)
			require.Equal(t, tt.want, string(res.Messages))
			require.Equal(t, []string{string(repair.IssuePaddedCallID)}, res.Report.IssueCodeSet())
			for _, a := range res.Report.Actions {
				require.Equal(t, repair.StageNormalizeCallIDs, a.Stage)
				require.Equal(t, repair.ActionRewrite, a.Action)
			}
		})
	}
}

func TestPaddedIDsPreferTheExactCall(t *testing.T) {
	t.Parallel()
	// Two calls of one turn whose ids are equal after trimming, answered in the other
	// order: each result goes to the call whose id it repeats exactly.
	in := []byte(`[{"role":"user","content":[{"type":"text","text":"go"}]},
{"role":"assistant","content":[{"type":"tool_use","id":"c1","name":"f","input":{"n":1}},{"type":"tool_use","id":"c1 ","name":"f","input":{"n":2}}]},
{"role":"user","content":[{"type":"tool_result","tool_use_id":"c1 ","content":"R2"},{"type":"tool_result","tool_use_id":"c1","content":"R1"}]}]`)
	res := checkInvariants(t, in, repair.Options{})
	var msgs []struct {
		Content []struct {
			ID        string          `json:"id"`
			Input     json.RawMessage `json:"input"`
			ToolUseID string          `json:"tool_use_id"`
			Content   string          `json:"content"`
		} `json:"content"`
	}
	require.NoError(t, json.Unmarshal(res.Messages, &msgs))
	require.Len(t, msgs, 3)
	answer := map[string]string{}
	for _, r := range msgs[2].Content {
		answer[r.ToolUseID] = r.Content
	}
	for _, c := range msgs[1].Content {
		want := map[string]string{`{"n":1}`: "R1", `{"n":2}`: "R2"}[string(c.Input)]
		require.Equal(t, want, answer[c.ID], "call %s %s", c.ID, c.Input)
	}
}

func TestReusedCallIDsBecomeUnique(t *testing.T) {
	t.Parallel()
	in := []byte(`[{"role":"user","content":[{"type":"text","text":"go"}]},
{"role":"assistant","content":[{"type":"tool_use","id":"exec_0","name":"bash","input":{"c":"ls"}}]},
{"role":"user","content":[{"type":"tool_result","tool_use_id":"exec_0","content":"first"}]},
{"role":"assistant","content":[{"type":"tool_use","id":"exec_0","name":"bash","input":{"c":"pwd"}},{"type":"tool_use","id":"exec_0","name":"bash","input":{"c":"id"}}]},
{"role":"user","content":[{"type":"tool_result","tool_use_id":"exec_0","content":"second"},{"type":"tool_result","tool_use_id":"exec_0","content":"third"}]}]`)
	res := checkInvariants(t, in, repair.Options{})
	var msgs []struct {
		Content []struct {
			ID        string `json:"id"`
			ToolUseID string `json:"tool_use_id"`
			Content   string `json:"content"`
		} `json:"content"`
	}
	require.NoError(t, json.Unmarshal(res.Messages, &msgs))
	require.Len(t, msgs, 5)
	first, second, third := msgs[1].Content[0].ID, msgs[3].Content[0].ID, msgs[3].Content[1].ID
	require.Equal(t, "exec_0", first)
	require.Equal(t, "exec_0", msgs[2].Content[0].ToolUseID)
	require.Regexp(t, `^exec_0_[a-zA-Z0-9]{8}$`, second)
	require.Regexp(t, `^exec_0_[a-zA-Z0-9]{8}$`, third)
	require.NotEqual(t, second, third)
	require.Equal(t, "first", msgs[2].Content[0].Content)
	require.Equal(t, []string{second, third}, []string{msgs[4].Content[0].ToolUseID, msgs[4].Content[1].ToolUseID})
	require.Equal(t, []string{"second", "third"}, []string{msgs[4].Content[0].Content, msgs[4].Content[1].Content})
	require.Equal(t, map[repair.Stage]int{repair.StageNormalizeCallIDs: 4}, res.Report.StageCounts)
	require.Equal(t, []string{string(repair.IssueDuplicateCallID)}, res.Report.IssueCodeSet())

	// Under a target the new ids follow the target's rules.
	res = checkInvariants(t, in, repair.Options{Target: repair.TargetMistral})
	require.NoError(t, json.Unmarshal(res.Messages, &msgs))
	for _, i := range []int{1, 3} {
		for _, c := range msgs[i].Content {
			require.Regexp(t, `^[a-zA-Z0-9]{9}$`, c.ID)
		}
	}
}

func TestRemovalsKeepTurnRules(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		opts repair.Options
		want string
	}{
		{"Bedrock", `[{"role":"user","content":[{"text":"a"}]},{"role":"assistant","content":[{"toolUse":{"toolUseId":"","name":"f","input":{}}}]},{"role":"user","content":[{"text":"b"}],"x":1},{"role":"assistant","content":[{"text":"ok"}]}]`,
			repair.Options{},
			`[{"role":"user","content":[{"text":"a"},{"text":"b"}],"x":1},{"role":"assistant","content":[{"text":"ok"}]}]`},
		{"Gemini", `[{"role":"user","parts":[{"text":"a"}]},{"role":"model","parts":[{"text":"thinking"}]},{"role":"model","parts":[{"functionCall":{"id":"","name":"f","args":{}}}]},{"role":"user","parts":[{"functionResponse":{"id":"x","name":"f","response":{}}}]},{"role":"model","parts":[{"functionCall":{"id":"g2","name":"f"}}]},{"role":"user","parts":[{"functionResponse":{"id":"g2","name":"f","response":{"ok":1}}}]}]`,
			repair.Options{},
			`[{"role":"user","parts":[{"text":"a"}]},{"role":"model","parts":[{"text":"thinking"},{"functionCall":{"id":"g2","name":"f"}}]},{"role":"user","parts":[{"functionResponse":{"id":"g2","name":"f","response":{"ok":1}}}]}]`},
		{"AnthropicTarget", `[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"tool_use","id":"","name":"f","input":{}}]},{"role":"user","content":"b"}]`,
			repair.Options{Target: repair.TargetAnthropic},
			`[{"role":"user","content":"a"},{"role":"user","content":"b"}]`},
		{"AnthropicNoTarget", `[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"tool_use","id":"","name":"f","input":{}}]},{"role":"user","content":"b"}]`,
			repair.Options{},
			`[{"role":"user","content":"a"},{"role":"user","content":"b"}]`},
		// A failed turn's text, then the retried turn: merged, and the retried call (answered
		// synthetically) does not inherit the failed turn's stop reason, which would make the
		// next repair remove it.
		{"BedrockFailedTurnThenRetry", `[{"role":"user","content":[{"text":"a"}]},{"role":"assistant","content":[{"text":"t"},{"toolUse":{"toolUseId":"f1","name":"f","input":{}}}],"stop_reason":"error"},{"role":"assistant","content":[{"toolUse":{"toolUseId":"r1","name":"f","input":{}}}]},{"role":"user","content":[{"text":"b"}]}]`,
			repair.Options{},
			`[{"role":"user","content":[{"text":"a"}]},{"role":"assistant","content":[{"text":"t"},{"toolUse":{"toolUseId":"r1","name":"f","input":{}}}]},{"role":"user","content":[{"toolResult":{"toolUseId":"r1","content":[{"text":"` + repair.SyntheticResultText + `"}],"status":"error"}},{"text":"b"}]}]`},
		{"BedrockMergedAcrossAGapAfterAFailedTurn", `[{"role":"user","content":[{"text":"a"}]},{"role":"assistant","content":[{"text":"t"},{"toolUse":{"toolUseId":"m1","name":"f"}}],"stop_reason":"error"},{"role":"user","content":[{"toolResult":{"toolUseId":"m1","content":[{"text":"r"}]}}]},{"role":"assistant","content":[{"toolUse":{"toolUseId":"x1","name":"f","input":{}}}],"stopReason":"tool_use"},{"role":"user","content":[{"text":"b"}]}]`,
			repair.Options{},
			`[{"role":"user","content":[{"text":"a"}]},{"role":"assistant","content":[{"text":"t"},{"toolUse":{"toolUseId":"x1","name":"f","input":{}}}],"stopReason":"tool_use"},{"role":"user","content":[{"toolResult":{"toolUseId":"x1","content":[{"text":"` + repair.SyntheticResultText + `"}],"status":"error"}},{"text":"b"}]}]`},
		{"GeminiFailedTurnThenCall", `[{"role":"user","parts":[{"text":"a"}]},{"role":"model","parts":[{"text":"t"},{"functionCall":{"name":"f","args":{}}}],"stop_reason":"error"},{"role":"model","parts":[{"functionCall":{"name":"g","args":{}}}]},{"role":"user","parts":[{"functionResponse":{"name":"g","response":{"ok":1}}}]}]`,
			repair.Options{},
			`[{"role":"user","parts":[{"text":"a"}]},{"role":"model","parts":[{"text":"t"},{"functionCall":{"name":"g","args":{}}}]},{"role":"user","parts":[{"functionResponse":{"name":"g","response":{"ok":1}}}]}]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := checkInvariants(t, []byte(tt.in), tt.opts)
			require.Equal(t, tt.want, string(res.Messages))
		})
	}
}

// A removal that leaves two user messages side by side which cannot be merged (they hold
// one member with different values) would write a transcript Bedrock rejects: refused and
// left as it is, not "repaired".
func TestRemovalLeavingUnmergeableTurnsIsRefused(t *testing.T) {
	t.Parallel()
	in := `[{"role":"user","content":[{"text":"a"}],"x":1},{"role":"assistant","content":[{"toolUse":{"toolUseId":"","name":"f","input":{}}}]},{"role":"user","content":[{"text":"b"}],"x":2}]`
	res, err := repair.Repair([]byte(in), repair.Options{})
	var ue *repair.UnrepairableError
	require.ErrorAs(t, err, &ue)
	require.Equal(t, repair.StatusUnsupported, res.Report.Status)
	require.Contains(t, res.Report.Reason, "a user message follows a user message")
	require.Equal(t, in, string(res.Messages))
}

func TestDanglingReasoningIsDropped(t *testing.T) {
	t.Parallel()
	user := `{"type":"message","role":"user","content":"go"}`
	rs := `{"type":"reasoning","id":"rs_1","summary":[]}`
	rs2 := `{"type":"reasoning","id":"rs_2","summary":[]}`
	call := `{"type":"function_call","call_id":"c2","name":"f","arguments":"{}"}`
	out := `{"type":"function_call_output","call_id":"c2","output":"x"}`
	tests := []struct{ name, in, want string }{
		{"AtTheEnd", `[` + user + `,` + rs + `]`, `[` + user + `]`},
		{"BeforeUser", `[` + user + `,` + rs + `,` + user + `]`, `[` + user + `,` + user + `]`},
		{"BeforeItsCall", `[` + user + `,` + rs + `,{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"x"}]`, ""},
		{"SideBySide", `[` + user + `,` + rs + `,` + rs2 + `,` + call + `,` + out + `]`, ""},
		{"LostItsCall", `[` + user + `,` + rs + `,{"type":"function_call","call_id":"","name":"f","arguments":"{}"},` + rs2 + `,` + call + `,` + out + `]`,
			`[` + user + `,` + rs2 + `,` + call + `,` + out + `]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := []byte(tt.in)
			if tt.want == "" {
				res, err := repair.Repair(in, repair.Options{})
				require.NoError(t, err)
				require.Equal(t, repair.StatusClean, res.Report.Status)
				return
			}
			res := checkInvariants(t, in, repair.Options{})
			require.Equal(t, tt.want, string(res.Messages))
			require.Equal(t, 1, res.Report.StageCounts[repair.StageDropDanglingReasoning])
		})
	}
	t.Run("StillStreaming", func(t *testing.T) {
		t.Parallel()
		now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
		res, err := repair.Repair([]byte(`[`+user+`,`+rs+`]`), repair.Options{Now: now, UpdatedAt: now.Add(-time.Minute)})
		require.NoError(t, err)
		require.Empty(t, res.Report.Actions)
	})
}

func TestGeminiCallWithoutArgsIsValid(t *testing.T) {
	t.Parallel()
	in := []byte(`[{"role":"user","parts":[{"text":"time?"}]},{"role":"model","parts":[{"functionCall":{"id":"g1","name":"now"}}]},{"role":"user","parts":[{"functionResponse":{"id":"g1","name":"now","response":{"t":"12:00"}}}]}]`)
	res, err := repair.Repair(in, repair.Options{})
	require.NoError(t, err)
	require.Equal(t, repair.StatusClean, res.Report.Status)
	v, err := repair.Validate(in, repair.Options{})
	require.NoError(t, err)
	require.Empty(t, v.Issues)
}

func TestOnlyTheLastTurnMayBeRunning(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	recent := repair.Options{Now: now, UpdatedAt: now.Add(-time.Minute)}
	call := `{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}`
	// The user wrote after the call: it is not running any more.
	res := checkInvariants(t, []byte(`[{"role":"user","content":"go"},`+call+`,{"role":"user","content":"hello?"}]`), recent)
	require.Equal(t, 1, res.Report.StageCounts[repair.StageSynthesizeMissingResults])
	require.Zero(t, res.Report.PendingCalls)
	// Nothing after the call: it may be.
	res, err := repair.Repair([]byte(`[{"role":"user","content":"go"},`+call+`]`), recent)
	require.NoError(t, err)
	require.Equal(t, repair.StatusPending, res.Report.Status)
	require.Equal(t, 1, res.Report.PendingCalls)
}

func TestLoneSurrogatesInIDsAreNotGuessed(t *testing.T) {
	t.Parallel()
	// Many decoders read a lone surrogate as U+FFFD, others keep it: a result whose id
	// differs from an unanswered call's only there may be its result. It is refused, not
	// dropped. (encoding/json conflates the ids, so checkInvariants' oracle can't be used.)
	for _, in := range []string{
		`[{"role":"user","content":"go"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_\ud83d","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"call_\ufffd","content":"other"}]`,
		`[{"role":"assistant","content":null,"tool_calls":[{"id":"a\udc00","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"a\udc01","content":"x"}]`,
	} {
		res, err := repair.Repair([]byte(in), repair.Options{})
		require.ErrorContains(t, err, "lone surrogate")
		require.Equal(t, repair.StatusUnsupported, res.Report.Status)
		require.Equal(t, in, string(res.Messages))
		require.Equal(t, []string{string(repair.IssueUnrecognizedCall)}, res.Report.IssueCodeSet())
	}

	// The same lone surrogate on both sides is the same id.
	in := `[{"role":"assistant","content":null,"tool_calls":[{"id":"a\udc00","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"a\udc00","content":"x"}]`
	v, err := repair.Validate([]byte(in), repair.Options{})
	require.NoError(t, err)
	require.Equal(t, repair.StatusClean, v.Status)
}

func TestDuplicateKeysAmongMany(t *testing.T) {
	t.Parallel()
	many := func(dupAt int) string {
		var b strings.Builder
		for i := range 200 {
			fmt.Fprintf(&b, `"k%d":%d,`, i, i)
		}
		fmt.Fprintf(&b, `"k%d":0`, dupAt)
		return b.String()
	}
	for _, in := range []string{
		`[{"role":"user",` + many(3) + `}]`,                                   // a message's members (scanned)
		`[{"role":"user",` + many(150) + `}]`,                                 // found through the set
		`[{"role":"assistant","content":[{"type":"text",` + many(20) + `}]}]`, // a block's members
	} {
		_, err := repair.Repair([]byte(in), repair.Options{})
		require.ErrorContains(t, err, "duplicate key", in[:40])
	}
	_, err := repair.Repair([]byte(`[{"role":"user",`+strings.Replace(many(0), `"k0":0`, `"other":0`, 1)+`}]`), repair.Options{})
	require.NoError(t, err)
}

// A key spelled with escapes is the same key: calls in an escaped "content" are calls
// (their real results were once dropped as orphans), and an escaped "messages" holds
// the transcript.
func TestKeysSpelledWithEscapesAreTheSameKeys(t *testing.T) {
	t.Parallel()
	in := `[{"role":"user","content":"go"},{"role":"assistant","cont\u0065nt":[{"type":"toolCall","id":"c1","name":"f","arguments":{}}]},` +
		`{"role":"toolResult","toolCallId":"c1","toolName":"f","content":[{"type":"text","text":"real output"}]}]`
	res, err := repair.Repair([]byte(in), repair.Options{})
	require.NoError(t, err)
	require.Equal(t, repair.StatusClean, res.Report.Status)
	require.Equal(t, in, string(res.Messages))

	doc := `{"id":"s1","mess\u0061ges":[{"role":"user","content":"go"},{"role":"assistant","content":[{"type":"toolCall","id":"c1","name":"f","arguments":{}}]}]}`
	out, err := repair.RepairDocument([]byte(doc), repair.Options{})
	require.NoError(t, err)
	require.Equal(t, "messages", out.Key)
	require.Equal(t, map[repair.Stage]int{repair.StageSynthesizeMissingResults: 1}, out.Report.StageCounts)
	require.True(t, strings.HasPrefix(string(out.Output), `{"id":"s1","mess\u0061ges":[`), "%s", out.Output)
}

// TestBlankToolNameFilledForGemini: only --target gemini fills an OpenClaw result's blank
// toolName from its call (Gemini needs functionResponse.name); without it, or for another
// target, the transcript is clean.
func TestBlankToolNameFilledForGemini(t *testing.T) {
	t.Parallel()
	in := []byte(`[{"role":"user","content":"go"},{"role":"assistant","content":[{"type":"toolCall","id":"c1","name":"f","arguments":{}}]},
{"role":"toolResult","toolCallId":"c1","toolName":" ","content":[{"type":"text","text":"out"}]}]`)
	for _, target := range []repair.Target{"", repair.TargetAnthropic} {
		res, err := repair.Repair(in, repair.Options{Target: target})
		require.NoError(t, err)
		require.Equal(t, repair.StatusClean, res.Report.Status, "target %q", target)
	}
	res := checkInvariants(t, in, repair.Options{Target: repair.TargetGemini})
	require.Equal(t, []string{string(repair.IssueMissingToolName)}, res.Report.IssueCodeSet())
	require.Contains(t, string(res.Messages), `{"role":"toolResult","toolCallId":"c1","toolName":"f",`)
}

// A legacy OpenAI function_call is a call tmend does not pair: refused in an openai-chat
// transcript as when alone, so a repair never leaves one that the next run refuses.
func TestLegacyFunctionCallIsNotRead(t *testing.T) {
	t.Parallel()
	in := `[{"role":"user","content":"hi"},{"role":"assistant","content":null,"function_call":{"name":"f","arguments":"{}"}},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"","type":"function","function":{"name":"g","arguments":"{}"}}]}]`
	res, err := repair.Repair([]byte(in), repair.Options{})
	var ue *repair.UnrepairableError
	require.ErrorAs(t, err, &ue)
	require.Equal(t, repair.StatusUnknownDialect, res.Report.Status)
	require.Contains(t, res.Report.Reason, `message 1 (role "assistant") is not a message of the openai-chat dialect`)
}

func TestArgumentsObjectIsWrittenAsCompactJSONText(t *testing.T) {
	t.Parallel()
	// Stored with white space: the arguments become their compact JSON text (strings and
	// numbers as written), and every other byte of the transcript stays as it was.
	in := `[{"role": "user", "content": "hi"},
 {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "a", "arguments": { "q" : "a \"b\"\n c", "n" : 1.50e3 , "l":[ 1, {"x": null} ] }}}]},
 {"role": "tool", "tool_call_id": "c1", "content": "ok"}]`
	want := `[{"role": "user", "content": "hi"},` +
		`{"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "a", "arguments": "{\"q\":\"a \\\"b\\\"\\n c\",\"n\":1.50e3,\"l\":[1,{\"x\":null}]}"}}]},` +
		`{"role": "tool", "tool_call_id": "c1", "content": "ok"}]`
	res, err := repair.Repair([]byte(in), repair.Options{})
	require.NoError(t, err)
	require.Equal(t, repair.StatusRepaired, res.Report.Status)
	require.Equal(t, want, string(res.Messages))
	var msgs []struct {
		ToolCalls []struct{ Function struct{ Arguments string } } `json:"tool_calls"`
	}
	require.NoError(t, json.Unmarshal(res.Messages, &msgs))
	require.JSONEq(t, `{"q":"a \"b\"\n c","n":1500,"l":[1,{"x":null}]}`, msgs[1].ToolCalls[0].Function.Arguments)
}

func TestAdjacentTurnsAreMergedAndTheRestKept(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, in, want string }{
		{"BedrockResultThenText",
			`[{"role": "user", "content": [{"text": "weather?"}]},
 {"role": "assistant", "content": [{"toolUse": {"toolUseId": "t1", "name": "w", "input": {}}}]},
 {"role": "user", "content": [{"toolResult": {"toolUseId": "t1", "content": [{"text": "sun"}]}}]},
 {"role": "user", "content": [{"text": "and tomorrow?"}]},
 {"role": "assistant", "content": [{"text": "rain"}]}]`,
			`[{"role": "user", "content": [{"text": "weather?"}]},` +
				`{"role": "assistant", "content": [{"toolUse": {"toolUseId": "t1", "name": "w", "input": {}}}]},` +
				`{"role": "user", "content": [{"toolResult": {"toolUseId": "t1", "content": [{"text": "sun"}]}},{"text": "and tomorrow?"}]},` +
				`{"role": "assistant", "content": [{"text": "rain"}]}]`},
		{"GeminiTextThenCalls",
			`[{"role": "user", "parts": [{"text": "hi"}]},
 {"role": "model", "parts": [{"text": "let me look"}]},
 {"role": "model", "parts": [{"functionCall": {"name": "a", "args": {}}}, {"functionCall": {"name": "b", "args": {}}}]},
 {"role": "user", "parts": [{"functionResponse": {"name": "a", "response": {}}}, {"functionResponse": {"name": "b", "response": {}}}]}]`,
			`[{"role": "user", "parts": [{"text": "hi"}]},` +
				`{"role": "model", "parts": [{"text": "let me look"},{"functionCall": {"name": "a", "args": {}}},{"functionCall": {"name": "b", "args": {}}}]},` +
				`{"role": "user", "parts": [{"functionResponse": {"name": "a", "response": {}}}, {"functionResponse": {"name": "b", "response": {}}}]}]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res, err := repair.Repair([]byte(tt.in), repair.Options{})
			require.NoError(t, err)
			require.Equal(t, repair.StatusRepaired, res.Report.Status)
			require.Equal(t, tt.want, string(res.Messages))
			require.Equal(t, []string{string(repair.IssueAdjacentTurns)}, res.Report.IssueCodeSet())
			again, err := repair.Repair(res.Messages, repair.Options{})
			require.NoError(t, err)
			require.Equal(t, repair.StatusClean, again.Report.Status)
		})
	}
}
