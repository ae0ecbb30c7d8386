package repair

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// This file is a small JSON scanner that works on the original bytes. tmend must write
// untouched messages back byte for byte and keep unknown fields and the exact text of
// numbers in touched ones, so it never decodes a message into Go values: it validates
// once, then finds the spans of the few members it needs and splices new bytes in.

// MaxDepth bounds nesting; deeper input is rejected rather than risking the stack.
const MaxDepth = 512

// SyntaxError is malformed JSON at a byte offset.
type SyntaxError struct {
	Offset int
	Msg    string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("invalid JSON at byte %d: %s", e.Offset, e.Msg)
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// validate checks that b holds exactly one JSON value (surrounding space allowed), with
// valid UTF-8 and nesting of at most MaxDepth.
func validate(b []byte) error {
	i := skipSpace(b, 0)
	end, err := scanValue(b, i, 0)
	if err != nil {
		return err
	}
	if j := skipSpace(b, end); j != len(b) {
		return &SyntaxError{j, "unexpected data after the top-level value"}
	}
	return nil
}

// scanValue validates the value starting at b[i] and returns the offset just past it.
func scanValue(b []byte, i, depth int) (int, error) {
	if i >= len(b) {
		return i, &SyntaxError{i, "unexpected end of input"}
	}
	switch c := b[i]; {
	case c == '"':
		end, _, err := scanString(b, i)
		return end, err
	case c == '{':
		return scanObject(b, i, depth+1)
	case c == '[':
		return scanArray(b, i, depth+1)
	case c == 't':
		return scanLiteral(b, i, "true")
	case c == 'f':
		return scanLiteral(b, i, "false")
	case c == 'n':
		return scanLiteral(b, i, "null")
	case c == '-' || (c >= '0' && c <= '9'):
		return scanNumber(b, i)
	default:
		return i, &SyntaxError{i, fmt.Sprintf("unexpected character %q", c)}
	}
}

func scanLiteral(b []byte, i int, lit string) (int, error) {
	if !bytes.HasPrefix(b[i:], []byte(lit)) {
		return i, &SyntaxError{i, "invalid literal"}
	}
	return i + len(lit), nil
}

func scanNumber(b []byte, i int) (int, error) {
	start := i
	if b[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
			n++
		}
		return n
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case digits() == 0:
		return i, &SyntaxError{start, "invalid number"}
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			return i, &SyntaxError{start, "invalid number"}
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return i, &SyntaxError{start, "invalid number"}
		}
	}
	return i, nil
}

// scanString validates the string at b[i] (which is '"') and reports whether it holds
// escapes.
func scanString(b []byte, i int) (end int, escaped bool, err error) {
	start := i
	i++
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			return i + 1, escaped, nil
		case c == '\\':
			escaped = true
			if i+1 >= len(b) {
				return i, escaped, &SyntaxError{i, "unterminated escape"}
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || !isHex4(b[i+2:i+6]) {
					return i, escaped, &SyntaxError{i, "invalid \\u escape"}
				}
				i += 6
			default:
				return i, escaped, &SyntaxError{i, fmt.Sprintf("invalid escape \\%c", b[i+1])}
			}
		case c < 0x20:
			return i, escaped, &SyntaxError{i, "control character in string"}
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				return i, escaped, &SyntaxError{i, "invalid UTF-8"}
			}
			i += size
		}
	}
	return i, escaped, &SyntaxError{start, "unterminated string"}
}

func isHex4(b []byte) bool {
	for _, c := range b {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

func checkDepth(i, depth int) error {
	if depth > MaxDepth {
		return &SyntaxError{i, fmt.Sprintf("nesting deeper than %d levels", MaxDepth)}
	}
	return nil
}

func scanObject(b []byte, i, depth int) (int, error) {
	if err := checkDepth(i, depth); err != nil {
		return i, err
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return i, &SyntaxError{i, "expected object key"}
		}
		end, _, err := scanString(b, i)
		if err != nil {
			return end, err
		}
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return i, &SyntaxError{i, "expected ':' after object key"}
		}
		if i, err = scanValue(b, skipSpace(b, i+1), depth); err != nil {
			return i, err
		}
		i = skipSpace(b, i)
		if i >= len(b) {
			return i, &SyntaxError{i, "unterminated object"}
		}
		if b[i] == '}' {
			return i + 1, nil
		}
		if b[i] != ',' {
			return i, &SyntaxError{i, "expected ',' or '}' in object"}
		}
		i = skipSpace(b, i+1)
	}
}

func scanArray(b []byte, i, depth int) (int, error) {
	if err := checkDepth(i, depth); err != nil {
		return i, err
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, nil
	}
	for {
		var err error
		if i, err = scanValue(b, i, depth); err != nil {
			return i, err
		}
		i = skipSpace(b, i)
		if i >= len(b) {
			return i, &SyntaxError{i, "unterminated array"}
		}
		if b[i] == ']' {
			return i + 1, nil
		}
		if b[i] != ',' {
			return i, &SyntaxError{i, "expected ',' or ']' in array"}
		}
		i = skipSpace(b, i+1)
	}
}

