#!/usr/bin/env bash
# Builds of tmend side by side on the message table's full dry run (BENCHMARKS.md), on
# the table scripts/bench-messages.sh left behind: each round runs `\copy` of the rows in
# session order and a full dry run with every build, one right after the other, the order
# rotating each round; then each build's rounds' ratios to `\copy` and to the first
# build, and their medians.
#   BINS="/tmp/tmend-before bin/tmend" TMEND_DATABASE_URL=postgres://.../that_db scripts/bench-read-ab.sh
set -euo pipefail
ROUNDS=${ROUNDS:-9}
export TMEND_LOG_LEVEL=warn
now() { date +%s.%N; }
t=langchain_chat_histories
read -ra bins <<< "$BINS"
one() {
  local s
  s=$(now)
  if [ "$1" = copy ]; then
    psql "$TMEND_DATABASE_URL" -qAtX -c "\\copy (SELECT session_id, id, message FROM $t ORDER BY session_id, id) TO '/dev/null'"
  else
    "$1" scan --preset langchain-postgres --full --dry-run >/dev/null || [ $? = 3 ]
  fi
  echo "$(now) - $s" | bc
}
items=(copy "${bins[@]}")
n=${#items[@]}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for r in $(seq "$ROUNDS"); do
  declare -A secs=()
  for k in $(seq 0 $((n - 1))); do
    i=$(( (k + r) % n ))
    secs[$i]=$(one "${items[$i]}")
  done
  line="round $r (load average $(cut -d' ' -f1 /proc/loadavg)):"
  for i in $(seq 0 $((n - 1))); do line="$line ${secs[$i]}"; done
  echo "$line" | tee -a "$out"
done
python3 - "$out" "${items[@]}" <<'EOF'
import statistics, sys
names = sys.argv[2:]
rounds = [[float(x) for x in l.split(":")[1].split()] for l in open(sys.argv[1])]
fmt = lambda xs: ", ".join("%.2f" % x for x in xs) + " (median %.2f)" % statistics.median(xs)
for i, name in enumerate(names):
    print("%s: median %.2fs" % (name, statistics.median(r[i] for r in rounds)))
    if i > 0:
        print("  / copy:", fmt([r[i] / r[0] for r in rounds]))
    if i > 1:
        print("  / %s:" % names[1], fmt([r[i] / r[1] for r in rounds]))
EOF
