package repair

import (
	"crypto/sha256"
	"fmt"
	"math/big"
	"strings"
	"unicode/utf8"
)

// Target is a provider whose call-id rules a repair enforces (stage rewrite_call_ids).
type Target string

// The targets.
const (
	TargetAnthropic       Target = "anthropic"
	TargetOpenAI          Target = "openai"
	TargetOpenAIResponses Target = "openai-responses"
	TargetGemini          Target = "gemini"
	TargetBedrock         Target = "bedrock"
	TargetMistral         Target = "mistral"
)

// Targets lists every target.
func Targets() []Target {
	return []Target{TargetAnthropic, TargetOpenAI, TargetOpenAIResponses, TargetGemini, TargetBedrock, TargetMistral}
}

// ParseTarget accepts a target name as printed by Targets.
func ParseTarget(s string) (Target, error) {
	for _, t := range Targets() {
		if string(t) == s {
			return t, nil
		}
	}
	var names []string
	for _, t := range Targets() {
		names = append(names, string(t))
	}
	return "", fmt.Errorf("unknown target %q (want one of %s)", s, strings.Join(names, ", "))
}

type idRule struct {
	maxLen    int
	exactLen  int
	allowed   func(r byte) bool // nil: any character
	mustMatch string            // human-readable rule for details
}

func alnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }

func alnumDash(c byte) bool { return alnum(c) || c == '_' || c == '-' }

var idRules = map[Target]idRule{
	TargetAnthropic:       {maxLen: 64, allowed: alnumDash, mustMatch: "^[a-zA-Z0-9_-]{1,64}$"},
	TargetBedrock:         {maxLen: 64, allowed: alnumDash, mustMatch: "^[a-zA-Z0-9_-]{1,64}$"},
	TargetOpenAI:          {maxLen: 40, mustMatch: "at most 40 characters"},
	TargetOpenAIResponses: {maxLen: 64, mustMatch: "at most 64 characters"},
	TargetMistral:         {exactLen: 9, allowed: alnum, mustMatch: "exactly 9 characters a-z, A-Z, 0-9"},
	TargetGemini:          {maxLen: 512, mustMatch: "at most 512 characters"}, // ids are optional and free-form
}

func (r idRule) valid(id string) bool {
	if id == "" || r.maxLen > 0 && len(id) > r.maxLen || r.exactLen > 0 && len(id) != r.exactLen {
		return false
	}
	if r.allowed != nil {
		for i := 0; i < len(id); i++ {
			if !r.allowed(id[i]) {
				return false
			}
		}
	}
	return true
}

// ruleLike is the strictest rule that old already meets, for ids derived from it: a
// 9-character alphanumeric id stays one (Mistral), an id of [a-zA-Z0-9_-] keeps to them
// (Anthropic, Bedrock), and none grows past 40 characters (OpenAI) or its own length.
func ruleLike(old string) idRule {
	r := idRule{maxLen: max(len(old), 40), allowed: alnumDash}
	for i := 0; i < len(old); i++ {
		if !alnumDash(old[i]) {
			r.allowed = nil
		}
	}
	if r.allowed != nil && len(old) == 9 && !strings.ContainsAny(old, "_-") {
		return idRules[TargetMistral]
	}
	return r
}

// freshID derives from old an id the rule accepts and used does not hold, and adds it
// to used.
func (r idRule) freshID(old string, used map[string]bool) string {
	id := old
	for attempt := 0; id == old || used[id]; attempt++ {
		id = r.newID(old, attempt)
	}
	used[id] = true
	return id
}

// newID derives a valid id from old: the old id with bad characters replaced and, when it
// is too long or already taken, a hash suffix; Mistral gets a 9-character hash. attempt
// varies the hash to get past collisions. Derived ids depend only on old and attempt.
func (r idRule) newID(old string, attempt int) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s\x00%d", old, attempt)))
	hash := new(big.Int).SetBytes(sum[:]).Text(62)
	if r.exactLen > 0 {
		return hash[:r.exactLen]
	}
	var b strings.Builder
	for i := 0; i < len(old); i++ {
		if r.allowed == nil || r.allowed(old[i]) {
			b.WriteByte(old[i])
		} else {
			b.WriteByte('_')
		}
	}
	id := b.String()
	max := r.maxLen
	if id != "" && attempt == 0 && len(id) <= max {
		return id
	}
	const suffix = 9 // "_" + 8 hash characters
	if n := max - suffix; len(id) > n {
		for n > 0 && !utf8.RuneStart(id[n]) {
			n-- // cut between characters, not inside one
		}
		id = id[:n]
	}
	return strings.TrimRight(id, "_") + "_" + hash[:8]
}

