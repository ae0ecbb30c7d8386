package repair

import (
	"bytes"
	"fmt"
	"slices"
)

// In-place dialects (the AI SDK's UIMessage, Mastra) keep a tool call and its result in
// one part, whose state says how far the call got; the SDK turns each part into a call
// and, once it has an output, a result when it builds a request. So nothing is ever
// moved or inserted: a part whose call never got its result is answered in place (the
// part's own error state, input kept), a streaming leftover goes, a later part repeating
// a call (same tool, same input) goes, another call reusing an id gets a new one, and a
// message left with nothing but step-start markers goes.

// toolState classifies a tool part's state.
type toolState uint8

const (
	stateStreaming toolState = iota + 1 // the input was still streaming: never a call
	stateOpen                           // called, no output yet
	stateAnswered                       // output, error or denial recorded
)

// toolStates maps the states of AI SDK 5+ parts (input-*, approval-*, output-*) and of
// AI SDK 4 / Mastra tool invocations (partial-call, call, result).
var toolStates = map[string]toolState{
	"input-streaming":    stateStreaming,
	"input-available":    stateOpen,
	"approval-requested": stateOpen,
	"approval-responded": stateOpen,
	"output-available":   stateAnswered,
	"output-error":       stateAnswered,
	"output-denied":      stateAnswered,
	"partial-call":       stateStreaming,
	"call":               stateOpen,
	"result":             stateAnswered,
}

// streamingLeftover is why a part in each streaming state of toolStates is malformed.
var streamingLeftover = map[string]malformed{
	"input-streaming": malInputStreaming,
	"partial-call":    malPartialCall,
}

// uiPartTypes are the other part types of a UIMessage (and of Mastra's format 2), which
// hold no tool call; data-* parts are the app's own. ai 7 adds reasoning-file and
// steering-message (a user message steered into the run: text and file parts only).
var uiPartTypes = words("text", "reasoning", "step-start", "file", "source-url", "source-document",
	"source", "custom", "reasoning-file", "steering-message")

// knownUIPart reports whether typ is a part type tmend reads: a tool part or one above.
func knownUIPart(typ []byte) bool {
	return uiPartTypes.has(typ) || bytes.HasPrefix(typ, []byte("tool-")) || bytes.HasPrefix(typ, []byte("data-")) ||
		string(typ) == "dynamic-tool"
}

var pathInvocationID = []keyCode{keyToolInvocation, keyToolCallIDCamel}

// parseUIPart reads one part of a UIMessage or of Mastra's content: a tool part of
// AI SDK 5+ (type "tool-<name>" or "dynamic-tool"), an AI SDK 4 / Mastra
// "tool-invocation" part, or (bare) an element of a toolInvocations array. It returns
// false for a part type tmend does not know.
func parseUIPart(p *part, o obj, bare bool) bool {
	if bare {
		invocationShape(p, o, pathToolCallIDCamel)
		return true
	}
	typ := wordOf(o.get(keyType))
	switch {
	case string(typ) == "tool-invocation":
		inv := o.sub(keyToolInvocation)
		if inv.raw == nil {
			p.kind = partCall
			p.malformed = malNoInvocation
			return true
		}
		invocationShape(p, inv, pathInvocationID)
		if isTrue(o.get(keyProviderExecuted)) { // Mastra keeps it beside the invocation
			o.ps.markProviderRun(p)
		}
		return true
	case string(typ) == "dynamic-tool", bytes.HasPrefix(typ, []byte("tool-")):
		toolPartShape(p, o, typ)
		return true
	}
	return knownUIPart(typ)
}

// toolPartShape reads an AI SDK 5+ tool part: {type, toolCallId, state, input, output |
// errorText, providerExecuted?, approval?}.
func toolPartShape(p *part, o obj, typ []byte) {
	p.kind = partCall
	p.idPath = pathOf(pathToolCallIDCamel)
	readCallID(p, o, keyToolCallIDCamel)
	if string(typ) == "dynamic-tool" {
		name, _ := inputString(o.get(keyToolName))
		p.setName(name)
	} else {
		p.setName(string(typ[len("tool-"):]))
	}
	if isTrue(o.get(keyProviderExecuted)) {
		o.ps.markProviderRun(p)
	}
	inPlaceState(p, o, keyInput)
}

