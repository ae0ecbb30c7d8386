package repair

import (
	"fmt"
	"time"
)

// EnvelopeKeys are the object members a transcript may sit under, in the order they are
// looked for: "messages" (most dialects), "input" (OpenAI Responses), "contents" (Gemini).
var EnvelopeKeys = []string{"messages", "input", "contents"}

// Document is one transcript as stored or sent: either a bare JSON array of messages or an
// object holding it under one of EnvelopeKeys, with other members (id, updated_at, model
// settings, ...) kept byte for byte.
type Document struct {
	Raw []byte
	// Key is the envelope member holding the messages; "" for a bare array.
	Key string
	// ID is the envelope's "id" as text (string or number); "" when absent.
	ID string
	// UpdatedAt is the envelope's "updated_at" or "updatedAt" (RFC 3339), if any.
	UpdatedAt time.Time
	start     int
	end       int
}

// ParseDocument validates b and finds its messages array.
func ParseDocument(b []byte) (Document, error) {
	if err := validate(b); err != nil {
		return Document{}, err
	}
	d := Document{Raw: b}
	i := skipSpace(b, 0)
	switch b[i] {
	case '[':
		d.start, d.end = i, skip(b, i)
		return d, nil
	case '{':
	default:
		return Document{}, fmt.Errorf("document is a JSON %s; want an array of messages or an object holding one", kindOf(b[i]))
	}
	obj := b[i:skip(b, i)]
	ms, err := members(obj, nil)
	if err != nil {
		return Document{}, err
	}
	for _, key := range EnvelopeKeys {
		m, ok := findMember(obj, ms, key)
		if !ok {
			continue
		}
		if v := m.val(obj); v[0] != '[' {
			return Document{}, fmt.Errorf("%q is a JSON %s, not an array of messages", key, kindOf(v[0]))
		}
		d.Key, d.start, d.end = key, i+m.valStart, i+m.valEnd
		break
	}
	if d.Key == "" {
		return Document{}, fmt.Errorf("object has no messages, input or contents array")
	}
	if m, ok := findMember(obj, ms, "id"); ok {
		v := m.val(obj)
		if s, ok := stringValue(v); ok {
			d.ID = s
		} else if v[0] != '{' && v[0] != '[' && string(v) != "null" {
			d.ID = string(v)
		}
	}
	for _, k := range []string{"updated_at", "updatedAt"} {
		if m, ok := findMember(obj, ms, k); ok {
			s, _ := stringValue(m.val(obj))
			t, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				return Document{}, fmt.Errorf("%s %q is not an RFC 3339 time", k, s)
			}
			d.UpdatedAt = t
		}
	}
	return d, nil
}

// Messages returns the messages array's bytes.
func (d Document) Messages() []byte { return d.Raw[d.start:d.end] }

// With returns the document with its messages array replaced by msgs.
func (d Document) With(msgs []byte) []byte { return splice(d.Raw, d.start, d.end, msgs) }
