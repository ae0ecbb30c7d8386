#!/usr/bin/env bash
# Times the same repair of the 2% broken sessions with 2, 4 and 8 workers (BENCHMARKS.md).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/pg.sh
trap pg_stop EXIT
pg_start
export TMEND_DATABASE_URL=$TMEND_PG_URL TMEND_LOG_LEVEL=warn
tmend=bin/tmend
sql() { psql "$TMEND_DATABASE_URL" -qAtX "$@"; }
make -s build
$tmend migrate up >/dev/null
$tmend gen --dialect openclaw --sessions 100000 --messages 45 --fault-rate 0.02 --seed 1 | $tmend import - >/dev/null
sql -c "VACUUM ANALYZE tmend.sessions"
$tmend scan --full --dry-run >/dev/null 2>&1 || true
sql -c "CREATE TABLE tmend.broken AS SELECT DISTINCT session_id AS id FROM tmend.repair_reports WHERE status = 'would_repair'"
for w in 2 4 8 4 2 8; do
  sql -c "TRUNCATE tmend.session_versions, tmend.session_holds" -c "DELETE FROM tmend.repair_reports WHERE status <> 'would_repair'"
  sql -c "UPDATE tmend.sessions SET updated_at = now() - interval '1 day'"
  sql -c "UPDATE tmend.sessions s SET updated_at = now() - interval '20 minutes' FROM tmend.broken b WHERE b.id = s.id"
  sql -c "INSERT INTO tmend.scan_state (source, scanned_through) VALUES ('sessions(id,messages,updated_at)', now() - interval '1 hour') ON CONFLICT (source) DO UPDATE SET scanned_through = excluded.scanned_through"
  sql -c "VACUUM tmend.sessions" -c "CHECKPOINT" # leave no setup work to the timed run
  s=$(date +%s.%N); $tmend scan --workers $w > /tmp/rw.txt || true; rep=$(echo "$(date +%s.%N) - $s" | bc)
  sql -c "UPDATE tmend.sessions s SET messages = v.content::jsonb FROM tmend.session_versions v WHERE v.session_id = s.id AND v.kind = 'original'"
  sql -c "VACUUM tmend.sessions" -c "CHECKPOINT"
  s=$(date +%s.%N); sql -c "UPDATE tmend.sessions s SET messages = v.content::jsonb FROM tmend.session_versions v WHERE v.session_id = s.id AND v.kind = 'repaired'"; upd=$(echo "$(date +%s.%N) - $s" | bc)
  sql -c "UPDATE tmend.sessions s SET messages = v.content::jsonb FROM tmend.session_versions v WHERE v.session_id = s.id AND v.kind = 'original'"
  echo "workers $w: repaired $(grep -E '^  repaired' /tmp/rw.txt | awk '{print $2}') in ${rep}s; plain UPDATE ${upd}s; ratio $(echo "scale=2; $rep / $upd" | bc)"
done
