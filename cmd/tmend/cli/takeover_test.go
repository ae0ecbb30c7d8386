package cli

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// A scan that takes over a dead one goes on in the dead run's partitions, whatever
// --partitions asks for, and says so.
func TestTakeOverKeepsItsPartitions(t *testing.T) {
	t.Parallel()
	b := setupDB(t, 60, "0.5")
	r := runCLI(t, "", b.env, "scan", "--full", "--dry-run", "--partitions", "3", "--json")
	require.Equal(t, ExitProblems, r.code, r.stderr)
	var done struct {
		ID         int64 `json:"id"`
		Partitions int   `json:"partitions"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &done))
	require.Equal(t, 3, done.Partitions)
	// The same scan again, left running by a process that died before it worked any of
	// its partitions (no job, no owner: nobody will work it).
	var dead int64
	require.NoError(t, b.pool.QueryRow(context.Background(), `INSERT INTO repair_runs (trigger, mode, dry_run, source, options,
  source_key, partitions, scanned_through) SELECT trigger, mode, dry_run, source, options, source_key, partitions, now()
FROM repair_runs WHERE id = $1 RETURNING id`, done.ID).Scan(&dead))
	_, err := b.pool.Exec(context.Background(), `INSERT INTO run_partitions (run_id, partition, lower_id, upper_id)
SELECT $2, partition, lower_id, upper_id FROM run_partitions WHERE run_id = $1`, done.ID, dead)
	require.NoError(t, err)

	r = runCLI(t, "", b.env, "scan", "--full", "--dry-run", "--partitions", "1", "--json")
	require.Equal(t, ExitProblems, r.code, r.stderr)
	var taken struct {
		ID         int64          `json:"id"`
		Status     string         `json:"status"`
		Partitions int            `json:"partitions"`
		Counts     map[string]int `json:"counts"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &taken))
	require.Equal(t, dead, taken.ID, "the dead run goes on")
	require.Equal(t, "completed", taken.Status)
	require.Equal(t, 3, taken.Partitions)
	require.Equal(t, 60, taken.Counts["scanned"])
	require.Contains(t, r.stderr, "run taken over")
	require.Contains(t, r.stderr, "it goes on in its own 3 partitions from their checkpoints; --partitions 1 does not apply to it")
	require.Contains(t, r.stderr, `"partitions_asked":1`)
}
