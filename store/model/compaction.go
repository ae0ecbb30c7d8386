package model

import (
	"bytes"
	"encoding/json"

	"github.com/tmend/tmend/compact"
)

// PrefixSpan returns where the first n messages of the JSON array b lie: from the first
// one's first byte to the n-th one's last, with the separators between them. ok is false
// when b is not an array of at least n values.
func PrefixSpan(b []byte, n int) (start, end int, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('[') {
		return 0, 0, false
	}
	start = int(dec.InputOffset())
	for start < len(b) && isSpace(b[start]) {
		start++
	}
	end = start
	for i := 0; i < n; i++ {
		if !dec.More() {
			return 0, 0, false
		}
		var m json.RawMessage
		if err := dec.Decode(&m); err != nil {
			return 0, 0, false
		}
		end = int(dec.InputOffset())
	}
	return start, end, n > 0
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// Cleared is one content a compaction replaced by a stub, as 'report --cleared' shows it:
// the action (rule, tool, call id, bytes before and after) and the text of the message
// before and after, where they differ (one span per message: a message with several
// stubs shows them in one).
type Cleared struct {
	Version int `json:"version"` // the version written compacted
	compact.Action
	Original string `json:"original"`
	Stub     string `json:"stub"`
}
