#!/usr/bin/env bash
# `make demo`: tmend's main job end to end on a throwaway PostgreSQL, ending with the
# daemon (tmend serve) and its console running until Ctrl-C, which stops both.
#   KEEP=1                    leaves the cluster running after Ctrl-C, to look around
#   TMEND_DEMO_DATABASE_URL   a database of your own to use instead of a throwaway cluster:
#                             it gets tmend's tables and the 4,000 demo sessions
#   TMEND_DEMO_LISTEN         where tmend serve listens (default 127.0.0.1:8080)
set -euo pipefail
cd "$(dirname "$0")/.."
listen=${TMEND_DEMO_LISTEN:-127.0.0.1:8080}
host=${listen%:*}
host=${host:-127.0.0.1}
port=${listen##*:}
tmend=bin/tmend

step_began=
# step ends the previous step with the time it took, and names the next one.
step() {
  [ -z "$step_began" ] || echo "   (took $((SECONDS - step_began))s)"
  echo
  echo "== $*"
  step_began=$SECONDS
}

# build runs `make build`, saying every few seconds how many packages it has compiled
# (go build -v names each one) and for how long: a first build compiles every package of
# tmend, its libraries and the standard library, and only prints its command line.
build() {
  local log pid n quiet=0
  log=$(mktemp)
  make -s build BUILDFLAGS=-v 2>"$log" &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    n=$(grep -cv '^go: ' "$log" || true)
    if [ -t 1 ]; then
      printf '\r   %d of %d packages compiled, %ds ' "$n" "$1" $((SECONDS - step_began))
    elif [ $((SECONDS - step_began)) -ge $((quiet + 15)) ]; then
      quiet=$((SECONDS - step_began))
      echo "   $n of $1 packages compiled, ${quiet}s"
    fi
    sleep 1
  done
  [ -t 1 ] && printf '\r%60s\r' ''
  wait "$pid" || { grep -Ev '^[A-Za-z0-9./_~-]+$' "$log" >&2; rm -f "$log"; return 1; }
  echo "   compiled $(grep -cv '^go: ' "$log" || true) packages (none when they were already in Go's build cache)"
  rm -f "$log"
}

began=$SECONDS
step "fetching the Go modules tmend is built from (none when they are already in $(go env GOMODCACHE))"
packages=$(go list -deps ./cmd/tmend | wc -l)

step "building bin/tmend: $packages packages; a first build needs about 70 s of CPU, minutes on a busy machine; later ones seconds"
build "$packages"

if [ -n "${TMEND_DEMO_DATABASE_URL:-}" ]; then
  step "PostgreSQL: TMEND_DEMO_DATABASE_URL"
  export TMEND_DATABASE_URL=$TMEND_DEMO_DATABASE_URL
else
  step "starting a throwaway PostgreSQL"
  . scripts/pg.sh
  [ "${KEEP:-}" = 1 ] || trap pg_stop EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  pg_start
  echo "   at $TMEND_PG_DIR"
  export TMEND_DATABASE_URL=$TMEND_PG_URL
fi
export TMEND_LOG_LEVEL=warn
$tmend migrate up

step "loading 4,000 generated sessions in four dialects, 10% of them broken"
for d in openclaw anthropic openai-chat gemini; do
  $tmend gen --dialect "$d" --sessions 1000 --fault-rate 0.1 --seed 7 | sed "s/\"id\":\"s-/\"id\":\"$d-/"
done | $tmend import -

step "tmend scan --dry-run (reports only, exit 3: there is work to do)"
$tmend scan --dry-run || [ $? -eq 3 ]

step "tmend scan"
$tmend scan

step "tmend scan again: incremental, nothing changed since"
$tmend scan

# A session the scan repaired by answering a call that had no result, from the audit rows.
id=$($tmend report --status repaired --issue tool_call_without_result --limit 1 --json |
  sed -n 's/.*"session_id":"\([^"]*\)".*/\1/p')
[ -n "$id" ] || { echo "demo: tmend report found no repaired session" >&2; exit 1; }

step "tmend report --session $id: what tmend did to one session"
$tmend report --session "$id"

step "tmend report --session $id --diff: what the repair changed"
$tmend report --session "$id" --diff

step "tmend rollback --session $id: undo it (the session still holds what tmend wrote)"
$tmend rollback --session "$id"

step "tmend serve: the daemon (nightly scans at 03:00 UTC), its API and the console"
token() { od -An -N16 -tx1 /dev/urandom | tr -d ' \n'; }
api_token=$(token)
read_token=$(token)
TMEND_API_TOKEN=$api_token TMEND_READ_TOKEN=$read_token $tmend serve --listen "$listen" &
serve=$!
# A background job of a script ignores Ctrl-C; pass it on as the SIGTERM serve stops on.
trap 'kill -TERM "$serve" 2>/dev/null || true' INT TERM
until (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null; do
  kill -0 "$serve" 2>/dev/null || { wait "$serve" || true; echo "demo: tmend serve did not start (is $listen in use? set TMEND_DEMO_LISTEN)" >&2; exit 1; }
  sleep 0.2
done
echo "   (took $((SECONDS - step_began))s; the whole demo $((SECONDS - began))s)"
cat <<TXT

tmend serve runs. Open the console:
  http://$host:$port/
and sign in with the API token (look and roll back)
  $api_token
or the read token (look only)
  $read_token
The API answers the same tokens:
  curl -H 'Authorization: Bearer $read_token' http://$host:$port/v1/runs
Ctrl-C stops tmend serve$([ -z "${TMEND_DEMO_DATABASE_URL:-}" ] && [ "${KEEP:-}" != 1 ] && echo " and the throwaway PostgreSQL").
TXT
while kill -0 "$serve" 2>/dev/null; do
  wait "$serve" || true
done
echo "tmend serve stopped."

if [ -z "${TMEND_DEMO_DATABASE_URL:-}" ] && [ "${KEEP:-}" = 1 ]; then
  cat <<TXT

The cluster keeps running. Look around with
  export TMEND_DATABASE_URL='$TMEND_DATABASE_URL'
  bin/tmend report
  bin/tmend report --session $id
  bin/tmend repair --session $id --dry-run
and stop it with
  $TMEND_PG_BINDIR/pg_ctl -D $TMEND_PG_DIR/data stop$( [ "$(id -u)" = 0 ] && echo " (as the postgres user: runuser -u postgres -- ...)")
TXT
fi
