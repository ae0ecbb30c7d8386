package repair

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// Dialect names a transcript shape: where tool calls and tool results live. Each dialect
// is one file, dialect_<name>.go, holding its constant, its spec and its synthetic-result
// shape, and one line in registry.
type Dialect string

// registry lists every dialect's spec in detection order: a message shape of an earlier
// dialect wins over a later one's. It is set in init because the parsers consult it.
var registry []*spec

func init() {
	registry = []*spec{geminiSpec, aiSDKUISpec, mastraSpec, openClawSpec, openAIChatSpec, responsesSpec, langChainSpec,
		bedrockSpec, anthropicSpec, aiSDKModelSpec}
	for k, s := range registry {
		if s == langChainSpec {
			langChainIndex = k
		}
	}
}

// langChainIndex is LangChain's place in the registry.
var langChainIndex int

// Dialects lists every dialect in a stable order.
func Dialects() []Dialect {
	out := make([]Dialect, len(registry))
	for i, s := range registry {
		out[i] = s.name
	}
	return out
}

// ParseDialect accepts a dialect name as printed by Dialects.
func ParseDialect(s string) (Dialect, error) {
	if sp := specOf(Dialect(s)); sp != nil {
		return sp.name, nil
	}
	var names []string
	for _, d := range Dialects() {
		names = append(names, string(d))
	}
	return "", fmt.Errorf("unknown dialect %q (want one of %s)", s, strings.Join(names, ", "))
}

// EnvelopeKey is the member a dialect's transcript goes under in an envelope object or a
// JSON Lines record: "messages", "input" (OpenAI Responses) or "contents" (Gemini).
func (d Dialect) EnvelopeKey() string {
	if sp := specOf(d); sp != nil && sp.envelope != "" {
		return sp.envelope
	}
	return "messages"
}

// InPlace reports a dialect that keeps a call and its result in one part (see
// inplace.go): its outline shows such a part as a call.
func (d Dialect) InPlace() bool {
	sp := specOf(d)
	return sp != nil && sp.inPlace
}

func specOf(d Dialect) *spec {
	for _, s := range registry {
		if s.name == d {
			return s
		}
	}
	return nil
}

// spec is what the engine needs to know about a dialect.
type spec struct {
	name     Dialect
	envelope string // envelope member; "" for "messages"
	parse    func(m *message, ps *parser) error
	// messageSignal reports a message shape that only this dialect uses.
	messageSignal func(f *msgFacts) bool
	// blockSignal reports a content block shape that only this dialect uses; nil for none.
	blockSignal func(o obj, typ []byte) bool
	// block dialects put results as parts of a user message; whole dialects give each
	// result a message of its own.
	block bool
	// resultsFirst: result parts must precede other parts of their user message.
	resultsFirst bool
	// anyUserSlot: the user message right after a call turn takes the results even when it
	// holds none yet (Bedrock's strict alternation); otherwise a new message is inserted.
	anyUserSlot bool
	// inPlace dialects keep a call and its result in one part (AI SDK UIMessage, Mastra):
	// see inplace.go.
	inPlace bool
	// slotRun: the results of a turn may be in any message of the run of result messages
	// right after it (AI SDK tool messages, which the SDK joins into one); new ones go
	// into the first.
	slotRun bool
	// mergeAfterRemoval says whether two messages that a removal left adjacent must become
	// one for the provider to accept them (nil: never).
	mergeAfterRemoval func(prev, cur *outMsg, target Target) bool
	synth             func(c *part, id []byte, text string) []byte
	wrap              func(parts [][]byte) []byte
	// synthFor, when set, is used instead of synth: the synthetic result for call c of
	// message m, for a dialect whose result shape depends on the call's message (the
	// stored form of a LangChain message).
	synthFor func(m *message, c *part, id []byte, text string) []byte
	// rebuild, when set, writes a message that lost parts or whose parts changed
	// (removed is per part), instead of replacing its partsKey array: for a dialect whose
	// parts are not one array of the message, or that keeps copies of them elsewhere in
	// the message (LangChain's nested forms, invalid_tool_calls and provider mirrors).
	// ok is false when nothing of the message is left. Only non-block dialects use it.
	rebuild func(m *message, removed []bool, ids *parser) (raw []byte, ok bool)

	// mayHideResultID reports whether a result part without an id may carry one in a
	// member tmend does not read (it is then not dropped as an orphan); nil: any id-like
	// key or escape in its text may (mayHoldIDKey).
	mayHideResultID func(raw []byte, ps *parser) bool
	// resultName is the member of a result message naming its tool, which converters to
	// Gemini copy into functionResponse.name (OpenClaw's toolName); keyOther: none.
	resultName keyCode
	// follower says what a reasoning message (message.reasoning) is followed by, for
	// dropDanglingReasoning; nil: responsesFollower.
	follower func(m *message) follower
	// order returns the first message whose place the provider rejects in a way no stage
	// changes, and what is wrong and why tmend does not repair it, in one text (the
	// transcript is then refused); nil: none.
	order func(msgs []message, ps *parser) (int, string)
	// mergeAdjacent says whether two messages side by side in the input must become one
	// for the provider to accept them, where one merge is the only reading (nil: never);
	// the merge is stage merge_turns. order refuses the shapes it does not cover.
	mergeAdjacent func(prev, cur *outMsg) bool
	// argsPath is the path from a call part to its arguments, for a dialect whose
	// arguments may be stored in a JSON type the provider rejects with one reading in the
	// type it takes (partArgsRetype); nil: none.
	argsPath []keyCode
	// providerRuns is what the dialect's client makes of the parts a provider ran when it
	// sends them to a target; nil: the AI SDK's rule (takesProviderCallsAsClients).
	providerRuns func(Target) providerRunRule
}

