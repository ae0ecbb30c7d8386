package repair

import "fmt"

// Stage names one step of the repair pipeline. The strings appear in reports, audit rows
// and metrics and never change.
type Stage string

// The stages, in the order they apply.
const (
	StageNormalizeCallBlocks      Stage = "normalize_call_blocks"
	StageNormalizeCallIDs         Stage = "normalize_call_ids"
	StageNormalizeArguments       Stage = "normalize_arguments"
	StageMergeTurns               Stage = "merge_turns"
	StageStripMalformedCalls      Stage = "strip_malformed_calls"
	StageDropDanglingReasoning    Stage = "drop_dangling_reasoning"
	StageFailedTurnCalls          Stage = "failed_turn_calls"
	StageMoveResults              Stage = "move_results"
	StageDropDuplicateResults     Stage = "drop_duplicate_results"
	StageDropOrphanResults        Stage = "drop_orphan_results"
	StageSynthesizeMissingResults Stage = "synthesize_missing_results"
	StageDropProviderCalls        Stage = "drop_provider_calls"
	StageRewriteCallIDs           Stage = "rewrite_call_ids"
)

// Stages lists the stages in pipeline order.
func Stages() []Stage {
	return []Stage{StageNormalizeCallBlocks, StageNormalizeCallIDs, StageNormalizeArguments, StageMergeTurns, StageStripMalformedCalls,
		StageDropDanglingReasoning, StageFailedTurnCalls, StageMoveResults,
		StageDropDuplicateResults, StageDropOrphanResults, StageSynthesizeMissingResults, StageDropProviderCalls, StageRewriteCallIDs}
}

// stageCode is a Stage as one byte, its place in stageList plus one (0: none), as every
// message's edit keeps one: a string took 16.
type stageCode uint8

var stageList = Stages()

func stageCodeOf(st Stage) stageCode {
	for i, s := range stageList {
		if s == st {
			return stageCode(i + 1)
		}
	}
	panic("repair: unknown stage " + string(st))
}

func (c stageCode) stage() Stage {
	if c == 0 {
		return ""
	}
	return stageList[c-1]
}

// Meaning is what the stage does, in one line: check --help and the console show it.
func (s Stage) Meaning() string {
	switch s {
	case StageNormalizeCallBlocks:
		return "rewrites call blocks in a legacy or non-canonical shape to the dialect's canonical one"
	case StageNormalizeCallIDs:
		return "makes call ids that differ only by white space one id, and gives a reused call id a new one"
	case StageNormalizeArguments:
		return "writes call arguments stored in a JSON type the provider rejects in the one it takes: an object as its JSON text, a JSON text as its object"
	case StageMergeTurns:
		return "merges two turns the provider rejects side by side into one (Bedrock: one role twice; Gemini: two user turns, not a function-response turn and text, or a text turn, then the call turn)"
	case StageStripMalformedCalls:
		return "removes tool calls that can never be valid: no id, no name, no arguments, or streaming leftovers"
	case StageDropDanglingReasoning:
		return "removes reasoning items with no model item after them"
	case StageFailedTurnCalls:
		return "removes calls of a turn that failed or was aborted and has no real result"
	case StageMoveResults:
		return "moves each tool result to directly after its call's turn"
	case StageDropDuplicateResults:
		return "removes later results for a call that already has one (a real result wins over a synthetic one)"
	case StageDropOrphanResults:
		return "removes results whose call is not in the transcript (their content stays in the saved version)"
	case StageSynthesizeMissingResults:
		return "answers a call that has no result with an error result marked as written by tmend"
	case StageDropProviderCalls:
		return "with a target that would take them for its client's calls without result (or, from LangChain content, for content it rejects), removes the calls a provider ran itself and the provider's results for them; from LangChain content, also reasoning another provider encrypted for itself"
	case StageRewriteCallIDs:
		return "rewrites call ids the target provider rejects, in the call and its result alike"
	}
	return ""
}

