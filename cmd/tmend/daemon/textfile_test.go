package daemon_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/cmd/tmend/daemon"
	"github.com/tmend/tmend/store/model"
)

// The metrics textfile is written through a symlink: the link stays, its target gets the
// metrics (it used to be replaced by a plain file), also when the target is new and the
// link relative.
func TestMetricsTextfileKeepsSymlinks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dir, "real"), 0o755))
	link := filepath.Join(dir, "tmend.prom")
	require.NoError(t, os.Symlink(filepath.Join("real", "tmend.prom"), link))
	m := daemon.NewRunMetrics()
	res := model.NewRunResult()
	res.Trigger, res.Mode, res.Status = model.TriggerCron, model.ModeFull, model.RunCompleted
	res.AddStatus(model.StatusRepaired, 3)
	for range 2 {
		m.Observe(&res)
		require.NoError(t, m.WriteTextfile(link))
		fi, err := os.Lstat(link)
		require.NoError(t, err)
		require.NotZero(t, fi.Mode()&os.ModeSymlink, "the link is kept")
	}
	b, err := os.ReadFile(filepath.Join(dir, "real", "tmend.prom"))
	require.NoError(t, err)
	require.Contains(t, string(b), `tmend_sessions_total{status="repaired"} 9`, "counted across writes: 3, then the registry's 6 added to the file's 3")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 2, "no temp file left beside the link")
}
