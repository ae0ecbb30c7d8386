package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/tmend/tmend/store/model"
)

// runPartitionsSQL lists a run's partitions with the client of their River job's latest
// attempt. River deletes finished jobs after a while, hence the outer join.
const runPartitionsSQL = `SELECT p.partition, p.status, p.attempt, p.num_scanned, p.num_repaired, p.num_failed,
  coalesce(j.attempted_by[cardinality(j.attempted_by)], ''), coalesce(p.error, ''), p.updated_at
FROM run_partitions p LEFT JOIN river_job j ON j.id = p.job_id
WHERE p.run_id = $1 ORDER BY p.partition`

// RunPartitions returns a run's partitions in order; none for a run that has none.
func (s *Store) RunPartitions(ctx context.Context, runID int64) ([]model.PartitionRow, error) {
	rows, err := s.pool.Query(ctx, runPartitionsSQL, runID)
	if err != nil {
		return nil, classify(fmt.Errorf("list the partitions of run %d: %w", runID, err))
	}
	parts, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (model.PartitionRow, error) {
		var p model.PartitionRow
		err := row.Scan(&p.Partition, &p.Status, &p.Attempt, &p.Scanned, &p.Repaired, &p.Failed, &p.Worker, &p.Error, &p.UpdatedAt)
		return p, err
	})
	return parts, classify(err)
}
