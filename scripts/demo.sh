#!/usr/bin/env bash
# `make demo`: tmend end to end on a throwaway PostgreSQL. Grows with the scanner.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/pg.sh
trap pg_stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
pg_start
export TMEND_DATABASE_URL=$TMEND_PG_URL
echo "== throwaway PostgreSQL at $TMEND_PG_DIR"
bin/tmend migrate up
