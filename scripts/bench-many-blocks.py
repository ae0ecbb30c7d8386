# One Anthropic session of N tool blocks (calls plus results), 8 calls per turn, as one
# JSON Lines record; every 1000th call has no result, so fix has work to do.
# Usage: python3 scripts/bench-many-blocks.py N > session.jsonl
import json, sys
n = int(sys.argv[1])
msgs = [{"role": "user", "content": "go"}]
i = 0
while i < n // 2:
    k = min(8, n // 2 - i)
    ids = ["t%d" % (i + j) for j in range(k)]
    msgs.append({"role": "assistant", "content": [{"type": "tool_use", "id": t, "name": "ls", "input": {}} for t in ids]})
    msgs.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": t, "content": "ok"} for t in ids if int(t[1:]) % 1000 != 999]})
    i += k
msgs.append({"role": "assistant", "content": "done"})
sys.stdout.write(json.dumps({"id": "many-blocks", "updated_at": "2026-01-01T00:00:00Z", "messages": msgs}, separators=(",", ":")) + "\n")
