#!/usr/bin/env bash
# Conformance with the real libraries (conformance/README.md): tmend against the AI SDK,
# LangChain, LangGraph, Mastra and pi code, run by test.sh after the Go tests. Finds Node.js and npm,
# installing Debian's nodejs and npm packages when none is found (as chromium.sh does for
# Chromium), installs the pinned packages when conformance/node_modules is missing or older
# than package-lock.json, builds tmend into a temp dir and runs conformance/run.mjs.
# Arguments go to run.mjs: case name filters, -v for every request. TMEND_BIN skips the build.
# The cases in conformance/cases/ use TMEND_TEST_DATABASE_URL, else a throwaway PostgreSQL.
set -euo pipefail
cd "$(dirname "$0")/.."

node_install() {
  if ! command -v apt-get >/dev/null 2>&1 || [ "$(id -u)" != 0 ]; then
    echo "conformance.sh: no node and npm found and apt-get is not usable here;" >&2
    echo "conformance.sh: install Node.js 20 or newer with npm" >&2
    return 1
  fi
  echo "conformance.sh: installing Debian's nodejs and npm packages" >&2
  DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm >&2
}

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  node_install
fi
# The packages want Node 20 or newer; Debian 12's nodejs is 18. Then the suite runs on the
# Node 20 that the npm registry's `node` package ships (installs still use the machine's npm).
run_node=(node)
if [ "$(node -p 'process.versions.node.split(".")[0]')" -lt 20 ]; then
  echo "conformance.sh: node $(node --version) is older than 20: running the suite on the npm package node@20.20.2" >&2
  run_node=(npm exec --yes --package=node@20.20.2 -- node)
fi

dir=conformance
# npm writes node_modules/.package-lock.json on every install: older than the lockfile means stale.
if [ ! -f "$dir/node_modules/.package-lock.json" ] || [ "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]; then
  echo "conformance.sh: npm ci in $dir (node $(node --version), npm $(npm --version))"
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
fi

tmp=
started_pg=
cleanup() {
  if [ -n "$tmp" ]; then rm -rf "$tmp"; fi
  if [ -n "$started_pg" ]; then pg_stop; fi
}
trap cleanup EXIT
# The cases that store sessions where the libraries keep them (conformance/cases/) need a
# PostgreSQL server where they may CREATE DATABASE: test.sh's, or a throwaway one.
if [ -z "${TMEND_TEST_DATABASE_URL:-}" ]; then
  . scripts/pg.sh
  pg_start
  started_pg=1
  export TMEND_TEST_DATABASE_URL=$TMEND_PG_URL
fi
if [ -z "${TMEND_BIN:-}" ]; then
  tmp=$(mktemp -d /tmp/tmend-conformance.XXXXXX)
  CGO_ENABLED=0 go build -o "$tmp/tmend" ./cmd/tmend
  export TMEND_BIN=$tmp/tmend
fi
"${run_node[@]}" "$dir/run.mjs" "$@"
