package repair

import (
	"bytes"
	"strconv"
	"strings"
	"unicode/utf8"
)

// idString decodes the JSON string v for comparing ids. Unlike encoding/json it keeps a
// lone UTF-16 surrogate (\ud83d) apart from U+FFFD and from every other surrogate, by
// writing it as its own three bytes (WTF-8): two ids are equal exactly when their JSON
// texts denote the same code units. ok is false when v is not a string.
func idString(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	inner := v[1 : len(v)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return inputString(v)
	}
	var b strings.Builder
	b.Grow(len(inner))
	for i := 0; i < len(inner); i++ {
		c := inner[i]
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		i++
		switch inner[i] {
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'u':
			u := hex4(inner[i+1 : i+5])
			i += 4
			if u >= 0xD800 && u < 0xDC00 && i+6 < len(inner) && inner[i+1] == '\\' && inner[i+2] == 'u' {
				if lo := hex4(inner[i+3 : i+7]); lo >= 0xDC00 && lo < 0xE000 {
					b.WriteRune(rune((u-0xD800)<<10|(lo-0xDC00)) + 0x10000)
					i += 6
					continue
				}
			}
			if u >= 0xD800 && u < 0xE000 {
				b.Write([]byte{0xE0 | byte(u>>12), 0x80 | byte(u>>6)&0x3F, 0x80 | byte(u)&0x3F})
				continue
			}
			b.WriteRune(rune(u))
		default: // '"', '\\', '/'
			b.WriteByte(inner[i])
		}
	}
	return b.String(), true
}

func hex4(h []byte) int {
	n, _ := strconv.ParseUint(string(h), 16, 32)
	return int(n)
}

// encodeID is the JSON text of an id decoded by idString: lone surrogates go back to
// their \u escapes, so a rewritten id keeps the code units it had.
func encodeID(s string) []byte {
	if utf8.ValidString(s) {
		return jsonString(s)
	}
	var plain strings.Builder
	var out []byte
	flush := func() {
		if plain.Len() > 0 {
			q := jsonString(plain.String())
			out = append(out, q[1:len(q)-1]...)
			plain.Reset()
		}
	}
	out = append(out, '"')
	for i := 0; i < len(s); {
		_, n := utf8.DecodeRuneInString(s[i:])
		if loneSurrogate(s, i) {
			flush()
			u := int(s[i]&0x0F)<<12 | int(s[i+1]&0x3F)<<6 | int(s[i+2]&0x3F)
			out = append(out, []byte(`\u`+strconv.FormatInt(int64(u), 16))...)
			i += 3
			continue
		}
		plain.WriteString(s[i : i+n])
		i += n
	}
	flush()
	return append(out, '"')
}

// loneSurrogate reports whether s, a string idString decoded, holds a lone surrogate at
// i: the 3-byte form (0xED 0xA0-0xBF ..) that is not valid UTF-8.
func loneSurrogate(s string, i int) bool {
	r, n := utf8.DecodeRuneInString(s[i:])
	return r == utf8.RuneError && n == 1 && s[i] == 0xED && i+2 < len(s)
}
