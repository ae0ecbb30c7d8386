package store

import (
	"cmp"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tmend/tmend/store/model"
)

// A process that works River jobs proves it is alive to the other tmend processes on the
// database with Postgres session-level advisory locks, held on a connection of its own
// for as long as its River client may hold a job. Postgres drops them when that
// connection ends: at once when the process dies on a live host (kill -9, OOM kill: the
// kernel closes its socket), and within about 30 seconds when the host itself vanishes
// (the server's TCP keepalives and user timeout, set on the connection).
//
// Why locks and not River: River (v0.51, the open-source pilot) keeps no per-client
// heartbeat in the database. Its river_client table was dropped unused (River migration
// 7), the producer keep-alive is a no-op, the leader row names one client only, and the
// rescuer judges a running job by its age (RescueStuckJobsAfter) alone. What River does
// record is who works each job: river_job.attempted_by ends with the ID of the client
// that holds it. tmend names a lock after that ID, so "is this job's worker alive" is a
// question Postgres answers with certainty, without a clock.
//
// Two locks:
//   - the client lock, exclusive, named after the River client ID: held by every process
//     that runs a River client (tmend scan, serve, worker);
//   - the workers lock, shared, one per schema and source: held by the processes that
//     work any run's queued partitions of their source for as long as they live (serve,
//     worker), not by tmend scan, which works only while it waits for its own run.
//
// Each source has a River queue of its own (QueueName), which only the processes that
// read that source work: a process of another source would read its own table for the
// partition. So its workers keep only its runs alive.

// Advisory lock keys, computed by the server so that the lock and the checks in
// CreateRun agree: the client lock of River client %s, and the workers lock of the
// schema's source of key %s.
const (
	clientLockKey  = `hashtextextended('tmend:river-client:' || %s, 0)`
	workersLockKey = `hashtextextended('tmend:river-workers:' || current_schema() || ':' || %s, 0)`
	// queueNameSQL is QueueName, by the server, of source key %s.
	queueNameSQL = `('tmend_' || left(md5(%s), 16))`
)

// QueueName is the River queue of the source's jobs: tmend_ and 16 hex digits of the
// md5 of its key (Key).
func (s *Store) QueueName() string {
	sum := md5.Sum([]byte(s.key))
	return "tmend_" + hex.EncodeToString(sum[:8])
}

// oldQueueName is the River queue that every source's jobs shared before each source
// had its own (QueueName). Only processes of a tmend before that work it.
const oldQueueName = "tmend"

// moveOldQueueJobsSQL moves the source's jobs still waiting in the old shared queue to
// its own: its runs' partition jobs ($5 River's kind of them, whose args name the run)
// and its scheduled scan's ($6, whose args name the source). $1 the source's queue, $2
// the old one, $3 River's queued job states, $4 the source's key, $7 its name. It reads
// the waiting jobs of the old queue by River's fetch index and each one's run by its
// key. A running job stays where it is: its worker (a process of the old tmend) ends
// it, and once snoozed or rescued it waits again and is moved then.
const moveOldQueueJobsSQL = `UPDATE river_job j SET queue = $1
WHERE j.queue = $2 AND j.state = ANY($3)
  AND (j.kind = $5 AND EXISTS (SELECT 1 FROM repair_runs r WHERE r.id = (j.args->>'run_id')::bigint AND r.source_key = $4)
    OR j.kind = $6 AND j.args->>'source' = $7)`

// MoveOldQueueJobs moves the source's jobs that wait in the shared queue of a tmend
// before a queue per source (its runs' partitions, of River kind partitionKind with a
// run_id argument; its scheduled scan, of kind scheduledKind with a source argument) to
// the source's queue, where its processes work them, and returns how many it moved. A
// process that works the queue does it as it starts and on its progress tick, so that
// an upgrade in the middle of a run loses none of it.
func (s *Store) MoveOldQueueJobs(ctx context.Context, partitionKind, scheduledKind string) (int64, error) {
	tag, err := s.pool.Exec(ctx, moveOldQueueJobsSQL, s.QueueName(), oldQueueName, queuedJobStates, s.key,
		partitionKind, scheduledKind, s.src.Name())
	if err != nil {
		return 0, classify(fmt.Errorf("move jobs out of the old shared queue: %w", err))
	}
	return tag.RowsAffected(), nil
}

// Liveness holds a process's liveness locks. Alive reports whether it still holds them.
type Liveness struct {
	mu     sync.Mutex
	conn   *pgx.Conn
	client string
}