// invocationShape reads an AI SDK 4 / Mastra tool invocation: {state, toolCallId,
// toolName, args, result?}. idPath leads from the part to its toolCallId.
func invocationShape(p *part, inv obj, idPath []keyCode) {
	p.kind = partCall
	p.idPath = pathOf(idPath)
	readCallID(p, inv, keyToolCallIDCamel)
	name, _ := inputString(inv.get(keyToolName))
	p.setName(name)
	inPlaceState(p, inv, keyArgs)
}

func readCallID(p *part, o obj, key keyCode) {
	v, ok := o.lookup(key)
	if !ok || string(v) == "null" {
		return
	}
	o.ps.setID(p, v)
	p.hasID = true
	if v[0] != '"' {
		o.ps.doubtful("a tool part's toolCallId is a JSON " + kindOf(v[0]) + ", not a string")
	}
}

// inPlaceState sets what a tool part's state and members say: answered, open, a
// streaming leftover, or malformed.
func inPlaceState(p *part, o obj, argsKey keyCode) {
	state, ok := toolStates[string(wordOf(o.get(keyState)))]
	switch {
	case !ok:
		o.ps.doubtful(fmt.Sprintf("a tool part's state %s is not one tmend knows", o.get(keyState)))
	case state == stateStreaming:
		p.set(partStreaming, true)
		p.malformed = streamingLeftover[string(wordOf(o.get(keyState)))]
	case isBlank(o.ps.id(p)):
		p.malformed = malNoID
	case isBlank(p.name()):
		p.malformed = malNoName
	case !o.has(argsKey) && !(state == stateAnswered && o.has(keyRawInput)):
		// (ai 5+ keeps input it could not parse as rawInput on an output-error part.)
		p.malformed = malNoArgs
	}
	p.set(partAnswered, state == stateAnswered)
	p.set(partAwaiting, isString(o.get(keyState), "approval-requested"))
	p.set(partSynthetic, p.is(partAnswered) && (isSyntheticText(o.get(keyErrorText), nil) || isSyntheticText(o.get(keyResult), nil) ||
		isSyntheticText(o.get(keyApproval), nil)))
}

// answerInPlace returns a tool part whose call got no result with tmend's error as its
// result, its input kept: state output-error with errorText (AI SDK 5+), or state result
// with the text as result (AI SDK 4 and Mastra, which have no error state). A call whose
// approval was asked for and not given (never answered, or refused) is denied instead
// (state output-denied, its approval {approved: false, reason}): the SDK accepts an error
// only after an approval.
func answerInPlace(raw []byte) []byte {
	ms, err := membersOf(raw)
	if err != nil {
		return raw
	}
	if m, ok := findCode(ms, keyToolInvocation); ok {
		return setMember(raw, m, answerInPlace(m.val(raw)))
	}
	if _, ok := findCode(ms, keyType); ok { // an AI SDK 5+ part
		if ap, ok := findMember(raw, ms, "approval"); ok && ap.val(raw)[0] == '{' && !isTrue(approvedOf(ap.val(raw))) {
			approval := setOrAddMember(ap.val(raw), "approved", []byte("false"))
			raw = setMember(raw, ap, setOrAddMember(approval, "reason", jsonString(SyntheticResultText)))
			return setOrAddMember(raw, "state", jsonString("output-denied"))
		}
		raw = setOrAddMember(raw, "state", jsonString("output-error"))
		return setOrAddMember(raw, "errorText", jsonString(SyntheticResultText))
	}
	raw = setOrAddMember(raw, "state", jsonString("result"))
	return setOrAddMember(raw, "result", jsonString(SyntheticResultText))
}

