#!/usr/bin/env bash
# The test command (`make test`): go vet, then the whole suite with the race detector,
# against TMEND_TEST_DATABASE_URL or else a throwaway PostgreSQL started here, with
# Chromium for the console's browser test (installed when missing and possible); then tmend
# against the real AI SDK, LangChain, LangGraph, Mastra and pi code (scripts/conformance.sh).
# Screenshots of the console go to TMEND_ARTIFACTS when set.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/pg.sh
. scripts/chromium.sh

start=$(date +%s)
finish() {
  local rc=$?
  trap - EXIT INT TERM
  pg_stop
  echo "test command finished in $(( $(date +%s) - start ))s (exit $rc)"
  exit "$rc"
}
trap finish EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ -z "${TMEND_TEST_DATABASE_URL:-}" ]; then
  pg_start
  export TMEND_TEST_DATABASE_URL=$TMEND_PG_URL
  echo "throwaway PostgreSQL $("$TMEND_PG_BINDIR/postgres" --version | awk '{print $3}') at $TMEND_PG_DIR"
fi

# The console's browser test needs Chromium; without one it fails and says so.
chromium_find && echo "Chromium at $TMEND_CHROMIUM" || echo "no Chromium: the console's browser test will fail" >&2

go vet ./...
go test -race -count=1 -timeout 20m "$@" ./...
scripts/conformance.sh