// retarget rewrites the ids the target rejects, in each kept call and the result it
// keeps, so that pairs stay pairs and no two calls share an id.
func (p *plan) retarget() {
	if p.opts.Target == TargetGemini && p.spec.resultName != keyOther {
		p.fillResultNames()
	}
	if p.opts.Target == TargetOpenAI && p.report.Dialect == LangChain {
		p.blankEmptyContent()
	}
	rule := idRules[p.opts.Target]
	var used map[string]bool
	for ci := range p.calls {
		c := &p.calls[ci]
		pt := p.part(c.msg, c.part)
		if c.removed || !pt.hasID || rule.valid(p.ps.id(pt)) {
			continue
		}
		if used == nil {
			used = p.usedIDs()
		}
		old := p.ps.id(pt)
		id := rule.freshID(old, used)
		p.issue(IssueInvalidCallID, int(c.msg), pt, rule.mustMatch)
		p.rewriteCallID(c, StageRewriteCallIDs, id, fmt.Sprintf("id %q rewritten to %q (%s)", old, id, rule.mustMatch))
	}
}

// takesProviderCallsAsClients reports a target whose clients send every call of an
// assistant message as a client call: the AI SDK's chat converters for OpenAI, Mistral,
// Bedrock and Gemini write each tool-call part, providerExecuted or not, as a function
// call (tool_calls, toolUse, functionCall) and leave the provider's result in assistant
// content out (Mistral's throws on it), so the API finds a call without result. Its
// Responses converter leaves a provider-executed call out, and Anthropic's sends its
// own server tools as server_tool_use blocks.
func takesProviderCallsAsClients(t Target) bool {
	return t == TargetOpenAI || t == TargetMistral || t == TargetBedrock || t == TargetGemini
}

// providerRunRule is what a dialect's client makes of the parts a provider ran when it
// sends them to a target (dropProviderRuns).
type providerRunRule uint8

const (
	providerRunsTaken providerRunRule = iota // the target takes them (or never receives them)
	// providerCallsAsClients: each call goes out as a client call (takesProviderCallsAsClients).
	providerCallsAsClients
	// providerBlocksAsContent: every call and result goes out as content the target
	// rejects, and so does the provider's encrypted reasoning (langChainProviderRuns).
	providerBlocksAsContent
)

// providerRunsTo is the rule of p's dialect for its target.
func (p *plan) providerRunsTo() providerRunRule {
	switch {
	case !p.ps.providerRuns && !p.ps.redacted || p.opts.Target == "":
		return providerRunsTaken
	case p.spec.providerRuns != nil:
		return p.spec.providerRuns(p.opts.Target)
	case takesProviderCallsAsClients(p.opts.Target):
		return providerCallsAsClients
	}
	return providerRunsTaken
}

// dropProviderRuns removes, under rule providerCallsAsClients, each call a provider ran
// itself that no tool message answers, with the provider's results for it: the target
// would receive it as its client's call, left without a result. A call Gemini ran (its
// serverToolCallId kept) goes back to Gemini as its own. Under providerBlocksAsContent
// every part a provider ran goes, and every redacted_thinking block (dropRedacted).
// Their bytes stay in the saved version.
func (p *plan) dropProviderRuns(rule providerRunRule) {
	var answered, dropped map[string]bool
	for i := range p.msgs {
		if p.msgs[i].kind == msgAssistant {
			continue
		}
		parts := p.msgs[i].parts()
		for pi := range parts {
			if pt := &parts[pi]; pt.is(partProviderRun) && pt.kind != partCall {
				if answered == nil {
					answered = map[string]bool{}
				}
				answered[p.ps.id(pt)] = true
			}
		}
	}
	// dropCall removes part pi of message i, a call, for issue code; detail names the target.
	dropCall := func(i, pi int, code IssueCode, detail string) {
		pt := &p.msgs[i].parts()[pi]
		if dropped == nil {
			dropped = map[string]bool{}
		}
		dropped[p.ps.id(pt)] = true
		p.removePart(i, pi, StageDropProviderCalls)
		p.issue(code, i, pt, "")
		p.act(StageDropProviderCalls, ActionDrop, i, pt, fmt.Sprintf(detail, p.opts.Target))
	}
	for i := range p.msgs {
		m := &p.msgs[i]
		for pi := range m.parts() {
			pt := &m.parts()[pi]
			if !pt.is(partProviderRun) || p.removedOf(i)[pi] || m.kind != msgAssistant {
				continue
			}
			id := p.ps.id(pt)
			switch {
			case rule == providerBlocksAsContent && dropped[id]:
				p.removePart(i, pi, StageDropProviderCalls)
				p.act(StageDropProviderCalls, ActionDrop, i, pt, "the provider's result of a call removed with it")
			case rule == providerBlocksAsContent:
				dropCall(i, pi, IssueProviderBlock, "block of a tool the provider ran itself, which %s would receive as content it rejects; removed")
			case pt.kind == partCall || isString(valueAt(pt.raw(), []keyCode{keyType}), "tool-call"):
				if answered[id] || p.opts.Target == TargetGemini && geminiServerCall(pt.raw()) {
					continue
				}
				dropCall(i, pi, IssueProviderCall, "call the provider ran itself, which %s would take for a client call without result; removed")
			case dropped[id]:
				p.removePart(i, pi, StageDropProviderCalls)
				p.act(StageDropProviderCalls, ActionDrop, i, pt, "the provider's result of a call removed with it")
			}
		}
	}
	if len(dropped) > 0 {
		p.dropApprovalsOf(dropped)
	}
	for ci := range p.calls { // in-place dialects: the call parts removed here
		c := &p.calls[ci]
		c.removed = c.removed || p.part(c.msg, c.part).is(partProviderRun) && p.removedOf(int(c.msg))[c.part]
	}
	if rule == providerBlocksAsContent && p.ps.redacted {
		p.dropRedacted()
	}
}

