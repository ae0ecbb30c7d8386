# One Anthropic session of N tool blocks (calls plus results), 8 calls per turn, as one
# JSON Lines record; every 1000th call has no result, so fix has work to do.
# With --langchain, the same calls as LangChain messages, one a line, for the rows of one
# session of langchain_chat_histories (one tool message a result).
# Usage: python3 scripts/bench-many-blocks.py N [--langchain] > session.jsonl
import json, sys
n = int(sys.argv[1])
langchain = "--langchain" in sys.argv[2:]
msgs = [{"type": "human", "content": "go"} if langchain else {"role": "user", "content": "go"}]
i = 0
while i < n // 2:
    k = min(8, n // 2 - i)
    ids = ["t%d" % (i + j) for j in range(k)]
    answered = [t for t in ids if int(t[1:]) % 1000 != 999]
    if langchain:
        msgs.append({"type": "ai", "content": "", "tool_calls": [{"id": t, "name": "ls", "args": {}, "type": "tool_call"} for t in ids]})
        msgs += [{"type": "tool", "content": "ok", "tool_call_id": t, "name": "ls"} for t in answered]
    else:
        msgs.append({"role": "assistant", "content": [{"type": "tool_use", "id": t, "name": "ls", "input": {}} for t in ids]})
        msgs.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": t, "content": "ok"} for t in answered]})
    i += k
if langchain:
    msgs.append({"type": "ai", "content": "done"})
    sys.stdout.write("".join(json.dumps(m, separators=(",", ":")) + "\n" for m in msgs))
else:
    msgs.append({"role": "assistant", "content": "done"})
    sys.stdout.write(json.dumps({"id": "many-blocks", "updated_at": "2026-01-01T00:00:00Z", "messages": msgs}, separators=(",", ":")) + "\n")