// toolParts reports whether m holds a call or result part.
func toolParts(m *message) bool {
	parts := m.parts()
	for i := range parts {
		if k := parts[i].kind; k == partCall || k == partResult {
			return true
		}
	}
	return false
}

// wellFormedCalls reports whether m holds a call strip_malformed_calls keeps.
func wellFormedCalls(m *message) bool {
	parts := m.parts()
	for i := range parts {
		if parts[i].kind == partCall && parts[i].malformed == wellFormed {
			return true
		}
	}
	return false
}

// msgFacts are the members of a message that detection looks at, found in one pass.
type msgFacts struct {
	role, typ, content                   []byte
	hasRole, hasToolCallID, hasToolCalls bool
	hasToolInvocations                   bool
	format2                              bool // a content object of format 2 (Mastra)
	// parts is the message's parts array's blocks, when it has one (hasParts).
	parts    []block
	hasParts bool
}

type msgKind uint8

const (
	msgOther     msgKind = iota
	msgAssistant         // may hold call parts
	msgUser              // may hold result parts (block dialects)
	msgResult            // the whole message is one result
	msgCall              // the whole message is one call (Responses items)
)

type partKind uint8

const (
	partOther partKind = iota
	partCall
	partResult
	// partRef names a call without being one or answering it (an AI SDK approval request
	// or response): neither paired nor searched for unrecognised calls, never removed.
	partRef
)

// part is one tool call, tool result or other piece of a message: a content block, a
// tool_calls element, a Gemini part, or for whole-message dialects the message itself.
type part struct {
	// rawAt and nameAt with their lengths hold its bytes (raw) and its tool's name (name)
	// as a pointer and a length each, not as a slice and a string: every block has a
	// part, and a transcript of many small blocks is mostly parts (TestPartSize).
	rawAt, nameAt *byte
	rawLen        int32
	nameLen       int32
	// idAt and idLen place the id's JSON text, which synthetic results copy (parser.idText),
	// when it is a string in the input whose inner bytes are the id (parser.id) as they
	// are; else (escapes, a rewritten id, not a string) idLen is -1 and idAt the index of
	// the text in parser.idTexts and of the decoded id in parser.idStrs. idLen is 0
	// without an id. Offsets, not a slice and a string, as every part has one.
	idAt, idLen int32
	// idPath leads from raw to the id member, for rewriting it.
	idPath    keyPath
	malformed malformed // why a call can never be valid
	callType  callType
	kind      partKind
	hasID     bool
	flags     partFlags // one bit each, as every part has them
}

// partFlags are a part's rarer traits, as bits.
type partFlags uint8

const (
	// partSynthetic: a result inserted by tmend or another repairer.
	partSynthetic partFlags = 1 << iota
	// In-place dialects: the call's part holds its result too (partAnswered), or it ran
	// on the provider's side (partProviderRun).
	partAnswered
	partProviderRun
	// partAwaiting: the call waits for a person's approval (an AI SDK approval request),
	// so while nothing follows its turn it is pending however old the session is.
	partAwaiting
	// partStreaming: an in-place part whose input was still streaming (also malformed).
	partStreaming
	// partInvalid: a LangChain invalid_tool_calls entry (arguments that did not parse),
	// which some clients send as a call and others do not.
	partInvalid
	// partCanonical: a call written in another shape the platform also accepts (OpenClaw's
	// legacy snake_case blocks), whose canonical form is kept apart (parser.canonical).
	partCanonical
	// partArgsRetype: a call whose arguments (spec.argsPath) are a JSON object or array
	// where the provider takes their JSON text as a string (stringArgs), or a string
	// holding an object's JSON text where it takes the object (objectArgs).
	partArgsRetype
)

func (p part) is(f partFlags) bool { return p.flags&f != 0 }

func (p *part) set(f partFlags, on bool) {
	if on {
		p.flags |= f
	} else {
		p.flags &^= f
	}
}

// markProviderRun marks p as run on the provider's side.
func (ps *parser) markProviderRun(p *part) {
	p.set(partProviderRun, true)
	ps.providerRuns = true
}

func rawPart(raw []byte) part {
	var p part
	p.setRaw(raw)
	return p
}

func (p part) raw() []byte { return unsafe.Slice(p.rawAt, p.rawLen) }

func (p *part) setRaw(raw []byte) { p.rawAt, p.rawLen = unsafe.SliceData(raw), int32(len(raw)) }

func (p part) name() string { return unsafe.String(p.nameAt, p.nameLen) }

func (p *part) setName(name string) { p.nameAt, p.nameLen = unsafe.StringData(name), int32(len(name)) }

// malformed says why a call can never be valid, as a code: every part has one.
type malformed uint8

const (
	wellFormed malformed = iota
	malPartial
	malIncomplete
	malNoID
	malBlankID
	malNoName
	malNoArgs
	malNoFunction
	malArgsNotJSON
	malNoInvocation
	malInputStreaming
	malPartialCall
)

// malformedText is what the report says of each malformed code.
var malformedText = [...]string{
	wellFormed:        "",
	malPartial:        "streaming leftover (partial)",
	malIncomplete:     "streaming leftover (status incomplete)",
	malNoID:           "missing or blank id",
	malBlankID:        "blank id",
	malNoName:         "missing or blank name",
	malNoArgs:         "arguments missing",
	malNoFunction:     "function missing",
	malArgsNotJSON:    "arguments are a string that is not JSON",
	malNoInvocation:   "toolInvocation missing",
	malInputStreaming: "streaming leftover (state input-streaming)",
	malPartialCall:    "streaming leftover (state partial-call)",
}