// sameMembers reports whether objects a and b have the same members with the same values
// (as written), in whatever order.
func sameMembers(a, b []byte) bool {
	ams, err1 := membersOf(a)
	bms, err2 := membersOf(b)
	if err1 != nil || err2 != nil || len(ams) != len(bms) {
		return false
	}
	for _, am := range ams {
		bm, ok := findMember(b, bms, am.name(a))
		if !ok || !bytes.Equal(am.val(a), bm.val(b)) {
			return false
		}
	}
	return true
}

// approvedOf is an approval object's approved member, or nil.
func approvedOf(approval []byte) []byte {
	ms, err := membersOf(approval)
	if err != nil {
		return nil
	}
	m, ok := findMember(approval, ms, "approved")
	if !ok {
		return nil
	}
	return m.val(approval)
}

// decideInPlace is decide for in-place dialects.
func (p *plan) decideInPlace() {
	p.prepareEdits()
	calls, _, _ := p.countParts()
	p.byKey.reset(calls)
	// The last message, when it is the model's: its calls may still be running (within
	// the quiet period), or wait for a person's approval (however old the session is).
	last := -1
	if n := len(p.msgs); n > 0 && p.msgs[n-1].kind == msgAssistant {
		last = n - 1
	}
	running := last >= 0 && p.quiet()
	for i := range p.msgs {
		if p.overMemory() {
			return // refused (checkReport): no need to go on
		}
		m := &p.msgs[i]
		parts := m.parts()
		for pi := range parts {
			pt := &parts[pi]
			if pt.kind != partCall {
				continue
			}
			if i == last && running && pt.is(partStreaming) {
				continue // still streaming
			}
			if pt.malformed != wellFormed {
				p.removePart(i, pi, StageStripMalformedCalls)
				p.act(StageStripMalformedCalls, ActionDrop, i, pt, pt.malformed.String())
				p.issue(IssueMalformedCall, i, pt, pt.malformed.String())
				continue
			}
			ci := int32(len(p.calls))
			p.calls = append(p.calls, callRef{msg: int32(i), part: int32(pi), kept: -1})
			k, slot, seen := p.byKey.find(p.callKey(ci), p.callKey)
			if !seen {
				p.byKey.set(slot, ci)
				continue
			}
			first := &p.calls[k]
			if !samePart(p.part(first.msg, first.part), pt) {
				p.calls[ci].renew = true // another call reusing the id
				continue
			}
			// A part repeating an earlier part's call (a message stored twice by a
			// retry): one stays, the one with the real result, else the earlier one.
			drop := &p.calls[ci]
			if fp := p.part(first.msg, first.part); pt.is(partAnswered) && !pt.is(partSynthetic) && (!fp.is(partAnswered) || fp.is(partSynthetic)) {
				drop = first
				p.byKey.set(slot, ci)
			}
			drop.removed = true
			dp := p.part(drop.msg, drop.part)
			p.removePart(int(drop.msg), int(drop.part), StageDropDuplicateResults)
			p.act(StageDropDuplicateResults, ActionDrop, int(drop.msg), dp, "part repeating the call of another part")
			p.issue(IssueDuplicateCallID, int(drop.msg), dp, "")
		}
	}
	p.renumberInPlace()
	for ci := range p.calls {
		c := &p.calls[ci]
		pt := p.part(c.msg, c.part)
		switch {
		case c.removed || pt.is(partAnswered):
		case int(c.msg) == last && (running || pt.is(partAwaiting) && !p.opts.Force):
			p.report.PendingCalls++
		case pt.is(partProviderRun):
			// The provider ran it and its result was lost; tmend cannot answer for the
			// provider's own tool.
			c.removed = true
			p.removePart(int(c.msg), int(c.part), StageSynthesizeMissingResults)
			p.act(StageSynthesizeMissingResults, ActionDrop, int(c.msg), pt, "provider-executed call without its result cannot be answered; call removed")
			p.issue(IssueCallWithoutResult, int(c.msg), pt, "")
		default:
			pt.setRaw(answerInPlace(pt.raw()))
			p.edits[c.msg].dirty = true
			p.act(StageSynthesizeMissingResults, ActionRewrite, int(c.msg), pt, "answered in place with a synthetic error result")
			p.issue(IssueCallWithoutResult, int(c.msg), pt, "")
		}
	}
	p.dropDanglingReasoningParts(last, running)
	p.dropBareMarkers()
}

