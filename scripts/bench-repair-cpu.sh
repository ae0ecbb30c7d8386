#!/usr/bin/env bash
# CPU, not wall, of the row-per-session repair (BENCHMARKS.md): on a shared machine a
# run's wall time moves with the load, its CPU much less. Each round repairs the broken
# sessions with every build in turn, then runs the plain UPDATE from the repaired
# contents as text; each prints wall, the CPU of tmend (or psql) and the CPU of the
# database's backends that served it (utime+stime from /proc, sampled every 2 ms, so the
# database must run on this machine and /proc be readable; 10 ms ticks).
#   BINS="bin/tmend /tmp/tmend-variant" TMEND_DATABASE_URL=postgres://.../db ROUNDS=8 scripts/bench-repair-cpu.sh
# The database is one scripts/bench-repair-ab.sh has set up (bench_orig, bench_rep_text).
set -euo pipefail
ROUNDS=${ROUNDS:-5}
sql() { psql "$TMEND_DATABASE_URL" -qAtX -v ON_ERROR_STOP=1 "$@"; }
export TMEND_LOG_LEVEL=warn
db=$(sql -c "SELECT current_database()")
reset() {
  sql -c "UPDATE tmend.sessions SET updated_at = now() - interval '1 day' WHERE updated_at > now() - interval '1 day'" \
      -c "UPDATE tmend.sessions s SET messages = o.messages, updated_at = now() - interval '20 minutes' FROM bench_orig o WHERE o.id = s.id" \
      -c "INSERT INTO tmend.scan_state (source, scanned_through) VALUES ('sessions(id,messages,updated_at)', now() - interval '1 hour') ON CONFLICT (source) DO UPDATE SET scanned_through = excluded.scanned_through" \
      -c "VACUUM tmend.sessions" -c "CHECKPOINT"
}
cpu() { # command...: wall, the command's CPU, the backends' CPU
  python3 - "$db" "$@" <<'EOF'
import os, sys, time, subprocess, resource
db, cmd = sys.argv[1].encode(), sys.argv[2:]
tck, seen = os.sysconf('SC_CLK_TCK'), {}
def sample():
    for p in filter(str.isdigit, os.listdir('/proc')):
        try:
            with open('/proc/%s/cmdline' % p, 'rb') as f:
                c = f.read()
            if not c.startswith(b'postgres:') or b' ' + db + b' ' not in c:
                continue
            with open('/proc/%s/stat' % p) as f:
                st = f.read().rsplit(')', 1)[1].split()
            seen[p] = max(seen.get(p, 0), (int(st[11]) + int(st[12])) / tck)
        except OSError:
            pass
sample()
base, t0 = dict(seen), time.time()
child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
while child.poll() is None:
    sample()
    time.sleep(0.002)
wall = time.time() - t0
sample()
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
print("%.3f/%.3f/%.3f" % (wall, ru.ru_utime + ru.ru_stime, sum(v - base.get(p, 0) for p, v in seen.items())))
EOF
}
read -ra bins <<< "$BINS"
for r in $(seq "$ROUNDS"); do
  line="round $r (wall/own CPU/database CPU):"
  for i in $(seq 0 $((${#bins[@]} - 1))); do
    b=${bins[$(( (i + r) % ${#bins[@]} ))]}
    reset; line="$line $(basename "$b")=$(cpu "$b" scan)"
  done
  reset
  line="$line plaintext=$(cpu psql "$TMEND_DATABASE_URL" -qAtX -c "UPDATE tmend.sessions s SET messages = v.m::jsonb FROM bench_rep_text v WHERE v.id = s.id")"
  echo "$line"
done
