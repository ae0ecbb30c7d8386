package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/store/model"
)

// StartRun inserts a running repair_runs row, for a run this process works alone (a
// single session, a rollback), and returns its id and the database time it started,
// which bounds what the run scans. The run is alive while its process is: a liveness lock
// named after the row's owner is taken before the row exists, and FinishRun drops it.
// When the process dies the lock goes, and the next StartRun, CreateRun, Prune or daemon
// tick ends the run abandoned (abandonOwnedRuns); this one does so first.
func (s *Store) StartRun(ctx context.Context, r model.Run) (int64, time.Time, error) {
	opts, err := json.Marshal(r.Options)
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("encode run options: %w", err)
	}
	owner := ownerID()
	alive, err := s.HoldLiveness(ctx, owner, false)
	if err != nil {
		return 0, time.Time{}, err
	}
	var id int64
	var started time.Time
	err = s.withTx(ctx, func(tx pgx.Tx) error {
		if _, err := abandonOwnedRuns(ctx, tx); err != nil {
			return err
		}
		err := tx.QueryRow(ctx, `INSERT INTO repair_runs (trigger, mode, dry_run, source, options, source_key,
  actor, tmend_version, host, owner, order_mark)
VALUES ($1, $2, $3, $4, $5, $6, nullif($7, ''), nullif($8, ''), nullif($9, ''), $10, `+s.orderMarkSQL()+`) RETURNING id, started_at`,
			r.Trigger, r.Mode, r.DryRun, r.Source, opts, s.key, r.Actor, s.origin.Version, s.origin.Host, owner).Scan(&id, &started)
		if err != nil {
			return fmt.Errorf("start run: %w", err)
		}
		return nil
	})
	if err != nil {
		alive.Release(context.WithoutCancel(ctx))
		return 0, time.Time{}, err
	}
	s.owned.Store(id, alive)
	return id, started, nil
}

// orderMarkSQL is the expression a run row's order_mark takes: the order column's
// largest value for a source that keeps a row per message on a sequence, else NULL.
func (s *Store) orderMarkSQL() string {
	if m, ok := s.layout.(*messageLayout); ok && m.sql.orderMark != "" {
		return "(" + m.sql.orderMark + ")"
	}
	return "NULL::bigint"
}

// FinishRun records a run's outcome and, for a completed run that asks for it, moves the
// source's incremental position, in one transaction.
// A run StartRun recorded loses its liveness lock here, whatever the outcome: a caller
// that gives up leaves it for the next one to end as abandoned.
func (s *Store) FinishRun(ctx context.Context, f model.Finish) error {
	err := s.withTx(ctx, func(tx pgx.Tx) error { return finishRun(ctx, tx, f) })
	if alive, ok := s.owned.LoadAndDelete(f.RunID); ok {
		alive.(*Liveness).Release(context.WithoutCancel(ctx))
	}
	return err
}

func finishRun(ctx context.Context, tx pgx.Tx, f model.Finish) error {
	c := f.Counts
	summary, err := json.Marshal(f.Summary)
	if err != nil {
		return fmt.Errorf("encode run summary: %w", err)
	}
	// One round trip: the run's row and, when asked, the source's position.
	b := &pgx.Batch{}
	b.Queue(`UPDATE repair_runs SET status = $2, finished_at = now(),
  scanned_from = $3, scanned_through = $4, error = nullif($5, ''),
  num_scanned = $6, num_clean = $7, num_repaired = $8, num_pending = $9, num_conflict = $10,
  num_skipped = $11, num_failed = $12, summary = $13, num_restored = $14, num_refused = $15
WHERE id = $1`, f.RunID, f.Status, nullTime(f.ScannedFrom), nullTime(f.ScannedThrough), f.Error,
		c.Scanned, c.Clean, c.Repaired, c.Pending, c.Conflict, c.Skipped, c.Failed, summary, c.Restored, c.Refused)
	if f.AdvanceScanState {
		b.Queue(`INSERT INTO scan_state (source, last_run_id, scanned_through) VALUES ($1, $2, $3)
ON CONFLICT (source) DO UPDATE SET last_run_id = excluded.last_run_id,
  scanned_through = excluded.scanned_through, updated_at = now()`, f.Source, f.RunID, f.ScannedThrough)
	}
	br := tx.SendBatch(ctx, b)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return fmt.Errorf("finish run %d: %w", f.RunID, err)
	}
	if f.AdvanceScanState {
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("advance scan state of %q: %w", f.Source, err)
		}
	}
	return br.Close()
}

func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// ScanPosition returns where the source's last completed run stopped; ok is false when
// no run has completed yet.
func (s *Store) ScanPosition(ctx context.Context, source string) (time.Time, bool, error) {
	var t time.Time
	err := s.pool.QueryRow(ctx, "SELECT scanned_through FROM scan_state WHERE source = $1", once, source).Scan(&t)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, classify(fmt.Errorf("read scan state: %w", err))
	}
	return t, true, nil
}