// ActionKind is what an action did to a message or block.
type ActionKind string

// The action kinds.
const (
	ActionDrop    ActionKind = "drop"
	ActionMove    ActionKind = "move"
	ActionInsert  ActionKind = "insert"
	ActionRewrite ActionKind = "rewrite"
	// ActionMerge joins a message to the one before it, where a removal left two that
	// the provider rejects side by side (content concatenated in order).
	ActionMerge ActionKind = "merge"
)

// Action is one change the repair made. MessageIndex is the index in the input of the
// message the change touched; for an insert, of the call's message the new result answers.
type Action struct {
	Stage        Stage      `json:"stage"`
	Action       ActionKind `json:"action"`
	MessageIndex int        `json:"message_index"`
	CallID       string     `json:"call_id,omitempty"`
	ToolName     string     `json:"tool_name,omitempty"`
	Detail       string     `json:"detail,omitempty"`
}

// IssueCode names a structural fault. The strings are stable.
type IssueCode string

// Issue codes. Each line says what providers do with the fault, in their words where they
// have them.
const (
	// A call without a result: Anthropic "tool_use ids were found without tool_result
	// blocks immediately after", OpenAI "An assistant message with 'tool_calls' must be
	// followed by tool messages responding to each 'tool_call_id'", Responses "No tool
	// output found for function call".
	IssueCallWithoutResult IssueCode = "tool_call_without_result"
	// A result whose call is not in the transcript: OpenAI "messages with role 'tool' must
	// be a response to a preceeding message with 'tool_calls'", Responses "No tool call
	// found for function call output".
	IssueResultWithoutCall IssueCode = "tool_result_without_call"
	// A second result for one call: OpenAI "Duplicate value for 'tool_call_id'".
	IssueDuplicateResult IssueCode = "duplicate_tool_result"
	// A result that is not right after its call's turn (or, for Anthropic, not before the
	// other blocks of its message): Gemini "Please ensure that function response turn comes
	// immediately after a function call turn".
	IssueMisplacedResult IssueCode = "misplaced_tool_result"
	// A call that can never be valid: no id, no name, no arguments, or a streaming leftover.
	IssueMalformedCall IssueCode = "malformed_tool_call"
	// Two calls share an id: Anthropic "tool_use ids must be unique"; OpenAI Responses
	// rejects it too. The later call gets a new id, and its result follows.
	IssueDuplicateCallID IssueCode = "duplicate_tool_call_id"
	// A call and its result whose ids differ only by surrounding white space; providers
	// compare ids exactly, so the result would be an orphan.
	IssuePaddedCallID IssueCode = "padded_tool_call_id"
	// A call written in a shape the platform accepts but does not send to providers as a
	// tool call (OpenClaw's legacy snake_case blocks): "unexpected tool_use_id found in
	// tool_result blocks".
	IssueNoncanonicalCall IssueCode = "noncanonical_tool_call"
	// A call's arguments are a JSON object or array where the provider takes their JSON
	// text as a string (OpenAI "Invalid type for 'messages[1].tool_calls[0].function.arguments':
	// expected a string"), or a string holding an object's JSON text where the provider
	// takes the object (Anthropic "tool_use.input: Input should be a valid dictionary").
	// They are written in the type the provider takes.
	IssueArgumentsType IssueCode = "arguments_wrong_type"
	// Two turns the provider rejects side by side: Bedrock "A conversation must alternate
	// between user and assistant roles", Gemini "function call turn comes immediately
	// after a user turn or after a function response turn". They are merged into one.
	IssueAdjacentTurns IssueCode = "adjacent_turns"
	// A block tmend does not recognise as a call or result carries the id of a result or
	// call it would drop or answer; a result without an id tmend knows has an id-like
	// member; a call or result cannot be read with certainty (an id that is not a string, a
	// legacy block saying two things); or an orphan result may answer a call left without
	// one: the transcript is left untouched (status unsupported).
	IssueUnrecognizedCall IssueCode = "unrecognized_tool_call"
	// A Responses reasoning item with no model item after it: "Item 'rs_...' of type
	// 'reasoning' was provided without its required following item".
	IssueDanglingReasoning IssueCode = "dangling_reasoning"
	// A call of a turn that ended in error or abort still has its result, which clients
	// that drop failed turns turn into an orphan (reported with --failed-turns strip).
	IssueFailedTurnCall IssueCode = "failed_turn_tool_call"
	// A call id the target provider rejects: Anthropic "String should match pattern
	// '^[a-zA-Z0-9_-]+$'", OpenAI "Expected a string with maximum length 40", Mistral
	// "must be a-z, A-Z, 0-9, with a length of 9".
	IssueInvalidCallID IssueCode = "invalid_tool_call_id"
	// A result that names no tool where the target provider needs the name: Gemini
	// "function_response.name: Name cannot be empty". It is filled in from its call.
	IssueMissingToolName IssueCode = "missing_tool_name"
	// A call the provider ran itself (AI SDK providerExecuted: an Anthropic web search),
	// which the target provider would receive as a client call without result: the AI
	// SDK's OpenAI chat converter sends it as a function call and leaves the provider's
	// result out, and OpenAI answers "An assistant message with 'tool_calls' must be
	// followed by tool messages responding to each 'tool_call_id'".
	IssueProviderCall IssueCode = "provider_tool_call"
	// A block of a tool the provider ran itself (an Anthropic server_tool_use or
	// web_search_tool_result in a LangChain AI message's content), which the target's
	// client sends as it is where the target rejects it: ChatOpenAI passes it on as an
	// assistant content part, and OpenAI chat takes only text and refusal parts there.
	IssueProviderBlock IssueCode = "provider_tool_block"
	// Reasoning a provider encrypted for itself (an Anthropic redacted_thinking block in a
	// LangChain AI message's content), which the target's client sends as it is where the
	// target rejects it: ChatOpenAI passes it on as an assistant content part.
	IssueProviderReasoning IssueCode = "provider_reasoning_block"
	// An AI message whose content the target's client sends as an empty array, which the
	// target rejects: ChatOpenAI leaves ChatAnthropic's tool_use and thinking blocks out of
	// assistant content, and OpenAI chat rejects an empty content array.
	IssueEmptyContent IssueCode = "empty_content"
)