// dropRedacted removes each redacted_thinking block of an AI message (lcContentParts):
// reasoning Anthropic encrypted for itself, which no other provider can read and the
// target's client sends on as content the target rejects. A message left with nothing
// goes.
func (p *plan) dropRedacted() {
	for i := range p.msgs {
		m := &p.msgs[i]
		if m.kind != msgAssistant {
			continue
		}
		parts := m.parts()
		for pi := range parts {
			pt := &parts[pi]
			if pt.kind != partOther || pt.is(partProviderRun) || p.removedOf(i)[pi] || !lcRedacted(pt.raw()) {
				continue
			}
			p.removePart(i, pi, StageDropProviderCalls)
			p.issue(IssueProviderReasoning, i, pt, "")
			p.act(StageDropProviderCalls, ActionDrop, i, pt, fmt.Sprintf(
				"redacted_thinking block, reasoning only its provider can read, which %s would receive as content it rejects; removed", p.opts.Target))
		}
	}
}

// blankEmptyContent writes as "" the content of each LangChain AI message that ChatOpenAI
// would send as an empty array, which OpenAI rejects ("Invalid 'messages[..].content':
// empty array", langchainjs#11416): ChatAnthropic keeps a call as a tool_use copy in
// content beside tool_calls, and ChatOpenAI (@langchain/openai 1.6, chat completions)
// leaves tool_use and thinking blocks out, so a turn that called tools without writing
// text goes out as content []. A string goes as it is, with the message's tool_calls.
// The messages edited otherwise are written so too when their content comes out so
// (rebuildLangChain); the blocks' bytes stay in the saved version.
func (p *plan) blankEmptyContent() {
	p.ps.blankContent = true
	for i := range p.msgs {
		m := &p.msgs[i]
		if m.kind != msgAssistant || p.edits[i].drop {
			continue
		}
		// A message without a call kept goes when its blocks go (dropProviderRuns), or
		// keeps text.
		parts, removed := m.parts(), p.removedOf(i)
		kept := -1
		for pi := range parts {
			if parts[pi].kind == partCall && !removed[pi] {
				kept = pi
				break
			}
		}
		if kept < 0 {
			continue
		}
		var v lcView
		lcRead(m, &parser{}, &v)
		if !lcEmptyForOpenAI(v.inner) {
			continue
		}
		pt := &parts[kept]
		p.edits[i].dirty = true
		p.edits[i].stage = stageCodeOf(StageDropProviderCalls)
		p.issue(IssueEmptyContent, i, pt, "")
		p.act(StageDropProviderCalls, ActionRewrite, i, pt, fmt.Sprintf(
			"content of only tool_use and thinking blocks, which %s would receive as an empty array; written as \"\", the tool_calls kept", p.opts.Target))
	}
}

