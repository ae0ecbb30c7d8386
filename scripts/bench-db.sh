#!/usr/bin/env bash
# Database benchmarks for BENCHMARKS.md: SESSIONS sessions of ~45 messages, 2% broken.
#   scripts/bench-db.sh                         # 100,000 sessions
#   SESSIONS=400000 RSS_ONLY=1 scripts/bench-db.sh # peak RSS of a full dry run only
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/pg.sh
SESSIONS=${SESSIONS:-100000}
trap pg_stop EXIT
pg_start
export TMEND_DATABASE_URL=$TMEND_PG_URL TMEND_LOG_LEVEL=warn
make -s build
tmend=bin/tmend
sql() { psql "$TMEND_DATABASE_URL" -qAtX "$@"; }
secs() { local s=$(date +%s.%N); "$@" >/dev/null; echo "$(date +%s.%N) - $s" | bc; }

$tmend migrate up >/dev/null
echo "loading $SESSIONS sessions"
$tmend gen --dialect openclaw --sessions "$SESSIONS" --messages 45 --fault-rate 0.02 --seed 1 | $tmend import - >/dev/null
sql -c "VACUUM ANALYZE tmend.sessions"
echo "table: $(sql -c "SELECT pg_size_pretty(pg_total_relation_size('tmend.sessions'))"), text: $(sql -c "SELECT pg_size_pretty(sum(octet_length(messages::text))) FROM tmend.sessions")"

dry() { # workers...
  local s=$(date +%s.%N)
  /usr/bin/time -f "%M" -o /tmp/bench-db-rss.txt $tmend scan --full --dry-run "$@" >/dev/null 2>&1 || true
  echo "$(date +%s.%N) - $s" | bc
}
if [ -n "${RSS_ONLY:-}" ]; then
  dry >/dev/null
  echo "full dry run over $SESSIONS sessions: peak RSS $(tail -1 /tmp/bench-db-rss.txt) KB"
  exit 0
fi
for i in 1 2 3; do
  copy=$(secs sql -c "\\copy (SELECT id, messages FROM tmend.sessions) TO '/dev/null'")
  d=$(dry); rss=$(tail -1 /tmp/bench-db-rss.txt)
  d1=$(dry --workers 1)
  echo "round $i: copy ${copy}s  dry-run scan ${d}s (ratio $(echo "scale=2; $d / $copy" | bc), peak RSS ${rss} KB)  with --workers 1 ${d1}s (ratio $(echo "scale=2; $d1 / $copy" | bc))"
done

# Repair: a full run writes the broken ones (versions and reports). Then put the originals
# back and time a plain batched UPDATE writing the same repaired contents to the same rows.
broken=$(sql -c "SELECT count(DISTINCT session_id) FROM tmend.repair_reports WHERE status = 'would_repair'")
# Only the broken ones count as changed since the last run (and not within the quiet period).
sql -c "UPDATE tmend.sessions SET updated_at = now() - interval '1 day'"
sql -c "UPDATE tmend.sessions s SET updated_at = now() - interval '20 minutes' FROM (SELECT DISTINCT session_id FROM tmend.repair_reports WHERE status = 'would_repair') b WHERE b.session_id = s.id"
sql -c "INSERT INTO tmend.scan_state (source, scanned_through) VALUES ('sessions(id,messages,updated_at)', now() - interval '1 hour') ON CONFLICT (source) DO UPDATE SET scanned_through = excluded.scanned_through"
# The setup's mass updates must not leave vacuum and checkpoint work to the timed steps.
settle() { sql -c "VACUUM tmend.sessions" -c "CHECKPOINT"; }
settle
s=$(date +%s.%N); $tmend scan > /tmp/bench-db-repair.txt || true; rep=$(echo "$(date +%s.%N) - $s" | bc)
repaired=$(grep -E '^  repaired' /tmp/bench-db-repair.txt | awk '{print $2}')
sql -c "UPDATE tmend.sessions s SET messages = v.content::jsonb FROM tmend.session_versions v WHERE v.session_id = s.id AND v.kind = 'original'"
settle
upd=$(secs sql -c "UPDATE tmend.sessions s SET messages = v.content::jsonb FROM tmend.session_versions v WHERE v.session_id = s.id AND v.kind = 'repaired'")
echo "repair of $repaired broken sessions (of $broken): tmend ${rep}s, plain batched UPDATE ${upd}s, ratio $(echo "scale=2; $rep / $upd" | bc)"

# Incremental: change 1% of the sessions; count what the next run reads.
sql -c "UPDATE tmend.sessions SET updated_at = now() WHERE id IN (SELECT id FROM tmend.sessions ORDER BY md5(id) LIMIT $((SESSIONS / 100)))"
scanned=$( ($tmend scan --json || true) | python3 -c 'import json,sys; print(json.load(sys.stdin)["counts"]["scanned"])')
echo "incremental after 1% changed: read $scanned of $SESSIONS rows ($(echo "scale=2; 100 * $scanned / $SESSIONS" | bc)%)"
