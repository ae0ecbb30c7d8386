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

// ParseDocument finds b's messages array and validates the rest of b. The array itself
// is validated by Repair or Validate, so that it is scanned once.
func ParseDocument(b []byte) (Document, error) {
	d := Document{Raw: b}
	i := skipSpace(b, 0)
	if i == len(b) {
		return Document{}, &SyntaxError{i, "empty document"}
	}
	switch b[i] {
	case '[':
		d.start, d.end = i, skip(b, i)
		if j := skipSpace(b, d.end); j != len(b) {
			return Document{}, &SyntaxError{j, "unexpected data after the top-level value"}
		}
		return d, nil
	case '{':
	default:
		if err := validate(b); err != nil {
			return Document{}, err
		}
		return Document{}, fmt.Errorf("document is a JSON %s; want an array of messages or an object holding one", kindOf(b[i]))
	}
	ms, end, err := scanEnvelope(b, i)
	if err != nil {
		return Document{}, err
	}
	if j := skipSpace(b, end); j != len(b) {
		return Document{}, &SyntaxError{j, "unexpected data after the top-level value"}
	}
	obj := b[i:end]
	for _, key := range EnvelopeKeys {
		if m, ok := findMember(obj, ms, key); ok && d.Key == "" {
			d.Key, d.start, d.end = key, i+int(m.valStart), i+int(m.valEnd)
		} else if ok {
			// Only the chosen array is left to the engine; validate any other one here.
			if err := validate(m.val(obj)); err != nil {
				return Document{}, err
			}
		}
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

// scanEnvelope is scanMembers for a document's top-level object, except that array
// values of EnvelopeKeys are skipped rather than validated.
func scanEnvelope(b []byte, start int) ([]member, int, error) {
	var out []member
	i := skipSpace(b, start+1)
	if i < len(b) && b[i] == '}' {
		return out, i + 1, nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return out, i, &SyntaxError{i, "expected object key"}
		}
		kend, _, err := scanString(b, i)
		if err != nil {
			return out, kend, err
		}
		m := member{keyStart: int32(i - start), keyEnd: int32(kend - start)}
		i = skipSpace(b, kend)
		if i >= len(b) || b[i] != ':' {
			return out, i, &SyntaxError{i, "expected ':' after object key"}
		}
		i = skipSpace(b, i+1)
		if i >= len(b) {
			return out, i, &SyntaxError{i, "unexpected end of input"}
		}
		var vend int
		if b[i] == '[' && isEnvelopeKey(b[start+int(m.keyStart):kend]) {
			vend = skip(b, i)
		} else if vend, err = scanValue(b, i, 1); err != nil {
			return out, vend, err
		}
		m.valStart, m.valEnd = int32(i-start), int32(vend-start)
		out = append(out, m)
		i = skipSpace(b, vend)
		if i >= len(b) {
			return out, i, &SyntaxError{i, "unterminated object"}
		}
		if b[i] == '}' {
			i++
			break
		}
		if b[i] != ',' {
			return out, i, &SyntaxError{i, "expected ',' or '}' in object"}
		}
		i = skipSpace(b, i+1)
	}
	return out, i, checkEscapedDuplicates(b[start:i], out)
}

func isEnvelopeKey(quoted []byte) bool {
	for _, k := range EnvelopeKeys {
		if isString(quoted, k) {
			return true
		}
	}
	return false
}

// Messages returns the messages array's bytes.
func (d Document) Messages() []byte { return d.Raw[d.start:d.end] }

// With returns the document with its messages array replaced by msgs.
func (d Document) With(msgs []byte) []byte { return splice(d.Raw, d.start, d.end, msgs) }
