package repair

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
	"unsafe"
)

// specialBytes must find the first byte that is not plainString, for every byte value at
// every position, whatever special bytes follow it.
func TestSpecialBytesFindsTheFirst(t *testing.T) {
	for c := range 256 {
		for pos := range 8 {
			for _, after := range []byte{'a', 0, '"', 0xff} {
				w := []byte("abcdefgh")
				w[pos] = byte(c)
				for j := pos + 1; j < 8; j++ {
					w[j] = after
				}
				m := specialBytes(binary.LittleEndian.Uint64(w))
				first := -1
				for j, b := range w {
					if !plainString[b] {
						first = j
						break
					}
				}
				got := -1
				if m != 0 {
					got = bits.TrailingZeros64(m) / 8
				}
				if got != first {
					t.Fatalf("%q: first special byte at %d, found %d", w, first, got)
				}
			}
		}
	}
}

// stopBytes likewise finds the first quote, backslash or control byte, whatever bytes of
// 0x80 or more come before or after it.
func TestStopBytesFindsTheFirst(t *testing.T) {
	for c := range 256 {
		for pos := range 8 {
			for _, fill := range []byte{'a', 0x80, 0xc3, 0xff} {
				for _, after := range []byte{'a', 0, '"', 0xff} {
					w := []byte{fill, fill, fill, fill, fill, fill, fill, fill}
					w[pos] = byte(c)
					for j := pos + 1; j < 8; j++ {
						w[j] = after
					}
					first := -1
					for j, b := range w {
						if b == '"' || b == '\\' || b < 0x20 {
							first = j
							break
						}
					}
					got := -1
					if m := stopBytes(binary.LittleEndian.Uint64(w)); m != 0 {
						got = bits.TrailingZeros64(m) / 8
					}
					if got != first {
						t.Fatalf("%q: first stop byte at %d, found %d", w, first, got)
					}
				}
			}
		}
	}
}

