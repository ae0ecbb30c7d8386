package store_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/store/model"
	"github.com/tmend/tmend/store/storetest"
)

// ApplyBatch on one row per session: the sessions that still hold what was read are
// written in one transaction, each with its versions and report; one that changed is a
// conflict and one that is gone too, as with Apply; a session whose write fails (a
// trigger raises) fails alone, with its reason, and the rest of its batch is written.
func TestApplyBatchWritesEachSessionWhole(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	ids := []string{"a", "b", "c", "d", "e", "f"}
	for _, id := range ids {
		storetest.Sessions(t, b.pool, model.Session{ID: id, Messages: []byte(broken)})
	}
	page, err := b.store.Sessions(ctx, model.Query{Mode: model.ModeFull, Limit: 10, MaxBytes: 1 << 20})
	require.NoError(t, err)
	require.Len(t, page, len(ids))
	runID, _, err := b.store.StartRun(ctx, model.Run{Trigger: model.TriggerCLI, Mode: model.ModeFull, Source: "x"})
	require.NoError(t, err)
	applies := map[string]model.Apply{}
	for _, sess := range page {
		res, err := repair.Repair(sess.Messages, repair.Options{})
		require.NoError(t, err)
		applies[sess.ID] = model.Apply{RunID: runID, Trigger: model.TriggerCLI, Session: sess, NewMessages: res.Messages,
			Report: model.Report{Status: model.StatusRepaired, Dialect: "openai-chat", IssueCodes: res.Report.IssueCodeSet(),
				StageCounts: res.Report.StageCounts, Actions: res.Report.Actions}}
	}
	batch := func(ids ...string) ([]model.Outcome, []error) {
		as := make([]model.Apply, len(ids))
		for i, id := range ids {
			as[i] = applies[id]
		}
		return b.store.ApplyBatch(ctx, as)
	}
	count := func(sql string, args ...any) int {
		var n int
		require.NoError(t, b.pool.QueryRow(ctx, sql, args...).Scan(&n))
		return n
	}

	// An agent appends to c and deletes d between the read and the write.
	_, err = b.pool.Exec(ctx, `UPDATE sessions SET messages = messages || '[{"role":"user","content":"late"}]'::jsonb WHERE id = 'c'`)
	require.NoError(t, err)
	_, err = b.pool.Exec(ctx, `DELETE FROM sessions WHERE id = 'd'`)
	require.NoError(t, err)
	appended := storetest.Content(t, b.pool, "c")
	outs, errs := batch("a", "b", "c", "d")
	require.Equal(t, []error{nil, nil, nil, nil}, errs)
	written := model.Outcome{Applied: true, FromVersion: 1, ToVersion: 2}
	require.Equal(t, []model.Outcome{written, written, {Conflict: true}, {Conflict: true}}, outs)
	require.Equal(t, appended, storetest.Content(t, b.pool, "c"), "the agent's append must survive")
	// a and b in one transaction.
	require.Equal(t, 1, count(`SELECT count(DISTINCT xmin::text) FROM sessions WHERE id IN ('a', 'b')`))
	for _, id := range []string{"a", "b"} {
		require.Contains(t, storetest.Content(t, b.pool, id), repair.SyntheticResultText)
		// The report's hashes and sizes are the saved versions'; the original is what was read.
		require.Equal(t, 1, count(`SELECT count(*) FROM repair_reports r
JOIN session_versions o ON o.session_id = r.session_id AND o.version = 1 AND o.kind = 'original' AND o.content_hash = r.before_hash AND o.size_bytes = r.before_bytes
  AND o.content = $3
JOIN session_versions n ON n.session_id = r.session_id AND n.version = 2 AND n.kind = 'repaired' AND n.content_hash = r.after_hash AND n.size_bytes = r.after_bytes
  AND n.content = (SELECT messages::text FROM sessions WHERE id = r.session_id)
WHERE r.session_id = $1 AND r.run_id = $2 AND r.status = 'repaired' AND r.issue_codes = '{tool_call_without_result}'
  AND r.actions @> '[{"stage":"synthesize_missing_results"}]' AND r.from_version = 1 AND r.to_version = 2 AND r.dialect = 'openai-chat'`,
			id, runID, string(applies[id].Session.Messages)), id)
	}
	require.Equal(t, 2, count(`SELECT count(*) FROM repair_reports WHERE status = 'conflict' AND session_id IN ('c', 'd')`))
	require.Zero(t, count(`SELECT count(*) FROM session_versions WHERE session_id IN ('c', 'd')`))

	// A trigger refuses e's write: the batch is rolled back and written one by one.
	_, err = b.pool.Exec(ctx, `CREATE FUNCTION refuse_e() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN IF NEW.id = 'e' THEN RAISE EXCEPTION 'e may not change'; END IF; RETURN NEW; END $$;
CREATE TRIGGER refuse_e BEFORE UPDATE ON sessions FOR EACH ROW EXECUTE FUNCTION refuse_e()`)
	require.NoError(t, err)
	outs, errs = batch("e", "f")
	require.ErrorContains(t, errs[0], "e may not change")
	require.NoError(t, errs[1])
	require.Equal(t, []model.Outcome{{}, written}, outs)
	require.Equal(t, string(applies["e"].Session.Messages), storetest.Content(t, b.pool, "e"))
	require.Zero(t, count(`SELECT count(*) FROM session_versions WHERE session_id = 'e'`))
	require.Contains(t, storetest.Content(t, b.pool, "f"), repair.SyntheticResultText)
	require.Equal(t, 2, count(`SELECT count(*) FROM session_versions WHERE session_id = 'f'`))
	require.Equal(t, 3, count(`SELECT count(*) FROM repair_reports WHERE status = 'repaired'`))
}