// dropApprovalsOf removes the AI SDK approval requests and responses that name a call
// dropped here, which nothing could answer any more: generateText and streamText, resuming
// from a last tool message of approval responses (collectToolApprovals), throw
// ToolCallNotFoundForApprovalError for one whose request names no call, and a message
// left holding only such parts reaches Gemini and Converse with no parts ("contents.parts
// must not be empty"): convertToLanguageModelPrompt leaves requests out, and the target's
// converter skips the providerExecuted responses it passes on.
func (p *plan) dropApprovalsOf(dropped map[string]bool) {
	gone := map[string]bool{} // approval ids of requests that name a dropped call
	for i := range p.msgs {
		parts := p.msgs[i].parts()
		for pi := range parts {
			if pt := &parts[pi]; pt.kind == partRef && p.msgs[i].kind == msgAssistant {
				if approval, call := approvalIDs(pt.raw()); approval != "" && dropped[call] {
					gone[approval] = true
				}
			}
		}
	}
	for i := range p.msgs {
		parts := p.msgs[i].parts()
		for pi := range parts {
			pt := &parts[pi]
			if pt.kind != partRef {
				continue
			}
			if approval, _ := approvalIDs(pt.raw()); !gone[approval] {
				continue
			}
			p.removePart(i, pi, StageDropProviderCalls)
			p.act(StageDropProviderCalls, ActionDrop, i, pt, "approval part of a call removed with it")
		}
	}
}

// approvalIDs returns the approvalId and toolCallId of an AI SDK approval part.
func approvalIDs(raw []byte) (approval, call string) {
	ms, err := membersOf(raw)
	if err != nil {
		return "", ""
	}
	if m, ok := findMember(raw, ms, "approvalId"); ok {
		approval, _ = idString(m.val(raw))
	}
	if m, ok := findCode(ms, keyToolCallIDCamel); ok {
		call, _ = idString(m.val(raw))
	}
	return approval, call
}

// geminiServerCall reports a tool part of a call Gemini ran itself, which @ai-sdk/google
// sends back as Gemini's toolCall: its provider options (a UIMessage's
// callProviderMetadata, which convertToModelMessages turns into them; a part's
// providerMetadata, as a stream stores it, is read alike) hold a
// serverToolCallId and a serverToolType under the provider's namespace, the first
// present of google, googleVertex and vertex. Keys are compared decoded: a name spelled
// with escapes is the same key to JSON.parse.
func geminiServerCall(raw []byte) bool {
	ms, err := membersOf(raw)
	if err != nil {
		return false
	}
	for _, key := range []string{"providerOptions", "callProviderMetadata", "providerMetadata"} {
		m, ok := findMember(raw, ms, key)
		if !ok {
			continue
		}
		opts := m.val(raw)
		oms, err := membersOf(opts)
		if err != nil {
			continue
		}
		for _, ns := range []string{"google", "googleVertex", "vertex"} {
			n, ok := findMember(opts, oms, ns)
			if !ok || string(n.val(opts)) == "null" {
				continue
			}
			g := n.val(opts)
			gms, err := membersOf(g)
			if err != nil {
				break
			}
			id, okID := findMember(g, gms, "serverToolCallId")
			typ, okType := findMember(g, gms, "serverToolType")
			if okID && okType && string(id.val(g)) != "null" && string(typ.val(g)) != "null" {
				return true
			}
			break
		}
	}
	return false
}

// fillResultNames gives each kept result that names no tool its call's name: a Gemini
// functionResponse must carry one, and the dialect's converters take it from the result.
func (p *plan) fillResultNames() {
	for ci := range p.calls {
		c := &p.calls[ci]
		if c.removed || c.kept < 0 {
			continue
		}
		r, rp, cp := &p.results[c.kept], p.resPart(int(c.kept)), p.part(c.msg, c.part)
		if !isBlank(rp.name()) || isBlank(cp.name()) {
			continue
		}
		p.issue(IssueMissingToolName, int(r.msg), rp, "")
		rp.setRaw(setOrAddMember(rp.raw(), keyNames[p.spec.resultName], jsonString(cp.name())))
		rp.setName(cp.name())
		p.edits[r.msg].dirty = true
		p.act(StageRewriteCallIDs, ActionRewrite, int(r.msg), rp, "tool name filled in from its call (Gemini needs it)")
	}
}

// valueAt returns the value at path in obj, or nil when there is none.
func valueAt(obj []byte, path []keyCode) []byte {
	ms, err := membersOf(obj)
	if err != nil {
		return nil
	}
	m, ok := findCode(ms, path[0])
	if !ok {
		return nil
	}
	v := m.val(obj)
	if len(path) == 1 {
		return v
	}
	if len(v) == 0 || v[0] != '{' {
		return nil
	}
	return valueAt(v, path[1:])
}

// setPath returns obj with the value at path (nested object keys) replaced by val. A
// path that does not exist leaves obj as it is.
func setPath(obj []byte, path []keyCode, val []byte) []byte {
	ms, err := membersOf(obj)
	if err != nil {
		return obj
	}
	m, ok := findCode(ms, path[0])
	if !ok {
		return obj
	}
	if len(path) == 1 {
		return setMember(obj, m, val)
	}
	sub := m.val(obj)
	if len(sub) == 0 || sub[0] != '{' {
		return obj
	}
	return setMember(obj, m, setPath(sub, path[1:], val))
}
