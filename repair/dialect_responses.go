package repair

import "bytes"

// OpenAIResponses is the OpenAI Responses API: items {type:"function_call", call_id, name,
// arguments} (and custom_tool_call, local_shell_call, computer_call), answered by items
// {type:"function_call_output", call_id} (and the matching *_output types).
const OpenAIResponses Dialect = "openai-responses"

var responsesSpec = &spec{
	name:     OpenAIResponses,
	envelope: "input",
	parse:    parseResponses,
	messageSignal: func(f msgFacts) bool {
		if len(f.typ) == 0 {
			return false
		}
		_, call := responsesCalls[string(f.typ)]
		return call || responsesOutputs[string(f.typ)] || string(f.typ) == "reasoning"
	},
	synth: func(c *part, text string) []byte {
		typ := "function_call_output" // also for local_shell_call, as Codex answers them
		if c.callType == "custom_tool_call" {
			typ = "custom_tool_call_output"
		}
		return objectBuilder(nil).str("type", typ).raw("call_id", c.idRaw).str("output", text).done()
	},
}

// responsesCalls maps each Responses call item type to its arguments member and the
// fallback tool name for items that carry none.
var responsesCalls = map[string]struct {
	args keyCode
	name string
}{
	"function_call":    {keyArguments, ""},
	"custom_tool_call": {keyInput, ""},
	"local_shell_call": {keyAction, "local_shell"},
	"computer_call":    {keyAction, "computer"},
}

var responsesOutputs = map[string]bool{
	"function_call_output":    true,
	"custom_tool_call_output": true,
	"local_shell_call_output": true,
	"computer_call_output":    true,
}

// responsesItems are the other item types of a Responses input: messages, reasoning, and
// the items of tools the server runs, whose output is part of the item itself.
var responsesItems = words("message", "reasoning", "item_reference", "compaction",
	"web_search_call", "file_search_call", "image_generation_call", "code_interpreter_call",
	"mcp_call", "mcp_list_tools", "mcp_approval_request", "mcp_approval_response")

// responsesRoles are the roles of an input message given without a type.
var responsesRoles = words("user", "assistant", "system", "developer")

func parseResponses(m *message, ps *parser) error {
	typ := m.word(keyType)
	o := obj{m.raw, m.ms, ps}
	m.known = responsesItems.has(typ) || typ == nil && !m.has(keyType) && responsesRoles.has(m.word(keyRole))
	if c, ok := responsesCalls[string(typ)]; ok {
		m.known = true
		m.kind = msgCall
		p := part{raw: m.raw, callType: string(typ)}
		callShape(&p, o, pathCallID, o, o, c.args, false)
		if c.name != "" && p.name == "" {
			p.name = c.name
			if p.malformed == "missing or blank name" {
				p.malformed = ""
			}
		}
		m.parts = ps.one(p)
		return nil
	}
	if responsesOutputs[string(typ)] {
		m.known = true
		m.kind = msgResult
		p := part{raw: m.raw}
		idPath := pathCallID
		if !o.has(keyCallID) && string(typ) == "local_shell_call_output" {
			idPath = pathID
		}
		resultShape(&p, o, idPath)
		p.synthetic = isSyntheticText(m.get(keyOutput), nil)
		m.parts = ps.one(p)
		return nil
	}
	m.reasoning = string(typ) == "reasoning"
	return nil
}

// responsesFollower says what a reasoning item is followed by: the model item it produced
// (an assistant message, a call), an input item (a user, system or developer message, a
// tool output), or neither.
type follower uint8

const (
	followsModel follower = iota
	followsInput
	followsNothing
)

func responsesFollower(m *message) follower {
	switch m.kind {
	case msgCall:
		return followsModel
	case msgResult:
		return followsInput
	}
	switch string(m.word(keyRole)) {
	case "user", "system", "developer":
		return followsInput
	}
	if bytes.HasSuffix(m.word(keyType), []byte("_output")) {
		return followsInput
	}
	// An assistant message, another model item (web_search_call, ...) or a shape tmend
	// does not know: taken as model output, so the reasoning item stays.
	return followsModel
}
