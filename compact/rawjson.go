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
// raw comes from a transcript the engine has validated; anything unexpected is ok=false.
func members(raw []byte) ([]member, bool) {
	i := skipWS(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return nil, false
	}
	var out []member
	i = skipWS(raw, i+1)
	if i < len(raw) && raw[i] == '}' {
		return out, true
	}
	for i < len(raw) {
		ks := i
		ke, ok := skipValue(raw, i)
		if !ok || raw[ks] != '"' {
			return nil, false
		}
		key, ok := str(raw[ks:ke])
		if !ok {
			return nil, false
		}
		i = skipWS(raw, ke)
		if i >= len(raw) || raw[i] != ':' {
			return nil, false
		}
		vs := skipWS(raw, i+1)
		ve, ok := skipValue(raw, vs)
		if !ok {
			return nil, false
		}
		out = append(out, member{key: key, start: vs, end: ve})
		i = skipWS(raw, ve)
		if i >= len(raw) {
			return nil, false
		}
		switch raw[i] {
		case ',':
			i = skipWS(raw, i+1)
		case '}':
			return out, true
		default:
			return nil, false
		}
	}
	return nil, false
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the end of the JSON value starting at i.
func skipValue(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch b[i] {
	case '"':
		for j := i + 1; j < len(b); j++ {
			switch b[j] {
			case '\\':
				j++
			case '"':
				return j + 1, true
			}
		}
		return 0, false
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end, ok := skipValue(b, j)
				if !ok {
					return 0, false
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1, true
				}
			}
		}
		return 0, false
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\n' && b[j] != '\t' && b[j] != '\r' {
		j++
	}
	return j, j > i
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
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	body := v[1 : len(v)-1]
	if bytes.IndexByte(body, '\\') < 0 {
		return string(body), true
	}
	if s, ok := unescape(body); ok {
		return s, true
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return "", false
	}
	return s, true
}

// unescape decodes a string body with the one-letter escapes results are full of (\n,
// \t, \", ...); ok is false at a \u escape, which str leaves to encoding/json.
func unescape(body []byte) (string, bool) {
	out := make([]byte, 0, len(body))
	for i := 0; i < len(body); i++ {
		c := body[i]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		if i++; i == len(body) {
			return "", false
		}
		switch body[i] {
		case 'n':
			out = append(out, '\n')
		case 't':
			out = append(out, '\t')
		case 'r':
			out = append(out, '\r')
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case '"', '\\', '/':
			out = append(out, body[i])
		default:
			return "", false
		}
	}
	return string(out), true
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