func (m malformed) String() string { return malformedText[m] }

// callType is the shape of a call where its synthetic result depends on it: a Responses
// call item's type, for the matching output type, or ai 4's call.
type callType uint8

const (
	callPlain      callType = iota // every other call (and Responses function_call, local_shell_call)
	callCustomTool                 // Responses custom_tool_call
	callComputer                   // Responses computer_call
	callToolSearch                 // Codex's tool_search_call
	callAISDK4                     // written as ai 4 wrote it (args, not input)
)

// keyPath is a path of one or two member keys (every id path of every dialect), held in
// the part itself: a slice per part cost 24 bytes of each block's record.
type keyPath struct {
	codes [2]keyCode
	n     uint8
}

func pathOf(keys []keyCode) keyPath {
	switch len(keys) {
	case 1:
		return keyPath{codes: [2]keyCode{keys[0]}, n: 1}
	case 2:
		return keyPath{codes: [2]keyCode{keys[0], keys[1]}, n: 2}
	}
	panic("repair: an id path of one or two keys is needed")
}

func (p *keyPath) keys() []keyCode { return p.codes[:p.n] }

// message is one transcript element with what tmend found in it.
type message struct {
	// rawAt, msAt and partsAt with their lengths hold its bytes (raw), its members (ms)
	// and its parts (parts) as a pointer and a length each, not as slices (64 bytes, not
	// 104): a transcript of many small messages is mostly message records (TestMessageSize).
	// raw lies in the scanned input, which gives its offset there (at).
	rawAt               *byte
	msAt                *member
	partsAt             *part
	arrays              *arrayBlocks // the blocks of content, tool_calls and parts; nil: none
	rawLen, nms, nparts int32
	// knownValues[knownFrom:knownTo] (the parser's) are values inside raw that the
	// dialect recognised outside the parts array (LangChain's provider copies of its
	// calls, and calls in a nested object or in invalid_tool_calls): the search for calls
	// of unknown shapes passes over them. Indexes, not a slice: most messages have none.
	knownFrom, knownTo int32
	// fieldsAt is 1 + the index of the message's fields object in parser.fields (the
	// scanner's), or 0 when it has none.
	fieldsAt int32
	kind     msgKind
	partsKey keyCode // member holding the parts; keyOther for whole messages
	// partsIn is the object member holding the parts member (Mastra's content), or
	// keyOther when partsKey is the message's own.
	partsIn keyCode
	// otherContent: the message has content outside its parts (OpenAI chat and LangChain
	// assistant text beside tool_calls), so it survives losing every part.
	otherContent bool
	// known: the dialect's parser recognised the message's shape. A transcript with a
	// message no parser recognised is never reported clean (see plan.parse).
	known     bool
	failed    bool // the turn ended in error or was aborted
	reasoning bool // a Responses reasoning item
}

func (m *message) raw() []byte {
	return *(*[]byte)(unsafe.Pointer(&sliceHeader{unsafe.Pointer(m.rawAt), int(m.rawLen), int(m.rawLen)}))
}

func (m *message) ms() []member {
	return *(*[]member)(unsafe.Pointer(&sliceHeader{unsafe.Pointer(m.msAt), int(m.nms), int(m.nms)}))
}

func (m *message) parts() []part {
	return *(*[]part)(unsafe.Pointer(&sliceHeader{unsafe.Pointer(m.partsAt), int(m.nparts), int(m.nparts)}))
}

// sliceHeader is a slice's layout. A message's accessors make their slices with it, not
// with unsafe.Slice, whose checks (a negative length, an end past the address space),
// which a pointer and a length taken from a slice always pass, cost as much as a short
// loop over a message's members.
type sliceHeader struct {
	at       unsafe.Pointer
	len, cap int
}

func (m *message) setRaw(raw []byte) { m.rawAt, m.rawLen = unsafe.SliceData(raw), int32(len(raw)) }

func (m *message) setMembers(ms []member) { m.msAt, m.nms = unsafe.SliceData(ms), int32(len(ms)) }

// setParts points m to parts, a run of parser.parts, which never moves (plan.parse sizes
// it once), so nothing is appended to parts through m.
func (m *message) setParts(parts []part) {
	m.partsAt, m.nparts = unsafe.SliceData(parts), int32(len(parts))
}

// at is where raw starts in in, the input the message was scanned from.
func (m *message) at(in []byte) int {
	return int(uintptr(unsafe.Pointer(m.rawAt)) - uintptr(unsafe.Pointer(unsafe.SliceData(in))))
}

func (m *message) whole() bool { return m.kind == msgResult || m.kind == msgCall }

func wrapUser(key keyCode, parts [][]byte) []byte {
	out := []byte(`{"role":"user","` + keyNames[key] + `":`)
	out = append(out, joinArray(parts)...)
	return append(out, '}')
}

// --- helpers shared by the parsers ---

func (m *message) get(key keyCode) []byte {
	if mb, ok := findCode(m.ms(), key); ok {
		return mb.val(m.raw())
	}
	return nil
}

// canonicalForm is the canonical form of the part at index part of parser.parts.
type canonicalForm struct {
	part int32
	raw  []byte
}

// partIndex is the index of p in ps.parts, which is sized once for every part of the
// transcript (plan.parse), so a part keeps its place.
func (ps *parser) partIndex(p *part) int32 {
	return int32((uintptr(unsafe.Pointer(p)) - uintptr(unsafe.Pointer(unsafe.SliceData(ps.parts)))) / unsafe.Sizeof(part{}))
}

