package repair

import "testing"

// messageSignal skips every dialect's signal for the facts plain() accepts: none of them
// may take such a message for its own, whatever its content.
func TestPlainFactsSignalNothing(t *testing.T) {
	t.Parallel()
	for _, role := range []string{"user", "assistant"} {
		for _, content := range []string{``, `"hi"`, `[{"type":"text","text":"hi"}]`, `{"format":3}`, `null`} {
			f := msgFacts{role: []byte(role), hasRole: true, content: []byte(content)}
			if !f.plain() {
				t.Fatalf("%s %s: want plain facts", role, content)
			}
			for _, s := range registry {
				if s.messageSignal != nil && s.messageSignal(&f) {
					t.Errorf("%s takes a plain %s message (content %s) for its own: plain() must not skip it", s.name, role, content)
				}
			}
		}
	}
}

// Every streaming state of a tool part has its reason: a part in it is malformed.
func TestStreamingStatesHaveReasons(t *testing.T) {
	t.Parallel()
	for s, st := range toolStates {
		if st == stateStreaming && streamingLeftover[s] == wellFormed {
			t.Errorf("streaming state %q has no reason in streamingLeftover", s)
		}
	}
}

// Facts that langChain() takes for LangChain's are LangChain's by the registry's own order:
// no dialect before it takes them first.
func TestLangChainFactsSignalLangChain(t *testing.T) {
	t.Parallel()
	types := []string{"ai", "AIMessageChunk", "tool", "ToolMessageChunk", "human", "system", "generic", "chat",
		"function", "remove", "developer", "HumanMessageChunk", "SystemMessageChunk", "ChatMessageChunk",
		"FunctionMessageChunk", "constructor", "message", "function_call", "reasoning"}
	untyped := []block{newBlock([]byte(`{}`), make([]member, 0, 1))} // Gemini's parts
	taken := 0
	for _, typ := range types {
		for _, content := range []string{`"hi"`, `[{"type":"text","text":"hi"}]`, `{"format":2}`} {
			for _, f := range []msgFacts{
				{typ: []byte(typ), content: []byte(content)},
				{typ: []byte(typ), content: []byte(content), hasToolCalls: true, hasToolCallID: true, format2: true},
				{typ: []byte(typ), content: []byte(content), parts: untyped, hasParts: true},
				{typ: []byte(typ), content: []byte(content), hasToolInvocations: true},
				{typ: []byte(typ), content: []byte(content), role: []byte("model"), hasRole: true},
			} {
				if !f.langChain() {
					continue
				}
				taken++
				for _, s := range registry {
					if s.messageSignal != nil && s.messageSignal(&f) {
						if s != langChainSpec {
							t.Errorf("%s takes a LangChain %s message (%+v) before LangChain: langChain() must not skip it", s.name, typ, f)
						}
						break
					}
				}
			}
		}
	}
	if taken == 0 {
		t.Fatal("langChain() took no facts")
	}
}
