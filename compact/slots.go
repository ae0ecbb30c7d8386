package compact

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/tmend/tmend/repair"
)

// resultForm is how a dialect holds a result's content, and so how a stub is written
// in its place.
type resultForm uint8

const (
	formString     resultForm = iota + 1 // a JSON string (OpenAI, Responses, Anthropic, LangChain)
	formTextBlocks                       // [{"type":"text","text":...}] (OpenClaw)
	formBedrock                          // [{"text":...}] (Bedrock toolResult.content)
	formGemini                           // {"output":...} (Gemini functionResponse.response)
	formAISDK                            // {"type":"text","value":...} (AI SDK ModelMessage output)
)

// slot is a content tmend may rewrite: its span in the transcript, its text as a model
// reads it, and how to write a replacement.
type slot struct {
	start, end int // in the messages array
	form       resultForm
	text       string // the content as text: a string's value, text blocks joined, else the JSON
	// argsString: a call's input is a JSON string holding the arguments object (OpenAI
	// chat and Responses), not the object itself.
	argsString bool
	ok         bool
}

// raw returns the slot's current bytes in msgs.
func (s slot) raw(msgs []byte) []byte { return msgs[s.start:s.end] }

// resultPaths are where each dialect keeps a result's content inside the result part,
// with the form it has. A dialect not listed (AI SDK UIMessage, Mastra: the result lives
// in the call's part and in mirrors of it) has its results left alone.
var resultPaths = map[repair.Dialect][]struct {
	path []string
	form resultForm
}{
	repair.Anthropic:       {{[]string{"content"}, formString}},
	repair.OpenAIChat:      {{[]string{"content"}, formString}},
	repair.OpenAIResponses: {{[]string{"output"}, formString}},
	repair.Gemini:          {{[]string{"functionResponse", "response"}, formGemini}},
	repair.Bedrock:         {{[]string{"toolResult", "content"}, formBedrock}},
	repair.OpenClaw:        {{[]string{"content"}, formTextBlocks}},
	repair.AISDKModel:      {{[]string{"output"}, formAISDK}},
	// LangChain's three stored forms; a ToolMessage's content has no mirror.
	repair.LangChain: {{[]string{"content"}, formString}, {[]string{"data", "content"}, formString},
		{[]string{"kwargs", "content"}, formString}},
}

// inputPaths are where each dialect keeps a call's arguments inside the call part.
// LangChain is not listed: its calls are mirrored in provider copies (additional_kwargs,
// content blocks) that would have to change together.
var inputPaths = map[repair.Dialect][][]string{
	repair.Anthropic:       {{"input"}},
	repair.OpenAIChat:      {{"function", "arguments"}},
	repair.OpenAIResponses: {{"arguments"}},
	repair.Gemini:          {{"functionCall", "args"}},
	repair.Bedrock:         {{"toolUse", "input"}},
	repair.OpenClaw:        {{"arguments"}},
	repair.AISDKModel:      {{"input"}, {"args"}},
}

// inPlace are the dialects that keep a call and its result in one part (see repair's
// inplace.go): where the part keeps its output and input, and the state an answered
// call's part has. A message that also holds a copy of its calls (AI SDK 4's
// toolInvocations, Mastra's content.toolInvocations) is left alone whole, so that the
// copies never disagree.
var inPlace = map[repair.Dialect]struct {
	result, input, state []string
	answered             string
	mirror               []string
}{
	repair.AISDKUI: {[]string{"output"}, []string{"input"}, []string{"state"}, "output-available",
		[]string{"toolInvocations"}},
	repair.Mastra: {[]string{"toolInvocation", "result"}, []string{"toolInvocation", "args"},
		[]string{"toolInvocation", "state"}, "result", []string{"content", "toolInvocations"}},
}

// supported reports a dialect whose results compaction knows where to find.
func supported(d repair.Dialect) bool {
	_, ok := inPlace[d]
	return ok || resultPaths[d] != nil
}

// inPlaceSlots locates an answered in-place part's output and input; ok is false for a
// part that is not answered, ran on the provider's side, or sits in a message with
// copies of its calls.
func inPlaceSlots(d repair.Dialect, msg, part []byte, base int) (result, input slot, ok bool) {
	ip := inPlace[d]
	if _, _, mirrored := findPath(msg, ip.mirror...); mirrored {
		return slot{}, slot{}, false
	}
	if s, e, found := findPath(part, ip.state...); !found || string(part[s:e]) != `"`+ip.answered+`"` {
		return slot{}, slot{}, false
	}
	if string(value(part, "providerExecuted")) == "true" {
		return slot{}, slot{}, false
	}
	if s, e, found := findPath(part, ip.result...); found {
		result = slot{start: base + s, end: base + e, form: formString, ok: true}
	}
	if s, e, found := findPath(part, ip.input...); found && part[s] == '{' {
		input = slot{start: base + s, end: base + e, text: string(part[s:e]), ok: true}
	}
	return result, input, true
}