// canonical returns the canonical form of p, which has one (partCanonical).
func (ps *parser) canonical(p *part) []byte {
	i, _ := slices.BinarySearchFunc(ps.canonicals, ps.partIndex(p), func(c canonicalForm, at int32) int { return cmp.Compare(c.part, at) })
	return ps.canonicals[i].raw
}

// one returns a message's only part, kept with the others rather than allocated alone.
func (ps *parser) one(p part) []part {
	ps.parts = append(ps.parts, p)
	n := len(ps.parts)
	return ps.parts[n-1 : n : n]
}

// word returns a string member's text without allocating when it has no escapes, for
// comparisons like switch string(m.word(keyRole)); nil when it is not a string.
func (m *message) word(key keyCode) []byte { return wordOf(m.get(key)) }

// wordOf is word for a member's value v.
func wordOf(v []byte) []byte {
	if len(v) < 2 || v[0] != '"' {
		return nil
	}
	if bytes.IndexByte(v, '\\') < 0 {
		return v[1 : len(v)-1]
	}
	s, _ := stringValue(v)
	return []byte(s)
}

// parser holds scratch space for the members of blocks and sub-objects, which are only
// needed while their message is parsed; it saves an allocation per block.
type parser struct {
	scratch []member
	parts   []part // every message's parts, in one allocation
	// detected is the dialect found by detection (not forced); a block of another
	// dialect's shape then makes the transcript mixed, recorded in foreign.
	detected   Dialect
	foreign    Dialect
	foreignMsg int
	msg        int
	// err is the first error in a call's or result's sub-object (a repeated key: providers
	// read the last one, tmend the first), which makes the message unparseable.
	err    error
	errMsg int
	// doubt says why a block that is a call or result cannot be read with certainty (an id
	// that is not a string, a legacy call with two ids): the transcript is then refused.
	doubt    string
	doubtMsg int
	// doubtOrder: the doubt is an order check's (spec.order), whose text gives its reason.
	doubtOrder bool
	// hashes is scratch space for an order check (duplicateItemIDs).
	hashes []uint64
	// providerCalls are the ids of the calls seen so far that the provider runs itself
	// (AI SDK providerExecuted): a result for one is the provider's, not a client result.
	providerCalls map[string]bool
	// providerRuns: some part ran on the provider's side (partProviderRun).
	providerRuns bool
	// redacted: some part is a LangChain AI message's redacted_thinking block (lcContentParts).
	redacted bool
	// blankContent: rebuildLangChain writes an AI message's content that ChatOpenAI would
	// send as an empty array as "" (blankEmptyContent).
	blankContent bool
	// unknown says why a message is not one the dialect can read as its own although it
	// looks like one (a LangChain message in another stored form than the transcript's
	// others): the transcript is then of no known dialect.
	unknown    string
	unknownMsg int
	// toolish is set by checkToolish.
	toolish    string
	toolishMsg int
	// form is the stored form of the transcript's messages, for a dialect that has
	// several (LangChain); 0 until a message sets it. formMsg is that message.
	form        uint8
	formMsg     int
	knownValues [][]byte        // every message's knownValues, in one allocation
	canonicals  []canonicalForm // of the parts that have one (partCanonical), in order
	src         []byte          // the input, where the parts' ids are (part.idAt)
	idTexts     [][]byte        // the ids' JSON texts that are not their ids' inner bytes (part.idAt)
	idStrs      []string        // and those ids, decoded
	fields      []fieldsObj     // the messages' fields objects, as scanned (message.fieldsAt)
	// facts are detection's for the message it looks at (messageSignal), passed to each
	// dialect's signal by pointer (by value, 112 bytes copied for each dialect asked) and
	// kept here (a local would escape through those calls, an allocation per message).
	facts msgFacts
}

// setID makes v, a JSON value, p's id, decoded as idString does (lone surrogates kept
// apart from U+FFFD; "" when v is not a string).
func (ps *parser) setID(p *part, v []byte) {
	// v is a slice of src when it was read there (blocks hold no capacity, so where it
	// starts is found by address).
	at := int(uintptr(unsafe.Pointer(unsafe.SliceData(v))) - uintptr(unsafe.Pointer(unsafe.SliceData(ps.src))))
	if at >= 0 && at+len(v) <= len(ps.src) && len(v) >= 2 && &ps.src[at] == &v[0] && v[0] == '"' && bytes.IndexByte(v, '\\') < 0 {
		p.idAt, p.idLen = int32(at), int32(len(v))
		return
	}
	id, _ := idString(v)
	ps.keepID(p, v, id)
}

// rewriteID gives p the id id.
func (ps *parser) rewriteID(p *part, id string) { ps.keepID(p, encodeID(id), id) }

// keepID gives p the id id of JSON text text, both kept apart from the input.
func (ps *parser) keepID(p *part, text []byte, id string) {
	ps.idTexts = append(ps.idTexts, text)
	ps.idStrs = append(ps.idStrs, id)
	p.idAt, p.idLen = int32(len(ps.idTexts)-1), -1
}

// id returns p's decoded id, "" when it has none: the inner bytes of its text in the
// input (as inputString does, without a copy), or the decoded one kept apart.
func (ps *parser) id(p *part) string {
	switch {
	case p.idLen < 0:
		return ps.idStrs[p.idAt]
	case p.idLen <= 2:
		return ""
	}
	return unsafe.String(&ps.src[p.idAt+1], p.idLen-2)
}

// idText returns the JSON text of p's id, or nil when it has none.
func (ps *parser) idText(p *part) []byte {
	switch {
	case p.idLen < 0:
		return ps.idTexts[p.idAt]
	case p.idLen == 0:
		return nil
	}
	return ps.src[p.idAt : p.idAt+p.idLen]
}

