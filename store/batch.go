package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/tmend/tmend/store/model"
)

// batchLayout is a layout that writes the repairs of several sessions in one transaction.
type batchLayout interface {
	// applyBatch is one attempt at ApplyBatch's transaction. It locks the sessions it can,
	// in one fixed order and skipping those another transaction holds, checks each against
	// what was read (wants[i] is the hash of as[i]'s transcript as read), takes the lease
	// once, and writes the sessions that match with set-based statements; reports[i] is
	// reportInsert's arguments for as[i]. Its results are in as' order.
	applyBatch(ctx context.Context, as []model.Apply, wants []string, reports [][]any) ([]batchResult, error)
}

// batchResult is what became of one session of a batch's transaction.
type batchResult struct {
	out      model.Outcome
	conflict *conflictError // it changed since it was read: nothing written
	// alone: the batch could not lock it (another writer holds it, or it is gone), so it
	// is written by a transaction of its own, which waits for the lock or finds it gone.
	alone bool
}

// ApplyBatch writes several repaired sessions, each as Apply would, in one transaction
// for all of them: each session is still old or wholly new after a crash, and what Apply
// does per session (the check against what was read, the versions, the report, a
// conflict report for a session that changed) it does for each. A session that changed
// is left out of the write, as Apply leaves it. When the batch's write fails (a trigger
// raises, a constraint refuses), it is rolled back and its sessions are written one by
// one with Apply, so that only the session at fault fails, with its reason. It returns
// each session's outcome and error as Apply would; a database that is unavailable, or a
// lease lost, is every session's error.
func (s *Store) ApplyBatch(ctx context.Context, as []model.Apply) ([]model.Outcome, []error) {
	outs, errs := make([]model.Outcome, len(as)), make([]error, len(as))
	alone := func(i int) { outs[i], errs[i] = s.Apply(ctx, as[i]) }
	bl, ok := s.layout.(batchLayout)
	_, rows := s.layout.(*rowLayout)
	// A batch holds one lease and each session once; the others go alone, and so does a
	// repair in pieces, or of one row per session over sendBackMax, which apply sends from
	// its own buffers (sendArg).
	var batch []int
	seen := make(map[string]bool, len(as))
	for i, a := range as {
		if !ok || seen[a.Session.ID] || a.Compaction != nil && !s.CanCompact() || !sameLease(a.Report.Lease, as[0].Report.Lease) ||
			a.NewPieces != nil || rows && len(a.NewMessages) > sendBackMax {
			continue
		}
		seen[a.Session.ID] = true
		batch = append(batch, i)
	}
	if len(batch) < 2 {
		batch = nil
	}
	in := make([]bool, len(as))
	for _, i := range batch {
		in[i] = true
	}
	for i := range as {
		if !in[i] {
			alone(i)
		}
	}
	if batch == nil {
		return outs, errs
	}

	bas, wants, reports := make([]model.Apply, len(batch)), make([]string, len(batch)), make([][]any, len(batch))
	for j, i := range batch {
		a := as[i]
		r := a.Report
		r.RunID, r.SessionID, r.Trigger = a.RunID, a.Session.ID, a.Trigger
		_, args, err := s.reportInsert(r)
		if err != nil {
			errs[i] = err
			return outs, errs
		}
		bas[j], wants[j], reports[j] = a, model.ContentHash(a.Session.Messages), args
	}
	var res []batchResult
	err := retryTx(ctx, func() error {
		var err error
		res, err = bl.applyBatch(ctx, bas, wants, reports)
		return err
	})
	switch {
	case errors.Is(err, model.ErrUnavailable), errors.Is(err, model.ErrLeaseLost), ctx.Err() != nil:
		for _, i := range batch {
			errs[i] = fmt.Errorf("repair session %q: %w", as[i].Session.ID, err)
		}
		return outs, errs
	case err != nil:
		for _, i := range batch {
			alone(i)
		}
		return outs, errs
	}
	for j, i := range batch {
		switch r := res[j]; {
		case r.alone:
			alone(i)
		case r.conflict != nil:
			outs[i], errs[i] = s.conflicted(ctx, as[i], wants[j], r.conflict)
		default:
			outs[i] = r.out
		}
	}
	return outs, errs
}

// sameLease reports whether two writes hold the same lease (or none).
func sameLease(a, b *model.Lease) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}

// reportArrays are the report columns of a batch's written sessions, one array a column,
// from reportInsert's arguments; JSON columns travel as text.
type reportArrays struct {
	status, trigger, dialect, reason, codes, stages, actions, actor, version, host []string
}

func (r *reportArrays) add(args []any) {
	codes, _ := json.Marshal(args[6]) // a []string: cannot fail
	r.status = append(r.status, fmt.Sprint(args[2]))
	r.trigger = append(r.trigger, fmt.Sprint(args[3]))
	r.dialect = append(r.dialect, fmt.Sprint(args[4]))
	r.reason = append(r.reason, fmt.Sprint(args[5]))
	r.codes = append(r.codes, string(codes))
	r.stages = append(r.stages, string(args[7].([]byte)))
	r.actions = append(r.actions, string(args[8].([]byte)))
	r.actor = append(r.actor, fmt.Sprint(args[16]))
	r.version = append(r.version, fmt.Sprint(args[17]))
	r.host = append(r.host, fmt.Sprint(args[18]))
}

// args are the arrays in the order reportColumns names them.
func (r *reportArrays) args() []any {
	return []any{r.status, r.trigger, r.dialect, r.reason, r.codes, r.stages, r.actions, r.actor, r.version, r.host}
}

// reportUnnest is the unnest arguments of reportArrays' arrays from parameter $first on,
// and reportColumns the names they take.
func reportUnnest(first int) string {
	ps := make([]string, 10)
	for i := range ps {
		ps[i] = fmt.Sprintf("$%d::text[]", first+i)
	}
	return strings.Join(ps, ", ")
}

const reportColumns = "status, trig, dialect, reason, codes, stages, actions, actor, tver, host"

// reportHead and reportTail are a report row's values from a batch's row v: the columns
// before before_hash and after to_version.
const (
	reportHead = `v.status, v.trig, nullif(v.dialect, ''), nullif(v.reason, ''),
  ARRAY(SELECT jsonb_array_elements_text(v.codes::jsonb)), v.stages::jsonb, v.actions::jsonb`
	reportTail = `nullif(v.actor, ''), nullif(v.tver, ''), nullif(v.host, '')`
)