// InsertReport records one audit row outside any repair transaction (dry runs, pending,
// skipped and failed sessions).
func (s *Store) InsertReport(ctx context.Context, r model.Report) error {
	return classify(s.insertReport(ctx, s.pool, r))
}

// insertReport inserts r with q; a leased report (r.Lease set) is a transaction of its
// own on the pool instead, since it must take the lease first.
func (s *Store) insertReport(ctx context.Context, q querier, r model.Report) error {
	sql, args, err := s.reportInsert(r)
	if err != nil {
		return err
	}
	if r.Lease == nil {
		if _, err := q.Exec(ctx, sql, args...); err != nil {
			return fmt.Errorf("insert report for session %q: %w", r.SessionID, err)
		}
		return nil
	}
	// A leased report is a transaction of its own on the pool, in one round trip: the
	// lease, then the insert that goes in only while the attempt holds its partition.
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(leaseLockSQL, r.Lease.RunID, r.Lease.Partition)
	b.Queue(sql, append(args, leaseArgs(r.Lease)...)...)
	b.Queue("COMMIT")
	br := s.pool.SendBatch(ctx, b)
	var tag pgconn.CommandTag
	for i := 0; i < 4 && err == nil; i++ {
		var t pgconn.CommandTag
		if t, err = br.Exec(); i == 2 {
			tag = t
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("insert report for session %q: %w", r.SessionID, err)
	}
	if tag.RowsAffected() == 0 {
		return model.ErrLeaseLost
	}
	return nil
}

// A partition attempt's lease is a transaction-level advisory lock on (run, partition),
// not a lock on the partition's row: a run's workers all write at once, and share-locking
// the one row each write (and the run's, for the foreign keys) made MultiXacts and kept
// the partition's checkpoint UPDATE waiting behind every write in flight. A write takes
// the lock shared (leaseLockSQL), then checks that its attempt still holds the partition
// (leaseCheckSQL); claiming, cancelling or ending a partition takes it exclusively
// (lockPartitionsSQL) before changing the row, so it waits for the writes that hold the
// lease, and the writes after it see the row as changed. The check must be a statement
// of its own after the lock: in READ COMMITTED a statement sees what committed before it
// started, and one that waited for the lock inside would not see the claim it waited for.
// The key is computed by the server, as the liveness locks' are (liveness.go).
const partitionLockKey = `hashtextextended('tmend:partition:' || current_schema() || ':' || %s::bigint || ':' || %s::int, 0)`

var (
	// leaseLockSQL takes the lease of $1 the run, $2 the partition for a write's transaction.
	leaseLockSQL = "SELECT pg_advisory_xact_lock_shared(" + fmt.Sprintf(partitionLockKey, "$1", "$2") + ")"
	// lockPartitionsSQL takes the partitions' leases of run $1 exclusively: those named in
	// $2, or all of them when $2 is NULL. In partition order, as two transactions that
	// take more than one must.
	lockPartitionsSQL = "SELECT count(pg_advisory_xact_lock(" + fmt.Sprintf(partitionLockKey, "run_id", "partition") + ")) FROM (" +
		"SELECT run_id, partition FROM run_partitions WHERE run_id = $1 AND ($2::int[] IS NULL OR partition = ANY($2)) ORDER BY partition) p"
)

// leaseCheckSQL finds the partition row of a lease that still holds: $1 the run, $2 the
// partition, $3 the attempt. Run after leaseLockSQL, in the same transaction.
const leaseCheckSQL = `SELECT 1 FROM run_partitions WHERE run_id = $1 AND partition = $2 AND attempt = $3 AND status = 'running'`

// leaseReportCheckSQL is leaseCheckSQL in a report's insert, whose own arguments are $1 to $19.
var leaseReportCheckSQL = strings.NewReplacer("$1", "$20", "$2", "$21", "$3", "$22").Replace(leaseCheckSQL)

// queueLease queues the lease of a write's transaction in its batch: leaseHeld reads it.
func queueLease(b *pgx.Batch, l *model.Lease) {
	b.Queue(leaseLockSQL, l.RunID, l.Partition)
	b.Queue(leaseCheckSQL, l.RunID, l.Partition, l.Attempt)
}

// leaseHeld reads the results of queueLease: model.ErrLeaseLost when the attempt no
// longer holds its partition (the run ended, was cancelled or abandoned, or a newer
// attempt claimed the partition).
func leaseHeld(br pgx.BatchResults) error {
	if _, err := br.Exec(); err != nil {
		return err
	}
	var one int
	err := br.QueryRow().Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return model.ErrLeaseLost
	}
	return err
}

// lockPartitions takes the leases of run runID's partitions exclusively (all of them
// when partitions is nil): see partitionLockKey.
func lockPartitions(ctx context.Context, tx pgx.Tx, runID int64, partitions []int) error {
	if _, err := tx.Exec(ctx, lockPartitionsSQL, runID, partitions); err != nil {
		return fmt.Errorf("lock the partitions of run %d: %w", runID, err)
	}
	return nil
}

