package repair

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/bits"
	"strings"
	"unicode/utf8"
	"unsafe"
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

// skipSpace returns the offset of the first byte at or after b[i] that is not white
// space. Stored JSON is mostly compact, so the one test that rules out white space (every
// kind is at most ' ') comes first.
func skipSpace(b []byte, i int) int {
	for i < len(b) && b[i] <= ' ' && isSpace(b[i]) {
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
	// Written without a helper closure for the digit runs: every timestamp and count of
	// a transcript comes through here.
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i++; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		}
	default:
		return i, &SyntaxError{start, "invalid number"}
	}
	if i < len(b) && b[i] == '.' {
		i++
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			return i, &SyntaxError{start, "invalid number"}
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			return i, &SyntaxError{start, "invalid number"}
		}
	}
	return i, nil
}

// plainString marks bytes that need no attention inside a string: printable ASCII other
// than the quote and the backslash.
var plainString = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// specialBytes has the high bit set in each byte of x that is not plainString (and maybe
// in bytes after the first such byte, which callers ignore): eight bytes tested at once,
// because most of a transcript's bytes are inside strings.
func specialBytes(x uint64) uint64 {
	quote := x ^ ('"' * lsb)
	backslash := x ^ ('\\' * lsb)
	zero := (quote-lsb)&^quote | (backslash-lsb)&^backslash // a byte equal to '"' or '\\'
	control := (x - 0x20*lsb) &^ x                          // a byte below 0x20
	return (zero | control | x) & msb                       // x: a byte of 0x80 or more
}

// stopBytes is specialBytes without the bytes of 0x80 or more: it finds the quote, the
// backslash or the control byte that ends a run of text, UTF-8 included.
func stopBytes(x uint64) uint64 {
	quote := x ^ ('"' * lsb)
	backslash := x ^ ('\\' * lsb)
	zero := (quote-lsb)&^quote | (backslash-lsb)&^backslash
	control := (x - 0x20*lsb) &^ x
	return (zero | control) & msb
}

// scanString validates the string at b[i] (which is '"') and reports whether it holds
// escapes. Most strings hold no escapes: that case is kept short. It finds the first
// quote, backslash or control byte eight bytes at a time, noting on the way whether any
// byte was 0x80 or more; only then is the text before it checked as UTF-8, in one call
// (rune by rune costs several times more on text in other scripts). The rest is left to
// scanStringFrom.
func scanString(b []byte, i int) (end int, escaped bool, err error) {
	j := i + 1
	var high uint64 // the bytes passed, ORed: its top bits say whether one was non-ASCII
	for j+8 <= len(b) {
		x := binary.LittleEndian.Uint64(b[j:])
		if m := stopBytes(x); m != 0 {
			k := bits.TrailingZeros64(m) / 8
			high |= x & (1<<(8*k) - 1) // the bytes before the stop
			if high&msb != 0 && !validUTF8(b[i+1:j+k]) {
				return scanStringFrom(b, i, i+1) // finds where
			}
			j += k
			if b[j] == '"' {
				return j + 1, false, nil
			}
			return scanStringFrom(b, i, j)
		}
		high |= x
		j += 8
	}
	return scanStringFrom(b, i, i+1)
}

// scanKey is scanString for an object key, which it also codes (keyCode; keyOther when
// escaped is true and the key is not known). Most keys are a few letters of ASCII: those
// of up to 15 bytes are checked and coded from two words read once.
func scanKey(b []byte, i int) (end int, code keyCode, escaped bool, err error) {
	if len(b)-i > 16 {
		w := b[i+1 : i+17]
		lo, hi := binary.LittleEndian.Uint64(w), binary.LittleEndian.Uint64(w[8:])
		n := 16 // where the first byte that is not plain ASCII is, if in w
		if m := specialBytes(lo); m != 0 {
			n = bits.TrailingZeros64(m) / 8
		} else if m := specialBytes(hi); m != 0 {
			n = 8 + bits.TrailingZeros64(m)/8
		}
		if n < 16 && w[n] == '"' {
			if n == 0 {
				return i + 2, keyOther, false, nil
			}
			mask := &keyMasks[n]
			return i + n + 2, lookupKey(lo&mask[0], hi&mask[1], n), false, nil
		}
	}
	end, escaped, err = scanString(b, i)
	if err == nil {
		if escaped {
			name, _ := stringValue(b[i:end])
			code = codeOf(name)
		} else {
			code = codeOf(b[i+1 : end-1])
		}
	}
	return end, code, escaped, err
}