// doubtful records the first reason to refuse the transcript, for analyze to report.
func (ps *parser) doubtful(why string) {
	if ps.doubt == "" {
		ps.doubt, ps.doubtMsg = why, ps.msg
	}
}

// obj is a parsed sub-object (a block or a call object).
type obj struct {
	raw []byte
	ms  []member
	ps  *parser
}

func (ps *parser) obj(raw []byte) (obj, bool, error) {
	if len(raw) == 0 || raw[0] != '{' {
		return obj{}, false, nil
	}
	ms, err := members(raw, &ps.scratch)
	return obj{raw, ms, ps}, err == nil, err
}

func (o obj) get(key keyCode) []byte {
	if mb, ok := findCode(o.ms, key); ok {
		return mb.val(o.raw)
	}
	return nil
}

func (o obj) has(key keyCode) bool { _, ok := findCode(o.ms, key); return ok }

func (o obj) lookup(key keyCode) ([]byte, bool) {
	m, ok := findCode(o.ms, key)
	if !ok {
		return nil, false
	}
	return m.val(o.raw), true
}

// sub is the object member key of o; a repeated key in it is recorded in the parser.
func (o obj) sub(key keyCode) obj {
	sub, _, err := o.ps.obj(o.get(key))
	var se *SyntaxError
	if errors.As(err, &se) && o.ps.err == nil {
		o.ps.err = fmt.Errorf("%s: %s", keyNames[key], se.Msg) // its offset is the sub-object's
		o.ps.errMsg = o.ps.msg
	}
	return sub
}

// failedTurn reports whether the message object raw, with members ms, ended its
// generation in error or aborted it.
func failedTurn(raw []byte, ms []member) bool {
	for imb := range ms {
		mb := &ms[imb] // one pass for both spellings: this runs for every assistant message
		if mb.code() == keyStopReason || mb.code() == keyStopReasonSnake {
			switch string(wordOf(mb.val(raw))) {
			case "error", "aborted":
				return true
			}
		}
	}
	return false
}

// Paths from a part to its id member, shared by every part of that shape.
var (
	pathID         = []keyCode{keyID}
	pathCallID     = []keyCode{keyCallID}
	pathToolCallID = []keyCode{keyToolCallID}
)

// callShape fills a call part's id and name and says why it is malformed, if it is.
// The id, the partial markers and status are members of o; the name is in nameObj and
// the arguments member argsKey in args (either may be o itself). idPath leads from the
// part to o's id member.
func callShape(p *part, o obj, idPath []keyCode, nameObj obj, args obj, argsKey keyCode, idOptional bool) {
	p.kind = partCall
	p.idPath = pathOf(idPath)
	idKey := idPath[len(idPath)-1]
	partial, incomplete, hasArgs := false, false, argsKey == keyOther
	for im := range o.ms {
		m := &o.ms[im]
		v := m.val(o.raw)
		switch m.code() {
		case idKey:
			if string(v) != "null" {
				o.ps.setID(p, v)
				p.hasID = true
				if v[0] != '"' {
					o.ps.doubtful("a call's id is a JSON " + kindOf(v[0]) + ", not a string")
				}
			}
		case keyPartialJSON, keyPartialArgs:
			partial = true
		case keyPartial, keyIncomplete:
			partial = partial || isTrue(v)
		case keyStatus:
			incomplete = isString(v, "incomplete")
		}
	}
	if nv, ok := nameObj.lookup(keyName); ok {
		name, _ := inputString(nv)
		p.setName(name)
	}
	if !hasArgs {
		_, hasArgs = args.lookup(argsKey)
	}
	switch {
	case partial:
		p.malformed = malPartial
	case incomplete:
		p.malformed = malIncomplete
	case !idOptional && isBlank(o.ps.id(p)):
		p.malformed = malNoID
	case idOptional && p.hasID && isBlank(o.ps.id(p)):
		p.malformed = malBlankID
	case isBlank(p.name()):
		p.malformed = malNoName
	case !hasArgs:
		p.malformed = malNoArgs
	}
}

// argsKind refuses a well-formed call whose arguments member key of args is of another
// JSON kind than the provider takes (want '{' an object, '"' a JSON string; null too when
// nullOK): the API rejects the request, and whether a string is the object's JSON text,
// an object the parse of the string, or null no arguments, is more than tmend can tell.
func argsKind(p *part, args obj, key keyCode, want byte, nullOK bool, what string) {
	v, ok := args.lookup(key)
	if !ok || p.malformed != wellFormed || v[0] == want || nullOK && v[0] == 'n' {
		return
	}
	args.ps.doubtful(fmt.Sprintf("%s is a JSON %s, not a JSON %s, which the provider rejects", what, kindOf(v[0]), kindOf(want)))
}

// stringArgs checks the arguments member key of args of a well-formed call where the
// provider takes a JSON string: an object or array there is marked (partArgsRetype) to be
// written as its JSON text, which is what the API needs and what the AI SDK sends
// (JSON.stringify(input)); any other kind is refused (argsKind): a number, a boolean or
// null is no arguments object, and its text would say what the model never did.
func stringArgs(p *part, args obj, key keyCode, what string) {
	if v, ok := args.lookup(key); ok && p.malformed == wellFormed && (v[0] == '{' || v[0] == '[') {
		p.set(partArgsRetype, true)
		return
	}
	argsKind(p, args, key, '"', false, what)
}

