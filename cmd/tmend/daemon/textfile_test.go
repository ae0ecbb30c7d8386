package daemon_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/cmd/tmend/daemon"
	"github.com/tmend/tmend/store"
)

// The metrics textfile holds the totals of the recorded runs, replaced (not added to)
// on each write, and is written through a symlink: the link stays, its target gets the
// metrics (it used to be replaced by a plain file), also when the target is new and the
// link relative.
func TestMetricsTextfileKeepsSymlinks(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.repair(t, "a")
	st, err := store.Open(t.Context(), b.pool, store.DefaultSource, false)
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dir, "real"), 0o755))
	link := filepath.Join(dir, "tmend.prom")
	require.NoError(t, os.Symlink(filepath.Join("real", "tmend.prom"), link))
	for range 2 {
		require.NoError(t, daemon.WriteTextfile(t.Context(), st, link))
		fi, err := os.Lstat(link)
		require.NoError(t, err)
		require.NotZero(t, fi.Mode()&os.ModeSymlink, "the link is kept")
	}
	got, err := os.ReadFile(filepath.Join(dir, "real", "tmend.prom"))
	require.NoError(t, err)
	require.Contains(t, string(got), `tmend_sessions_total{status="repaired"} 1`+"\n", "the database's total, written twice")
	require.Contains(t, string(got), `tmend_runs_total{mode="session",status="completed",trigger="cli"} 1`+"\n")
	require.NotContains(t, string(got), "tmend_running_runs", "a gauge of now, stale until the next write")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 2, "no temp file left beside the link")
}
