package repair

import "errors"

// PartKind says what a part of a message is. The strings appear in JSON output and never
// change.
type PartKind string

// The part kinds.
const (
	PartCall   PartKind = "call"
	PartResult PartKind = "result"
	PartOther  PartKind = "other" // text, images, thinking, ...: anything not a tool call or result
)

// Outline is a transcript as the engine reads it: its dialect and the tool calls and
// results in each message. It is for programs that show transcripts (the audit diff), so
// that they see calls, results and tmend's synthetic results exactly as Repair does.
type Outline struct {
	Dialect  Dialect
	Messages []OutlineMessage
}

// OutlineMessage is one message. Raw and the parts' Raw alias the input.
type OutlineMessage struct {
	Raw []byte
	// Kind is the message's role, else its type ("user", "tool", "function_call", ...).
	Kind string
	// Whole is set when the message is itself one call or result (OpenAI chat and
	// LangChain tool messages, Responses items): Parts then holds that one part.
	Whole bool
	// PartsKey names the member whose elements are Parts ("content", "tool_calls",
	// "parts"); "" for whole messages and messages without parts.
	PartsKey string
	Parts    []OutlinePart
}

// OutlinePart is one element of a message's parts array, or a whole message.
type OutlinePart struct {
	Kind   PartKind
	Raw    []byte
	CallID string // the id of the call, or of the call a result answers; "" when it has none
	// CallIDText is the id's JSON text as it is in Raw (escapes kept); nil when it has none.
	CallIDText []byte
	ToolName   string
	Synthetic  bool // a result inserted by tmend or another repairer, not by the tool
}

// Inspect reads msgs as Repair would, changing nothing. With opts.Dialect set it reads
// that dialect's shapes. When the dialect cannot be told (mixed shapes), the error is an
// *UnrepairableError with status unknown_dialect and the outline still lists the
// messages, without parts; for input that is not an array of objects it lists nothing.
func Inspect(msgs []byte, opts Options) (Outline, error) {
	p := plans.Get().(*plan)
	defer p.release()
	p.opts = opts
	if err := p.checkSize(msgs); err != nil {
		return Outline{}, err
	}
	if err := p.scanAll(msgs); err != nil {
		return Outline{}, err
	}
	err := p.parse()
	var ue *UnrepairableError
	if err == nil && p.ps.toolish != "" {
		// A block whose type names a call, which the dialect does not read: Repair calls
		// the transcript unknown_dialect, unless a check after pairing refuses it first
		// (one that names the id such a block carries). Rare, so Repair is asked.
		if _, rerr := Repair(msgs, opts); errors.As(rerr, &ue) && ue.Status == StatusUnknownDialect {
			err = rerr
		}
	}
	if err != nil && (!errors.As(err, &ue) || ue.Status != StatusUnknownDialect) {
		return Outline{}, err
	}
	o := Outline{Dialect: p.report.Dialect, Messages: make([]OutlineMessage, len(p.msgs))}
	for i := range p.msgs {
		m := &p.msgs[i]
		om := OutlineMessage{Raw: m.raw(), Kind: string(m.word(keyRole))}
		if om.Kind == "" {
			om.Kind = string(m.word(keyType))
		}
		if err == nil {
			om.Whole, om.PartsKey = m.whole(), keyNames[m.partsKey]
			om.Parts = make([]OutlinePart, len(m.parts()))
			parts := m.parts()
			for k := range parts {
				pt := &parts[k]
				om.Parts[k] = OutlinePart{Kind: pt.kind.public(), Raw: pt.raw(), CallID: p.ps.id(pt), CallIDText: p.ps.idText(pt),
					ToolName: pt.name(), Synthetic: pt.is(partSynthetic)}
			}
		}
		o.Messages[i] = om
	}
	return o, err
}

func (k partKind) public() PartKind {
	switch k {
	case partCall:
		return PartCall
	case partResult:
		return PartResult
	}
	return PartOther
}
