package repair

// Gemini is the Gemini API: model parts {functionCall:{id?, name, args?}}, answered by
// {functionResponse:{id?, name, response}} parts in the next turn. A function-call turn
// must follow a user turn or a function-response turn.
const Gemini Dialect = "gemini"

var geminiSpec = &spec{
	name:     Gemini,
	envelope: "contents",
	parse:    parseGemini,
	block:    true,
	messageSignal: func(f *msgFacts) bool {
		return string(f.role) == "model" || f.hasParts && partsTyped(f.parts) == someUntyped
	},
	// "Please ensure that function call turn comes immediately after a user turn or after
	// a function response turn": a removal must not leave one after another model turn,
	// nor two user turns side by side (geminiOneTurn).
	mergeAfterRemoval: func(prev, cur *outMsg, _ Target) bool {
		return string(prev.role) == "model" && string(cur.role) == "model" && cur.calls || bothUser(prev, cur)
	},
	mergeAdjacent: geminiOneTurn,
	synth: func(c *part, id []byte, text string) []byte {
		var fr objectBuilder
		if c.hasID {
			fr = fr.raw("id", id)
		}
		fr = fr.str("name", c.name()).raw("response", objectBuilder(nil).str("error", text).done())
		return objectBuilder(nil).raw("functionResponse", fr.done()).done()
	},
	wrap: func(p [][]byte) []byte { return wrapUser(keyParts, p) },

	mayHideResultID: geminiMayHideID,
	order:           geminiOrder,
}

// geminiOneTurn reports two contents side by side that Gemini takes only as one turn: two
// user contents, which it rejects ("Please ensure that multiturn requests alternate
// between user and model", 400 INVALID_ARGUMENT) and its clients merge before sending,
// parts concatenated (pi's mergeConsecutiveRoles, hermes-agent's native Gemini adapter,
// Portkey's gateway), unless one is a function-response turn (bothUser); and a model
// text turn stored apart from the call turn the same response went on with, as the AI
// SDK's google provider and LangChain's google-genai write a response's text and calls
// ([...text, ...functionCalls]). Other model turns side by side (a failed turn and its
// retry) are left as they are.
func geminiOneTurn(prev, cur *outMsg) bool {
	return bothUser(prev, cur) || string(prev.role) == "model" && !prev.calls && string(cur.role) == "model" && cur.calls
}

// bothUser reports two user contents that merge into one: both function-response turns
// (the responses to one call turn go in one content) or neither. A function response
// merged with the user's next text is accepted, but Gemini 3 then answers with an empty
// candidate or goes on with the text (google-gemini/gemini-cli#28700,
// NousResearch/hermes-agent#79791, anomalyco/opencode#43479), so those stay apart.
func bothUser(prev, cur *outMsg) bool {
	return string(prev.role) == "user" && string(cur.role) == "user" && prev.results == cur.results
}

// geminiMayHideID: a response without an id is a form Gemini defines (it pairs by
// position and name), and its response member is the tool's output, not a place for a
// call id; only a member beside id, name and response may hold one.
func geminiMayHideID(raw []byte, ps *parser) bool {
	mark := len(ps.scratch)
	defer func() { ps.scratch = ps.scratch[:mark] }()
	o, ok, _ := ps.obj(raw)
	if !ok {
		return true
	}
	for im := range o.ms {
		m := &o.ms[im]
		if m.code() != keyFunctionResponse {
			if mayHoldIDKey(raw[m.keyStart(raw):m.valEnd()]) {
				return true
			}
			continue
		}
		fr, ok, _ := ps.obj(m.val(raw))
		if !ok {
			return true
		}
		for ifm := range fr.ms {
			fm := &fr.ms[ifm]
			switch fm.code() {
			case keyID, keyName, keyResponse:
			default:
				if mayHoldIDKey(fr.raw[fm.keyStart(fr.raw):fm.valEnd()]) {
					return true
				}
			}
		}
	}
	return false
}

var geminiRoles = words("model", "user", "function", "tool", "system")

var (
	pathFunctionCallID     = []keyCode{keyFunctionCall, keyID}
	pathFunctionResponseID = []keyCode{keyFunctionResponse, keyID}
)

// geminiOrder finds a function-call turn Gemini rejects ("function call turn comes
// immediately after a user turn or after a function response turn") that no stage
// changes: the first turn, or one right after a model turn with no calls (a model turn
// with calls gets its responses after it, or goes with them; a turn of malformed calls
// only goes, and its neighbours are merged) that is first itself or follows a turn other
// than a user or function-response turn. Add a user turn, or drop the call? Which model turns to merge? tmend does not
// decide. A model text turn between a user turn and the call turn is merged into it
// (mergeAdjacent).
func geminiOrder(msgs []message, _ *parser) (int, string) {
	for j := range msgs {
		m := &msgs[j]
		if m.kind != msgAssistant || !wellFormedCalls(m) {
			continue
		}
		if j == 0 {
			return j, "the first turn is a function-call turn, which Gemini takes only after a user turn or a function response turn; whether to add a user turn or drop the call and its response is not tmend's to decide"
		}
		if prev := &msgs[j-1]; prev.kind == msgAssistant && !toolParts(prev) {
			switch {
			case j == 1:
				return j, "a function-call turn comes right after a model turn that opens the contents, which Gemini rejects merged or not; whether to add a user turn or drop them is not tmend's to decide"
			case msgs[j-2].kind != msgUser:
				return j, "a function-call turn comes right after a model turn that does not follow a user turn, which Gemini rejects; which of the turns before it are its response's is unclear"
			}
		}
	}
	return 0, ""
}

func parseGemini(m *message, ps *parser) error {
	role := m.word(keyRole)
	// The role is optional (a turn without one is the user's); its parts are not.
	m.known = geminiRoles.has(role) || role == nil && !m.has(keyRole) && m.get(keyParts) != nil
	switch string(role) {
	case "model":
		m.kind = msgAssistant
		m.failed = failedTurn(m.raw(), m.ms())
		return parseBlocks(m, ps, keyParts, func(p *part, o obj) {
			switch {
			case o.has(keyFunctionCall):
				fc := o.sub(keyFunctionCall)
				// Gemini call ids are optional and args may be omitted for no-parameter
				// functions; calls pair with responses by name and order then.
				callShape(p, fc, pathFunctionCallID, fc, fc, keyOther, true)
				argsKind(p, fc, keyArgs, '{', true, "a functionCall's args")
			case o.has(keyFunctionResponse):
				ps.doubtful("a functionResponse part is in a model turn")
			}
		})
	case "user", "function", "tool", "": // "": no role, the user's turn
		m.kind = msgUser
		return parseBlocks(m, ps, keyParts, func(p *part, o obj) {
			switch {
			case o.has(keyFunctionResponse):
				fr := o.sub(keyFunctionResponse)
				resultShape(p, fr, pathFunctionResponseID)
				name, _ := inputString(fr.get(keyName))
				p.setName(name)
				p.set(partSynthetic, isSyntheticText(fr.get(keyResponse), nil))
			case o.has(keyFunctionCall):
				// Gemini takes a call only from the model: not read as one, never clean.
				ps.doubtful("a functionCall part is in a user turn")
			}
		})
	}
	return nil
}
