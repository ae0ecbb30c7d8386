# Sourced by test.sh and demo.sh: starts a throwaway PostgreSQL cluster in a temp dir,
# reachable only through a unix socket there, and stops it again.
#   pg_start  -> exports TMEND_PG_DIR and TMEND_PG_URL
#   pg_stop   -> stops the cluster and removes its directory (safe to call twice)

pg_bindir() {
  local d
  if d=$(command -v initdb 2>/dev/null) && [ -x "$(dirname "$d")/pg_ctl" ]; then
    dirname "$(readlink -f "$d")"; return 0
  fi
  if command -v pg_config >/dev/null 2>&1; then
    d=$(pg_config --bindir 2>/dev/null)
    if [ -x "$d/initdb" ]; then echo "$d"; return 0; fi
  fi
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k4 -n -r); do
    if [ -x "$d/initdb" ]; then echo "$d"; return 0; fi
  done
  return 1
}

pg_install() {
  if ! command -v apt-get >/dev/null 2>&1 || [ "$(id -u)" != 0 ]; then
    echo "pg.sh: no PostgreSQL server found (initdb) and apt-get is not usable here;" >&2
    echo "pg.sh: install PostgreSQL 13 or newer, or set TMEND_TEST_DATABASE_URL" >&2
    return 1
  fi
  echo "pg.sh: installing Debian's postgresql package" >&2
  # Don't let the package create and start its own cluster: we only want the binaries.
  mkdir -p /etc/postgresql-common
  grep -qs '^create_main_cluster' /etc/postgresql-common/createcluster.conf ||
    echo 'create_main_cluster = false' >> /etc/postgresql-common/createcluster.conf
  DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
}

# as_pg runs a command as the postgres user when we are root (initdb refuses root).
as_pg() {
  if [ "$(id -u)" = 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

# pg_reap stops clusters left behind by runs that were killed before they could clean up.
pg_reap() {
  local dir owner bindir=$1
  for dir in /tmp/tmend-pg.*; do
    [ -d "$dir" ] || continue
    owner=$(cat "$dir/owner" 2>/dev/null || echo 0)
    if [ "$owner" != 0 ] && kill -0 "$owner" 2>/dev/null; then continue; fi
    if [ -f "$dir/data/postmaster.pid" ]; then
      as_pg "$bindir/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
    fi
    rm -rf "$dir"
  done
}

pg_start() {
  local bindir
  bindir=$(pg_bindir) || { pg_install && bindir=$(pg_bindir); } || return 1
  pg_reap "$bindir"
  TMEND_PG_BINDIR=$bindir
  TMEND_PG_DIR=$(mktemp -d /tmp/tmend-pg.XXXXXX)
  echo $$ > "$TMEND_PG_DIR/owner"
  chmod 755 "$TMEND_PG_DIR"
  [ "$(id -u)" = 0 ] && chown postgres "$TMEND_PG_DIR"
  as_pg "$bindir/initdb" -D "$TMEND_PG_DIR/data" -U postgres -A trust -E UTF8 --locale=C.UTF-8 \
    --no-sync >"$TMEND_PG_DIR/initdb.log" 2>&1 ||
    { cat "$TMEND_PG_DIR/initdb.log" >&2; return 1; }
  # Durability is irrelevant for a throwaway cluster; speed is not.
  as_pg "$bindir/pg_ctl" -D "$TMEND_PG_DIR/data" -l "$TMEND_PG_DIR/server.log" -w -t 60 \
    -o "-c listen_addresses='' -k $TMEND_PG_DIR -p 5432 -c fsync=off -c synchronous_commit=off \
        -c full_page_writes=off -c max_connections=300 -c shared_buffers=256MB" start >/dev/null ||
    { cat "$TMEND_PG_DIR/server.log" >&2; return 1; }
  export TMEND_PG_DIR TMEND_PG_BINDIR
  export TMEND_PG_URL="postgres://postgres@/postgres?host=$TMEND_PG_DIR&port=5432&sslmode=disable"
}

pg_stop() {
  [ -n "${TMEND_PG_DIR:-}" ] && [ -d "$TMEND_PG_DIR" ] || return 0
  as_pg "$TMEND_PG_BINDIR/pg_ctl" -D "$TMEND_PG_DIR/data" -m fast -w -t 30 stop >/dev/null 2>&1 ||
    as_pg "$TMEND_PG_BINDIR/pg_ctl" -D "$TMEND_PG_DIR/data" -m immediate -w stop >/dev/null 2>&1 || true
  rm -rf "$TMEND_PG_DIR"
  TMEND_PG_DIR=
}
