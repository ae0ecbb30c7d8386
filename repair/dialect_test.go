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