// reportInsert is the INSERT of one report row and its arguments; Apply reuses the
// first nine arguments and the last three in a variant that takes hashes and sizes from
// saved versions.
func (s *Store) reportInsert(r model.Report) (string, []any, error) {
	actions := r.Actions
	if actions == nil {
		actions = []repair.Action{}
	}
	acts, err := json.Marshal(actions)
	if err != nil {
		return "", nil, fmt.Errorf("encode actions: %w", err)
	}
	counts := r.StageCounts
	if counts == nil {
		counts = map[repair.Stage]int{}
	}
	sc, err := json.Marshal(counts)
	if err != nil {
		return "", nil, fmt.Errorf("encode stage counts: %w", err)
	}
	codes := r.IssueCodes
	if codes == nil {
		codes = []string{}
	}
	const (
		insert = `INSERT INTO repair_reports (run_id, session_id, status, trigger, dialect, reason,
  issue_codes, stage_counts, actions, before_hash, after_hash, before_bytes, after_bytes, from_version, to_version, source_key,
  actor, tmend_version, host)
`
		values = `$1, $2, $3, $4, nullif($5, ''), nullif($6, ''), $7, $8, $9, nullif($10, ''), nullif($11, ''),
  nullif($12, 0), nullif($13, 0), nullif($14, 0), nullif($15, 0), $16, nullif($17, ''), nullif($18, ''), nullif($19, '')`
	)
	sql := insert + "VALUES (" + values + ")"
	if r.Lease != nil {
		// The row goes in only while the attempt holds its partition, after the
		// transaction took its lease (insertReport).
		sql = "WITH lease AS (" + leaseReportCheckSQL + ")\n" + insert + "SELECT " + values + " FROM lease"
	}
	return sql, []any{nilIfZero(r.RunID), r.SessionID, r.Status, r.Trigger, r.Dialect, r.Reason, codes, sc, acts,
		r.BeforeHash, r.AfterHash, r.BeforeBytes, r.AfterBytes, r.FromVersion, r.ToVersion, s.key,
		r.Actor, s.origin.Version, s.origin.Host}, nil
}

// leaseArgs are the arguments a leased report insert adds ($20 to $22 of leaseReportCheckSQL).
func leaseArgs(l *model.Lease) []any { return []any{l.RunID, l.Partition, l.Attempt} }

// TryLock takes a session-level advisory lock that lets one replica at a time do a
// job (the scheduled prune). ok is false when another process holds it. release frees it; the lock
// also goes away with the connection if the process dies.
func (s *Store) TryLock(ctx context.Context, name string) (release func(), ok bool, err error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, false, classify(fmt.Errorf("acquire connection for lock: %w", err))
	}
	key := lockKey(name)
	if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", key).Scan(&ok); err != nil || !ok {
		conn.Release()
		return nil, false, classify(err)
	}
	return func() {
		_, err := conn.Exec(context.Background(), "SELECT pg_advisory_unlock($1)", key)
		if err != nil {
			// The connection is broken; closing it drops the lock with it.
			conn.Conn().Close(context.Background()) //nolint:errcheck
		}
		conn.Release()
	}, true, nil
}

func lockKey(name string) int64 {
	h := fnv.New64a()
	h.Write([]byte("tmend:" + name))
	return int64(h.Sum64())
}

// Run returns a recorded run.
func (s *Store) Run(ctx context.Context, id int64) (model.RunRow, error) {
	rows, err := s.pool.Query(ctx, runSelect+" WHERE id = $1", id)
	if err != nil {
		return model.RunRow{}, classify(fmt.Errorf("read run %d: %w", id, err))
	}
	r, err := pgx.CollectExactlyOneRow(rows, scanRun)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, fmt.Errorf("run %d: %w", id, model.ErrNotFound)
	}
	return r, classify(err)
}

const runSelect = `SELECT id, trigger, mode, dry_run, source_key, source, options, status, started_at, finished_at,
  scanned_from, scanned_through, num_scanned, num_clean, num_repaired, num_pending, num_conflict, num_skipped,
  num_failed, coalesce(error, ''), summary, num_restored, num_refused, partitions,
  coalesce(actor, ''), coalesce(tmend_version, ''), coalesce(host, '')
FROM repair_runs`

func scanRun(row pgx.CollectableRow) (model.RunRow, error) {
	var r model.RunRow
	err := row.Scan(&r.ID, &r.Trigger, &r.Mode, &r.DryRun, &r.Source, &r.ScanSource, &r.Options, &r.Status,
		&r.StartedAt, &r.FinishedAt, &r.ScannedFrom, &r.ScannedThrough, &r.Counts.Scanned, &r.Counts.Clean,
		&r.Counts.Repaired, &r.Counts.Pending, &r.Counts.Conflict, &r.Counts.Skipped, &r.Counts.Failed, &r.Error, &r.Summary,
		&r.Counts.Restored, &r.Counts.Refused, &r.Partitions, &r.Actor, &r.TmendVersion, &r.Host)
	return r, err
}