// HoldLiveness takes the liveness locks of River client clientID on a new connection of
// their own (not the pool's), the workers lock of the store's source too when worker is
// set. It fails when a live process already holds the client lock: River client IDs
// must be unique.
func (s *Store) HoldLiveness(ctx context.Context, clientID string, worker bool) (*Liveness, error) {
	cfg := s.pool.Config().ConnConfig.Copy()
	// A host that vanished leaves no FIN behind: the server finds its connection dead
	// after 10s idle plus 3 probes 5s apart, or 10s of unacknowledged data.
	for k, v := range map[string]string{"tcp_keepalives_idle": "10", "tcp_keepalives_interval": "5",
		"tcp_keepalives_count": "3", "tcp_user_timeout": "10000"} {
		setDefault(cfg.RuntimeParams, k, v)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, classify(fmt.Errorf("connect for the liveness lock: %w", err))
	}
	var ok bool
	err = conn.QueryRow(ctx, "SELECT pg_try_advisory_lock("+fmt.Sprintf(clientLockKey, "$1")+")", once, clientID).Scan(&ok)
	if err == nil && !ok {
		err = fmt.Errorf("River client id %q is held by another live process", clientID)
	}
	if err == nil && worker {
		_, err = conn.Exec(ctx, "SELECT pg_advisory_lock_shared("+fmt.Sprintf(workersLockKey, "$1")+")", once, s.key)
	}
	if err != nil {
		_ = conn.Close(context.WithoutCancel(ctx)) // closing the connection drops any lock taken
		return nil, classify(fmt.Errorf("take the liveness lock: %w", err))
	}
	return &Liveness{conn: conn, client: clientID}, nil
}

// Check asks the server whether the connection that holds the locks is still there; an
// error means the locks are gone (the database restarted, the connection was cut) and
// other processes may take this one for dead.
func (l *Liveness) Check(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn == nil {
		return errors.New("liveness locks released")
	}
	var n int
	err := l.conn.QueryRow(ctx, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND granted").Scan(&n)
	if err == nil && n == 0 {
		err = errors.New("the liveness locks are not held")
	}
	return classify(err)
}

// Release drops the locks: the process no longer works jobs.
func (l *Liveness) Release(ctx context.Context) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn != nil {
		// Unlocked before the connection closes, so that the next process does not see
		// them held while the server ends this connection's backend.
		_, _ = l.conn.Exec(ctx, "SELECT pg_advisory_unlock_all()")
		_ = l.conn.Close(ctx) // the locks go with the connection, whatever the error
		l.conn = nil
	}
}

// heldLocksSQL starts a query with the keys of the session-level advisory locks held in
// this database, as the server computes them (clientLockKey, workersLockKey).
const heldLocksSQL = `WITH held AS MATERIALIZED (
  SELECT DISTINCT (classid::bigint << 32) | objid::bigint AS key FROM pg_locks
  WHERE locktype = 'advisory' AND objsubid = 1 AND granted
    AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
)`

// abandonedRunsSQL finds the source's scans recorded as running that no live process
// works or will work. $1 running, $2 the source, $3 and $4 the scan modes, $5 River's
// queued job states. A run is alive while one of its unfinished partitions has a River
// job that is
//   - running, held by a client whose client lock is held (River's attempted_by names it), or
//   - queued (available, retryable, scheduled, pending) in the run's source's queue, and
//     a process that works that queue (its workers lock) or the run's owner (tmend
//     scan, waiting for it) is alive.
//
// Anything else (jobs that ended or were discarded, a running job whose client died and
// nobody left to work the rest) is dead: nothing will end the run.
var abandonedRunsSQL = heldLocksSQL + `
SELECT r.id FROM repair_runs r
WHERE r.status = $1 AND r.source = $2 AND r.mode IN ($3, $4)
  AND (r.owner IS NULL OR EXISTS (SELECT 1 FROM run_partitions p WHERE p.run_id = r.id)) -- else deadOwnedRunsSQL's
  AND NOT EXISTS (
    SELECT 1 FROM run_partitions p JOIN river_job j ON j.id = p.job_id
    WHERE p.run_id = r.id AND p.status IN ('pending', 'running')
      AND (j.state = 'running' AND ` + fmt.Sprintf(clientLockKey, "j.attempted_by[cardinality(j.attempted_by)]") + ` IN (SELECT key FROM held)
        OR j.state = ANY($5) AND j.queue = ` + fmt.Sprintf(queueNameSQL, "r.source_key") + `
          AND (` + fmt.Sprintf(workersLockKey, "r.source_key") + ` IN (SELECT key FROM held)
          OR r.owner IS NOT NULL AND ` + fmt.Sprintf(clientLockKey, "r.owner") + ` IN (SELECT key FROM held))))
ORDER BY r.id`

// queuedJobStates are River's states of a job waiting for a worker.
var queuedJobStates = []string{"available", "pending", "retryable", "scheduled"}

// ownerID names the liveness lock of a run a process records and works alone (StartRun):
// unique to the run, like a River client ID.
func ownerID() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("tmend_run_%s_%d_%016x", cmp.Or(host, "localhost"), os.Getpid(), rand.Uint64())
}

