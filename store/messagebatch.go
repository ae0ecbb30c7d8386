package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/store/model"
)

// apply is one attempt at a repaired session's transaction: write for the one session,
// waiting for its rows. The hash of the transcript read goes unused: the rows are
// checked instead (see write).
func (l *messageLayout) apply(ctx context.Context, a model.Apply, _ string, report []any) (model.Outcome, error) {
	res, err := l.write(ctx, []model.Apply{a}, [][]any{report}, false)
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == pgerrcode.LockNotAvailable:
		return model.Outcome{}, &conflictError{"the session (or, to place rows, the table) was locked by another writer for over 5s"}
	case err != nil:
		return model.Outcome{}, err
	case res[0].conflict != nil:
		return model.Outcome{}, res[0].conflict
	}
	return res[0].out, nil
}

// applyBatch is apply for several sessions at once (see batchLayout): write, skipping
// the sessions another transaction holds, which are left to apply. The hashes of the
// transcripts read go unused, as in apply.
func (l *messageLayout) applyBatch(ctx context.Context, as []model.Apply, _ []string, reports [][]any) ([]batchResult, error) {
	return l.write(ctx, as, reports, true)
}

// write is the transaction of one or more repaired sessions, in three round trips. The
// new order values of all the sessions are taken first and the table's writers in
// flight waited for once (see queueBegin); then one statement locks the sessions' rows,
// checks that they are still the rows read, by their keys and xmins in order (a
// platform's append, update or delete since makes the session a conflict, retried next
// run), and saves the prior versions of those that match; the row changes are one
// statement of each kind for all of them, and the repaired versions and reports one
// more. In a batch (batch set), a session that cannot be planned or whose rows another
// transaction holds is left to apply (alone), which waits for its rows or fails it with
// the reason; alone, those are its error or conflict.
func (l *messageLayout) write(ctx context.Context, as []model.Apply, reports [][]any, batch bool) ([]batchResult, error) {
	res := make([]batchResult, len(as))
	ps := make([]*prepared, len(as))
	var ids, keys, xmins []string
	readKeys := make([]string, len(as)) // each session's keys as read, a JSON array
	var runs []*int64
	places, fresh := false, 0
	for i, a := range as {
		p, err := l.prepare(a)
		if err != nil && !batch {
			return nil, err
		}
		if err != nil {
			res[i].alone = true
			continue
		}
		k, x, err := rowsRead(a.Session.Rows)
		if err != nil {
			return nil, err
		}
		ps[i], ids, keys, xmins = &p, append(ids, a.Session.ID), append(keys, k), append(xmins, x)
		readKeys[i] = k
		runs = append(runs, nilIfZero(a.RunID))
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
	check := l.sql.check[0]
	if batch {
		check = l.sql.check[1]
	}
	b.Queue(check, ids, l.t.key, keys, xmins, runs)
	// A write of a partition attempt holds its lease (see partitionLockKey), as rowLayout's does.
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
		hash           string // of the rows' version
	}
	locked := make(map[string]state, len(ids))
	br := conn.SendBatch(ctx, b)
	values, err := l.readBegin(br, places)
	if err == nil {
		var rows pgx.Rows
		if rows, err = br.Query(); err == nil {
			var id string
			var st state
			_, err = pgx.ForEachRow(rows, []any{&id, &st.whole, &st.matched, &st.last, &st.lastHash, &st.hash}, func() error {
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
		ids, before, keys     []string
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
		case batch && (!ok || !st.whole):
			res[i].alone = true
			continue
		case !ok:
			res[i].conflict = &conflictError{"the session was deleted after it was read"}
			continue
		case !st.matched:
			res[i].conflict = &conflictError{"the session changed after it was read"}
			continue
		}
		// The values are ascending, above every order value in the table: each session
		// takes the next ones in turn.
		p := ps[i]
		n := p.plan.fresh
		if err := p.plan.fill(values[:n]); err != nil {
			return nil, err
		}
		values = values[n:]
		out := &res[i].out
		out.FromVersion = st.last
		if st.lastHash == nil || *st.lastHash != st.hash {
			out.FromVersion = st.last + 1 // saved by the check
		}
		out.ToVersion, out.Applied = out.FromVersion+1, true
		w.ids, w.to, w.runs = append(w.ids, a.Session.ID), append(w.to, out.ToVersion), append(w.runs, nilIfZero(a.RunID))
		w.from, w.size, w.after = append(w.from, out.FromVersion), append(w.size, a.Session.Size), append(w.after, repair.OriginsLen(a.Origins))
		w.before, w.keys = append(w.before, st.hash), append(w.keys, readKeys[i])
		w.reports.add(reports[i])
		w.rows = append(w.rows, p)
	}

	b = &pgx.Batch{}
	var counts []int64 // what each statement must have changed (-1: any number of rows)
	queue := func(n int64, sql string, args ...any) {
		b.Queue(sql, args...)
		counts = append(counts, n)
	}
	if len(w.ids) > 0 {
		l.queueRows(queue, w.rows)
		queue(int64(len(w.ids)), l.sql.saveRepairs, append([]any{w.ids, l.t.key, w.to, w.runs, w.from, w.size, w.after,
			w.before, w.keys}, w.reports.args()...)...)
		if l.src.NotifyChannel != "" {
			payloads := make([]string, len(w.ids))
			for i, id := range w.ids {
				payloads[i] = notifyPayload(l.t.key, id, w.to[i], actionRepair)
			}
			queue(-1, notifyBatchSQL, l.src.NotifyChannel, payloads)
		}
	}
	if err := execCounted(ctx, conn, b, counts); err != nil {
		return nil, fmt.Errorf("write repaired sessions: %w", referenced(err))
	}
	return res, nil
}

// rowsRead are a session's rows as read, as the check takes them: their keys as a JSON
// array, and their xmins joined by commas.
func rowsRead(rows *model.Rows) (keys, xmins string, err error) {
	k := make([]string, rows.Len())
	var x strings.Builder
	for i := range k {
		k[i] = rows.Key(i)
		if i > 0 {
			x.WriteByte(',')
		}
		x.WriteString(strconv.FormatUint(uint64(rows.Xmin(i)), 10))
	}
	kj, err := json.Marshal(k)
	return string(kj), x.String(), err
}