// objectArgs checks the arguments member key of args of a well-formed call where the
// provider takes a JSON object: a string holding an object's JSON text (a stream's
// accumulated input stored unparsed) is marked (partArgsRetype) to be written as that
// object, as the engine parses a legacy call's string arguments; any other kind, or a
// string holding something else, is refused (argsKind).
func objectArgs(p *part, args obj, key keyCode, what string) {
	if v, ok := args.lookup(key); ok && p.malformed == wellFormed && v[0] == '"' {
		if s, _ := idString(v); utf8.ValidString(s) && json.Valid([]byte(s)) &&
			s[skipSpace([]byte(s), 0)] == '{' && depthOf([]byte(s)) <= legacyArgsDepth {
			p.set(partArgsRetype, true)
			return
		}
	}
	argsKind(p, args, key, '{', false, what)
}

// parseResultMessage makes message m one result part: its id at idPath, its tool name in
// nameKey, its text in content.
func parseResultMessage(m *message, ps *parser, idPath []keyCode, nameKey keyCode) {
	m.kind = msgResult
	p := rawPart(m.raw())
	resultShape(&p, obj{m.raw(), m.ms(), ps}, idPath)
	name, _ := inputString(m.get(nameKey))
	p.setName(name)
	p.set(partSynthetic, isSyntheticText(m.get(keyContent), m.contentBlocks()))
	m.setParts(ps.one(p))
}

func isBlank(s string) bool { return strings.TrimSpace(s) == "" }

// resultShape fills a result part's id from o's member at the end of idPath.
func resultShape(p *part, o obj, idPath []keyCode) {
	p.kind = partResult
	p.idPath = pathOf(idPath)
	if idv, ok := o.lookup(idPath[len(idPath)-1]); ok && string(idv) != "null" {
		o.ps.setID(p, idv)
		p.hasID = true
		if idv[0] != '"' {
			o.ps.doubtful("a result's id is a JSON " + kindOf(idv[0]) + ", not a string")
		}
	}
}

// blocks returns the blocks of the array member key (one of blockArrays), or nil when
// the member is not an array.
func (m *message) blocks(key keyCode) ([]block, bool) {
	for k, c := range blockArrays {
		if c == key {
			if blks := m.arrays.of(k); blks != nil {
				return blks, true // only an array's blocks are collected
			}
			v := m.get(key) // an empty array (with no slab yet), or none
			return nil, len(v) > 0 && v[0] == '['
		}
	}
	return nil, false
}

func (m *message) contentBlocks() []block { b, _ := m.blocks(keyContent); return b }

// parseBlocks makes a part of each element of the array member key, classifying object
// elements with fn.
func parseBlocks(m *message, ps *parser, key keyCode, fn func(p *part, o obj)) error {
	blks, ok := m.blocks(key)
	if !ok {
		return nil
	}
	m.partsKey = key
	start := len(ps.parts)
	for _, blk := range blks {
		// Filled in place (a part handed to fn by address would otherwise be allocated), so
		// fn must not add parts itself.
		ps.parts = append(ps.parts, rawPart(blk.raw()))
		if blk.raw()[0] == '{' {
			p := &ps.parts[len(ps.parts)-1]
			mark := len(ps.scratch)
			o := obj{blk.raw(), blk.members(), ps}
			fn(p, o)
			if p.kind == partOther {
				ps.checkForeign(o)
				ps.checkToolish(o)
			}
			ps.scratch = ps.scratch[:mark]
		}
	}
	m.setParts(ps.parts[start:len(ps.parts):len(ps.parts)])
	return nil
}

// checkForeignContent checks the content blocks of a message whose parts live elsewhere
// (OpenAI chat and LangChain tool_calls) for another dialect's call or result shapes, and
// for blocks whose type names a tool, call or function: content the dialect does not read
// calls from, so the message is not one it knows.
func checkForeignContent(m *message, ps *parser) {
	if ps.detected == "" || ps.foreign != "" {
		return
	}
	for _, blk := range m.contentBlocks() {
		if blk.raw()[0] == '{' {
			o := obj{blk.raw(), blk.members(), ps}
			ps.checkForeign(o)
			if why := ps.toolishBlock(o); why != "" && ps.unknown == "" {
				ps.unknown, ps.unknownMsg = why, ps.msg
			}
		}
	}
}

// checkForeign records a block that the detected dialect does not recognise but another
// dialect would: the transcript is then mixed and left alone.
func (ps *parser) checkForeign(o obj) {
	if ps.detected != "" && ps.foreign == "" {
		if d := blockSignal(o); d != "" && d != ps.detected {
			ps.foreign, ps.foreignMsg = d, ps.msg
		}
	}
}

// checkToolish records a block whose type names a tool, call or function that the detected
// dialect does not read: it may be a call or result tmend cannot pair (and one the provider
// would refuse), so the transcript is left alone (after the search of unknown blocks for
// ids, whose refusal says more), as it is when no dialect is found.
func (ps *parser) checkToolish(o obj) {
	if ps.toolish == "" {
		if why := ps.toolishBlock(o); why != "" {
			ps.toolish, ps.toolishMsg = why, ps.msg
		}
	}
}

// toolishBlock says why o, a block the detected dialect did not read, may be a call or
// result it cannot see (its type names a tool, call or function), or "".
func (ps *parser) toolishBlock(o obj) string {
	typ := wordOf(o.get(keyType))
	if ps.detected == "" || !toolish(typ) || serverToolBlocks.has(typ) || blockSignal(o) == ps.detected {
		return ""
	}
	return fmt.Sprintf("a block of type %q, which the %s dialect does not know", typ, ps.detected)
}

