#!/usr/bin/env bash
# Scans shared by worker processes (BENCHMARKS.md, "Runs shared across workers"): the same
# SESSIONS sessions (30% broken) repaired by a full scan, every round on a fresh copy of
# the loaded database, in these shapes, interleaved round by round:
#   before   the scan before runs were River jobs (BEFORE, a binary built from an older
#            commit; skipped when unset): one process, no queue
#   p1       tmend scan --full --partitions 1: one process working one partition
#   pN-wK    tmend scan --full --partitions N with K-1 'tmend worker' processes helping
# Prints each round's wall seconds and the medians and ratios.
#   scripts/bench-workers.sh [ROUNDS]    # default 3; SESSIONS=20000 PARTITIONS=6
#   BEFORE=/tmp/tmend-before scripts/bench-workers.sh   (git worktree add /tmp/b e9681d9 && make -C /tmp/b build)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/pg.sh
ROUNDS=${1:-3}
SESSIONS=${SESSIONS:-20000}
PARTITIONS=${PARTITIONS:-6}
trap 'kill $(jobs -p) 2>/dev/null || true; pg_stop' EXIT
pg_start
make -s build
tmend=$PWD/bin/tmend
export TMEND_LOG_LEVEL=warn
sql() { psql "$TMEND_PG_URL" -qAtX "$@"; }
url() { echo "postgres://postgres@/$1?host=$TMEND_PG_DIR&port=5432&sslmode=disable"; }

# One loaded database per binary (their schemas differ); each run gets a copy of it.
load() { # name binary
  sql -c "CREATE DATABASE $1"
  TMEND_DATABASE_URL=$(url "$1") "$2" migrate up >/dev/null
  TMEND_DATABASE_URL=$(url "$1") "$2" import /tmp/bench-workers.jsonl >/dev/null
  psql "$(url "$1")" -qAtX -c "VACUUM ANALYZE tmend.sessions"
}
"$tmend" gen --dialect openclaw --sessions "$SESSIONS" --messages 20 --fault-rate 0.3 --seed 5 -o /tmp/bench-workers.jsonl
load base_new "$tmend"
[ -n "${BEFORE:-}" ] && load base_before "$BEFORE"

fresh() { # template -> url of a new copy
  local name=run_$RANDOM$RANDOM
  sql -c "CREATE DATABASE $name TEMPLATE $1"
  psql "$(url "$name")" -qAtX -c "CHECKPOINT"
  url "$name"
}
timed() { local s=$(date +%s.%N); "$@" >/dev/null 2>&1 || true; echo "$(date +%s.%N) - $s" | bc; }

run_shape() { # shape -> seconds
  case $1 in
  before) TMEND_DATABASE_URL=$(fresh base_before) timed "$BEFORE" scan --full ;;
  p1) TMEND_DATABASE_URL=$(fresh base_new) timed "$tmend" scan --full --partitions 1 ;;
  p*-w*)
    local k=${1#*-w} u
    u=$(fresh base_new)
    local pids=()
    for ((i = 1; i < k; i++)); do
      TMEND_DATABASE_URL=$u "$tmend" worker >/dev/null 2>&1 &
      pids+=($!)
    done
    sleep 1 # let the helpers connect and start polling
    TMEND_DATABASE_URL=$u timed "$tmend" scan --full --partitions "$PARTITIONS"
    for p in "${pids[@]}"; do kill -TERM "$p"; wait "$p" || true; done
    ;;
  esac
}

shapes=(p1 "p$PARTITIONS-w1" "p$PARTITIONS-w2" "p$PARTITIONS-w3")
[ -n "${BEFORE:-}" ] && shapes=(before "${shapes[@]}")
declare -A times
for ((r = 1; r <= ROUNDS; r++)); do
  line="round $r:"
  for s in "${shapes[@]}"; do
    t=$(run_shape "$s")
    times[$s]+="$t "
    line+=" $s ${t}s"
  done
  echo "$line"
done
median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "cores: $(nproc); $SESSIONS sessions, $(sql -c "SELECT count(*) FROM tmend.sessions" -d base_new 2>/dev/null || true)"
ref=$(echo "${times[p1]}" | median)
for s in "${shapes[@]}"; do
  m=$(echo "${times[$s]}" | median)
  echo "median $s ${m}s  (p1 / $s = $(echo "scale=2; $ref / $m" | bc))"
done