// skip returns the end of the already validated value at b[i]. It only tracks strings
// and brackets, which is all a valid value needs.
func skip(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = skipString(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return i
	default:
		for i < len(b) && !isSpace(b[i]) && b[i] != ',' && b[i] != '}' && b[i] != ']' {
			i++
		}
		return i
	}
}

func skipString(b []byte, i int) int {
	i++
	for i < len(b) {
		j := bytes.IndexAny(b[i:], `"\`)
		if j < 0 {
			return len(b)
		}
		i += j
		if b[i] == '"' {
			return i + 1
		}
		i += 2
	}
	return i
}

// member is one key/value pair of a validated object, as spans into the object's bytes.
type member struct {
	key        []byte // raw key between the quotes (escapes not decoded)
	keyStart   int    // offset of the key's opening quote
	valStart   int
	valEnd     int
	keyEscaped bool
}

func (m member) val(obj []byte) []byte { return obj[m.valStart:m.valEnd] }

// members lists the members of the validated object obj. It reports duplicate keys,
// because a message whose "id" or "role" appears twice has no single meaning.
func members(obj []byte, buf []member) ([]member, error) {
	out := buf[:0]
	i := skipSpace(obj, 1)
	if obj[i] == '}' {
		return out, nil
	}
	for {
		end := skipString(obj, i)
		m := member{key: obj[i+1 : end-1], keyStart: i}
		m.keyEscaped = bytes.IndexByte(m.key, '\\') >= 0
		if m.keyEscaped {
			var k string
			if err := json.Unmarshal(obj[i:end], &k); err != nil {
				return out, err
			}
			m.key = []byte(k)
		}
		i = skipSpace(obj, skipSpace(obj, end)+1)
		m.valStart = i
		m.valEnd = skip(obj, i)
		for _, prev := range out {
			if bytes.Equal(prev.key, m.key) {
				return out, &SyntaxError{m.keyStart, fmt.Sprintf("duplicate key %q", m.key)}
			}
		}
		out = append(out, m)
		i = skipSpace(obj, m.valEnd)
		if obj[i] == '}' {
			return out, nil
		}
		i = skipSpace(obj, i+1)
	}
}

// elements returns the element spans of the validated array arr.
func elements(arr []byte) [][]byte {
	var out [][]byte
	i := skipSpace(arr, 1)
	if arr[i] == ']' {
		return out
	}
	for {
		end := skip(arr, i)
		out = append(out, arr[i:end])
		i = skipSpace(arr, end)
		if arr[i] == ']' {
			return out
		}
		i = skipSpace(arr, i+1)
	}
}

// stringValue decodes a JSON string value; ok is false for any other type.
func stringValue(v []byte) (s string, ok bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	inner := v[1 : len(v)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return string(inner), true
	}
	if err := json.Unmarshal(v, &s); err != nil {
		return "", false
	}
	return s, true
}

// isString reports whether v is the JSON string s (s must need no escaping).
func isString(v []byte, s string) bool {
	return len(v) == len(s)+2 && v[0] == '"' && string(v[1:len(v)-1]) == s
}

func isTrue(v []byte) bool { return string(v) == "true" }

// isEmptyValue reports null, "", whitespace-only strings, [] and {}.
func isEmptyValue(v []byte) bool {
	if len(v) == 0 || string(v) == "null" {
		return true
	}
	switch v[0] {
	case '"':
		s, _ := stringValue(v)
		return len(bytes.TrimSpace([]byte(s))) == 0
	case '[', '{':
		return skipSpace(v, 1) == len(v)-1
	}
	return false
}

// jsonString encodes s as a JSON string without HTML escaping.
func jsonString(s string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// splice returns obj with bytes [start:end) replaced by repl.
func splice(obj []byte, start, end int, repl []byte) []byte {
	out := make([]byte, 0, len(obj)-(end-start)+len(repl))
	out = append(out, obj[:start]...)
	out = append(out, repl...)
	return append(out, obj[end:]...)
}

// setMember returns obj with the value of member m replaced by val.
func setMember(obj []byte, m member, val []byte) []byte {
	return splice(obj, m.valStart, m.valEnd, val)
}

// removeMember returns obj without member idx of ms (as returned by members(obj)).
func removeMember(obj []byte, ms []member, idx int) []byte {
	m := ms[idx]
	switch {
	case len(ms) == 1:
		return splice(obj, 1, len(obj)-1, nil)
	case idx == 0:
		return splice(obj, m.keyStart, ms[1].keyStart, nil)
	default:
		return splice(obj, ms[idx-1].valEnd, m.valEnd, nil)
	}
}

// joinArray builds a compact JSON array from element bytes.
func joinArray(elems [][]byte) []byte {
	n := 2
	for _, e := range elems {
		n += len(e) + 1
	}
	out := make([]byte, 0, n)
	out = append(out, '[')
	for i, e := range elems {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, e...)
	}
	return append(out, ']')
}

// findMember returns the member named key, if any.
func findMember(obj []byte, ms []member, key string) (member, bool) {
	for _, m := range ms {
		if string(m.key) == key {
			return m, true
		}
	}
	return member{}, false
}