// scanStringFrom is scanString for the string at b[start], of which b[start+1:i] is
// already known to be valid and free of quotes, backslashes and control bytes.
func scanStringFrom(b []byte, start, i int) (end int, escaped bool, err error) {
	for i < len(b) {
		for i+8 <= len(b) {
			m := specialBytes(binary.LittleEndian.Uint64(b[i:]))
			if m != 0 {
				i += bits.TrailingZeros64(m) / 8
				break
			}
			i += 8
		}
		if i == len(b) {
			break // unterminated
		}
		c := b[i]
		switch {
		case plainString[c]:
			i++
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
		default:
			// Non-ASCII: check the text up to the next quote, backslash or control byte
			// in one go, and only when it is not valid UTF-8 look for where it breaks.
			run := i + 1
			for run+8 <= len(b) {
				if m := stopBytes(binary.LittleEndian.Uint64(b[run:])); m != 0 {
					run += bits.TrailingZeros64(m) / 8
					break
				}
				run += 8
			}
			if run+8 > len(b) {
				for run < len(b) && plainString[b[run]] || run < len(b) && b[run] >= 0x80 {
					run++
				}
			}
			if validUTF8(b[i:run]) {
				i = run
				continue
			}
			for i < run {
				r, size := utf8.DecodeRune(b[i:run])
				if r == utf8.RuneError && size == 1 {
					return i, escaped, &SyntaxError{i, "invalid UTF-8"}
				}
				i += size
			}
		}
	}
	return i, escaped, &SyntaxError{start, "unterminated string"}
}

// validUTF8 is utf8.Valid, two to three times faster on text that mixes scripts (whose
// changes of sequence length defeat branch prediction in utf8.Valid). It runs a
// "shift-based" DFA: utf8DFA[c] packs, for every state, the state that byte c leads to,
// six bits each at the state's own offset, so one step is a load indexed by the byte (not
// by the state, so it need not wait for the previous step) and a shift.
func validUTF8(p []byte) bool {
	var s uint64 // the state is s&63; the bits above it are left over from the shift
	for len(p) >= 8 {
		if s&63 == utf8Accept && binary.LittleEndian.Uint64(p)&msb == 0 {
			p = p[8:] // eight ASCII bytes between sequences
			continue
		}
		for _, c := range p[:8] {
			s = utf8DFA[c] >> (s & 63)
		}
		p = p[8:]
	}
	for _, c := range p {
		s = utf8DFA[c] >> (s & 63)
	}
	return s&63 == utf8Accept
}

// The states of validUTF8, as bit offsets into a utf8DFA entry.
const (
	utf8Accept = iota * 6 // between sequences
	utf8Error             // invalid: every byte keeps it here
	utf8Need1             // one continuation byte (80..BF) to go
	utf8Need2
	utf8Need3
	utf8AfterE0 // the second byte must be A0..BF (no overlong forms)
	utf8AfterED // 80..9F (no surrogates)
	utf8AfterF0 // 90..BF (no overlong forms)
	utf8AfterF4 // 80..8F (nothing above U+10FFFF)
)

// utf8DFA is built from the table of well-formed sequences in the Unicode standard
// (table 3-7), the one utf8.Valid follows.
var utf8DFA = func() (t [256]uint64) {
	on := func(from, to uint64, lo, hi int) {
		for c := lo; c <= hi; c++ {
			t[c] = t[c]&^(63<<from) | to<<from
		}
	}
	for from := uint64(utf8Accept); from <= utf8AfterF4; from += 6 {
		on(from, utf8Error, 0x00, 0xFF)
	}
	on(utf8Accept, utf8Accept, 0x00, 0x7F)
	on(utf8Accept, utf8Need1, 0xC2, 0xDF)
	on(utf8Accept, utf8AfterE0, 0xE0, 0xE0)
	on(utf8Accept, utf8Need2, 0xE1, 0xEC)
	on(utf8Accept, utf8AfterED, 0xED, 0xED)
	on(utf8Accept, utf8Need2, 0xEE, 0xEF)
	on(utf8Accept, utf8AfterF0, 0xF0, 0xF0)
	on(utf8Accept, utf8Need3, 0xF1, 0xF3)
	on(utf8Accept, utf8AfterF4, 0xF4, 0xF4)
	on(utf8Need1, utf8Accept, 0x80, 0xBF)
	on(utf8Need2, utf8Need1, 0x80, 0xBF)
	on(utf8Need3, utf8Need2, 0x80, 0xBF)
	on(utf8AfterE0, utf8Need1, 0xA0, 0xBF)
	on(utf8AfterED, utf8Need1, 0x80, 0x9F)
	on(utf8AfterF0, utf8Need2, 0x90, 0xBF)
	on(utf8AfterF4, utf8Need2, 0x80, 0x8F)
	return t
}()