// dropDanglingReasoningParts follows the Responses rule (dropDanglingReasoning) in an
// assistant message: a reasoning part with an OpenAI item id and no text, file or tool
// part after it in the message (a stream stopped right after the reasoning) goes, as the
// SDK would send it as a reasoning item followed by the user's next message. One followed
// by another assistant message that stays is left, as a reasoning item followed by a
// model item is; the last message's, while the session is within its quiet period, may
// still stream.
func (p *plan) dropDanglingReasoningParts(last int, running bool) {
	acts, issues := len(p.report.Actions), len(p.report.Issues)
	nextAssistant := false // the next message that stays is the assistant's
	for i := len(p.msgs) - 1; i >= 0; i-- {
		m := &p.msgs[i]
		if m.kind == msgAssistant && !nextAssistant && !(i == last && running) {
			p.dropTrailingReasoning(i)
		}
		if p.keepsContent(i) {
			nextAssistant = m.kind == msgAssistant
		}
	}
	// Found from the end: reported from the start.
	slices.Reverse(p.report.Actions[acts:])
	slices.Reverse(p.report.Issues[issues:])
}

// dropTrailingReasoning removes the Responses reasoning parts of message i that no text,
// file or tool part follows.
func (p *plan) dropTrailingReasoning(i int) {
	m, removed := &p.msgs[i], p.removedOf(i)
	for pi := len(m.parts()) - 1; pi >= 0; pi-- {
		if removed[pi] {
			continue
		}
		raw := m.parts()[pi].raw()
		if m.parts()[pi].kind == partCall || p.modelContentPart(raw) {
			return
		}
		if !responsesReasoningPart(raw) {
			continue
		}
		p.removePart(i, pi, StageDropDanglingReasoning)
		p.report.Actions = append(p.report.Actions, Action{Stage: StageDropDanglingReasoning, Action: ActionDrop,
			MessageIndex: i, Detail: "reasoning part with no text or tool part after it"})
		p.report.Issues = append(p.report.Issues, Issue{Code: IssueDanglingReasoning, MessageIndex: i})
	}
}

// keepsContent reports whether in-place message i keeps something besides step-start
// parts (dropBareMarkers removes a message left with those only).
func (p *plan) keepsContent(i int) bool {
	if p.edits[i].drop {
		return false
	}
	if p.msgs[i].otherContent {
		return true
	}
	for pi, removed := range p.removedOf(i) {
		if !removed && !p.isStepStart(p.msgs[i].parts()[pi].raw()) {
			return true
		}
	}
	return false
}

// modelContentPart reports a text or file part: the SDK sends it as the model's output.
func (p *plan) modelContentPart(raw []byte) bool {
	t := p.partType(raw)
	return isString(t, "text") || isString(t, "file")
}

// partType is the type member of part raw (nil without one, or when raw does not read),
// found in members read into the plan's own space: every assistant message's parts are
// read here, and a new slice for each was most of the pass's cost.
func (p *plan) partType(raw []byte) []byte {
	p.partMs = p.partMs[:0]
	ms, err := members(raw, &p.partMs)
	if err != nil {
		return nil
	}
	t, ok := findCode(ms, keyType)
	if !ok {
		return nil
	}
	return t.val(raw)
}

// responsesReasoningPart reports a reasoning part from OpenAI's Responses API: its
// providerMetadata.openai.itemId names the reasoning item the SDK sends back.
func responsesReasoningPart(raw []byte) bool {
	ms, err := membersOf(raw)
	if err != nil {
		return false
	}
	t, ok := findCode(ms, keyType)
	if !ok || !isString(t.val(raw), "reasoning") {
		return false
	}
	v := raw
	for _, key := range []string{"providerMetadata", "openai", "itemId"} {
		vms, err := membersOf(v)
		if err != nil {
			return false
		}
		m, ok := findMember(v, vms, key)
		if !ok {
			return false
		}
		v = m.val(v)
	}
	return len(v) > 0 && v[0] == '"'
}