// detect names the dialect from shapes that only one dialect uses: first message-level
// ones (roles, item types), else the first block-level one, else Converse's untyped text
// blocks (bedrockText). It returns "" when there is
// no such shape (so no tool calls or results either), and an error when message-level
// shapes of several dialects are mixed. Blocks of a foreign dialect are caught while
// parsing (see parser.foreign).
func detect(msgs []message, ps *parser) (Dialect, error) {
	var first [16]int // by registry index (room for 16 dialects): 1 + the first message with the signal
	var order []Dialect
	for i := range msgs {
		if k := messageSignal(&msgs[i], ps); k >= 0 && first[k] == 0 {
			first[k] = i + 1
			order = append(order, registry[k].name)
		}
	}
	switch len(order) {
	case 0:
		for i := range msgs {
			if d := blocksSignal(&msgs[i], ps); d != "" {
				return d, nil
			}
		}
		for i := range msgs {
			if bedrockText(&msgs[i]) {
				return Bedrock, nil // a last resort: a shape that names no tool
			}
		}
		return "", nil
	case 1:
		return order[0], nil
	}
	var parts []string
	for _, d := range order {
		for k, s := range registry {
			if s.name == d {
				parts = append(parts, fmt.Sprintf("%s (message %d)", d, first[k]-1))
			}
		}
	}
	return "", fmt.Errorf("shapes of several dialects are mixed: %s", strings.Join(parts, ", "))
}

// messageSignal returns the registry index of the dialect whose message shape m has, or -1.
func messageSignal(m *message, ps *parser) int {
	f := &ps.facts
	*f = msgFacts{}
	raw, ms := m.raw(), m.ms()
	for i := range ms {
		mb := &ms[i]
		switch mb.kc {
		case keyRole:
			f.hasRole = true
			f.role = wordOf(mb.val(raw))
		case keyType:
			f.typ = wordOf(mb.val(raw))
		case keyParts:
			f.parts, f.hasParts = m.blocks(keyParts)
		case keyToolCallID:
			f.hasToolCallID = true
		case keyToolCalls:
			f.hasToolCalls = true
		case keyToolInvocations:
			f.hasToolInvocations = true
		case keyContent:
			f.content = mb.val(raw)
			if f.content[0] == '{' {
				if content, ok := m.fields(ps, keyContent); ok {
					f.format2 = isFormat2(content)
				}
			}
		}
	}
	if f.plain() {
		return -1 // most messages: spared a call per dialect
	}
	if f.langChain() {
		return langChainIndex // a LangChain table's messages: spared the dialects before it
	}
	for k, s := range registry {
		if s.messageSignal != nil && s.messageSignal(f) {
			return k
		}
	}
	return -1
}

func blocksSignal(m *message, ps *parser) Dialect {
	blks, _ := m.blocks(keyContent)
	for _, blk := range blks {
		if blk.raw()[0] == '{' {
			if d := blockSignal(obj{blk.raw(), blk.members(), ps}); d != "" {
				return d
			}
		}
	}
	return ""
}

// blockSignal names the dialect a content block's shape belongs to, if only one uses it.
func blockSignal(o obj) Dialect {
	typ := o.get(keyType)
	if isString(typ, "text") {
		return "" // most blocks, and no dialect's call or result
	}
	for _, s := range registry {
		if s.blockSignal != nil && s.blockSignal(o, typ) {
			return s.name
		}
	}
	return ""
}

// plain reports facts that no dialect's messageSignal takes for its own: a user or
// assistant message with none of the members that signal (TestPlainFactsSignalNothing).
func (f *msgFacts) plain() bool {
	return (string(f.role) == "user" || string(f.role) == "assistant") && f.typ == nil && !f.hasParts &&
		!f.hasToolCalls && !f.hasToolCallID && !f.hasToolInvocations && !f.format2
}

// langChain reports facts that LangChain's messageSignal takes and no dialect before it in
// the registry does: a message without a role or parts whose type is one of LangChain's
// flat or {type, data} forms (TestLangChainFactsSignalLangChain).
func (f *msgFacts) langChain() bool {
	return !f.hasRole && !f.hasParts && lcTypeKind(f.typ) != lcNone
}

// typing says whether the objects of a parts array carry a "type" member.
type typing uint8

const (
	noParts     typing = iota // no object in the array
	allTyped                  // every object has a string type (AI SDK UIMessage parts)
	someUntyped               // no object has a type (Gemini parts)
	mixedTyping
)

// partsTyped tells how the objects of a parts array are typed.
func partsTyped(blks []block) typing {
	t := noParts
	for _, blk := range blks {
		if blk.ms == nil {
			continue
		}
		typed := false
		if mb, ok := findCode(blk.members(), keyType); ok {
			typed = blk.raw()[mb.valStart()] == '"'
		}
		switch {
		case typed && (t == noParts || t == allTyped):
			t = allTyped
		case !typed && (t == noParts || t == someUntyped):
			t = someUntyped
		default:
			return mixedTyping
		}
	}
	return t
}

// wordSet is a small set of words, for the roles and types a dialect recognises.
type wordSet []string

func words(w ...string) wordSet { return w }

func (s wordSet) has(w []byte) bool {
	for _, x := range s {
		if string(w) == x {
			return true
		}
	}
	return false
}

// fields returns m's object member key as the scanner collected it (see fieldsKey): its
// members, and the blocks of its block arrays in arrays. ok is false when m has no such
// object.
func (m *message) fields(ps *parser, key keyCode) (o fieldsView, ok bool) {
	if m.fieldsAt <= 0 || int(m.fieldsAt) > len(ps.fields) {
		return o, false
	}
	f := &ps.fields[m.fieldsAt-1]
	if f.key != key {
		return o, false
	}
	mb, _ := findCode(m.ms(), key)
	return fieldsView{obj{mb.val(m.raw()), f.ms, ps}, &f.arrays}, true
}

