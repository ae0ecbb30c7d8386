package repair

import (
	"bytes"
	"fmt"
	"slices"
)

// OpenAIResponses is the OpenAI Responses API: items {type:"function_call", call_id, name,
// arguments} (and custom_tool_call, local_shell_call, computer_call, Codex's
// tool_search_call), answered by items {type:"function_call_output", call_id} (and the
// matching *_output types).
const OpenAIResponses Dialect = "openai-responses"

var responsesSpec = &spec{
	name:     OpenAIResponses,
	envelope: "input",
	parse:    parseResponses,
	argsPath: []keyCode{keyArguments},
	messageSignal: func(f *msgFacts) bool {
		if len(f.typ) < shortestItemType { // most messages of other dialects: spared the lookups
			return false
		}
		_, call := responsesCalls[string(f.typ)]
		return call || responsesOutputs[string(f.typ)] || string(f.typ) == "reasoning"
	},
	synth: func(c *part, id []byte, text string) []byte {
		typ := "function_call_output" // also for local_shell_call, as Codex answers them
		switch c.callType {
		case callCustomTool:
			typ = "custom_tool_call_output"
		case callToolSearch:
			// Codex's own stand-in: no tools found. The item has no member for a text, so
			// it cannot carry tmend's; an empty one is read as synthetic (parseResponses).
			return objectBuilder(nil).str("type", "tool_search_output").raw("call_id", id).
				str("status", "completed").str("execution", "client").raw("tools", []byte("[]")).done()
		}
		return objectBuilder(nil).str("type", typ).raw("call_id", id).str("output", text).done()
	},
	order: func(msgs []message, ps *parser) (int, string) {
		if at, why := duplicateItemIDs(msgs, ps); why != "" {
			return at, why
		}
		return outputTypesMatch(msgs)
	},
}

// duplicateItemIDs finds a second item with an id an earlier one has ("Duplicate item
// found with id"): which item keeps it, or whether one is the other stored twice, tmend
// cannot tell. Ids are compared as the API reads them (decoded), by their hashes first,
// in an open-addressing table kept in the parser (a map per transcript cost a third of a
// Responses check).
func duplicateItemIDs(msgs []message, ps *parser) (int, string) {
	size := 16
	for size < 2*len(msgs) {
		size *= 2
	}
	t := grow(ps.hashes, size)
	ps.hashes = t
	for j := range msgs {
		id := itemID(msgs[j].get(keyID))
		if id == nil {
			continue
		}
		h := hashID(id) | 1 // 0 marks an empty slot
		for k := h & uint64(size-1); ; k = (k + 1) & uint64(size-1) {
			if t[k] == 0 {
				t[k] = h
				break
			}
			if t[k] == h {
				return sameItemIDs(msgs)
			}
		}
	}
	return 0, ""
}

// itemID is the id v, an item's id member, as the API reads it: the string decoded (an
// escape spells the character it stands for, so "fc\u005f1" is fc_1), or nil when v is
// not a non-empty string. Only an id written with escapes is copied.
func itemID(v []byte) []byte {
	if len(v) <= 2 || v[0] != '"' {
		return nil
	}
	if inner := v[1 : len(v)-1]; bytes.IndexByte(inner, '\\') < 0 {
		return inner
	}
	id, _ := idString(v)
	return []byte(id)
}

// sameItemIDs finds the first item whose id an earlier item has, comparing the decoded
// ids (only once two hashes agree).
func sameItemIDs(msgs []message) (int, string) {
	for j := range msgs {
		id := itemID(msgs[j].get(keyID))
		if id == nil {
			continue
		}
		for k := range j {
			if bytes.Equal(itemID(msgs[k].get(keyID)), id) {
				return j, fmt.Sprintf("two items have the id %q, which the API rejects; which of them keeps it, or whether one is the other stored twice, is unclear", id)
			}
		}
	}
	return 0, ""
}

// hashID is the 64-bit FNV-1a hash of b.
func hashID(b []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range b {
		h = (h ^ uint64(c)) * 1099511628211
	}
	return h
}

// responsesCalls maps each Responses call item type to its arguments member, the
// fallback tool name for items that carry none, and its callType.
var responsesCalls = map[string]struct {
	args keyCode
	name string
	typ  callType
}{
	"function_call":    {keyArguments, "", callPlain},
	"custom_tool_call": {keyInput, "", callCustomTool},
	"local_shell_call": {keyAction, "local_shell", callPlain},
	"computer_call":    {keyAction, "computer", callComputer},
	"tool_search_call": {keyArguments, "tool_search", callToolSearch},
}

// answers says which output item types answer each call item type: Codex answers a
// local shell call with a function_call_output too.
var answers = map[string][]string{
	"function_call":    {"function_call_output"},
	"custom_tool_call": {"custom_tool_call_output"},
	"local_shell_call": {"local_shell_call_output", "function_call_output"},
	"computer_call":    {"computer_call_output"},
	"tool_search_call": {"tool_search_output"},
}

