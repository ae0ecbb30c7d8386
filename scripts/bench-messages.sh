#!/usr/bin/env bash
# Benchmarks for BENCHMARKS.md, sessions kept one row per message: LangChain's
# langchain_chat_histories (--preset langchain-postgres, its DDL from store/testdata),
# SESSIONS sessions of ~10 messages (1M rows by default), 2% broken, rows interleaved
# across sessions as concurrent chats write them. Each of ROUNDS rounds runs tmend and the
# SQL it is measured against one right after the other (which goes first alternates), so
# that a loaded machine weighs on both alike; medians and ratios at the end.
#   scripts/bench-messages.sh                    # a throwaway PostgreSQL (scripts/pg.sh)
#   TMEND_DATABASE_URL=postgres://.../db scripts/bench-messages.sh   # an empty database of yours
# TMEND_BIN=path skips the build; PARTS=read (or repair) runs one part only. TMEND_BEFORE=path
# also times that build in each repair round (order alternating), paired with TMEND_BIN.
# Run again on the same database, the script keeps the table it loaded (and the broken
# sessions' original rows) and runs the rounds alone.
set -euo pipefail
cd "$(dirname "$0")/.."
SESSIONS=${SESSIONS:-100000}
ROUNDS=${ROUNDS:-5}
PARTS=${PARTS:-read repair}
if [ -z "${TMEND_DATABASE_URL:-}" ]; then
  . scripts/pg.sh
  trap pg_stop EXIT
  pg_start
  export TMEND_DATABASE_URL=$TMEND_PG_URL