// fieldsView is an object member of a message with what the scanner collected of it.
type fieldsView struct {
	obj
	arrays *arrayBlocks
}

// blocks returns the blocks of its array member key (one of blockArrays).
func (v fieldsView) blocks(key keyCode) ([]block, bool) {
	for k, c := range blockArrays {
		if blks := v.arrays.of(k); c == key && blks != nil {
			return blks, true
		}
	}
	pv := v.get(key)
	return nil, len(pv) > 0 && pv[0] == '['
}

func (m *message) has(key keyCode) bool { _, ok := findCode(m.ms(), key); return ok }

// describe names a message's shape for a report: its role or type.
func (m *message) describe() string {
	switch {
	case m.word(keyRole) != nil:
		return fmt.Sprintf("role %q", m.word(keyRole))
	case m.word(keyType) != nil:
		return fmt.Sprintf("type %q", m.word(keyType))
	}
	return "no role or type"
}

// plainRoles are the roles of messages that hold no tool call or result in any dialect.
var plainRoles = words("user", "assistant", "system", "developer", "model")

// plainMessage reports whether m can be read with certainty as a message that holds no
// tool call or result: a role (or LangChain type) that every dialect uses for such
// messages, no member where a dialect keeps calls or results, content that is text or
// blocks, and no block whose type names a tool, call or function. It decides that a
// transcript without any dialect's shapes is clean.
func plainMessage(m *message) bool {
	role, typ := m.word(keyRole), m.word(keyType)
	switch {
	case role != nil:
		if !plainRoles.has(role) || typ != nil && string(typ) != "message" {
			return false
		}
	case typ != nil:
		if !langChainTypes.has(typ) || string(typ) == "tool" || string(typ) == "function" {
			return false
		}
	default:
		return false
	}
	ms := m.ms()
	for imb := range ms {
		mb := &ms[imb]
		switch {
		case mb.code() == keyContent && mb.val(m.raw())[0] == '{':
			return false // a content object: not a shape of any dialect's plain message
		case callKey(*mb, m.raw()):
			return false // tool_calls, function_call, toolCalls, tool_call_id, ...
		}
	}
	for k := range blockArrays {
		for _, blk := range m.arrays.of(k) {
			if blk.ms == nil {
				continue
			}
			if callish(obj{raw: blk.raw(), ms: blk.members()}) {
				return false
			}
		}
	}
	return true
}

// serverToolBlocks are the Anthropic blocks of tools the server runs (and MCP's), whose
// call and result live in one assistant message: no client call, so no tool message
// can be missing for them.
var serverToolBlocks = words("server_tool_use", "web_search_tool_result", "web_fetch_tool_result",
	"code_execution_tool_result", "bash_code_execution_tool_result", "text_editor_code_execution_tool_result",
	"tool_search_tool_result", "tool_reference", "mcp_tool_use", "mcp_tool_result")

// callKey reports a member of obj under which some dialect, or an older shape of one,
// keeps a tool call, a result or their ids: not a member of a plain message or block.
func callKey(m member, obj []byte) bool {
	if callKeyCodes[m.code()] {
		return true
	}
	return m.code() == keyOther && callName(m, obj)
}

// callKeyCodes are the key codes callKey takes, looked up for every member of every
// message.
var callKeyCodes = func() (t [keyCount]bool) {
	for _, c := range []keyCode{keyToolCalls, keyToolCallID, keyToolCallIDCamel, keyCallID, keyToolUseID,
		keyToolUseIDCamel, keyFunctionCall, keyFunctionResponse, keyToolUse, keyToolResult, keyToolInvocation,
		keyToolInvocations} {
		t[c] = true
	}
	return t
}()

// callName reports an uncoded key that callKey takes.
func callName(m member, obj []byte) bool {
	// Each name starts with f or t (or is spelled with an escape): most keys are passed
	// over by their first byte.
	if c := obj[m.keyStart(obj)+1]; c != 'f' && c != 't' && c != '\\' {
		return false
	}
	return m.is(obj, "function_call") || m.is(obj, "toolCalls") || m.is(obj, "tool_use")
}

// toolish reports a block type that names a tool, a call or a function: a tool call or
// result in a shape tmend does not know.
func toolish(typ []byte) bool {
	return containsFold(typ, "tool") || containsFold(typ, "call") || containsFold(typ, "function")
}

// containsFold reports whether s holds the lower-case ASCII word w in any case.
func containsFold(s []byte, w string) bool {
	for i := 0; i+len(w) <= len(s); i++ {
		j := 0
		for j < len(w) && s[i+j]|0x20 == w[j] {
			j++
		}
		if j == len(w) {
			return true
		}
	}
	return false
}

// callish reports a block of a plain message that is no plain block: its type names a
// tool, call or function (Anthropic's server-tool and MCP blocks excepted, which pair
// within their message), or it holds another dialect's call or result object.
func callish(o obj) bool {
	typ := wordOf(o.get(keyType))
	if string(typ) == "text" || serverToolBlocks.has(typ) {
		return false
	}
	if toolish(typ) {
		return true
	}
	for im := range o.ms {
		m := &o.ms[im]
		switch m.code() {
		case keyFunctionCall, keyFunctionResponse, keyToolUse, keyToolResult, keyToolInvocation:
			return true
		}
	}
	return false
}

// outMsg is a message of the repaired transcript, for the turn rules after removals.
type outMsg struct {
	raw     []byte
	role    []byte
	calls   bool // it keeps a tool call
	results bool // it keeps a tool result
}
