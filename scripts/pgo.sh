#!/usr/bin/env bash
# Regenerates cmd/tmend/default.pgo, the CPU profile that go build uses to optimise tmend
# (profile-guided optimisation; BENCHMARKS.md has what it gains). The profile is
# BenchmarkFix's: 'tmend fix' over the bench-fix corpora, in process. Run it after
# changing the engine or the file pipeline, and commit the new profile with the change.
#   scripts/pgo.sh
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go test -run '^$' -bench '^BenchmarkFix$' -benchtime 50x -o "$tmp/files.test" \
  -cpuprofile "$tmp/cpu.pprof" ./files
# Only the pipeline (files functions in the stack; not the test's corpus generation,
# which would claim a share of the hot code).
go tool pprof -proto -focus 'tmend/files\.' "$tmp/files.test" "$tmp/cpu.pprof" >cmd/tmend/default.pgo
echo "wrote cmd/tmend/default.pgo ($(wc -c <cmd/tmend/default.pgo) bytes)"
