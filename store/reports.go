package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/tmend/tmend/store/model"
)

// InsertReports records reports outside any repair transaction (dry runs, pending,
// skipped and failed sessions) with one set-based insert: all of them or none. Reports
// with a lease must all hold the same one; they go in only while its attempt holds the
// partition, and model.ErrLeaseLost says none went in.
func (s *Store) InsertReports(ctx context.Context, rs []model.Report) error {
	if len(rs) == 0 {
		return nil
	}
	lease := rs[0].Lease
	var a reportRows
	for _, r := range rs {
		if !sameLease(r.Lease, lease) {
			return fmt.Errorf("insert reports: session %q holds another lease than session %q", r.SessionID, rs[0].SessionID)
		}
		if err := a.add(s, r); err != nil {
			return err
		}
	}
	args := append(a.args(), s.key, s.origin.Version, s.origin.Host)
	if lease == nil {
		if _, err := s.pool.Exec(ctx, reportsInsertSQL, args...); err != nil {
			return classify(fmt.Errorf("insert %d reports: %w", len(rs), err))
		}
		return nil
	}
	// One transaction in one round trip, as insertReport's: the lease, then the insert
	// that goes in only while the attempt holds its partition.
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(leaseLockSQL, lease.RunID, lease.Partition)
	b.Queue(reportsInsertSQL+"\nWHERE EXISTS ("+leaseReportCheckSQL+")", append(args, leaseArgs(lease)...)...)
	b.Queue("COMMIT")
	br := s.pool.SendBatch(ctx, b)
	var err error
	var n int64
	for i := 0; i < 4 && err == nil; i++ {
		t, e := br.Exec()
		if err = e; i == 2 {
			n = t.RowsAffected()
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return classify(fmt.Errorf("insert %d reports: %w", len(rs), err))
	}
	if n == 0 {
		return model.ErrLeaseLost
	}
	return nil
}

// reportsInsertSQL inserts the rows of reportRows' arrays, $1 to $16, with $17 to $19 the
// store's source key, version and host; reportInsert's columns and conversions.
const reportsInsertSQL = `INSERT INTO repair_reports (run_id, session_id, status, trigger, dialect, reason,
  issue_codes, stage_counts, actions, before_hash, after_hash, before_bytes, after_bytes, from_version, to_version, source_key,
  actor, tmend_version, host)
SELECT nullif(v.run_id, 0), v.sid, v.status, v.trig, nullif(v.dialect, ''), nullif(v.reason, ''),
  ARRAY(SELECT jsonb_array_elements_text(v.codes::jsonb)), v.stages::jsonb, v.actions::jsonb,
  nullif(v.bh, ''), nullif(v.ah, ''), nullif(v.bb, 0), nullif(v.ab, 0), nullif(v.fv, 0), nullif(v.tv, 0), $17,
  nullif(v.actor, ''), nullif($18, ''), nullif($19, '')
FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[],
  $10::text[], $11::text[], $12::bigint[], $13::bigint[], $14::bigint[], $15::bigint[], $16::text[])
  AS v(run_id, sid, status, trig, dialect, reason, codes, stages, actions, bh, ah, bb, ab, fv, tv, actor)`

// reportRows are reports as one array a column, for reportsInsertSQL; JSON columns travel
// as text.
type reportRows struct {
	runID                                                              []int64
	sid, status, trig, dialect, reason, codes, stages, actions, bh, ah []string
	bb, ab, fv, tv                                                     []int64
	actor                                                              []string
}

func (a *reportRows) add(s *Store, r model.Report) error {
	_, args, err := s.reportInsert(r) // for its encoding of the JSON columns
	if err != nil {
		return err
	}
	codes, err := json.Marshal(args[6])
	if err != nil {
		return fmt.Errorf("encode issue codes: %w", err)
	}
	a.runID = append(a.runID, r.RunID)
	a.sid = append(a.sid, r.SessionID)
	a.status = append(a.status, string(r.Status))
	a.trig = append(a.trig, string(r.Trigger))
	a.dialect = append(a.dialect, r.Dialect)
	a.reason = append(a.reason, r.Reason)
	a.codes = append(a.codes, string(codes))
	a.stages = append(a.stages, string(args[7].([]byte)))
	a.actions = append(a.actions, string(args[8].([]byte)))
	a.bh = append(a.bh, r.BeforeHash)
	a.ah = append(a.ah, r.AfterHash)
	a.bb = append(a.bb, int64(r.BeforeBytes))
	a.ab = append(a.ab, int64(r.AfterBytes))
	a.fv = append(a.fv, int64(r.FromVersion))
	a.tv = append(a.tv, int64(r.ToVersion))
	a.actor = append(a.actor, r.Actor)
	return nil
}

func (a *reportRows) args() []any {
	return []any{a.runID, a.sid, a.status, a.trig, a.dialect, a.reason, a.codes, a.stages, a.actions, a.bh, a.ah,
		a.bb, a.ab, a.fv, a.tv, a.actor}
}
