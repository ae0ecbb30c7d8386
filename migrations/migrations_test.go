package migrations_test

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/migrations"
	"github.com/tmend/tmend/store"
	"github.com/tmend/tmend/store/storetest"
)

var tables = []string{"sessions", "session_versions", "repair_runs", "repair_reports", "scan_state", "session_holds",
	"run_partitions", "river_job", "river_leader", "river_queue", "river_migration"}

func countTables(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	err := pool.QueryRow(t.Context(),
		`SELECT count(*) FROM information_schema.tables WHERE table_schema = $1 AND table_name = ANY($2)`,
		store.DefaultSchema, tables).Scan(&n)
	require.NoError(t, err)
	return n
}

func TestUpDownUp(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := storetest.NewDB(t) // already migrated up from the template

	v, dirty, err := migrations.Version(ctx, pool, store.DefaultSchema)
	require.NoError(t, err)
	require.False(t, dirty)
	require.Equal(t, migrations.Latest(), v)
	rv, err := migrations.RiverVersion(ctx, pool, store.DefaultSchema)
	require.NoError(t, err)
	require.Equal(t, migrations.RiverLatest(), rv)
	require.Positive(t, rv)
	require.Equal(t, len(tables), countTables(t, pool))
	// Debian's PostgreSQL, which the tests run on, is built with lz4.
	var method string
	require.NoError(t, pool.QueryRow(ctx, `SELECT attcompression::text FROM pg_attribute
WHERE attrelid = 'session_versions'::regclass AND attname = 'content'`).Scan(&method))
	require.Equal(t, "l", method, "session_versions.content should be compressed with lz4")

	require.NoError(t, migrations.Down(ctx, pool, store.DefaultSchema, 0))
	require.Zero(t, countTables(t, pool))
	v, _, err = migrations.Version(ctx, pool, store.DefaultSchema)
	require.NoError(t, err)
	require.Zero(t, v)
	rv, err = migrations.RiverVersion(ctx, pool, store.DefaultSchema)
	require.NoError(t, err)
	require.Zero(t, rv)

	require.NoError(t, migrations.Up(ctx, pool, store.DefaultSchema))
	require.Equal(t, len(tables), countTables(t, pool))
	// A second up is no change, which is success.
	require.NoError(t, migrations.Up(ctx, pool, store.DefaultSchema))
}

func TestDirtyDatabaseSaysWhatToRun(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := storetest.NewDB(t)
	_, err := pool.Exec(ctx, `UPDATE schema_migrations SET dirty = true`)
	require.NoError(t, err)

	err = migrations.Up(ctx, pool, store.DefaultSchema)
	var dirty *migrations.DirtyError
	require.ErrorAs(t, err, &dirty)
	require.Contains(t, err.Error(), "tmend migrate force")

	require.NoError(t, migrations.Force(ctx, pool, store.DefaultSchema, int(migrations.Latest())))
	require.NoError(t, migrations.Up(ctx, pool, store.DefaultSchema))
}

func TestMigrationsComeInPairs(t *testing.T) {
	t.Parallel()
	for _, v := range migrations.Versions() {
		ups, _ := migrations.FsGlob(v, "up")
		downs, _ := migrations.FsGlob(v, "down")
		require.Len(t, ups, 1, "version %d up", v)
		require.Len(t, downs, 1, "version %d down", v)
	}
}

// Rows from before sources were keyed belong to tmend's own sessions table.
func TestSourceKeysOfEarlierRows(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := storetest.NewDB(t)
	require.NoError(t, migrations.Down(ctx, pool, store.DefaultSchema, 1))
	_, err := pool.Exec(ctx, `INSERT INTO repair_runs (trigger, mode, source) VALUES ('cli', 'full', 'sessions(id,messages,updated_at)');
INSERT INTO session_versions (session_id, version, kind, content, content_hash, size_bytes) VALUES ('x', 1, 'original', '[]', 'h', 2);
INSERT INTO session_holds (session_id, content_hash, reason) VALUES ('x', 'h', 'r');
INSERT INTO repair_reports (session_id, status, trigger) VALUES ('x', 'repaired', 'cli');`)
	require.NoError(t, err)
	require.NoError(t, migrations.Up(ctx, pool, store.DefaultSchema))

	st, err := store.Open(ctx, pool, store.DefaultSource, true)
	require.NoError(t, err)
	require.Equal(t, "tmend.sessions(id,messages)", st.Key())
	for _, table := range []string{"repair_runs", "session_versions", "session_holds", "repair_reports"} {
		var keys []string
		require.NoError(t, pool.QueryRow(ctx, `SELECT array_agg(DISTINCT source_key) FROM `+table).Scan(&keys), table)
		require.Equal(t, []string{st.Key()}, keys, table)
	}
	versions, err := st.Versions(ctx, "x")
	require.NoError(t, err)
	require.Len(t, versions, 1)
}