// resultSlot locates part's content; base is the part's offset in msgs. Its text is
// read by readText, only for the contents compaction may change.
func resultSlot(d repair.Dialect, part []byte, base int) slot {
	for _, rp := range resultPaths[d] {
		if s, e, ok := findPath(part, rp.path...); ok {
			return slot{start: base + s, end: base + e, form: rp.form, ok: true}
		}
	}
	return slot{}
}

// readText sets the slot's text from msgs; a content tmend must not replace (an image,
// an unknown shape) makes it not ok.
func (s *slot) readText(msgs []byte) {
	if s.ok {
		s.text, s.ok = contentText(s.raw(msgs), s.form)
	}
}

// inputSlot locates call part's arguments object.
func inputSlot(d repair.Dialect, part []byte, base int) slot {
	if d == repair.OpenClaw && string(wordValue(part, "type")) != "toolCall" {
		return slot{} // a legacy block shape: repair's, not ours
	}
	for _, p := range inputPaths[d] {
		s, e, ok := findPath(part, p...)
		if !ok {
			continue
		}
		v := part[s:e]
		sl := slot{start: base + s, end: base + e}
		if v[0] == '"' {
			args, ok := str(v)
			if !ok || !strings.HasPrefix(strings.TrimSpace(args), "{") {
				return slot{}
			}
			sl.text, sl.argsString, sl.ok = args, true, true
			return sl
		}
		if v[0] != '{' {
			return slot{}
		}
		sl.text, sl.ok = string(v), true
		return sl
	}
	return slot{}
}

func wordValue(raw []byte, key string) []byte {
	s, _ := str(value(raw, key))
	return []byte(s)
}

// contentText reads a content value as the text a model sees. ok is false for content
// tmend must not replace: images or other non-text blocks, unknown shapes.
func contentText(v []byte, form resultForm) (string, bool) {
	switch form {
	case formGemini:
		if ms, ok := members(v); ok && len(ms) == 1 {
			if s, ok := str(v[ms[0].start:ms[0].end]); ok {
				return s, true
			}
		}
		if len(v) > 0 && v[0] == '{' {
			return string(v), true
		}
		return "", false
	case formAISDK:
		typ := string(wordValue(v, "type"))
		val := value(v, "value")
		switch typ {
		case "text", "error-text":
			s, ok := str(val)
			return s, ok
		case "json", "error-json":
			return string(val), val != nil
		}
		return "", false
	}
	if s, ok := str(v); ok {
		return s, true
	}
	return textBlocks(v)
}

// textBlocks joins an array of text blocks ({"type":"text","text":...} in its
// dialects' spellings, or Bedrock's {"text":...}); ok is false when any block is
// something else (an image, a document, JSON).
func textBlocks(v []byte) (string, bool) {
	if len(v) == 0 || v[0] != '[' {
		return "", false
	}
	var blocks []json.RawMessage
	if json.Unmarshal(v, &blocks) != nil {
		return "", false
	}
	var b strings.Builder
	for i, blk := range blocks {
		ms, ok := members(blk)
		if !ok {
			return "", false
		}
		var text string
		for _, m := range ms {
			val := blk[m.start:m.end]
			switch m.key {
			case "type":
				switch t, _ := str(val); t {
				case "text", "input_text", "output_text":
				default:
					return "", false
				}
			case "text":
				if text, ok = str(val); !ok {
					return "", false
				}
			case "cache_control", "citations", "annotations":
			default:
				return "", false
			}
		}
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(text)
	}
	return b.String(), true
}

// writeResult renders text in the slot's form; isError keeps an AI SDK error output an
// error.
func writeResult(form resultForm, text string, isError bool) []byte {
	q := quote(text)
	switch form {
	case formTextBlocks:
		return join(`[{"type":"text","text":`, q, `}]`)
	case formBedrock:
		return join(`[{"text":`, q, `}]`)
	case formGemini:
		return join(`{"output":`, q, `}`)
	case formAISDK:
		typ := "text"
		if isError {
			typ = "error-text"
		}
		return join(`{"type":"`+typ+`","value":`, q, `}`)
	}
	return q
}

func join(a string, b []byte, c string) []byte {
	out := make([]byte, 0, len(a)+len(b)+len(c))
	return append(append(append(out, a...), b...), c...)
}

// resultIsError reads a result part's error flag in its dialect's spelling.
func resultIsError(d repair.Dialect, part []byte) bool {
	switch d {
	case repair.Anthropic:
		return bytes.Equal(value(part, "is_error"), []byte("true"))
	case repair.OpenClaw:
		return bytes.Equal(value(part, "isError"), []byte("true"))
	case repair.Bedrock:
		return string(wordValue(value(part, "toolResult"), "status")) == "error"
	case repair.AISDKModel:
		return strings.HasPrefix(string(wordValue(value(part, "output"), "type")), "error")
	case repair.LangChain:
		for _, p := range [][]string{{"status"}, {"data", "status"}, {"kwargs", "status"}} {
			if s, e, ok := findPath(part, p...); ok {
				st, _ := str(part[s:e])
				return st == "error"
			}
		}
	}
	return false
}