// IssueCodes lists every issue code with its one-line meaning, in a stable order.
func IssueCodes() []struct {
	Code    IssueCode
	Meaning string
} {
	return []struct {
		Code    IssueCode
		Meaning string
	}{
		{IssueCallWithoutResult, "a tool call has no tool result (provider: \"tool_use ids were found without tool_result blocks immediately after\")"},
		{IssueResultWithoutCall, "a tool result answers no call in the transcript (provider: \"No tool call found for function call output\")"},
		{IssueDuplicateResult, "a tool call has more than one result (provider: \"Duplicate value for 'tool_call_id'\")"},
		{IssueMisplacedResult, "a tool result is not directly after its call's turn (provider: \"function response turn comes immediately after a function call turn\")"},
		{IssueMalformedCall, "a tool call has no id, no name or no arguments, or is a streaming leftover"},
		{IssueDuplicateCallID, "two tool calls share one id (provider: \"tool_use ids must be unique\")"},
		{IssuePaddedCallID, "a call and its result have ids that differ only by surrounding white space"},
		{IssueNoncanonicalCall, "a call block in a legacy shape the provider does not see as a call (provider: \"unexpected tool_use_id found in tool_result blocks\")"},
		{IssueArgumentsType, "a call's arguments are a JSON object where the provider takes its JSON text, or the reverse (provider: \"expected a string\", \"Input should be a valid dictionary\")"},
		{IssueAdjacentTurns, "two turns the provider rejects side by side (provider: \"A conversation must alternate between user and assistant roles\")"},
		{IssueUnrecognizedCall, "a block tmend does not know carries a tool call id, a result keeps its id where tmend does not read it, a call or result cannot be read with certainty, or a result about to be dropped may answer a call without one; left untouched (status unsupported)"},
		{IssueDanglingReasoning, "a reasoning item has no model item after it (provider: \"provided without its required following item\")"},
		{IssueFailedTurnCall, "a call of a failed or aborted turn kept its result (reported with --failed-turns strip)"},
		{IssueInvalidCallID, "a call id the target provider rejects (provider: \"String should match pattern '^[a-zA-Z0-9_-]+$'\")"},
		{IssueMissingToolName, "a tool result names no tool where the target provider needs its name (provider: \"function_response.name: Name cannot be empty\")"},
		{IssueProviderCall, "a call another provider ran itself, which the target provider would receive as a call without result (provider: \"must be followed by tool messages responding to each 'tool_call_id'\")"},
		{IssueProviderBlock, "a block of a tool another provider ran itself, which the target's client sends as content the target rejects (OpenAI chat takes only text and refusal parts in assistant content)"},
		{IssueProviderReasoning, "reasoning another provider encrypted for itself (Anthropic redacted_thinking), which the target's client sends as content the target rejects (OpenAI chat takes only text and refusal parts in assistant content)"},
		{IssueEmptyContent, "an assistant message's content that the target's client sends as an empty array (ChatOpenAI leaves tool_use and thinking blocks out) (provider: \"Invalid 'messages[..].content': empty array\")"},
	}
}