// samePart reports whether two tool parts are one call stored twice (by a retry, or
// once open and once answered): the same tool and the same input, as written.
func samePart(a, b *part) bool {
	return a.name() == b.name() && bytes.Equal(callInput(a.raw()), callInput(b.raw()))
}

// callInput is a tool part's input (ai 5+) or args (ai 4, Mastra).
func callInput(raw []byte) []byte {
	ms, err := membersOf(raw)
	if err != nil {
		return nil
	}
	if m, ok := findCode(ms, keyToolInvocation); ok {
		return callInput(m.val(raw))
	}
	for _, k := range []keyCode{keyInput, keyArgs} {
		if m, ok := findCode(ms, k); ok {
			return m.val(raw)
		}
	}
	return nil
}

// renumberInPlace gives each call that reuses an earlier call's id for another call
// (renew) a new id, as uniqueIDs does for other dialects.
func (p *plan) renumberInPlace() {
	var used map[string]bool
	for ci := range p.calls {
		if p.calls[ci].renew {
			used = p.renewCallID(&p.calls[ci], used)
		}
	}
}

// dropBareMarkers removes the step-start parts of a message that lost its other parts,
// so that the message goes rather than stay as an empty step.
func (p *plan) dropBareMarkers() {
	for i := range p.msgs {
		m, e, removed := &p.msgs[i], &p.edits[i], p.removedOf(i)
		if !e.dirty || m.otherContent {
			continue
		}
		bare := true
		parts := m.parts()
		for pi := range parts {
			if !removed[pi] && !p.isStepStart(parts[pi].raw()) {
				bare = false
				break
			}
		}
		if !bare {
			continue
		}
		for pi := range m.parts() {
			if !removed[pi] {
				removed[pi] = true
				p.report.Actions = append(p.report.Actions, Action{Stage: e.stage.stage(), Action: ActionDrop, MessageIndex: i,
					Detail: "step-start part of a message left with nothing else"})
			}
		}
	}
}

func (p *plan) isStepStart(raw []byte) bool { return isString(p.partType(raw), "step-start") }

// rebuildInPlace writes message i's parts member kept (where the dialect keeps it, in
// the message or in its content object) and the toolInvocations array that mirrors
// its tool-invocation parts, if it has one.
func (p *plan) rebuildInPlace(i int, kept [][]byte) []byte {
	m := &p.msgs[i]
	if m.partsIn == keyOther {
		return withParts(m.raw(), m.ms(), m.partsKey, kept)
	}
	mb, _ := findCode(m.ms(), m.partsIn)
	holder := mb.val(m.raw())
	hms, _ := membersOf(holder)
	return setMember(m.raw(), mb, withParts(holder, hms, m.partsKey, kept))
}

// withParts returns obj (with members ms) with its member partsKey set to parts, and its
// toolInvocations mirror, when parts are tool-invocation parts beside it, set to their
// invocations in AI SDK 4's states (as Mastra derives it: see mirrorsParts).
func withParts(obj []byte, ms []member, partsKey keyCode, parts [][]byte) []byte {
	mirror, hasMirror := findCode(ms, keyToolInvocations)
	if hasMirror && partsKey != keyToolInvocations {
		var invs [][]byte
		for _, pr := range parts {
			pms, _ := membersOf(pr)
			if inv, ok := findCode(pms, keyToolInvocation); ok && aiSDK4States.has(wordOf(stateOf(inv.val(pr)))) {
				invs = append(invs, inv.val(pr))
			}
		}
		obj = setMember(obj, mirror, joinArray(invs))
		ms, _ = membersOf(obj)
	}
	pm, _ := findCode(ms, partsKey)
	return setMember(obj, pm, joinArray(parts))
}