func isHex4(b []byte) bool {
	for _, c := range b {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') && (c < 'A' || c > 'F') {
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

// scanElements validates the array at b[i], at nesting level depth, handing each
// element's start to elem, which validates the element and returns its end. It is the
// one place that knows the array grammar; callers differ only in what they keep.
func scanElements(b []byte, i, depth int, elem func(start int) (int, error)) (int, error) {
	if err := checkDepth(i, depth); err != nil {
		return i, err
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, nil
	}
	for {
		if i >= len(b) {
			return i, &SyntaxError{i, "unexpected end of input"}
		}
		end, err := elem(i)
		if err != nil {
			return end, err
		}
		i = skipSpace(b, end)
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

// scanObject validates the object at b[i], at nesting level depth. scanMembersWith has the
// same grammar and also collects the members: keep the two in step.
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
		kend, _, _, err := scanKey(b, i)
		if err != nil {
			return kend, err
		}
		v := skipSpace(b, kend)
		if v >= len(b) || b[v] != ':' {
			return v, &SyntaxError{v, "expected ':' after object key"}
		}
		if v = skipSpace(b, v+1); v >= len(b) {
			return v, &SyntaxError{v, "unexpected end of input"}
		}
		vend, err := scanValue(b, v, depth)
		if err != nil {
			return vend, err
		}
		i = skipSpace(b, vend)
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
	return scanElements(b, i, depth, func(j int) (int, error) { return scanValue(b, j, depth) })
}

// structural marks the bytes skip must look at inside a container.
var structural = func() (t [256]bool) {
	for _, c := range []byte(`"{}[]`) {
		t[c] = true
	}
	return t
}()

// skip returns the end of the already validated value at b[i]. It only tracks strings
// and brackets, which is all a valid value needs.
func skip(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			c := b[i]
			if !structural[c] {
				i++
				continue
			}
			switch c {
			case '"':
				i = skipString(b, i)
				continue
			case '{', '[':
				depth++
			default:
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	default:
		for i < len(b) && !isSpace(b[i]) && b[i] != ',' && b[i] != '}' && b[i] != ']' {
			i++
		}
		return i
	}
}

// skipString returns the end of the validated string at b[i]: the first quote not
// escaped by an odd run of backslashes.
func skipString(b []byte, i int) int {
	i++
	// Most strings are short keys and words, where a plain loop beats IndexByte's setup.
	for end := min(i+16, len(b)); i < end; i++ {
		switch b[i] {
		case '"':
			return i + 1
		case '\\':
			i++
		}
	}
	if i > len(b) {
		return len(b)
	}
	for {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			return len(b)
		}
		i += j
		k := i - 1
		for b[k] == '\\' {
			k--
		}
		i++
		if (i-2-k)%2 == 0 {
			return i
		}
	}
}

// member is one key/value pair of a validated object, as offsets into the object's
// bytes. Every message and block keeps a list of its members, and in a transcript of
// many small blocks they are its largest records, so a member is 10 bytes, aligned to
// one: where its value starts and ends, its key's code, and how far before the value the
// key starts (keyFar when that far or farther: then found by scanning back, keyStart).
// A larger member (20 bytes) made a repair 10% slower; where the key ends is found again
// when needed (keyEnd).
type member struct {
	start, end [4]byte // the value's offsets, little-endian (valStart, valEnd)
	kc         keyCode
	back       uint8 // valStart minus the key's start, up to keyFar
}

// keyFar is a member's back for a key starting that far or farther before its value.
const keyFar = 255

func newMember(keyStart, valStart, valEnd int, code keyCode) member {
	var m member
	m.set(keyStart, valStart, valEnd, code)
	return m
}

// set fills m in place: a member built and copied in cost a stall (see scanMembersWith).
func (m *member) set(keyStart, valStart, valEnd int, code keyCode) {
	binary.LittleEndian.PutUint32(m.start[:], uint32(valStart))
	binary.LittleEndian.PutUint32(m.end[:], uint32(valEnd))
	m.kc, m.back = code, uint8(min(valStart-keyStart, keyFar))
}

func (m *member) valStart() int { return int(binary.LittleEndian.Uint32(m.start[:])) }

func (m *member) valEnd() int { return int(binary.LittleEndian.Uint32(m.end[:])) }

// code is the code of the decoded key.
func (m *member) code() keyCode { return m.kc }

// keyStart returns the offset of the key's opening quote.
func (m *member) keyStart(obj []byte) int {
	if m.back < keyFar {
		return m.valStart() - int(m.back)
	}
	// Inside the key every quote is escaped, by an odd run of backslashes; the opening
	// quote follows '{', ',' or white space.
	i := m.keyEnd(obj) - 2
	for {
		if obj[i] == '"' {
			k := i - 1
			for obj[k] == '\\' {
				k--
			}
			if (i-1-k)%2 == 0 {
				return i
			}
		}
		i--
	}
}

// keyEnd returns the offset just past the key's closing quote: only white space and the
// colon lie between it and the value.
func (m *member) keyEnd(obj []byte) int {
	i := m.valStart() - 1
	for obj[i] != '"' {
		i--
	}
	return i + 1
}

// key returns the key as written, quotes included.
func (m *member) key(obj []byte) []byte { return obj[m.keyStart(obj):m.keyEnd(obj)] }

func (m *member) val(obj []byte) []byte { return obj[m.valStart():m.valEnd()] }

// is reports whether the member's key is key (which must need no escaping); for keys
// without a code, which compare as bytes (findMember).
func (m *member) is(obj []byte, key string) bool {
	raw := m.key(obj)
	inner := raw[1 : len(raw)-1]
	if len(inner) == len(key) {
		return string(inner) == key
	}
	// Only a key spelled with escapes is longer than the name it decodes to.
	if len(inner) < len(key) || bytes.IndexByte(inner, '\\') < 0 {
		return false
	}
	k, _ := stringValue(raw)
	return k == key
}

// name returns the member's decoded key.
func (m *member) name(obj []byte) string {
	k, _ := stringValue(m.key(obj))
	return k
}

// block is an element of a message's content, tool_calls or parts array, with its members
// (offsets relative to raw) when it is an object. It holds both as a pointer and a
// length, not as slices (24 bytes, not 48): a transcript of many small blocks has a
// record per block. raw and members make the slices again.
type block struct {
	start *byte   // raw's first byte
	ms    *member // the first member; nil when the block is not an object
	size  int32   // len(raw), within MaxSize
	nms   int32   // len(members)
}

func newBlock(raw []byte, ms []member) block {
	return block{start: unsafe.SliceData(raw), ms: unsafe.SliceData(ms), size: int32(len(raw)), nms: int32(len(ms))}
}

func (b block) raw() []byte { return unsafe.Slice(b.start, b.size) }

func (b block) members() []member { return unsafe.Slice(b.ms, b.nms) }

// blockArrays are the message members whose elements the engine looks into; their
// blocks are collected while the message is validated, so they are scanned once.
var blockArrays = [...]keyCode{keyContent, keyToolCalls, keyParts}

// arrayBlocks holds the blocks of each blockArrays member of a message or fields object,
// as a pointer and a length each (40 bytes, not three 24-byte slices). A member that is
// not an array, or whose blocks were not collected, has none (nil). A message points to
// its own in the scanner's slab, and has none (nil) when it has no such array: in
// LangChain's and the whole-message dialects, most messages.
type arrayBlocks struct {
	first [len(blockArrays)]*block
	n     [len(blockArrays)]int32
}

// noArrays is the arrays of a message that has none, scanned.
var noArrays arrayBlocks

// of returns the blocks of blockArrays[k] (none of a nil a).
func (a *arrayBlocks) of(k int) []block {
	if a == nil {
		return nil
	}
	return unsafe.Slice(a.first[k], a.n[k])
}

func (a *arrayBlocks) set(k int, blks []block) {
	a.first[k], a.n[k] = unsafe.SliceData(blks), int32(len(blks))
}

// scanner validates messages and keeps what it found in slabs that the whole transcript
// shares, so a transcript costs a few allocations rather than a few per message.
type scanner struct {
	members      []member // of messages
	blockMembers []member // of blocks; a slab of its own, filled while members grows
	blocks       []block
	fieldMembers []member      // of fields objects
	fields       []fieldsObj   // the messages' fields objects (message.fieldsAt)
	arrays       []arrayBlocks // the messages' (message.arrays); a full slab is left to them
	// Counts over all chunks (see rechunk), for the working set (checkMemory).
	numBlocks, numMembers, numMsgs int
	maxMemory                      int64 // Options.MaxMemory
}

// newArrays returns a message's arrayBlocks in the slab, which is never regrown: the
// messages before keep pointers into it.
func (sc *scanner) newArrays() *arrayBlocks {
	if len(sc.arrays) == cap(sc.arrays) {
		sc.arrays = make([]arrayBlocks, 0, max(64, min(2*cap(sc.arrays), 1<<14)))
	}
	sc.arrays = append(sc.arrays, arrayBlocks{})
	return &sc.arrays[len(sc.arrays)-1]
}

// fieldsKey reports a message member whose object value holds the message's own fields
// (LangChain's {type, data} and {lc, type, id, kwargs} forms, Mastra's content object):
// the scanner collects its members and block arrays in the same pass as the message's,
// so they are scanned once.
func fieldsKey(code keyCode) bool { return code == keyData || code == keyKwargs || code == keyContent }

// fieldsObj is a message's fields object: the member holding it, its members (offsets
// relative to the object) and the blocks of its blockArrays members.
type fieldsObj struct {
	key    keyCode
	ms     []member
	arrays arrayBlocks
}

// scanMessage validates the object at b[start] and fills in m's members, the blocks of
// its blockArrays members and its first fields object (fieldsAt), and returns its end.
// It writes them into the message record in place: returned, they were 160 bytes copied
// twice per message.
func (sc *scanner) scanMessage(b []byte, start int, m *message) (end int, err error) {
	var base int
	sc.members, base, end, err = scanMembersWith(b, start, 2, sc.members, func(code keyCode, vstart int) (int, bool, error) {
		if b[vstart] == '{' {
			return sc.scanFields(b, code, vstart, m)
		}
		for k, c := range blockArrays {
			if code == c {
				blks, vend, err := sc.scanBlocks(b, vstart, 3)
				if m.arrays == nil {
					m.arrays = sc.newArrays()
				}
				m.arrays.set(k, blks)
				return vend, true, err
			}
		}
		return 0, false, nil
	})
	m.setMembers(sc.members[base:len(sc.members):len(sc.members)])
	sc.numMembers += len(m.ms())
	sc.numMsgs++
	if err == nil {
		err = sc.checkMemory()
	}
	return end, err
}

// scanFields scans the fields object at b[vstart], the value of m's member code, with
// the blocks of its blockArrays members, into sc.fields (m.fieldsAt); ok is false for a
// second one (scanned as any value; the key check fails it if it repeats the first).
func (sc *scanner) scanFields(b []byte, code keyCode, vstart int, m *message) (int, bool, error) {
	if m.fieldsAt != 0 {
		return 0, false, nil
	}
	var arrays arrayBlocks
	var vend, base int
	var err error
	sc.fieldMembers, base, vend, err = scanMembersWith(b, vstart, 3, sc.fieldMembers, func(c keyCode, vs int) (int, bool, error) {
		if b[vs] != '[' {
			return 0, false, nil // a fields object inside: scanned as any value
		}
		for k, key := range blockArrays {
			if c == key {
				blks, vend, err := sc.scanBlocks(b, vs, 4)
				arrays.set(k, blks)
				return vend, true, err
			}
		}
		return 0, false, nil
	})
	ms := sc.fieldMembers[base:len(sc.fieldMembers):len(sc.fieldMembers)]
	sc.fields = append(sc.fields, fieldsObj{key: code, ms: ms, arrays: arrays})
	m.fieldsAt = int32(len(sc.fields))
	sc.numMembers += len(ms)
	return vend, true, err
}

// scanBlocks validates the array at b[i], at nesting level depth (3 for a message
// member), appends its elements to sc.blocks and returns them.
func (sc *scanner) scanBlocks(b []byte, i, depth int) ([]block, int, error) {
	base := len(sc.blocks)
	end, err := scanElements(b, i, depth, func(j int) (int, error) {
		var ms []member
		var end int
		var err error
		if b[j] == '{' {
			var mbase int
			if sc.blockMembers, mbase, end, err = scanMembersWith(b, j, depth+1, sc.blockMembers, nil); err != nil {
				return end, err
			}
			ms = sc.blockMembers[mbase:len(sc.blockMembers):len(sc.blockMembers)]
		} else if end, err = scanValue(b, j, depth); err != nil {
			return end, err
		}
		blk := newBlock(b[j:end], ms)
		if len(sc.blocks) == cap(sc.blocks) {
			// Also checked here, not only per message: one message may hold them all.
			if err := sc.checkMemory(); err != nil {
				return end, err
			}
			sc.blocks, base = rechunk(sc.blocks, base), 0
		}
		sc.blocks = append(sc.blocks, blk)
		sc.numBlocks++
		sc.numMembers += len(ms)
		return end, nil
	})
	return sc.blocks[base:len(sc.blocks):len(sc.blocks)], end, err
}

// rechunk continues the full slab s in a new array that starts with s[base:], the part
// of the object being scanned so far. The sub-slices already handed out keep the old
// array alive as it is: growing with append would copy them too and leave both copies
// alive, which made a transcript of a million blocks hold its slabs about five times
// over. The new array is twice the old while small, then a quarter larger, as append
// grows slices.
func rechunk[T any](s []T, base int) []T {
	n, c := len(s)-base, cap(s)
	if c < 1<<14 {
		c *= 2
	} else {
		c += c / 4
	}
	out := make([]T, n, max(c, 2*n, 64))
	copy(out, s[base:])
	return out
}

// scanMembers validates the object starting at b[start] and returns its members, with
// offsets relative to start, appended to out, and the object's end. depth is the
// object's own nesting level.
func scanMembers(b []byte, start, depth int, out []member) ([]member, int, error) {
	out, base, end, err := scanMembersWith(b, start, depth, out, nil)
	return out[base:len(out):len(out)], end, err
}

// scanMembersWith is scanMembers where value, when it returns ok, validates a member's
// value itself and returns its end. value is asked only about members whose value is an
// array (all its callers look for one) or a fields object (fieldsKey), which spares a call per member, and is given the
// code of the decoded key: a key spelled with escapes is the same key. It is scanPairs written out rather than called with
// a callback: every message and block goes through here, and the callback (with out
// captured by reference) cost about a tenth of a repair.
//
// It returns out grown (see rechunk), where the object's members start in it, and the
// object's end.
func scanMembersWith(b []byte, start, depth int, out []member, value func(code keyCode, vstart int) (int, bool, error)) ([]member, int, int, error) {
	base := len(out)
	if err := checkDepth(start, depth); err != nil {
		return out, base, start, err
	}
	var seen keySet
	escaped := false
	i := skipSpace(b, start+1)
	if i < len(b) && b[i] == '}' {
		return out, base, i + 1, nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return out, base, i, &SyntaxError{i, "expected object key"}
		}
		ks := i
		ke, code, esc, err := scanKey(b, ks)
		if err != nil {
			return out, base, ke, err
		}
		escaped = escaped || esc
		vs := skipSpace(b, ke)
		if vs >= len(b) || b[vs] != ':' {
			return out, base, vs, &SyntaxError{vs, "expected ':' after object key"}
		}
		if vs = skipSpace(b, vs+1); vs >= len(b) {
			return out, base, vs, &SyntaxError{vs, "unexpected end of input"}
		}
		var vend int
		handled := false
		if value != nil && (b[vs] == '[' || b[vs] == '{' && fieldsKey(code)) {
			vend, handled, err = value(code, vs)
		}
		if !handled {
			vend, err = scanValue(b, vs, depth)
		}
		if err != nil {
			return out, base, vend, err
		}
		// A known key is a bit of seen.codes: that test is written out here, as the call
		// cost more than the test.
		dup := false
		if bit := uint64(1) << code; code != keyOther && !esc {
			dup, seen.codes = seen.codes&bit != 0, seen.codes|bit
		} else {
			dup = seen.dupOther(b[start:], out[base:], b[ks:ke])
		}
		if dup {
			return out, base, vs, &SyntaxError{vs, fmt.Sprintf("duplicate key %q", b[ks+1:ke-1])}
		}
		// Filled in place: a member built first and copied in cost a stall on every
		// member (the copy read it back before its field stores had landed).
		if len(out) == cap(out) {
			out, base = rechunk(out, base), 0
		}
		out = out[:len(out)+1] // every field is set below
		m := &out[len(out)-1]
		m.set(ks-start, vs-start, vend-start, code)
		i = skipSpace(b, vend)
		if i >= len(b) {
			return out, base, i, &SyntaxError{i, "unterminated object"}
		}
		if b[i] == '}' {
			break
		}
		if b[i] != ',' {
			return out, base, i, &SyntaxError{i, "expected ',' or '}' in object"}
		}
		i = skipSpace(b, i+1)
	}
	end := i + 1
	if escaped {
		// Keys spelled with escapes can name the same key differently; compare decoded.
		return out, base, end, checkEscapedDuplicates(b[start:end], out[base:])
	}
	return out, base, end, nil
}

// keySet finds a repeated key among an object's members. Every message and block is
// checked, so the common case is fast: a known key (keyCode) is a bit in codes; for
// other keys, bits has a bit for each (length, first letter) of the keys so far, and
// only a key whose bit is set already can repeat one; then the keys before it are
// compared, first letters before bytes. Past keySetFrom keys a set takes over, so an
// object of a million keys costs a million look-ups rather than half a trillion
// comparisons.
type keySet struct {
	codes uint64
	bits  uint64
	set   map[string]struct{}
}

const keySetFrom = 16

// dup reports whether the key b[ks:ke] (with its quotes), of code code, is among the
// keys of prev, the members so far of the object at b[start] (offsets into it), and adds
// it. A key spelled with escapes is compared as written here; its decoded name is checked
// once the object ends (checkEscapedDuplicates).
func (s *keySet) dup(b []byte, start int, prev []member, ks, ke int, code keyCode, escaped bool) bool {
	if code != keyOther && !escaped {
		bit := uint64(1) << code
		if s.codes&bit != 0 {
			return true
		}
		s.codes |= bit
		return false
	}
	return s.dupOther(b[start:], prev, b[ks:ke])
}

// dupOther is dup for a key without a code, or spelled with escapes: obj is the object,
// key the key as written.
func (s *keySet) dupOther(obj []byte, prev []member, key []byte) bool {
	// A key without a code can only repeat another key without one, or one spelled with
	// the same escapes.
	if len(prev) < keySetFrom {
		if bit := uint64(1) << ((uint(len(key))*7 ^ uint(key[1])) & 63); s.bits&bit == 0 {
			s.bits |= bit
			return false
		}
		for _, p := range prev {
			if k := p.key(obj); k[1] == key[1] && bytes.Equal(k, key) {
				return true
			}
		}
		return false
	}
	if s.set == nil {
		s.set = make(map[string]struct{}, 2*keySetFrom)
		for _, p := range prev {
			s.set[string(p.key(obj))] = struct{}{}
		}
	}
	if _, ok := s.set[string(key)]; ok {
		return true
	}
	s.set[string(key)] = struct{}{}
	return false
}

// checkEscapedDuplicates catches keys that are the same once their escapes are decoded.
func checkEscapedDuplicates(obj []byte, ms []member) error {
	seen := map[string]bool{}
	for im := range ms {
		m := &ms[im]
		k := m.name(obj)
		if seen[k] {
			return &SyntaxError{m.keyStart(obj), fmt.Sprintf("duplicate key %q", k)}
		}
		seen[k] = true
	}
	return nil
}

// members appends the members of the validated object obj to dst and returns the new
// members (a subslice of the result, which stays valid when dst grows later). It reports
// duplicate keys, because a message whose "id" or "role" appears twice has no single
// meaning.
func members(obj []byte, dst *[]member) ([]member, error) {
	base := len(*dst)
	ms, err := appendMembers(obj, *dst)
	*dst = ms
	return ms[base:len(ms):len(ms)], err
}

func appendMembers(obj []byte, out []member) ([]member, error) {
	base := len(out)
	var seen keySet
	i := skipSpace(obj, 1)
	if obj[i] == '}' {
		return out, nil
	}
	escaped := false
	for {
		ks, end := i, skipString(obj, i)
		esc := bytes.IndexByte(obj[ks:end], '\\') >= 0
		escaped = escaped || esc
		i = skipSpace(obj, skipSpace(obj, end)+1)
		var code keyCode
		if esc {
			name, _ := stringValue(obj[ks:end])
			code = codeOf(name)
		} else {
			code = codeOf(obj[ks+1 : end-1])
		}
		m := newMember(ks, i, skip(obj, i), code)
		if seen.dup(obj, 0, out[base:], ks, end, code, esc) {
			return out, &SyntaxError{i, fmt.Sprintf("duplicate key %q", obj[ks+1:end-1])}
		}
		out = append(out, m)
		i = skipSpace(obj, m.valEnd())
		if obj[i] == '}' {
			break
		}
		i = skipSpace(obj, i+1)
	}
	if escaped {
		// Keys spelled with escapes can name the same key differently; compare decoded.
		return out, checkEscapedDuplicates(obj, out[base:])
	}
	return out, nil
}

// eachElement calls fn with each element of the validated array arr until fn returns
// false.
func eachElement(arr []byte, fn func(e []byte) bool) {
	i := skipSpace(arr, 1)
	if arr[i] == ']' {
		return
	}
	for {
		end := skip(arr, i)
		if !fn(arr[i:end]) {
			return
		}
		i = skipSpace(arr, end)
		if arr[i] == ']' {
			return
		}
		i = skipSpace(arr, i+1)
	}
}

// membersOf lists the members of the validated object obj in a fresh slice.
func membersOf(obj []byte) ([]member, error) {
	var ms []member
	return members(obj, &ms)
}

// stringValue decodes a JSON string value; ok is false for any other type.
func stringValue(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	inner := v[1 : len(v)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return string(inner), true
	}
	var s string // declared here: Unmarshal's &s puts it on the heap
	if err := json.Unmarshal(v, &s); err != nil {
		return "", false
	}
	return s, true
}

// inputString is stringValue without a copy: for a string with no escapes it returns a
// string sharing v's bytes. The engine keeps such strings only while it works on the
// input; everything it hands back (actions, issues) is cloned first.
func inputString(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	inner := v[1 : len(v)-1]
	if bytes.IndexByte(inner, '\\') >= 0 {
		return stringValue(v)
	}
	return unsafe.String(unsafe.SliceData(inner), len(inner)), true
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
		s, _ := inputString(v) // only looked at: no copy for a string without escapes
		return len(strings.TrimSpace(s)) == 0
	case '[', '{':
		return skipSpace(v, 1) == len(v)-1
	}
	return false
}