// Meaning is the code's line of IssueCodes; empty for a code tmend does not know.
func (c IssueCode) Meaning() string {
	for _, ic := range IssueCodes() {
		if ic.Code == c {
			return ic.Meaning
		}
	}
	return ""
}

// Issue is one fault found in a transcript.
type Issue struct {
	Code         IssueCode `json:"code"`
	MessageIndex int       `json:"message_index"`
	CallID       string    `json:"call_id,omitempty"`
	ToolName     string    `json:"tool_name,omitempty"`
	Detail       string    `json:"detail,omitempty"`
}

// Status sums up what happened to one transcript.
type Status string

// The statuses the engine gives. The scanner adds its own (conflict, failed, ...).
const (
	StatusClean          Status = "clean"           // valid; nothing to do
	StatusRepaired       Status = "repaired"        // changed (Result.Messages holds the new transcript)
	StatusPending        Status = "pending"         // only calls that may still be running remain
	StatusUnparseable    Status = "unparseable"     // not JSON, or not an array of objects
	StatusUnknownDialect Status = "unknown_dialect" // shapes of several dialects, or not the forced one
	StatusUnsupported    Status = "unsupported"     // a call or result in a shape tmend does not know
	StatusTooLarge       Status = "too_large"       // would take more than Options.MaxMemory to repair
)

// Report says what Repair found and did.
type Report struct {
	Status       Status        `json:"status"`
	Reason       string        `json:"reason,omitempty"`
	Dialect      Dialect       `json:"dialect,omitempty"`
	MessagesIn   int           `json:"messages_in"`
	MessagesOut  int           `json:"messages_out"`
	PendingCalls int           `json:"pending_calls,omitempty"`
	Issues       []Issue       `json:"issues,omitempty"`
	Actions      []Action      `json:"actions,omitempty"`
	StageCounts  map[Stage]int `json:"stage_counts,omitempty"`
}

// IssueCodeSet returns the distinct issue codes of the report, in first-seen order.
func (r *Report) IssueCodeSet() []string {
	var out []string
	seen := map[IssueCode]bool{}
	for _, is := range r.Issues {
		if !seen[is.Code] {
			seen[is.Code] = true
			out = append(out, string(is.Code))
		}
	}
	return out
}

// UnrepairableError is returned for a transcript tmend will not touch; it is left as it
// is and the report carries the same status and reason.
type UnrepairableError struct {
	Status Status
	Reason string
}

func (e *UnrepairableError) Error() string { return fmt.Sprintf("%s: %s", e.Status, e.Reason) }
