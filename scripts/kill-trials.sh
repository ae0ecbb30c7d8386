#!/usr/bin/env bash
# The kill trials in full (README, "Repairing stored sessions"): tmend killed with SIGKILL
# at random points of a run, in each deployment the runbook describes, TRIALS times each
# (default 32):
#   - the CronJob and the systemd timer: 'tmend scan' alone is killed, and the next scan
#     must start within seconds and take the killed scan's run over to completion
#     (TestKillTrialsScan); 'tmend rollback --run' and 'tmend repair --session' are
#     killed mid-session, and the next command ends their runs abandoned, once whatever
#     TRIALS (TestKilledRepairAndRollbackAreAbandoned);
#   - a table with a row per message (--preset langchain-postgres): 'tmend scan' is
#     killed, and every session's rows are what the platform wrote or exactly its repair
#     (TestKillTrialsMessagesLayout);
#   - the daemon: 'tmend serve' replicas working a scan are killed, one or all, and
#     restarted (TestKillTrialsDaemon);
#   - the daemon plus workers: one of three 'tmend worker's is killed, once whatever TRIALS
#     (TestKilledWorkerIsRescued).
# Each checks that nothing is lost, nothing is repaired twice, no session is half-written
# and every run's counts are its reports. Runs against TMEND_TEST_DATABASE_URL, or else a
# throwaway PostgreSQL started here. TMEND_KILL_SEED=N repeats a run's kill points.
#
#   scripts/kill-trials.sh [TRIALS]
set -euo pipefail
cd "$(dirname "$0")/.."
trials=${1:-32}
case $trials in '' | *[!0-9]*) echo "usage: $0 [TRIALS]" >&2; exit 2 ;; esac

if [ -z "${TMEND_TEST_DATABASE_URL:-}" ]; then
  . scripts/pg.sh
  trap pg_stop EXIT
  pg_start
  export TMEND_TEST_DATABASE_URL=$TMEND_PG_URL
fi
start=$(date +%s)
set +e
TMEND_KILL_TRIALS=$trials go test -count=1 -timeout 6h -v \
  -run '^(TestKillTrialsScan|TestKilledRepairAndRollbackAreAbandoned|TestKillTrialsMessagesLayout|TestKillTrialsDaemon|TestKilledWorkerIsRescued)$' ./cmd/tmend/ |
  grep -E '^(--- |    --- |ok|FAIL|PASS)|kill(_messages)?_test.go'
rc=${PIPESTATUS[0]}
set -e
echo "kill trials: $trials per deployment in $(( $(date +%s) - start ))s (exit $rc)"
exit "$rc"
