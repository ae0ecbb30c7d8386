import json, sys
n = int(sys.argv[1]); size = int(sys.argv[2])
per = size // 50
for i in range(n):
    msgs = []
    for j in range(24):
        msgs.append({"role": "user", "content": "q%d " % j + "x" * per})
        msgs.append({"role": "assistant", "content": None, "tool_calls": [{"id": "c%d" % j, "type": "function", "function": {"name": "ls", "arguments": "{}"}}]})
        if j != 5:  # one call without its result
            msgs.append({"role": "tool", "tool_call_id": "c%d" % j, "content": "r" * (per // 2)})
    msgs.append({"role": "user", "content": "done"})
    print(json.dumps({"id": "big-%03d" % i, "updated_at": "2026-01-01T00:00:00Z", "messages": msgs}))
