#!/usr/bin/env bash
# Builds of tmend side by side on the message-table repair (BENCHMARKS.md), on the
# database scripts/bench-messages.sh left behind (its langchain_chat_histories and its
# bench_broken and bench_orig tables): each round puts the broken sessions back as
# generated and repairs them in an incremental run with every build in turn, the order
# rotating each round. Times in seconds: wall/repaired/run, run being the run row's own
# time (finished_at - started_at: without the process's start and `scan`'s 250ms polls).
#   BINS="/tmp/tmend-before bin/tmend" TMEND_DATABASE_URL=postgres://.../that_db scripts/bench-messages-ab.sh
set -euo pipefail
ROUNDS=${ROUNDS:-7}
export TMEND_LOG_LEVEL=warn
sql() { psql "$TMEND_DATABASE_URL" -qAtX -v ON_ERROR_STOP=1 "$@"; }
now() { date +%s.%N; }
since() { echo "$(now) - $1" | bc; }
t=langchain_chat_histories
read -ra bins <<< "$BINS"
one() {
  sql -1 -c "DELETE FROM $t WHERE session_id IN (SELECT session_id FROM bench_broken)" \
    -c "INSERT INTO $t (session_id, message) SELECT session_id, message FROM bench_orig ORDER BY id"
  # Dated back as in bench-messages.sh, so that the incremental run reads exactly them.
  sql -c "UPDATE tmend.repair_runs SET started_at = started_at - interval '1 day'" \
    -c "UPDATE tmend.scan_state SET scanned_through = now() - interval '1 hour'" \
    -c "VACUUM $t" -c "CHECKPOINT"
  local s out
  s=$(now)
  out=$($1 scan --preset langchain-postgres --json)
  echo "$(since "$s")/$(echo "$out" | python3 -c 'import json,sys; from datetime import datetime as d; r=json.load(sys.stdin); t=lambda k: d.fromisoformat(r[k].replace("Z", "+00:00")); print("%d/%.3f" % (r["counts"]["repaired"], (t("finished_at") - t("started_at")).total_seconds()))')"
}
for r in $(seq "$ROUNDS"); do
  line="round $r:"
  n=${#bins[@]}
  for k in $(seq 0 $((n - 1))); do
    i=$(( (k + r) % n ))
    line="$line $(basename "${bins[$i]}")=$(one "${bins[$i]}")"
  done
  echo "$line"
done