// A batch saves a session's original version in its check, from the row it locked, and
// only when the latest version is not already that content: a session rolled back (its
// latest version is the restored content) and repaired again in a batch gets the
// repaired version alone, next to a session whose original is saved.
func TestApplyBatchSavesOriginalOnlyWhenNotLatest(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	for _, id := range []string{"a", "b"} {
		storetest.Sessions(t, b.pool, model.Session{ID: id, Messages: []byte(broken)})
	}
	apply := func(id string) model.Apply {
		page, err := b.store.Sessions(ctx, model.Query{Mode: model.ModeSession, SessionID: id, MaxBytes: 1 << 20})
		require.NoError(t, err)
		res, err := repair.Repair(page[0].Messages, repair.Options{})
		require.NoError(t, err)
		return model.Apply{Trigger: model.TriggerCLI, Session: page[0], NewMessages: res.Messages,
			Report: model.Report{Status: model.StatusRepaired, IssueCodes: res.Report.IssueCodeSet()}}
	}
	out, err := b.store.Apply(ctx, apply("a"))
	require.NoError(t, err)
	require.Equal(t, model.Outcome{Applied: true, FromVersion: 1, ToVersion: 2}, out)
	rb, err := b.store.Rollback(ctx, model.RollbackRequest{SessionID: "a", Trigger: model.TriggerCLI})
	require.NoError(t, err)
	require.Equal(t, 3, rb.Written, "the restored content is version 3")

	as := []model.Apply{apply("a"), apply("b")}
	outs, errs := b.store.ApplyBatch(ctx, as)
	require.Equal(t, []error{nil, nil}, errs)
	require.Equal(t, []model.Outcome{{Applied: true, FromVersion: 3, ToVersion: 4}, {Applied: true, FromVersion: 1, ToVersion: 2}}, outs)
	type version struct {
		ID, Kind string
		N        int
	}
	rows, err := b.pool.Query(ctx, `SELECT session_id, kind, version FROM session_versions ORDER BY session_id, version`)
	require.NoError(t, err)
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[version])
	require.NoError(t, err)
	require.Equal(t, []version{{"a", "original", 1}, {"a", "repaired", 2}, {"a", "restored", 3}, {"a", "repaired", 4},
		{"b", "original", 1}, {"b", "repaired", 2}}, got)
	var content string
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT content FROM session_versions WHERE session_id = 'b' AND version = 1`).Scan(&content))
	require.Equal(t, string(as[1].Session.Messages), content)
}

// ApplyBatch on one row per message (LangChain's table, sessions' rows interleaved as
// concurrent chats write them): the same as on one row per session, each session's rows
// changed as Apply changes them, its versions its rows whole before and after.
func TestApplyBatchWritesEachMessageSessionWhole(t *testing.T) {
	t.Parallel()
	l := setupLangchain(t)
	ctx := t.Context()
	ids := []string{"s1", "s2", "s3", "s4", "s5"}
	for _, m := range []string{lcHuman, lcCall2, lcResult1, lcOrphan, lcHuman2, lcAnswer} {
		for _, id := range ids {
			l.add(t, id, m)
		}
	}
	applies, repaired, before := map[string]model.Apply{}, map[string]string{}, map[string]string{}
	for _, id := range ids {
		sess := l.read(t, id)
		res, origins, err := repair.RepairWithOrigins(sess.Messages, repair.Options{})
		require.NoError(t, err)
		require.True(t, res.Changed())
		applies[id] = model.Apply{Trigger: model.TriggerCLI, Session: sess, Origins: origins,
			Report: model.Report{Status: model.StatusRepaired, IssueCodes: res.Report.IssueCodeSet()}}
		repaired[id], before[id] = string(repair.JoinOrigins(origins)), l.whole(t, id)
	}
	batch := func(ids ...string) ([]model.Outcome, []error) {
		as := make([]model.Apply, len(ids))
		for i, id := range ids {
			as[i] = applies[id]
		}
		return l.st.ApplyBatch(ctx, as)
	}
	count := func(sql string, args ...any) int {
		var n int
		require.NoError(t, l.pool.QueryRow(ctx, sql, args...).Scan(&n))
		return n
	}
	written := model.Outcome{Applied: true, FromVersion: 1, ToVersion: 2}
	check := func(id string) {
		l.requireStored(t, repaired[id], id, id)
		require.Equal(t, 1, count(`SELECT count(*) FROM repair_reports r
