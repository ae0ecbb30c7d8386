package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/tmend/tmend/store/model"
)

// applyBatch is apply for several sessions at once (see batchLayout), in three round
// trips as well, with apply's handling of the order: the new values of all the sessions are
// taken first and the table's writers in flight waited for once (see apply), then the
// sessions' rows are locked and checked, and the prior versions of those that match
// saved, in one statement; the writes are one statement of each kind for all of them.
// A session that cannot be planned is left to apply, which fails it with the reason.
func (l *messageLayout) applyBatch(ctx context.Context, as []model.Apply, wants []string, reports [][]any) ([]batchResult, error) {
	res := make([]batchResult, len(as))
	ps := make([]*prepared, len(as))
	var ids, want, keys []string
	var runs []*int64
	places, fresh := false, 0
	for i, a := range as {
		p, err := l.prepare(a)
		if err != nil {
			res[i].alone = true
			continue
		}
		k := make([]string, len(a.Session.Rows))
		for j, r := range a.Session.Rows {
			k[j] = r.Key
		}
		kj, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		ps[i], ids, want = &p, append(ids, a.Session.ID), append(want, wants[i])
		keys, runs = append(keys, string(kj)), append(runs, nilIfZero(a.RunID))
		places = places || p.plan.places()
		fresh += p.plan.fresh
	}
	if len(ids) == 0 {
		return res, nil
	}
	conn, err := l.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()

	b := &pgx.Batch{}
	sequence := l.queueBegin(b, places, fresh)
	b.Queue(l.sql.lockBatch, ids, l.t.key, want, keys, runs)
	lease := as[0].Report.Lease
	if lease != nil {
		queueLease(b, lease)
	}
	if fresh > 0 && !sequence {
		b.Queue(l.sql.maxOrder)
	}
	type state struct {
		whole, matched bool
		last           int
		lastHash       *string
		rows           string // the hash of the rows' version
	}
	locked := make(map[string]state, len(ids))
	br := conn.SendBatch(ctx, b)
	values, err := l.readBegin(br, places)
	if err == nil {
		var rows pgx.Rows
		if rows, err = br.Query(); err == nil {
			var id string
			var st state
			_, err = pgx.ForEachRow(rows, []any{&id, &st.whole, &st.matched, &st.last, &st.lastHash, &st.rows}, func() error {
				locked[id] = st
				return nil
			})
		}
	}
	if err == nil && lease != nil {
		err = leaseHeld(br)
	}
	if err == nil && fresh > 0 && !sequence {
		var maxOrd int64
		err = br.QueryRow().Scan(&maxOrd)
		for i := range fresh {
			values = append(values, maxOrd+int64(i)+1)
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}

	var w struct {
		ids                   []string
		to, from, size, after []int
		runs                  []*int64
		reports               reportArrays
		rows                  []*prepared
	}
	for i, a := range as {
		st, ok := locked[a.Session.ID]
		switch {
		case ps[i] == nil:
			continue
		case !ok || !st.whole:
			res[i].alone = true
			continue
		case !st.matched:
			res[i].conflict = &conflictError{"the session changed after it was read"}
			continue
		}
		// The values are ascending, above every order value in the table: each session
		// takes the next ones in turn.
		n := ps[i].plan.fresh
		if err := ps[i].plan.fill(values[:n]); err != nil {
			return nil, err
		}
		values = values[n:]
		out := &res[i].out
		out.FromVersion = st.last
		if st.lastHash == nil || *st.lastHash != st.rows {
			out.FromVersion = st.last + 1 // saved by the check
		}
		out.ToVersion, out.Applied = out.FromVersion+1, true
		w.ids, w.to, w.runs = append(w.ids, a.Session.ID), append(w.to, out.ToVersion), append(w.runs, nilIfZero(a.RunID))
		w.from, w.size, w.after = append(w.from, out.FromVersion), append(w.size, a.Session.Size), append(w.after, len(a.NewMessages))
		w.reports.add(reports[i])
		w.rows = append(w.rows, ps[i])
	}

	b = &pgx.Batch{}
	var counts []int64 // what each statement must have changed (-1: any number of rows)
	queue := func(n int64, sql string, args ...any) {
		b.Queue(sql, args...)
		counts = append(counts, n)
	}
	if len(w.ids) > 0 {
		l.queueRows(queue, w.rows)
		queue(int64(len(w.ids)), l.sql.saveRepairs, append([]any{w.ids, l.t.key, w.to, w.runs, w.from, w.size, w.after},
			w.reports.args()...)...)
		if l.src.NotifyChannel != "" {
			payloads := make([]string, len(w.ids))
			for i, id := range w.ids {
				payloads[i] = notifyPayload(l.t.key, id, w.to[i], actionRepair)
			}
			queue(-1, notifyBatchSQL, l.src.NotifyChannel, payloads)
		}
	}
	err = execCounted(ctx, conn, b, counts)
	if err != nil {
		return nil, fmt.Errorf("write repaired sessions: %w", err)
	}
	return res, nil
}