// jsonString encodes s as a JSON string without HTML escaping.
func jsonString(s string) []byte {
	// Keys and most names and ids are printable ASCII that needs no escape: quoted as
	// they are, as the encoder would, without its allocations.
	plain := true
	for i := 0; i < len(s) && plain; i++ {
		plain = plainString[s[i]]
	}
	if plain {
		out := make([]byte, 0, len(s)+2)
		return append(append(append(out, '"'), s...), '"')
	}
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
	return splice(obj, m.valStart(), m.valEnd(), val)
}

// setOrAddMember returns obj with member key set to val: replaced where it is, else added
// at the end.
func setOrAddMember(obj []byte, key string, val []byte) []byte {
	ms, err := membersOf(obj)
	if err != nil {
		return obj
	}
	if m, ok := findMember(obj, ms, key); ok {
		return setMember(obj, m, val)
	}
	add := objectBuilder(nil).raw(key, val)[1:] // `"key":val`
	out := append([]byte(nil), obj[:len(obj)-1]...)
	if len(ms) > 0 {
		out = append(out, ',')
	}
	return append(append(out, add...), '}')
}

// removeMember returns obj without member idx of ms (as returned by members(obj)).
func removeMember(obj []byte, ms []member, idx int) []byte {
	m := ms[idx]
	switch {
	case len(ms) == 1:
		return splice(obj, 1, len(obj)-1, nil)
	case idx == 0:
		return splice(obj, m.keyStart(obj), ms[1].keyStart(obj), nil)
	default:
		return splice(obj, ms[idx-1].valEnd(), m.valEnd(), nil)
	}
}

// joinArray builds a compact JSON array from element bytes.
func joinArray(elems [][]byte) []byte {
	return appendArray(make([]byte, 0, arrayLen(elems)), elems)
}

// arrayLen is the length of joinArray(elems).
func arrayLen(elems [][]byte) int {
	n := 1 + len(elems)
	for _, e := range elems {
		n += len(e)
	}
	return max(n, 2)
}

func appendArray(out []byte, elems [][]byte) []byte {
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
	if c := codeOf(key); c != keyOther {
		return findCode(ms, c)
	}
	for i := range ms {
		if m := &ms[i]; m.kc == keyOther && m.is(obj, key) {
			return *m, true
		}
	}
	return member{}, false
}

// findCode returns the member whose key has code c, if any.
func findCode(ms []member, c keyCode) (member, bool) {
	for i := range ms {
		if ms[i].kc == c {
			return ms[i], true
		}
	}
	return member{}, false
}