JOIN session_versions o ON o.session_id = r.session_id AND o.version = 1 AND o.kind = 'original' AND o.content_hash = r.before_hash AND o.content::jsonb = $2::jsonb
JOIN session_versions n ON n.session_id = r.session_id AND n.version = 2 AND n.kind = 'repaired' AND n.content_hash = r.after_hash AND n.content::jsonb = $3::jsonb
WHERE r.session_id = $1 AND r.status = 'repaired' AND r.from_version = 1 AND r.to_version = 2 AND r.issue_codes @> '{tool_call_without_result}'
  AND r.before_bytes = $4 AND r.after_bytes = $5`, id, before[id], l.whole(t, id), applies[id].Session.Size, len(repaired[id])), id)
	}

	// An agent appends to s3 between the read and the write.
	l.add(t, "s3", lcAppended)
	appended := l.whole(t, "s3")
	outs, errs := batch("s1", "s2", "s3")
	require.Equal(t, []error{nil, nil, nil}, errs)
	require.Equal(t, []model.Outcome{written, written, {Conflict: true}}, outs)
	check("s1")
	check("s2")
	// In one transaction.
	require.Equal(t, 1, count(`SELECT count(DISTINCT xmin::text) FROM repair_reports WHERE session_id IN ('s1', 's2')`))
	require.Equal(t, appended, l.whole(t, "s3"), "the agent's append must survive")
	require.Zero(t, count(`SELECT count(*) FROM session_versions WHERE session_id = 's3'`))
	require.Equal(t, 1, count(`SELECT count(*) FROM repair_reports WHERE session_id = 's3' AND status = 'conflict'`))

	// A trigger refuses every change to s4: the batch is rolled back and written one by one.
	_, err := l.pool.Exec(ctx, `CREATE FUNCTION public.refuse_s4() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN IF coalesce(NEW.session_id, OLD.session_id) = 's4' THEN RAISE EXCEPTION 's4 may not change'; END IF; RETURN coalesce(NEW, OLD); END $$;
CREATE TRIGGER refuse_s4 BEFORE INSERT OR UPDATE OR DELETE ON public.langchain_chat_histories FOR EACH ROW EXECUTE FUNCTION public.refuse_s4()`)
	require.NoError(t, err)
	outs, errs = batch("s4", "s5")
	require.ErrorContains(t, errs[0], "s4 may not change")
	require.NoError(t, errs[1])
	require.Equal(t, []model.Outcome{{}, written}, outs)
	require.Equal(t, before["s4"], l.whole(t, "s4"))
	require.Zero(t, count(`SELECT count(*) FROM session_versions WHERE session_id = 's4'`))
	check("s5")
}

// A trigger that skips a row's change without an error (a soft delete) must not leave a
// session half written: the write's counts are read before COMMIT.
func TestSkippedRowChangeWritesNothing(t *testing.T) {
	t.Parallel()
	l := setupLangchain(t)
	ctx := t.Context()
	ids := []string{"s1", "s2", "s3"}
	for _, m := range []string{lcHuman, lcCall2, lcResult1, lcOrphan, lcHuman2, lcAnswer} {
		for _, id := range ids {
			l.add(t, id, m)
		}
	}
	applies, before := map[string]model.Apply{}, map[string]string{}
	for _, id := range ids {
		sess := l.read(t, id)
		_, origins, err := repair.RepairWithOrigins(sess.Messages, repair.Options{})
		require.NoError(t, err)
		applies[id] = model.Apply{Trigger: model.TriggerCLI, Session: sess, Origins: origins,
			Report: model.Report{Status: model.StatusRepaired}}
		before[id] = l.whole(t, id)
	}
	_, err := l.pool.Exec(ctx, `CREATE FUNCTION public.keep_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN IF OLD.session_id IN ('s1', 's2') THEN RETURN NULL; END IF; RETURN OLD; END $$;