// scanStringSlow is the rune-by-rune definition scanString must agree with.
func scanStringSlow(b []byte, i int) (int, bool, error) {
	start, escaped := i, false
	for i++; i < len(b); {
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
		case c < 0x80:
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

// scanString (eight bytes at a time, UTF-8 checked a run at a time) gives the same end,
// escape flag and error, at the same offset, as the rune-by-rune definition, on strings
// built from pieces that are valid and invalid UTF-8, escapes and stop bytes.
func TestScanStringMatchesRuneByRune(t *testing.T) {
	t.Parallel()
	pieces := []string{"a", "abcdefghij", "é", "函数", "🚀", "\u2028", "\u2029", "\\n", "\\u2028", "\\\"", "\\\\",
		"\x01", "\x1f", "\x7f", "\xff", "\xc3", "\xe2\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xc0\xaf", "\\x", "\\u12"}
	rng := rand.New(rand.NewPCG(1, 2))
	for n := 0; n < 200_000; n++ {
		b := []byte{' ', '"'}
		for k := rng.IntN(12); k > 0; k-- {
			p := pieces[rng.IntN(len(pieces))]
			if rng.IntN(4) > 0 {
				p = pieces[rng.IntN(7)] // mostly valid text
			}
			b = append(b, p...)
		}
		if rng.IntN(8) > 0 {
			b = append(b, '"')
		}
		b = append(b, "  ,"[:rng.IntN(4)]...)
		wantEnd, wantEsc, wantErr := scanStringSlow(b, 1)
		end, esc, err := scanString(b, 1)
		if end != wantEnd || esc != wantEsc && wantErr == nil || fmt.Sprint(err) != fmt.Sprint(wantErr) {
			t.Fatalf("%q: got %d %v %v, want %d %v %v", b, end, esc, err, wantEnd, wantEsc, wantErr)
		}
	}
}

// jsonString's shortcut for plain ASCII gives what encoding/json gives, for every byte.
func TestJSONStringMatchesEncoder(t *testing.T) {
	t.Parallel()
	check := func(s string) {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		if got, want := string(jsonString(s)), strings.TrimSuffix(buf.String(), "\n"); got != want {
			t.Fatalf("jsonString(%q) = %s, want %s", s, got, want)
		}
	}
	for c := range 256 {
		check(string([]byte{byte(c)}))
		check("call_" + string([]byte{byte(c)}) + "x")
	}
	for _, s := range []string{"", "toolResult", "<a&b>", "é", "\u2028", "a\u2029", "\xff"} {
		check(s)
	}
}

// validUTF8 agrees with utf8.Valid on every code point and surrogate, and on random
// bytes weighted towards lead and continuation bytes, in every length and alignment.
func TestValidUTF8MatchesStdlib(t *testing.T) {
	t.Parallel()
	for r := rune(0); r <= 0x10FFFF; r++ {
		var buf [12]byte
		n := copy(buf[:], "abcdefg")
		n += utf8.EncodeRune(buf[n:], r)
		if r >= 0xD800 && r < 0xE000 { // EncodeRune writes U+FFFD: spell the surrogate
			n = 7 + copy(buf[7:], []byte{0xED, 0xA0 | byte(r>>6)&0x1F, 0x80 | byte(r)&0x3F})
		}
		for k := 0; k < n; k++ {
			if got, want := validUTF8(buf[k:n]), utf8.Valid(buf[k:n]); got != want {
				t.Fatalf("%x: got %v, want %v", buf[k:n], got, want)
			}
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	special := []byte{0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xE1, 0xED, 0xEE, 0xEF, 0xF0, 0xF1, 0xF4, 0xF5, 0xFF, 'a'}
	for range 2_000_000 {
		b := make([]byte, rng.IntN(24))
		for i := range b {
			switch rng.IntN(3) {
			case 0:
				b[i] = byte(rng.IntN(256))
			case 1:
				b[i] = byte(0x80 + rng.IntN(64))
			default:
				b[i] = special[rng.IntN(len(special))]
			}
		}
		if got, want := validUTF8(b), utf8.Valid(b); got != want {
			t.Fatalf("%x: got %v, want %v", b, got, want)
		}
	}
}

// scanPairs is the object grammar with a callback per member, as it was before it was
// written out in scanMembersWith and scanObject: the reference they are checked against.
func scanPairs(b []byte, start, depth int, pair func(keyStart, keyEnd, valStart int) (int, error)) (end int, escaped bool, err error) {
	if err := checkDepth(start, depth); err != nil {
		return start, false, err
	}
	i := skipSpace(b, start+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, false, nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return i, escaped, &SyntaxError{i, "expected object key"}
		}
		kend, esc, err := scanString(b, i)
		if err != nil {
			return kend, escaped, err
		}
		escaped = escaped || esc
		v := skipSpace(b, kend)
		if v >= len(b) || b[v] != ':' {
			return v, escaped, &SyntaxError{v, "expected ':' after object key"}
		}
		if v = skipSpace(b, v+1); v >= len(b) {
			return v, escaped, &SyntaxError{v, "unexpected end of input"}
		}
		vend, err := pair(i, kend, v)
		if err != nil {
			return vend, escaped, err
		}
		i = skipSpace(b, vend)
		if i >= len(b) {
			return i, escaped, &SyntaxError{i, "unterminated object"}
		}
		if b[i] == '}' {
			return i + 1, escaped, nil
		}
		if b[i] != ',' {
			return i, escaped, &SyntaxError{i, "expected ',' or '}' in object"}
		}
		i = skipSpace(b, i+1)
	}
}

// scanValueRef is scanValue with objects through scanPairs.
func scanValueRef(b []byte, i, depth int) (int, error) {
	switch {
	case i < len(b) && b[i] == '{':
		end, _, err := scanPairs(b, i, depth+1, func(_, _, v int) (int, error) { return scanValueRef(b, v, depth+1) })
		return end, err
	case i < len(b) && b[i] == '[':
		return scanElements(b, i, depth+1, func(j int) (int, error) { return scanValueRef(b, j, depth+1) })
	}
	return scanValue(b, i, depth)
}

// scanMembersRef is scanMembers through scanPairs.
func scanMembersRef(b []byte, start, depth int, out []member) ([]member, int, error) {
	base := len(out)
	end, escaped, err := scanPairs(b, start, depth, func(ks, ke, vs int) (int, error) {
		vend, err := scanValueRef(b, vs, depth)
		if err != nil {
			return vend, err
		}
		for _, prev := range out[base:] {
			if bytes.Equal(prev.key(b[start:]), b[ks:ke]) {
				return vs, &SyntaxError{vs, fmt.Sprintf("duplicate key %q", b[ks+1:ke-1])}
			}
		}
		name, _ := stringValue(b[ks:ke])
		out = append(out, newMember(ks-start, vs-start, vend-start, codeOf(name)))
		return vend, nil
	})
	if err == nil && escaped {
		err = checkEscapedDuplicates(b[start:end], out[base:])
	}
	return out, end, err
}

// scanMembers gives the same members, end and error as scanPairs would, on objects
// broken in random ways (bytes dropped, doubled or replaced, keys repeated).
func TestScanMembersMatchesScanPairs(t *testing.T) {
	t.Parallel()
	seeds := []string{
		`{"role":"assistant","content":[{"type":"text","text":"hi"}],"usage":{"input":1,"output":2},"model":"m","stopReason":"stop"}`,
		`{ "a" : 1 , "b" : [ true , false , null ] , "c" : { "d" : "e\u00e9" } , "k\u0065y" : -1.5e3 }`,
		`{"id":"x","id":"y"}`, `{"a\u0062":1,"ab":2}`, `{}`, `{"":""}`,
		`{"functionResponse":{"name":"f","response":{"x":[1,{"y":2}]}},"toolUseId":"t","\u0074ype":"é","clé":1}`,
		`{"r\u006fle":1,"r\u006fle":2}`, `{"r\u006fle":1,"role":2}`, `{"role":1,"r\u006fle":2}`,
		`{"a_key_of_exactly_16":1,"key_of_fifteen_":{"key_of_seventeen_":2},"content":[],"role":"u"}`,
	}
	junk := []byte(`{}[]":,\ 0aé` + "\x01\xff")
	rng := rand.New(rand.NewPCG(5, 6))
	for n := 0; n < 300_000; n++ {
		b := []byte(seeds[rng.IntN(len(seeds))])
		for k := rng.IntN(3); k > 0 && len(b) > 1; k-- {
			at := rng.IntN(len(b))
			switch rng.IntN(3) {
			case 0:
				b = append(b[:at:at], b[at+1:]...)
			case 1:
				b = append(b[:at+1:at+1], b[at:]...)
			default:
				b[at] = junk[rng.IntN(len(junk))]
			}
		}
		if b[0] != '{' {
			continue
		}
		want, wantEnd, wantErr := scanMembersRef(b, 0, 1, nil)
		got, end, err := scanMembers(b, 0, 1, nil)
		if end != wantEnd || fmt.Sprint(err) != fmt.Sprint(wantErr) || err == nil && fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%q: got %v %d %v, want %v %d %v", b, got, end, err, want, wantEnd, wantErr)
		}
	}
}

// A member stays 10 bytes: members are the largest records of a transcript of many
// small blocks, and a 20-byte one made repairs 10% slower (see member).
func TestMemberSize(t *testing.T) {
	if n := unsafe.Sizeof(member{}); n != 10 {
		t.Fatalf("member is %d bytes, want 10", n)
	}
}

// A key starting keyFar bytes or more before its value, which its member cannot place,
// is found by scanning back, over quotes escaped inside it and white space after it.
func TestFarKeyStart(t *testing.T) {
	t.Parallel()
	long := `"a\\\"b` + strings.Repeat("k", keyFar) + `\\"`
	for _, c := range []struct {
		obj  string
		keys []string
	}{
		{`{"x":0,` + long + `:1}`, []string{`"x"`, long}},
		{`{` + long + ` :1, "y":2}`, []string{long, `"y"`}},
		{`{"":` + strings.Repeat(" ", keyFar) + `1}`, []string{`""`}},
	} {
		b := []byte(c.obj)
		ms, _, err := scanMembers(b, 0, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i, m := range ms {
			if k := m.key(b); string(k) != c.keys[i] || m.keyStart(b) != strings.Index(c.obj, c.keys[i]) {
				t.Fatalf("member %d: key of %d bytes at %d, want %d bytes at %d", i, len(k), m.keyStart(b), len(c.keys[i]), strings.Index(c.obj, c.keys[i]))
			}
		}
	}
}

// Every known name has its own code, which codeOf and scanKey both find; names that
// differ from a known one only in a byte, a length or a case have none.
func TestKeyCodes(t *testing.T) {
	t.Parallel()
	for c := keyOther + 1; c < keyCount; c++ {
		name := keyNames[c]
		_, code, _, err := scanKey([]byte(`"`+name+`":"a value long enough"}`), 0)
		if codeOf(name) != c || code != c || err != nil {
			t.Fatalf("%q: codeOf %d, scanKey %d %v, want %d", name, codeOf(name), code, err, c)
		}
		for _, other := range []string{name + "x", name[:len(name)-1], name[:len(name)-1] + "~", strings.ToUpper(name[:1]) + name[1:], "x" + name[1:]} {
			if got := codeOf(other); got != keyOther && !slices.Contains(keyNames[:], other) {
				t.Fatalf("%q has code %d (%q's)", other, got, keyNames[got])
			}
		}
	}
}

// scanKey ends and codes keys as scanString and codeOf do, whatever follows them: keys
// of every length around its two-word fast path, with escapes, non-ASCII and control
// bytes, known or not, with few or many bytes after them.
func TestScanKey(t *testing.T) {
	t.Parallel()
	alphabet := []byte("abcdefghijklmnopqrstuvwxyzACI_\\\"\x01é ")
	rng := rand.New(rand.NewPCG(7, 8))
	for n := 0; n < 200_000; n++ {
		var key []byte
		if rng.IntN(3) == 0 {
			key = []byte(keyNames[1+rng.IntN(int(keyCount)-1)])
		}
		for k := rng.IntN(20); k > 0; k-- {
			key = append(key, alphabet[rng.IntN(len(alphabet))])
		}
		b := append(append([]byte{'"'}, key...), '"')
		b = append(b, []byte(`:"xxxxxxxxxxxxxxxxxxxx"}`)[:rng.IntN(25)]...)
		end, code, esc, err := scanKey(b, 0)
		wantEnd, wantEsc, wantErr := scanString(b, 0)
		want := keyOther
		if wantErr == nil {
			name, _ := stringValue(b[:wantEnd])
			want = codeOf(name)
		}
		if end != wantEnd || fmt.Sprint(err) != fmt.Sprint(wantErr) || err == nil && (esc != wantEsc || code != want) {
			t.Fatalf("%q: got %d %d %v %v, want %d %d %v %v", b, end, code, esc, err, wantEnd, want, wantEsc, wantErr)
		}
	}
}

// scanNumberRef is scanNumber as it was, with a closure for digit runs.
func scanNumberRef(b []byte, i int) (int, error) {
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

func TestScanNumberMatchesRef(t *testing.T) {
	t.Parallel()
	alphabet := []byte("-+0123456789.eEx ,")
	rng := rand.New(rand.NewPCG(7, 8))
	for range 500_000 {
		b := make([]byte, 1+rng.IntN(10))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		if b[0] != '-' && (b[0] < '0' || b[0] > '9') {
			continue
		}
		wantEnd, wantErr := scanNumberRef(b, 0)
		end, err := scanNumber(b, 0)
		if end != wantEnd || fmt.Sprint(err) != fmt.Sprint(wantErr) {
			t.Fatalf("%q: got %d %v, want %d %v", b, end, err, wantEnd, wantErr)
		}
	}
}

// A part, one per block, stays 40 bytes: its bytes and name as pointers and lengths,
// its rarer traits as bits, its canonical form and decoded id (when not the input's) kept
// apart. A million 60-byte blocks took 8 MB more per 8 bytes.
func TestPartSize(t *testing.T) {
	if n := unsafe.Sizeof(part{}); n != 40 {
		t.Fatalf("part is %d bytes, want 40", n)
	}
}