fi
export TMEND_LOG_LEVEL=warn
tmend=${TMEND_BIN:-bin/tmend}
if [ -z "${TMEND_BIN:-}" ]; then make -s build; fi
sql() { psql "$TMEND_DATABASE_URL" -qAtX -v ON_ERROR_STOP=1 "$@"; }
now() { date +%s.%N; }
since() { echo "$(now) - $1" | bc; }
median() { sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
t=langchain_chat_histories
lc=(--preset langchain-postgres)

$tmend migrate up >/dev/null
loaded=$(sql -c "SELECT to_regclass('bench_orig') IS NOT NULL")
# A read-only run leaves the table without bench_orig: it is loaded once all the same.
if [ "$(sql -c "SELECT to_regclass('$t') IS NOT NULL")" = f ]; then
  sql -f store/testdata/langchain-postgres.sql
  sql -c "CREATE INDEX ON $t (session_id, id)"
  echo "loading $SESSIONS sessions"
  sql -c "CREATE UNLOGGED TABLE bench_gen (j jsonb)"
  # CSV with quote and delimiter bytes JSON never holds: each line one value, as it is.
  $tmend gen --dialect langchain --variant flat --sessions "$SESSIONS" --messages 10 --fault-rate 0.02 --seed 1 |
    sql -c "\\copy bench_gen (j) FROM STDIN WITH (FORMAT csv, QUOTE e'\\x01', DELIMITER e'\\x02')"
  sql -c "INSERT INTO $t (session_id, message) SELECT g.j->>'id', m.e FROM bench_gen g,
    jsonb_array_elements(g.j->'messages') WITH ORDINALITY AS m (e, i) ORDER BY m.i, g.j->>'id'" \
    -c "DROP TABLE bench_gen" -c "VACUUM ANALYZE $t"
fi
echo "table: $(sql -c "SELECT count(*) || ' rows, ' || pg_size_pretty(pg_total_relation_size('$t'))  FROM $t")"

# Read: a dry run of every session against COPY of the same rows in the same order.
# The repair part needs the reports of one dry run.
if [[ $PARTS != *read* ]]; then
  [ "$loaded" = t ] || $tmend scan "${lc[@]}" --full --dry-run >/dev/null || [ $? = 3 ]
  ROUNDS_READ=0
fi
copy_s=() dry_s=() read_r=()
copy() { local s=$(now); sql -c "\\copy (SELECT session_id, id, message FROM $t ORDER BY session_id, id) TO '/dev/null'"; since "$s"; }
dry() { local s=$(now); $tmend scan "${lc[@]}" --full --dry-run >/dev/null || [ $? = 3 ]; since "$s"; }
for r in $(seq "${ROUNDS_READ:-$ROUNDS}"); do
  if [ $((r % 2)) = 1 ]; then c=$(copy); d=$(dry); else d=$(dry); c=$(copy); fi
  copy_s+=("$c") dry_s+=("$d") read_r+=("$(echo "scale=3; $d / $c" | bc)")
  echo "read round $r: COPY ${c}s, dry-run scan ${d}s, ratio ${read_r[-1]}"
done
if [[ $PARTS == *read* ]]; then
  c=$(printf '%s\n' "${copy_s[@]}" | median) d=$(printf '%s\n' "${dry_s[@]}" | median)
  echo "read, medians of $ROUNDS: COPY ${c}s, dry-run scan ${d}s; median of the rounds' ratios $(printf '%s\n' "${read_r[@]}" | median)"
fi
[[ $PARTS == *repair* ]] || exit 0

# Repair: the broken sessions, put back as generated with new ids (above the last run's
# mark, so an incremental run reads exactly them), repaired by tmend; then the same rows put
# back exactly and the same row changes made by plain SQL (delete, update, insert by id);
# then again, the plain SQL preceded, in its transaction, by the least a safe repair adds:
# each changed session's rows saved first as a JSON version (as tmend's versions hold
# them: every column of every row, in order, with its hash).
if [ "$loaded" = f ]; then
  sql -c "CREATE TABLE bench_broken AS SELECT DISTINCT session_id FROM tmend.repair_reports WHERE status = 'would_repair'" \
    -c "CREATE TABLE bench_orig AS SELECT t.* FROM $t t JOIN bench_broken USING (session_id)"
  $tmend scan "${lc[@]}" --full >/dev/null # the first repair, which sets the mark
fi
broken=$(sql -c "SELECT count(*) FROM bench_broken")
settle() { sql -c "VACUUM $t" -c "CHECKPOINT"; }
snap() { sql -c "DROP TABLE IF EXISTS $1" -c "CREATE TABLE $1 AS SELECT t.* FROM $t t JOIN bench_broken USING (session_id)"; }
putback() {
  sql -1 -c "DELETE FROM $t WHERE session_id IN (SELECT session_id FROM bench_broken)" -c "$1"
}
plain=(-c "DELETE FROM $t WHERE id IN (SELECT id FROM bench_del)"
  -c "UPDATE $t t SET session_id = u.session_id, message = u.message FROM bench_upd u WHERE t.id = u.id"
  -c "INSERT INTO $t SELECT * FROM bench_ins")
sql -c "DROP TABLE IF EXISTS bench_versions" -c "CREATE TABLE bench_versions (session_id text, content text, content_hash text)"
# Each session's rows are read through the (session_id, id) index, as tmend reads them: by
# IN, the planner took the whole table (a hash join, twice the time) once the broken
# sessions' table had statistics.
saved=(-c "INSERT INTO bench_versions SELECT b.session_id, x.c, encode(sha256(convert_to(x.c, 'UTF8')), 'hex')
  FROM bench_broken b CROSS JOIN LATERAL (SELECT '[' || string_agg(row_to_json(t)::text, ',' ORDER BY id) || ']' AS c
  FROM $t t WHERE t.session_id = b.session_id) x")
# One repair by the build $1 of the broken sessions put back as generated (their rows
# snapshotted before and after when $2 is set); the time on stdout.
repair() {
  putback "INSERT INTO $t (session_id, message) SELECT session_id, message FROM bench_orig ORDER BY id"
  [ -z "${2:-}" ] || snap bench_before
  # An incremental run reads the sessions with rows above the mark of the last run that
  # started --overlap (15m) before its window: the runs here are seconds apart, so they
  # are dated back as a nightly schedule would have them.
  sql -c "UPDATE tmend.repair_runs SET started_at = started_at - interval '1 day'" \
    -c "UPDATE tmend.scan_state SET scanned_through = now() - interval '1 hour'"
  settle
  local s=$(now)
  $1 scan "${lc[@]}" --json >/tmp/bench-messages.$$.json
  since "$s"
  [ -z "${2:-}" ] || snap bench_after
}
tm_s=() sql_s=() rep_r=() sv_s=() sv_r=() bf_s=() bf_r=()
for r in $(seq "$ROUNDS"); do
  [ -z "${TMEND_BEFORE:-}" ] || [ $((r % 2)) = 0 ] || bf=$(repair "$TMEND_BEFORE")
  tm=$(repair "$tmend" snap)
  scanned=$(python3 -c 'import json,sys; c=json.load(sys.stdin)["counts"]; print(c["scanned"], c["repaired"])' </tmp/bench-messages.$$.json)
  [ -z "${TMEND_BEFORE:-}" ] || [ $((r % 2)) = 1 ] || bf=$(repair "$TMEND_BEFORE")
  sql -c "DROP TABLE IF EXISTS bench_del, bench_upd, bench_ins" \
    -c "CREATE TABLE bench_del AS SELECT id FROM bench_before EXCEPT SELECT id FROM bench_after" \
    -c "CREATE TABLE bench_upd AS SELECT a.* FROM bench_after a JOIN bench_before b USING (id) WHERE a.message <> b.message" \
    -c "CREATE TABLE bench_ins AS SELECT a.* FROM bench_after a WHERE NOT EXISTS (SELECT FROM bench_before b WHERE b.id = a.id)"
  changes=$(sql -c "SELECT (SELECT count(*) FROM bench_del) || ' deleted, ' || (SELECT count(*) FROM bench_upd) || ' updated, ' || (SELECT count(*) FROM bench_ins) || ' inserted'")
  putback "INSERT INTO $t SELECT * FROM bench_before"
  settle
  s=$(now)
  sql -1 "${plain[@]}"
  p=$(since "$s")
  same=$(sql -c "SELECT count(*) FROM (SELECT t.* FROM $t t JOIN bench_broken USING (session_id) EXCEPT ALL SELECT * FROM bench_after) x")
  [ "$same" = 0 ] || { echo "the plain SQL did not make the rows tmend made" >&2; exit 1; }
  putback "INSERT INTO $t SELECT * FROM bench_before"
  sql -c "TRUNCATE bench_versions"
  settle
  s=$(now)
  sql -1 "${saved[@]}" "${plain[@]}"
  v=$(since "$s")
  tm_s+=("$tm") sql_s+=("$p") rep_r+=("$(echo "scale=3; $tm / $p" | bc)") sv_s+=("$v") sv_r+=("$(echo "scale=3; $tm / $v" | bc)")
  echo "repair round $r: tmend ${tm}s (scanned, repaired: $scanned; rows: $changes), plain SQL ${p}s, ratio ${rep_r[-1]}; with the prior rows saved ${v}s, ratio ${sv_r[-1]}"
  if [ -n "${TMEND_BEFORE:-}" ]; then
    bf_s+=("$bf") bf_r+=("$(echo "scale=3; $tm / $bf" | bc)")
    echo "repair round $r: before ${bf}s, tmend/before ${bf_r[-1]}"
  fi
done
rm -f /tmp/bench-messages.$$.json
tm=$(printf '%s\n' "${tm_s[@]}" | median) p=$(printf '%s\n' "${sql_s[@]}" | median) v=$(printf '%s\n' "${sv_s[@]}" | median)
echo "repair of $broken broken sessions, medians of $ROUNDS: tmend ${tm}s, plain SQL ${p}s; median of the rounds' ratios $(printf '%s\n' "${rep_r[@]}" | median)"
echo "the plain SQL with the prior rows saved as versions: median ${v}s; median of the rounds' ratios $(printf '%s\n' "${sv_r[@]}" | median)"
[ -z "${TMEND_BEFORE:-}" ] || echo "the build before: median $(printf '%s\n' "${bf_s[@]}" | median)s; median of the rounds' ratios tmend/before $(printf '%s\n' "${bf_r[@]}" | median)"
