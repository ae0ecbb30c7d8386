#!/usr/bin/env bash
# `make demo`: tmend's main job end to end on a throwaway PostgreSQL.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/pg.sh
# KEEP=1 leaves the cluster running for a look around afterwards.
[ "${KEEP:-}" = 1 ] || trap pg_stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
pg_start
export TMEND_DATABASE_URL=$TMEND_PG_URL TMEND_LOG_LEVEL=warn
tmend=bin/tmend

echo "== throwaway PostgreSQL at $TMEND_PG_DIR"
$tmend migrate up

echo
echo "== loading 4,000 generated sessions in four dialects, 10% of them broken"
for d in openclaw anthropic openai-chat gemini; do
  $tmend gen --dialect "$d" --sessions 1000 --fault-rate 0.1 --seed 7 | sed "s/\"id\":\"s-/\"id\":\"$d-/"
done | $tmend import -

echo
echo "== tmend scan --dry-run (reports only, exit 3: there is work to do)"
$tmend scan --dry-run || [ $? -eq 3 ]

echo
echo "== tmend scan"
$tmend scan

echo
echo "== tmend scan again: incremental, nothing changed since"
$tmend scan

# A session the scan repaired by answering a call that had no result, from the audit rows.
id=$($tmend report --status repaired --issue tool_call_without_result --limit 1 --json |
  sed -n 's/.*"session_id":"\([^"]*\)".*/\1/p')
[ -n "$id" ] || { echo "demo: tmend report found no repaired session" >&2; exit 1; }
echo
echo "== tmend report --session $id: what tmend did to one session"
$tmend report --session "$id"

echo
echo "== tmend report --session $id --diff: what the repair changed"
$tmend report --session "$id" --diff

echo
echo "== tmend rollback --session $id: undo it (the session still holds what tmend wrote)"
$tmend rollback --session "$id"

if [ "${KEEP:-}" = 1 ]; then
  cat <<TXT

The cluster keeps running. Look around with
  export TMEND_DATABASE_URL='$TMEND_DATABASE_URL'
  bin/tmend report
  bin/tmend report --session $id
  bin/tmend repair --session $id --dry-run
and stop it with
  $TMEND_PG_BINDIR/pg_ctl -D $TMEND_PG_DIR/data stop$( [ "$(id -u)" = 0 ] && echo " (as the postgres user: runuser -u postgres -- ...)")
TXT
else
  echo
  echo "(KEEP=1 make demo leaves the database running to look around.)"
fi
