package repair

import (
	"bytes"
	"strings"
)

// SyntheticResultText is the text of every result tmend inserts. It names tmend so a
// person or model reading the transcript knows the result is not the tool's.
const SyntheticResultText = "[tmend] This tool call returned no result (the run was interrupted); " +
	"this error result was inserted by transcript repair."

// Results other repairers insert, recognised so that a real result wins over them.
var (
	syntheticExact = []string{
		SyntheticResultText,
		"No result provided", // pi-mono
		"aborted",            // OpenAI Codex
		"[Tool call was interrupted and did not return a result.]",
	}
	syntheticPrefixes = []string{
		"[openclaw] missing tool result",
		"[System: Tool execution skipped/interrupted by user. No result provided for tool", // LiteLLM
	}
	syntheticContains = []string{
		// deepagents: "Tool call {name} with id {id} was cancelled - another ...".
		"was cancelled - another message came in before it could be completed",
	}
)

// isSyntheticText reports whether a result's content is one of the known inserted texts.
// v is the content: a string, an array holding one text block (whose parsed blocks are
// blks, when known), or a Gemini response object.
func isSyntheticText(v []byte, blks []block) bool {
	q := textValue(v, blks)
	// Every known text is short, and the long ones start with '[' or "Tool call " (the
	// deepagents one), which spares searching every result's text; a text spelled with
	// escapes is decoded first (at most 6 bytes a character).
	if len(q) < 2 || len(q) > 6*400 {
		return false
	}
	if bytes.IndexByte(q, '\\') < 0 && (len(q) > 400 || len(q) > 24 && q[1] != '[' && !bytes.HasPrefix(q[1:], []byte("Tool call "))) {
		return false
	}
	s, ok := inputString(q) // only compared, never kept
	if !ok {
		return false
	}
	for _, t := range syntheticExact {
		if s == t {
			return true
		}
	}
	for _, t := range syntheticPrefixes {
		if strings.HasPrefix(s, t) {
			return true
		}
	}
	for _, t := range syntheticContains {
		if strings.Contains(s, t) {
			return true
		}
	}
	return false
}

// textValue returns the quoted JSON string holding a result's text, or nil.
func textValue(v []byte, blks []block) []byte {
	if len(v) == 0 || len(v) > 1024 {
		return nil
	}
	switch v[0] {
	case '"':
		return v
	case '[':
		if blks == nil {
			blks = parseBlockList(v)
		}
		if len(blks) != 1 {
			return nil
		}
		blk := blks[0]
		if blk.ms == nil {
			return blk.raw()
		}
		if m, ok := findMember(blk.raw(), blk.members(), "text"); ok {
			return m.val(blk.raw())
		}
	case '{':
		ms, err := membersOf(v)
		if err != nil {
			return nil
		}
		for _, k := range []string{"error", "output", "content", "result", "reason"} {
			if m, ok := findMember(v, ms, k); ok && m.val(v)[0] == '"' {
				return m.val(v)
			}
		}
	}
	return nil
}

// parseBlockList splits a validated array into blocks, for content found below a
// message's own members.
func parseBlockList(v []byte) []block {
	var out []block
	eachElement(v, func(e []byte) bool {
		var ms []member
		if e[0] == '{' {
			ms, _ = membersOf(e)
		}
		out = append(out, newBlock(e, ms))
		return true
	})
	return out
}

// objectBuilder writes a JSON object with members in the order added, so synthetic
// results are deterministic and read naturally.
type objectBuilder []byte

func (b objectBuilder) raw(key string, val []byte) objectBuilder {
	return b.member(jsonString(key), val)
}

// member adds a member whose key is already JSON text.
func (b objectBuilder) member(key, val []byte) objectBuilder {
	if len(b) == 0 {
		b = append(b, '{')
	} else {
		b = append(b, ',')
	}
	b = append(b, key...)
	b = append(b, ':')
	return append(b, val...)
}

func (b objectBuilder) str(key, val string) objectBuilder { return b.raw(key, jsonString(val)) }

func (b objectBuilder) done() []byte { return append(b, '}') }

func textBlocks(typed bool, text string) []byte {
	var blk objectBuilder
	if typed {
		blk = blk.str("type", "text")
	}
	return joinArray([][]byte{blk.str("text", text).done()})
}
