package compact

import (
	"bytes"
	"encoding/json"
	"unsafe"
)

// member is one member of a JSON object: its key and where its value lies in the
// object's text.
type member struct {
	key        string
	start, end int
}

// members lists the members of the JSON object raw in order; ok is false when raw is not
// an object. Values are located, not copied, so an edit can replace exactly one of them.
func members(raw []byte) ([]member, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		return nil, false
	}
	var out []member
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return nil, false
		}
		key, ok := kt.(string)
		if !ok {
			return nil, false
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
		end := int(dec.InputOffset())
		out = append(out, member{key: key, start: end - len(v), end: end})
	}
	return out, true
}

// find returns the span of the first member key of raw (the engine reads the first of a
// repeated key too, and refuses such transcripts anyway).
func find(raw []byte, key string) (start, end int, ok bool) {
	ms, ok := members(raw)
	if !ok {
		return 0, 0, false
	}
	for _, m := range ms {
		if m.key == key {
			return m.start, m.end, true
		}
	}
	return 0, 0, false
}

// findPath follows keys from raw, returning the last one's value span in raw.
func findPath(raw []byte, keys ...string) (start, end int, ok bool) {
	off := 0
	cur := raw
	for _, k := range keys {
		s, e, found := find(cur, k)
		if !found {
			return 0, 0, false
		}
		off += s
		cur = cur[s:e]
	}
	return off, off + len(cur), true
}

// value returns raw's member key, or nil.
func value(raw []byte, key string) []byte {
	s, e, ok := find(raw, key)
	if !ok {
		return nil
	}
	return raw[s:e]
}

// str decodes a JSON string value; ok is false for any other value.
func str(v []byte) (string, bool) {
	if len(v) == 0 || v[0] != '"' {
		return "", false
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return "", false
	}
	return s, true
}

// quote encodes s as a JSON string without HTML escapes, as transcripts are written.
func quote(s string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// offsetIn returns where sub starts inside buf, when sub is a slice of buf's array (the
// engine's outline aliases its input); ok is false otherwise, and then the caller leaves
// that content alone rather than guess.
func offsetIn(buf, sub []byte) (int, bool) {
	if len(sub) == 0 || len(buf) == 0 {
		return 0, false
	}
	d := int(uintptr(unsafe.Pointer(unsafe.SliceData(sub))) - uintptr(unsafe.Pointer(unsafe.SliceData(buf))))
	if d < 0 || d+len(sub) > len(buf) || !bytes.Equal(buf[d:d+len(sub)], sub) {
		return 0, false
	}
	return d, true
}
