package repair

// keyCode numbers the member names the engine looks up, and the ones most messages
// carry. The scanner gives each member of a message or block the code of its decoded key
// while it validates it, so a later look-up compares one byte per member instead of
// strings, and the duplicate-key check of known keys is a bit test. A key that is not in
// keyNames has code 0 (keyOther) and is compared by its bytes, as before.
type keyCode uint8

const (
	keyOther keyCode = iota
	keyRole
	keyContent
	keyToolCalls
	keyParts
	keyType
	keyText
	keyID
	keyCallID
	keyToolCallID
	keyToolCallIDCamel
	keyToolUseID
	keyToolUseIDCamel
	keyName
	keyArguments
	keyArgs
	keyInput
	keyOutput
	keyAction
	keyFunction
	keyFunctionCall
	keyFunctionResponse
	keyResponse
	keyToolUse
	keyToolResult
	keyToolName
	keyIsError
	keyStopReason
	keyStopReasonSnake
	keyPartialJSON
	keyPartialArgs
	keyPartial
	keyIncomplete
	keyStatus
	keyMessages
	keyContents
	keyUpdatedAt
	keyUpdatedAtCamel
	keyData   // LangChain's {type, data} form
	keyKwargs // LangChain's {lc, type:"constructor", id, kwargs} form
	// Not looked up, but in most messages of some dialect: known, their duplicate check
	// is a bit test too.
	keyTimestamp
	keyAPI
	keyProvider
	keyModel
	keyUsage
	keyThinking
	keySignature
	keyIsErrorSnake
	// AI SDK UIMessage and Mastra parts.
	keyState
	keyErrorText
	keyResult
	keyToolInvocation
	keyToolInvocations
	keyProviderExecuted
	keyFormat
	keyApproval
	keyRawInput
	keyCount
)

var keyNames = [keyCount]string{
	keyRole: "role", keyContent: "content", keyToolCalls: "tool_calls", keyParts: "parts",
	keyType: "type", keyText: "text", keyID: "id", keyCallID: "call_id",
	keyToolCallID: "tool_call_id", keyToolCallIDCamel: "toolCallId", keyToolUseID: "tool_use_id",
	keyToolUseIDCamel: "toolUseId", keyName: "name", keyArguments: "arguments", keyArgs: "args",
	keyInput: "input", keyOutput: "output", keyAction: "action", keyFunction: "function",
	keyFunctionCall: "functionCall", keyFunctionResponse: "functionResponse", keyResponse: "response",
	keyToolUse: "toolUse", keyToolResult: "toolResult", keyToolName: "toolName", keyIsError: "isError",
	keyStopReason: "stopReason", keyStopReasonSnake: "stop_reason", keyPartialJSON: "partialJson",
	keyPartialArgs: "partialArgs", keyPartial: "partial", keyIncomplete: "incomplete", keyStatus: "status",
	keyMessages: "messages", keyContents: "contents", keyUpdatedAt: "updated_at", keyUpdatedAtCamel: "updatedAt",
	keyData: "data", keyKwargs: "kwargs",
	keyTimestamp: "timestamp", keyAPI: "api", keyProvider: "provider", keyModel: "model", keyUsage: "usage",
	keyThinking: "thinking", keySignature: "signature", keyIsErrorSnake: "is_error",
	keyState: "state", keyErrorText: "errorText", keyResult: "result", keyToolInvocation: "toolInvocation",
	keyToolInvocations: "toolInvocations", keyProviderExecuted: "providerExecuted", keyFormat: "format",
	keyApproval: "approval", keyRawInput: "rawInput",
}

// The codes must fit the bit set of keySet.
var _ [64 - keyCount]struct{}

// keyTable maps a key, as two little-endian words (zero past its end) and its length,
// to its code: one multiplication picks the only slot it can be in, and one comparison
// of the words tells whether it is there. keyMul is the first multiplier (of a fixed
// sequence) under which no two names share a slot, so adding a name needs no tuning.
var keyTable, keyMul = func() (t [256]keyEntry, mul uint64) {
	for mul = 0x9E3779B97F4A7C15; ; mul += 0x2545F4914F6CDD1E {
		t = [256]keyEntry{}
		ok := true
		for c := keyOther + 1; c < keyCount && ok; c++ {
			name := keyNames[c]
			lo, hi := keyWords(name)
			e := &t[keySlot(lo, len(name), mul)]
			ok = e.code == keyOther
			*e = keyEntry{lo: lo, hi: hi, n: uint8(len(name)), code: c}
		}
		if ok {
			return t, mul
		}
	}
}()

type keyEntry struct {
	lo, hi uint64
	n      uint8
	code   keyCode
}

func keySlot(lo uint64, n int, mul uint64) uint8 { return uint8(((lo ^ uint64(n)) * mul) >> 56) }

// keyWords packs a key of at most 16 bytes.
func keyWords[T string | []byte](k T) (lo, hi uint64) {
	for i := len(k) - 1; i >= 0; i-- {
		if i < 8 {
			lo |= uint64(k[i]) << (8 * i)
		} else {
			hi |= uint64(k[i]) << (8 * (i - 8))
		}
	}
	return lo, hi
}

const maxKeyName = 16 // "functionResponse"

// keyMasks[n] keeps the first n bytes of two little-endian words (scanKey).
var keyMasks = func() (t [maxKeyName + 1][2]uint64) {
	for n := range t {
		for i := range n {
			t[n][i/8] |= 0xFF << (8 * (i % 8))
		}
	}
	return t
}()

// codeOf returns the code of the decoded key k. scanKey codes most keys itself, faster.
func codeOf[T string | []byte](k T) keyCode {
	if len(k) == 0 || len(k) > maxKeyName {
		return keyOther
	}
	lo, hi := keyWords(k)
	return lookupKey(lo, hi, len(k))
}

func lookupKey(lo, hi uint64, n int) keyCode {
	if e := &keyTable[keySlot(lo, n, keyMul)]; e.lo == lo && e.hi == hi && int(e.n) == n {
		return e.code
	}
	return keyOther
}