// outputTypesMatch finds an output item whose call_id names a call of a type it does not
// answer (a custom_tool_call answered by a function_call_output, or the reverse): Codex
// reads it as an orphan output beside an unanswered call, a reader that pairs by call_id
// as the call's answer of the wrong type. tmend cannot tell which, so it refuses.
func outputTypesMatch(msgs []message) (int, string) {
	if onlyFunctionCalls(msgs) {
		return 0, "" // the common transcript: every output answers every call, no map
	}
	var callType map[string]string
	for j := range msgs {
		m := &msgs[j]
		typ, id := m.word(keyType), m.get(keyCallID)
		if m.kind == msgCall && id != nil {
			if callType == nil {
				callType = map[string]string{}
			}
			callType[string(id)] = string(typ)
		}
		if m.kind != msgResult || id == nil {
			continue
		}
		if ct, ok := callType[string(id)]; ok && !slices.Contains(answers[ct], string(typ)) {
			return j, fmt.Sprintf("a %s answers the %s with call_id %s: the wrong output type, or an orphan beside an unanswered call? tmend cannot tell", typ, ct, id)
		}
	}
	return 0, ""
}

// onlyFunctionCalls reports whether every call is a function_call or local_shell_call and
// every output a function_call_output, which answers both.
func onlyFunctionCalls(msgs []message) bool {
	for j := range msgs {
		m := &msgs[j]
		switch typ := string(m.word(keyType)); {
		case m.kind == msgCall && typ != "function_call" && typ != "local_shell_call",
			m.kind == msgResult && typ != "function_call_output":
			return false
		}
	}
	return true
}

var responsesOutputs = map[string]bool{
	"function_call_output":    true,
	"custom_tool_call_output": true,
	"local_shell_call_output": true,
	"computer_call_output":    true,
	"tool_search_output":      true,
}

// shortestItemType is the length of the shortest type the message signal looks for.
var shortestItemType = func() int {
	n := len("reasoning")
	for typ := range responsesCalls {
		n = min(n, len(typ))
	}
	for typ := range responsesOutputs {
		n = min(n, len(typ))
	}
	return n
}()

// serverSearch reports a Codex tool search item without a call_id: the server ran the
// search (execution "server") and put call and output in one response; it is not a
// call or result for tmend to pair.
func serverSearch(m *message, typ []byte) bool {
	if string(typ) != "tool_search_call" && string(typ) != "tool_search_output" {
		return false
	}
	v := m.get(keyCallID)
	return v == nil || string(v) == "null"
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
	o := obj{m.raw(), m.ms(), ps}
	m.known = responsesItems.has(typ) || typ == nil && !m.has(keyType) && responsesRoles.has(m.word(keyRole))
	if serverSearch(m, typ) {
		m.known = true
		return nil
	}
	if c, ok := responsesCalls[string(typ)]; ok {
		m.known = true
		m.kind = msgCall
		p := rawPart(m.raw())
		p.callType = c.typ
		callShape(&p, o, pathCallID, o, o, c.args, false)
		switch {
		case c.typ == callPlain && c.args == keyArguments:
			// function_call arguments are a JSON string (Codex's tool_search_call keeps an
			// object).
			stringArgs(&p, o, c.args, "a "+string(typ)+" item's "+keyNames[c.args])
		case c.typ == callCustomTool:
			// A custom tool's input is free text, not JSON: an object there has no one text.
			argsKind(&p, o, c.args, '"', false, "a "+string(typ)+" item's "+keyNames[c.args])
		}
		if c.name != "" && p.nameLen == 0 {
			p.setName(c.name)
			if p.malformed == malNoName {
				p.malformed = wellFormed
			}
		}
		m.setParts(ps.one(p))
		return nil
	}
	if responsesOutputs[string(typ)] {
		m.known = true
		m.kind = msgResult
		p := rawPart(m.raw())
		idPath := pathCallID
		if !o.has(keyCallID) && string(typ) == "local_shell_call_output" {
			idPath = pathID
		}
		resultShape(&p, o, idPath)
		if v := m.get(keyOutput); string(typ) != "tool_search_output" && (v == nil || string(v) == "null") {
			// The API requires output; an empty one or an error text would each say
			// something the tool never did.
			ps.doubtful("a " + string(typ) + " item has no output")
		}
		p.set(partSynthetic, isSyntheticText(m.get(keyOutput), nil) || string(typ) == "tool_search_output" && emptySearch(m))
		m.setParts(ps.one(p))
		return nil
	}
	if string(typ) == "item_reference" {
		// The API resolves it to an item it stored (a call, an output, ...), which tmend
		// cannot see: whether the calls and outputs around it pair is unknown.
		ps.doubtful("an item_reference stands for an item the API stored, which tmend cannot read")
	}
	m.reasoning = string(typ) == "reasoning"
	return nil
}

// emptySearch reports a tool_search_output that loaded no tools: what Codex (and tmend)
// put in for a search whose output is missing.
func emptySearch(m *message) bool {
	tm, ok := findMember(m.raw(), m.ms(), "tools")
	return ok && isEmptyValue(tm.val(m.raw()))
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