// parseInPlaceParts reads the parts of message m from blks, the elements of the member
// partsKey of holder (the message, or its content object when in is keyContent), and
// checks that a toolInvocations array beside them mirrors their tool invocations exactly.
func parseInPlaceParts(m *message, ps *parser, in, partsKey keyCode, blks []block, holder obj) {
	m.partsIn, m.partsKey = in, partsKey
	bare := partsKey == keyToolInvocations
	start := len(ps.parts)
	var invs [][]byte // the tool-invocation parts' invocations, which a mirror repeats
	for _, blk := range blks {
		ps.parts = append(ps.parts, rawPart(blk.raw()))
		pt := &ps.parts[len(ps.parts)-1]
		if blk.ms == nil {
			m.known = false // a part that is not an object
			continue
		}
		mark := len(ps.scratch)
		if !parseUIPart(pt, obj{blk.raw(), blk.members(), ps}, bare) {
			m.known = false
		}
		ps.scratch = ps.scratch[:mark]
		if inv, ok := findCode(blk.members(), keyToolInvocation); ok && !bare {
			invs = append(invs, inv.val(blk.raw()))
		}
	}
	m.setParts(ps.parts[start:len(ps.parts):len(ps.parts)])
	if bare || !holder.has(keyToolInvocations) {
		return
	}
	// AI SDK 4 kept each invocation twice, the same object in both places (its members
	// in any order: Mastra writes them so); a copy that says something else (another
	// state, a result the part lacks) cannot be kept in step.
	if !mirrorsParts(invs, holder.get(keyToolInvocations)) {
		ps.doubtful("the toolInvocations array does not repeat the message's tool-invocation parts exactly")
	}
}

// mirrorsParts reports whether the toolInvocations array mirror repeats invs, the
// tool-invocation parts' invocations, in order. An invocation in a state AI SDK 4 lacks
// (output-error, output-denied, approval-*: Mastra writes ai 5's states in its parts) may
// be missing from the mirror, or be there as it was before it got that state (state call
// or partial-call, no other member changed): Mastra derives the mirror with only ai 4's
// states, and keeps a tool that threw as its earlier call. Mastra reads the parts (its
// prompt skips a mirror entry whose call is in a part; its ai 4 view keeps only results),
// so such a mirror says nothing the parts do not.
func mirrorsParts(invs [][]byte, mirror []byte) bool {
	var elems [][]byte
	eachElement(mirror, func(e []byte) bool {
		elems = append(elems, e)
		return true
	})
	j := 0
	for _, inv := range invs {
		switch {
		case j < len(elems) && (sameMembers(inv, elems[j]) || staleCopy(inv, elems[j])):
			j++
		case aiSDK4States.has(wordOf(stateOf(inv))):
			return false // an AI SDK 4 invocation the mirror lacks or tells otherwise
		}
	}
	return j == len(elems)
}

// aiSDK4States are the states of an AI SDK 4 tool invocation.
var aiSDK4States = words("partial-call", "call", "result")

// staleCopy reports whether mirror entry e is invocation inv as it was before it got a
// state AI SDK 4 lacks: state call or partial-call, every other member of e as in inv.
func staleCopy(inv, e []byte) bool {
	if aiSDK4States.has(wordOf(stateOf(inv))) || !isString(stateOf(e), "call") && !isString(stateOf(e), "partial-call") {
		return false
	}
	ims, err1 := membersOf(inv)
	ems, err2 := membersOf(e)
	if err1 != nil || err2 != nil {
		return false
	}
	for _, em := range ems {
		if em.name(e) == "state" {
			continue
		}
		im, ok := findMember(inv, ims, em.name(e))
		if !ok || !bytes.Equal(im.val(inv), em.val(e)) {
			return false
		}
	}
	return true
}

// stateOf is an invocation's state member, or nil.
func stateOf(inv []byte) []byte {
	ms, err := membersOf(inv)
	if err != nil {
		return nil
	}
	m, ok := findCode(ms, keyState)
	if !ok {
		return nil
	}
	return m.val(inv)
}
