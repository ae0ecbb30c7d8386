#!/usr/bin/env bash
# Where the row-per-session write path's time goes (BENCHMARKS.md): builds of tmend side by
# side on one database, each round repairing the same broken sessions in an incremental run
# with every build in turn (the order rotates each round), plus an incremental run that finds
# nothing to do (a run's fixed cost; every build in turn) and the plain batched UPDATE
# writing the same contents (from jsonb, and from text: plaintext).
#   BINS="bin/tmend /tmp/tmend-variant" TMEND_DATABASE_URL=postgres://.../empty_db scripts/bench-repair-ab.sh
# SESSIONS (20000) sessions of ~45 messages, 2% broken; ROUNDS (5). Times in seconds; a
# build's are wall/repaired/run, run being the run row's own time (finished_at - started_at:
# without the process's start and `scan`'s 250ms polls for the run's end).
set -euo pipefail
cd "$(dirname "$0")/.."
SESSIONS=${SESSIONS:-20000} ROUNDS=${ROUNDS:-5}
sql() { psql "$TMEND_DATABASE_URL" -qAtX -v ON_ERROR_STOP=1 "$@"; }
now() { date +%s.%N; }
since() { echo "$(now) - $1" | bc; }
export TMEND_LOG_LEVEL=warn
read -ra bins <<< "$BINS"
first=${bins[0]}
$first migrate up >/dev/null
$first gen --dialect openclaw --sessions "$SESSIONS" --messages 45 --fault-rate 0.02 --seed 1 | $first import - >/dev/null
sql -c "VACUUM ANALYZE tmend.sessions"
$first scan --full --dry-run >/dev/null || true
sql -c "CREATE TABLE bench_orig AS SELECT s.id, s.messages FROM tmend.sessions s WHERE id IN (SELECT session_id FROM tmend.repair_reports WHERE status = 'would_repair')"
reset() {
  sql -c "UPDATE tmend.sessions SET updated_at = now() - interval '1 day' WHERE updated_at > now() - interval '1 day'" \
      -c "UPDATE tmend.sessions s SET messages = o.messages, updated_at = now() - interval '20 minutes' FROM bench_orig o WHERE o.id = s.id" \
      -c "INSERT INTO tmend.scan_state (source, scanned_through) VALUES ('sessions(id,messages,updated_at)', now() - interval '1 hour') ON CONFLICT (source) DO UPDATE SET scanned_through = excluded.scanned_through" \
      -c "VACUUM tmend.sessions" -c "CHECKPOINT"
}
reset; $first scan >/dev/null
sql -c "CREATE TABLE bench_rep AS SELECT s.id, s.messages FROM tmend.sessions s JOIN bench_orig USING (id)" \
    -c "CREATE TABLE bench_rep_text AS SELECT id, messages::text AS m FROM bench_rep"
echo "broken: $(sql -c 'select count(*) from bench_orig')"
for r in $(seq "$ROUNDS"); do
  line="round $r:"
  n=${#bins[@]}
  for k in $(seq 0 $((n + 1))); do
    i=$(( (k + r) % (n + 2) ))
    reset
    if [ "$i" = $((n + 1)) ]; then
      # Nothing changed since the last run: what a run costs before its first session,
      # with every build in turn.
      sql -c "UPDATE tmend.sessions SET updated_at = now() - interval '1 day' WHERE updated_at > now() - interval '1 day'"
      for j in $(seq 0 $((n - 1))); do
        b=${bins[$(( (j + r) % n ))]}
        s=$(now); $b scan >/dev/null; line="$line empty:$(basename "$b")=$(since "$s")"
      done
      continue
    fi
    s=$(now)
    if [ "$i" = "$n" ]; then
      sql -c "UPDATE tmend.sessions s SET messages = v.messages FROM bench_rep v WHERE v.id = s.id"; line="$line plain=$(since "$s")"
      # The same from the contents as text, which Postgres parses into jsonb, as it does
      # what any client sends (tmend included).
      reset; s=$(now)
      sql -c "UPDATE tmend.sessions s SET messages = v.m::jsonb FROM bench_rep_text v WHERE v.id = s.id"; line="$line plaintext=$(since "$s")"
    else
      out=$(${bins[$i]} scan --json); line="$line $(basename ${bins[$i]})=$(since "$s")/$(echo "$out" | python3 -c 'import json,sys; from datetime import datetime as d; r=json.load(sys.stdin); t=lambda k: d.fromisoformat(r[k].replace("Z", "+00:00")); print("%d/%.3f" % (r["counts"]["repaired"], (t("finished_at") - t("started_at")).total_seconds()))')"
    fi
  done
  echo "$line"
done