// deadOwnedRunsSQL finds the runs recorded as running, of any source, that one process
// works alone (StartRun: a single session, a rollback; they have no partitions) and
// whose process died: its liveness lock named after the run's owner is not held. $1
// running, $2 and $3 the modes of such runs (session, rollback).
//
// A single session or a rollback that a tmend before run liveness (migration 11) started
// has no owner, and its process has no lock to lose. Every later tmend records an owner,
// and an earlier one refuses to start on the newer schema, so such a run's process
// started before the upgrade; it is taken for dead once it has written nothing for
// legacyRunSilence: neither started nor committed a session's report since (such a run
// writes one per session; its newest is read by the run's index of them). Ending it is
// safe even if that process still lives: it held no lease, so it keeps writing, each
// session whole, and its own FinishRun records the outcome over "abandoned". The second
// column says which kind of run it is.
var deadOwnedRunsSQL = heldLocksSQL + `
SELECT r.id, r.owner IS NULL FROM repair_runs r
WHERE r.status = $1
  AND NOT EXISTS (SELECT 1 FROM run_partitions p WHERE p.run_id = r.id)
  AND (r.owner IS NOT NULL AND ` + fmt.Sprintf(clientLockKey, "r.owner") + ` NOT IN (SELECT key FROM held)
    OR r.owner IS NULL AND r.mode IN ($2, $3)
      AND greatest(r.started_at, (SELECT created_at FROM repair_reports WHERE run_id = r.id ORDER BY id DESC LIMIT 1)) < now() - ` + legacyRunSilence + `)
ORDER BY r.id FOR UPDATE OF r SKIP LOCKED`

// legacyRunSilence is how long a single session or a rollback without an owner may go
// without writing a report before it is taken for dead: far longer than one session's
// transaction, the most such a run spends between two reports.
const legacyRunSilence = "interval '1 hour'"

// endOwnerDied is the error a run whose process died ends with; endLegacySilent that of
// a run without an owner that went silent.
const (
	endOwnerDied    = "abandoned: the process working it ended before it did; what it committed stays, each session whole"
	endLegacySilent = "abandoned: started by a tmend before run liveness (migration 11) and silent for an hour; what it committed stays, each session whole"
)

// abandonOwnedRuns ends as abandoned the runs deadOwnedRunsSQL finds, with the counts
// of the reports they committed (each session is one transaction with its report: a
// session without one was not written), and returns their ids.
func abandonOwnedRuns(ctx context.Context, tx pgx.Tx) ([]int64, error) {
	rows, err := tx.Query(ctx, deadOwnedRunsSQL, model.RunRunning, model.ModeSession, model.ModeRollback)
	if err != nil {
		return nil, fmt.Errorf("look for abandoned runs: %w", err)
	}
	runs, err := pgx.CollectRows(rows, scanDeadRun)
	if err != nil {
		return nil, fmt.Errorf("look for abandoned runs: %w", err)
	}
	return endOwnedRuns(ctx, tx, runs)
}

// deadRun is a row of deadOwnedRunsSQL: legacy when the run has no owner.
type deadRun struct {
	id     int64
	legacy bool
}

func scanDeadRun(row pgx.CollectableRow) (r deadRun, err error) {
	return r, row.Scan(&r.id, &r.legacy)
}

// endOwnedRuns ends as abandoned the runs dead, which deadOwnedRunsSQL found (and
// locked) in tx, and returns their ids.
func endOwnedRuns(ctx context.Context, tx pgx.Tx, dead []deadRun) ([]int64, error) {
	ids := make([]int64, 0, len(dead))
	for _, r := range dead {
		id := r.id
		ids = append(ids, id)
		spec, err := runSpec(ctx, tx, id)
		if err != nil {
			return nil, err
		}
		total, err := committedTotals(ctx, tx, id, nil)
		if err != nil {
			return nil, err
		}
		f := model.Finish{RunID: id, Status: model.RunAbandoned, Counts: total.Counts, Error: endOwnerDied,
			Source: spec.ScanSource, Summary: total.Summary(), ScannedThrough: spec.StartedAt}
		if r.legacy {
			f.Error = endLegacySilent
		}
		if spec.Mode == model.ModeRollback {
			// As Scanner.Rollback counts: sessions tried, restored, refused, failed.
			f.Counts = model.RunCounts{Scanned: total.Counts.Scanned, Restored: total.ByStatus[model.StatusRolledBack],
				Refused: total.ByStatus[model.StatusRefused], Failed: total.ByStatus[model.StatusFailed]}
			f.Summary, f.ScannedThrough = model.Summary{}, time.Time{}
		}
		if err := finishRun(ctx, tx, f); err != nil {
			return nil, err
		}
	}
	return ids, nil
}

// AbandonDeadRuns ends as abandoned the runs of a single session or a rollback whose
// process died (abandonOwnedRuns), and returns their ids. StartRun, CreateRun and Prune
// do it too; the daemon does it on its progress tick.
func (s *Store) AbandonDeadRuns(ctx context.Context) ([]int64, error) {
	var dead []int64
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		var err error
		dead, err = abandonOwnedRuns(ctx, tx)
		return err
	})
	return dead, err
}
