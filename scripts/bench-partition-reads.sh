#!/usr/bin/env bash
# What reading a table as P partitions costs Postgres (BENCHMARKS.md, "Runs shared across
# workers"): ROWS sessions with random text ids, read by keyset pages of 500 in id order
# as a partition job reads them, timed as
#   whole      one walk over every row
#   ranges     P walks, one per id range split at a 10% sample (what tmend does)
#   hash 1/P   one walk over the rows whose id hashes to 0 modulo P (what it did before
#              migration 8); the whole run was P such walks
#   scripts/bench-partition-reads.sh    # ROWS=1000000 P=64; about a minute
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/pg.sh
ROWS=${ROWS:-1000000}
P=${P:-64}
trap pg_stop EXIT
pg_start
psql "$TMEND_PG_URL" -qAtX -v rows="$ROWS" <<'EOF'
CREATE TABLE s (id text PRIMARY KEY, messages jsonb);
INSERT INTO s SELECT md5(g::text), jsonb_build_array(jsonb_build_object('role', 'user', 'content', repeat('x', 300)))
FROM generate_series(1, :rows) g;
VACUUM ANALYZE s;
-- Walks the rows after lo (NULL: from the first) up to hi (NULL: to the last), or with
-- p > 1 the rows whose id hashes to 0 modulo p, and returns how many it read.
CREATE FUNCTION walk(lo text, hi text, p int) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE c text := coalesce(lo, ''); n bigint := 0; r record; got int;
BEGIN
  LOOP
    got := 0;
    FOR r IN EXECUTE format('SELECT id, messages::text AS m FROM s WHERE id > %L %s %s ORDER BY id LIMIT 500', c,
        CASE WHEN hi IS NULL THEN '' ELSE format('AND id <= %L', hi) END,
        CASE WHEN p > 1 THEN format('AND mod(mod(hashtextextended(id, 0), %s) + %s, %s) = 0', p, p, p) ELSE '' END) LOOP
      c := r.id; got := got + 1; n := n + 1;
    END LOOP;
    EXIT WHEN got < 500;
  END LOOP;
  RETURN n;
END $$;
EOF
timed() { # label sql
  local s e
  s=$(date +%s.%N)
  local rows
  rows=$(psql "$TMEND_PG_URL" -qAtX -c "$2")
  e=$(date +%s.%N)
  printf '%-10s %8s rows  %6.2f s\n' "$1" "$rows" "$(echo "$e - $s" | bc)"
}
echo "cores: $(nproc); $ROWS rows, $P partitions"
timed whole "SELECT walk(NULL, NULL, 1)"
timed ranges "WITH b AS (SELECT percentile_disc(array(SELECT g::float8 / $P FROM generate_series(1, $P - 1) g))
  WITHIN GROUP (ORDER BY id) AS b FROM s TABLESAMPLE SYSTEM (10))
SELECT sum(walk(CASE WHEN i > 1 THEN b[i - 1] END, CASE WHEN i < $P THEN b[i] END, 1)) FROM b, generate_series(1, $P) i"
timed "hash 1/$P" "SELECT walk(NULL, NULL, $P)"
