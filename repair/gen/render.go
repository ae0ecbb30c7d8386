package gen

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/tmend/tmend/repair"
)

// dialect is what the generator knows about one dialect: how an event is written, and
// which dialect-specific faults it has (where its transcript goes is repair's knowledge:
// Dialect.EnvelopeKey).
// Each dialect lives in render_<dialect>.go and has one line in dialects.
type dialect struct {
	// render writes event e, the i-th of its session, at ts (Unix milliseconds).
	render func(e event, i int, ts int64) []json.RawMessage
	// argsOptional: a call without arguments is valid, and there is no streaming
	// leftover shape, so malformed_call uses a blank id instead.
	argsOptional bool
	// idsOptional: calls and results may carry no id (Config.OmitIDs).
	idsOptional bool
	// legacyBlocks: the platform writes calls in non-canonical block shapes too
	// (noncanonical_call applies).
	legacyBlocks bool
	// reasoning: the model's turns carry reasoning items (dangling_reasoning applies).
	reasoning bool
	// renderAll, for dialects that keep a call and its result in one part, writes the
	// whole conversation (a call's part needs its result, which a later event holds);
	// render is then unused.
	renderAll func(evs []event, t0 int64) []json.RawMessage
	// noTurnEnd: a turn carries no stop reason, so a failed one cannot be told apart
	// (failed_turn does not apply).
	noTurnEnd bool
	// invalidCalls: calls whose arguments did not parse are kept apart (invalid_call
	// applies).
	invalidCalls bool
	// variants are the dialect's stored shapes (Variants), and variant returns the
	// renderer of one of them; none for a dialect with one shape (render).
	variants []string
	variant  func(name string) func(e event, i int, ts int64) []json.RawMessage
}

// dialects is the registry, one line a dialect.
var dialects = map[repair.Dialect]dialect{
	repair.OpenAIChat:      openAIChat,
	repair.Anthropic:       anthropic,
	repair.OpenAIResponses: openAIResponses,
	repair.OpenClaw:        openClaw,
	repair.Gemini:          gemini,
	repair.Bedrock:         bedrock,
	repair.LangChain:       langChain,
	repair.AISDKUI:         aiSDKUI,
	repair.Mastra:          mastra,
	repair.AISDKModel:      aiSDKModel,
}

func dialectOf(d repair.Dialect) dialect {
	sp, ok := dialects[d]
	if !ok {
		panic(fmt.Sprintf("gen: unknown dialect %q", d))
	}
	return sp
}

func render(d repair.Dialect, r func(e event, i int, ts int64) []json.RawMessage, evs []event, t0 time.Time) []json.RawMessage {
	if all := dialectOf(d).renderAll; all != nil {
		return all(evs, t0.UnixMilli())
	}
	var out []json.RawMessage
	ts := t0.UnixMilli()
	for i, e := range evs {
		ts += 1000
		out = append(out, r(e, i, ts)...)
	}
	return out
}

// obj is an ordered JSON object, so rendered messages look like real ones.
type obj []kv

type kv struct {
	k string
	v any
}

func (o obj) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for i, e := range o {
		if i > 0 {
			b = append(b, ',')
		}
		k, _ := json.Marshal(e.k)
		v, err := json.Marshal(e.v)
		if err != nil {
			return nil, err
		}
		b = append(append(append(b, k...), ':'), v...)
	}
	return append(b, '}'), nil
}

func must(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only our own fixed shapes are marshalled
	}
	return b
}

// callFields renders a call's common fields; idKey/nameKey/argsKey differ per dialect and
// args is either the JSON text (a string) or the parsed object.
func callFields(c gcall, idKey, nameKey, argsKey string, argsAsString bool) obj {
	var o obj
	switch {
	case c.malformed == "blank_id":
		o = append(o, kv{idKey, ""})
	case c.id != "": // "" only under Config.OmitIDs
		o = append(o, kv{idKey, c.id})
	}
	if c.malformed != "no_name" {
		o = append(o, kv{nameKey, c.name})
	}
	if c.malformed != "no_args" {
		if argsAsString {
			o = append(o, kv{argsKey, c.args})
		} else {
			o = append(o, kv{argsKey, json.RawMessage(c.args)})
		}
	}
	return o
}

func stopKey(e event, key string, o obj) obj {
	if e.failed {
		return append(o, kv{key, "error"})
	}
	return o
}