CREATE TRIGGER keep_deleted BEFORE DELETE ON public.langchain_chat_histories FOR EACH ROW EXECUTE FUNCTION public.keep_deleted()`)
	require.NoError(t, err)
	versions := func(id string) int {
		var n int
		require.NoError(t, l.pool.QueryRow(ctx, `SELECT count(*) FROM session_versions WHERE session_id = $1`, id).Scan(&n))
		return n
	}

	// Alone (the per-session write), then in a batch with a session the trigger lets be.
	_, errs := l.st.ApplyBatch(ctx, []model.Apply{applies["s1"]})
	require.ErrorContains(t, errs[0], "changed 0 rows")
	require.NotErrorIs(t, errs[0], model.ErrUnavailable, "the session fails; it is not retried as an outage")
	outs, errs := l.st.ApplyBatch(ctx, []model.Apply{applies["s2"], applies["s3"]})
	require.ErrorContains(t, errs[0], "changed 0 rows")
	require.NoError(t, errs[1])
	require.True(t, outs[1].Applied)
	for _, id := range []string{"s1", "s2"} {
		require.Equal(t, before[id], l.whole(t, id), id)
		require.Zero(t, versions(id), id)
	}
	require.Equal(t, 2, versions("s3"))
}

// A batch on a sequence order waits for the appends in flight after taking its order
// values: a message appended to a session of the batch by a transaction in flight then
// (its order value below those the batch took) must make that session a conflict, not
// land among its repaired rows, and the other session is still written.
func TestApplyBatchFindsAppendsCommittedWhileItWaits(t *testing.T) {
	t.Parallel()
	l := setupLangchain(t)
	ctx := t.Context()
	as := make([]model.Apply, 2)
	for i, id := range []string{"s1", "s2"} {
		l.add(t, id, lcHuman, lcCall2, lcResult1, lcOrphan)
		sess := l.read(t, id)
		res, origins, err := repair.RepairWithOrigins(sess.Messages, repair.Options{})
		require.NoError(t, err)
		as[i] = model.Apply{Trigger: model.TriggerCLI, Session: sess, Origins: origins,
			Report: model.Report{Status: model.StatusRepaired, IssueCodes: res.Report.IssueCodeSet()}}
	}
	agent, err := l.pool.Begin(ctx)
	require.NoError(t, err)
	defer agent.Rollback(ctx)
	_, err = agent.Exec(ctx, `INSERT INTO public.langchain_chat_histories (session_id, message) VALUES ('s2', $1)`, lcAppended)
	require.NoError(t, err)

	type result struct {
		outs []model.Outcome
		errs []error
	}
	done := make(chan result)
	go func() {
		outs, errs := l.st.ApplyBatch(ctx, as)
		done <- result{outs, errs}
	}()
	// The batch waits for the agent's transaction: commit it then.
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, l.pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks
WHERE database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND relation = 'public.langchain_chat_histories'::regclass AND mode = 'ShareRowExclusiveLock' AND NOT granted`).Scan(&n))
		return n > 0
	}, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, agent.Commit(ctx))
	r := <-done
	require.Equal(t, []error{nil, nil}, r.errs)
	require.Equal(t, []model.Outcome{{Applied: true, FromVersion: 1, ToVersion: 2}, {Conflict: true}}, r.outs)
	var appended int
	require.NoError(t, l.pool.QueryRow(ctx, `SELECT count(*) FROM public.langchain_chat_histories WHERE session_id = 's2'`).Scan(&appended))
	require.Equal(t, 5, appended, "the session as it was, with the agent's message")
}
