package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tmend/tmend/store/model"
)

// langGraphLayout is LangGraph's PostgresSaver tables (checkpoints, checkpoint_blobs,
// checkpoint_writes, in one schema): a session is a thread, thread_id and checkpoint_ns
// (see langGraphSessionID). Its transcript is the messages channel's blob at the version
// its newest checkpoint (the largest checkpoint_id, as the saver picks it) names, a JSON
// array of LangChain messages as the JS serializer writes it. A repair is written as
// LangGraph writes a state update: a new checkpoint, child of the newest, whose messages
// channel has a new version holding the whole repaired list; older checkpoints stay as
// they are, so LangGraph's own history keeps the prior list. Versions hold the list.
//
// The checkpoints have no updated-at column: every run is a full run. A thread's last
// change (for the quiet period) is the time in its newest checkpoint id (a uuid6).
type langGraphLayout struct {
	pool       *pgxpool.Pool
	src        Source
	k          string
	cp, bl, wr string // the quoted tables
	origin     *model.Origin
}

// langGraphChannel is the channel that holds a thread's messages (MessagesAnnotation,
// createReactAgent and most graphs' state key).
const langGraphChannel = "messages"

func openLangGraphLayout(ctx context.Context, pool *pgxpool.Pool, src Source, readOnly bool) (*langGraphLayout, error) {
	if src.Table == "" {
		src.Table = "checkpoints"
	}
	_, oid, err := lookupTable(ctx, pool, src)
	if err != nil {
		return nil, err
	}
	var schema, table, key string
	if err := pool.QueryRow(ctx, `SELECT n.nspname, c.relname, format('%I.%I(langgraph)', n.nspname, c.relname)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = $1`, oid).Scan(&schema, &table, &key); err != nil {
		return nil, fmt.Errorf("name table %q: %w", src.Table, err)
	}
	l := &langGraphLayout{pool: pool, src: src, k: key,
		cp: pgx.Identifier{schema, table}.Sanitize(), bl: pgx.Identifier{schema, "checkpoint_blobs"}.Sanitize(),
		wr: pgx.Identifier{schema, "checkpoint_writes"}.Sanitize()}
	// The columns tmend reads and writes, as PostgresSaver's migrations create them.
	for _, c := range []struct{ table, columns, privs string }{
		{l.cp, "thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata", "INSERT"},
		{l.bl, "thread_id, checkpoint_ns, channel, version, type, blob", "INSERT"},
		{l.wr, "thread_id, checkpoint_ns, checkpoint_id, channel", ""},
	} {
		if _, err := pool.Exec(ctx, "SELECT "+c.columns+" FROM "+c.table+" LIMIT 0"); err != nil {
			return nil, fmt.Errorf("%w: LangGraph table %s is not as PostgresSaver.setup() creates it (%v); "+
				"point --table at the checkpoints table of a LangGraph schema", ErrSource, c.table, err)
		}
		if readOnly || c.privs == "" {
			continue
		}
		var ok bool
		if err := pool.QueryRow(ctx, "SELECT has_table_privilege($1::regclass, $2)", c.table, c.privs).Scan(&ok); err != nil {
			return nil, fmt.Errorf("check privileges on %s: %w", c.table, err)
		}
		if !ok {
			return nil, fmt.Errorf("%w: this role may not %s on %s (GRANT %s ON %s TO ...)", ErrSource, c.privs, c.table, c.privs, c.table)
		}
	}
	return l, nil
}

// langGraphSessionID is a thread's session id: its thread_id when checkpoint_ns is empty
// (and the id does not start with "["), else the JSON array [thread_id, checkpoint_ns].
// parseLangGraphSessionID reverses it.
func langGraphSessionID(thread, ns string) string {
	if ns == "" && !strings.HasPrefix(thread, "[") {
		return thread
	}
	b, _ := json.Marshal([]string{thread, ns}) // strings always marshal
	return string(b)
}

func parseLangGraphSessionID(id string) (thread, ns string) {
	var pair []string
	if strings.HasPrefix(id, "[") && json.Unmarshal([]byte(id), &pair) == nil && len(pair) == 2 {
		return pair[0], pair[1]
	}
	return id, ""
}

func (l *langGraphLayout) key() string        { return l.k }
func (l *langGraphLayout) hasUpdatedAt() bool { return false }

// newestSQL is the newest checkpoint of thread $1, namespace $2, as the saver's getTuple
// picks it.
func (l *langGraphLayout) newestSQL(cols string) string {
	return fmt.Sprintf(`SELECT %s FROM %s c WHERE c.thread_id = $1 AND c.checkpoint_ns = $2 ORDER BY c.checkpoint_id DESC LIMIT 1`, cols, l.cp)
}

// pageSQL reads a page: at most $2 threads in (thread_id, checkpoint_ns) order, and $3
// bytes of their blobs, as rowLayout's pages do (a blob over $1 bytes comes without its
// content). conds are the conditions on the threads, from parameter $4 on.
func (l *langGraphLayout) pageSQL(conds []string) string {
	return fmt.Sprintf(`WITH th AS (
  SELECT DISTINCT c.thread_id, c.checkpoint_ns FROM %[1]s c %[4]s ORDER BY 1, 2 LIMIT $2
), h AS (
  SELECT th.thread_id, th.checkpoint_ns, n.checkpoint_id, n.checkpoint->>'v' AS v,
    n.checkpoint->'channel_versions'->'%[5]s' AS ver
  FROM th CROSS JOIN LATERAL (SELECT c.checkpoint_id, c.checkpoint FROM %[1]s c
    WHERE c.thread_id = th.thread_id AND c.checkpoint_ns = th.checkpoint_ns ORDER BY c.checkpoint_id DESC LIMIT 1) n
), r AS (
  SELECT h.*, b.type, b.blob, b.thread_id IS NOT NULL AS found, octet_length(b.blob) AS sz,
    CASE WHEN b.type = 'json' AND octet_length(b.blob) <= $1 THEN octet_length(b.blob) ELSE 0 END AS counted,
    EXISTS (SELECT 1 FROM %[3]s w WHERE w.thread_id = h.thread_id AND w.checkpoint_ns = h.checkpoint_ns
      AND w.checkpoint_id = h.checkpoint_id AND w.channel = '%[5]s') AS pending
  FROM h LEFT JOIN %[2]s b ON b.thread_id = h.thread_id AND b.checkpoint_ns = h.checkpoint_ns
    AND b.channel = '%[5]s' AND b.version = h.ver #>> '{}'
), p AS (
  SELECT *, sum(counted) OVER (ORDER BY thread_id, checkpoint_ns ROWS UNBOUNDED PRECEDING) AS cum FROM r
)
SELECT thread_id, checkpoint_ns, checkpoint_id, coalesce(v, ''), jsonb_typeof(ver), ver #>> '{}', coalesce(type, ''), found,
  coalesce(sz, 0), CASE WHEN counted = 0 OR cum > $3 THEN NULL ELSE blob END, cum > $3 AND counted > 0, pending
FROM p WHERE cum - counted <= $3 ORDER BY thread_id, checkpoint_ns`, l.cp, l.bl, l.wr, whereAll(conds...), langGraphChannel)
}

func (l *langGraphLayout) sessions(ctx context.Context, q model.Query) ([]model.Session, error) {
	pageBytes := int64(q.PageBytes)
	if pageBytes <= 0 || q.Mode == model.ModeSession {
		pageBytes = 1<<63 - 1
	}
	args := []any{q.MaxBytes, q.Limit, pageBytes}
	var conds []string
	cond := func(op, id string) {
		t, ns := parseLangGraphSessionID(id)
		args = append(args, t, ns)
		conds = append(conds, fmt.Sprintf("(c.thread_id, c.checkpoint_ns) %s ($%d, $%d)", op, len(args)-1, len(args)))
	}
	if q.Mode == model.ModeSession {
		args[1] = 1
		cond("=", q.SessionID)
	} else {
		if q.After.Started {
			cond(">", q.After.ID)
		}
		if q.Slice.Lower != nil {
			cond(">", *q.Slice.Lower)
		}
		if q.Slice.Upper != nil {
			cond("<=", *q.Slice.Upper)
		}
	}
	rows, err := l.pool.Query(ctx, l.pageSQL(conds), args...)
	if err != nil {
		return nil, classify(fmt.Errorf("read threads: %w", err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (model.Session, error) {
		var thread, ns, head, v, typ string
		var verType, ver *string
		var found, deferred, pending bool
		var s model.Session
		if err := r.Scan(&thread, &ns, &head, &v, &verType, &ver, &typ, &found, &s.Size, &s.Messages, &deferred, &pending); err != nil {
			return s, err
		}
		s.ID, s.Head, s.Deferred = langGraphSessionID(thread, ns), head, deferred
		s.UpdatedAt = uuid6Time(head)
		s.Unreadable, s.InFlight = langGraphUnreadable(head, v, verType, ver, typ, found, pending)
		if s.Unreadable != "" || s.InFlight != "" {
			s.Messages, s.Deferred = nil, false
		} else if s.Messages != nil && !utf8.Valid(s.Messages) {
			s.Messages, s.Unreadable = nil, fmt.Sprintf("the messages blob of checkpoint %s is not UTF-8 text; left alone", head)
		}
		return s, nil
	})
	if err != nil {
		return nil, classify(fmt.Errorf("read threads: %w", err))
	}
	return out, classify(l.holds(ctx, out))
}

// langGraphUnreadable says why a thread's messages are not read, or why it is in flight.
func langGraphUnreadable(head, v string, verType, ver *string, typ string, found, pending bool) (unreadable, inFlight string) {
	switch {
	case verType == nil:
		return fmt.Sprintf("the newest checkpoint %s has no %s channel (a graph without one, or a DeltaChannel, which tmend does not read); left alone",
			head, langGraphChannel), ""
	case *verType != "number":
		return fmt.Sprintf("checkpoint %s versions its channels with %ss (Python's saver); tmend reads the JS saver's; left alone", head, *verType), ""
	case v != "4":
		return fmt.Sprintf("checkpoint %s is of format v%s; tmend reads and writes format 4 (LangGraph JS 1.x); left alone", head, v), ""
	case !found:
		return fmt.Sprintf("checkpoint %s names %s version %s, and checkpoint_blobs has no such blob; left alone", head, langGraphChannel, *ver), ""
	case typ == "msgpack":
		return fmt.Sprintf("the %s blob of checkpoint %s is msgpack (Python's serializer); tmend reads the JSON serializer's blobs (LangGraph JS); left alone",
			langGraphChannel, head), ""
	case typ == "empty":
		return fmt.Sprintf("the %s channel of checkpoint %s is empty; nothing to read", langGraphChannel, head), ""
	case typ != "json":
		return fmt.Sprintf("the %s blob of checkpoint %s is of type %q, not json; left alone", langGraphChannel, head, typ), ""
	case pending:
		return "", fmt.Sprintf("checkpoint %s has pending writes to %s (a step in flight, or one LangGraph resumes); left for the next run",
			head, langGraphChannel)
	}
	return "", ""
}

// holds sets the sessions' HoldHash from session_holds.
func (l *langGraphLayout) holds(ctx context.Context, ss []model.Session) error {
	if len(ss) == 0 {
		return nil
	}
	ids := make([]string, len(ss))
	for i, s := range ss {
		ids[i] = s.ID
	}
	rows, err := l.pool.Query(ctx, `SELECT session_id, content_hash FROM session_holds WHERE source_key = $1 AND session_id = ANY($2)`, l.k, ids)
	if err != nil {
		return fmt.Errorf("read holds: %w", err)
	}
	held := map[string]string{}
	var id, hash string
	if _, err := pgx.ForEachRow(rows, []any{&id, &hash}, func() error { held[id] = hash; return nil }); err != nil {
		return fmt.Errorf("read holds: %w", err)
	}
	for i := range ss {
		ss[i].HoldHash = held[ss[i].ID]
	}
	return nil
}

// The write transaction's statements. $1 and $2 are the thread and its namespace.
const (
	// langGraphLockSQL serializes tmend's writers of a thread (repairs and rollbacks);
	// LangGraph's own writers are caught by comparing the newest checkpoint after it.
	langGraphLockSQL = `SELECT pg_advisory_xact_lock(hashtextextended($3 || ' ' || length($1) || ' ' || $1 || $2, 0))`
)

// stateSQL is the newest checkpoint, its messages blob's hash (NULL: none, or not
// json), whether it has pending writes to messages, and tmend's last saved version.
func (l *langGraphLayout) stateSQL() string {
	return fmt.Sprintf(`SELECT n.checkpoint_id, n.checkpoint::text, n.metadata::text, encode(sha256(b.blob), 'hex'),
  EXISTS (SELECT 1 FROM %[3]s w WHERE w.thread_id = $1 AND w.checkpoint_ns = $2 AND w.checkpoint_id = n.checkpoint_id AND w.channel = '%[4]s'),
  (SELECT coalesce(max(version), 0) FROM session_versions WHERE source_key = $3 AND session_id = $4),
  (SELECT content_hash FROM session_versions WHERE source_key = $3 AND session_id = $4 ORDER BY version DESC LIMIT 1)
FROM (%[1]s) n LEFT JOIN %[2]s b ON b.thread_id = $1 AND b.checkpoint_ns = $2 AND b.channel = '%[4]s'
  AND b.version = n.checkpoint->'channel_versions'->>'%[4]s' AND b.type = 'json'`,
		l.newestSQL("c.checkpoint_id, c.checkpoint, c.metadata"), l.bl, l.wr, langGraphChannel)
}

// langGraphState is a thread's newest checkpoint as the write transaction reads it.
type langGraphState struct {
	id, checkpoint, metadata string
	hash                     *string
	pending                  bool
	last                     int
	lastHash                 *string
}

func (l *langGraphLayout) readState(row pgx.Row) (langGraphState, error) {
	var st langGraphState
	err := row.Scan(&st.id, &st.checkpoint, &st.metadata, &st.hash, &st.pending, &st.last, &st.lastHash)
	return st, err
}

// insertSQL writes a checkpoint and its messages blob: $1 thread, $2 namespace, $3 the
// new checkpoint id, $4 its parent, $5 checkpoint, $6 metadata, $7 the blob's version,
// $8 the list. Plain INSERTs: a blob version or id LangGraph took meanwhile is a
// conflict, never shared.
func (l *langGraphLayout) insertSQL() (blob, checkpoint string) {
	return fmt.Sprintf(`INSERT INTO %s (thread_id, checkpoint_ns, channel, version, type, blob) VALUES ($1, $2, '%s', $3, 'json', convert_to($4::text, 'UTF8'))`,
			l.bl, langGraphChannel),
		fmt.Sprintf(`INSERT INTO %s (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata) VALUES ($1, $2, $3, $4, $5::jsonb, $6::jsonb)`, l.cp)
}

// langGraphRepairedSQL saves the repaired list as a version and inserts the report, as
// rowLayout's write does.
const langGraphRepairedSQL = `WITH repaired AS (
  INSERT INTO session_versions (source_key, session_id, version, kind, content, content_hash, size_bytes, run_id)
  VALUES ($1, $2, $3, 'repaired', $4::text, encode(sha256(convert_to($4::text, 'UTF8')), 'hex'), octet_length($4::text), $5)
  RETURNING content_hash, size_bytes
), unheld AS (
  DELETE FROM session_holds WHERE source_key = $1 AND session_id = $2
)
INSERT INTO repair_reports (source_key, run_id, session_id, status, trigger, dialect, reason,
  issue_codes, stage_counts, actions, before_hash, after_hash, before_bytes, after_bytes, from_version, to_version,
  actor, tmend_version, host)
SELECT $1, $5, $2, $6, $7, nullif($8, ''), nullif($9, ''), $10, $11, $12, $13, r.content_hash, $14, r.size_bytes, $15, $3,
  nullif($16, ''), nullif($17, ''), nullif($18, '')
FROM repaired r`

const langGraphOriginalSQL = `INSERT INTO session_versions (source_key, session_id, version, kind, content, content_hash, size_bytes, run_id)
VALUES ($1, $2, $3, 'original', $4::text, encode(sha256(convert_to($4::text, 'UTF8')), 'hex'), octet_length($4::text), $5)`

// apply locks the thread against tmend's other writers, checks that its newest
// checkpoint is the one read, with the messages read and no pending writes to them, and
// writes the repaired list as a new checkpoint, with the versions and the report.
func (l *langGraphLayout) apply(ctx context.Context, a model.Apply, want string, report []any) (out model.Outcome, err error) {
	thread, ns := parseLangGraphSessionID(a.Session.ID)
	conn, err := l.pool.Acquire(ctx)
	if err != nil {
		return out, err
	}
	defer conn.Release()
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue("SET LOCAL lock_timeout = '5s'")
	b.Queue(langGraphLockSQL, thread, ns, l.k)
	// After the lock, so that it sees what a tmend writer that held it committed.
	b.Queue(l.stateSQL(), thread, ns, l.k, a.Session.ID)
	lease := a.Report.Lease
	if lease != nil {
		queueLease(b, lease)
	}
	br := conn.SendBatch(ctx, b)
	for range 3 {
		if err == nil {
			_, err = br.Exec()
		}
	}
	var st langGraphState
	if err == nil {
		st, err = l.readState(br.QueryRow())
	}
	if err == nil && lease != nil {
		err = leaseHeld(br)
	}
	var pgErr *pgconn.PgError
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		err = &conflictError{"the thread was deleted after it was read"}
	case errors.As(err, &pgErr) && pgErr.Code == pgerrcode.LockNotAvailable:
		err = &conflictError{"another tmend writer held the thread for over 5s"}
	case err == nil && st.id != a.Session.Head:
		err = &conflictError{fmt.Sprintf("the thread's newest checkpoint is %s, not %s as read", st.id, a.Session.Head)}
	case err == nil && (st.hash == nil || *st.hash != want):
		err = &conflictError{"the thread's messages changed after they were read"}
	case err == nil && st.pending:
		err = &conflictError{"a step is writing the thread's messages"}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return out, err
	}
	child, err := l.child(st, "run", a.RunID)
	if err != nil {
		return out, err
	}

	out.FromVersion = st.last
	b = &pgx.Batch{}
	if st.lastHash == nil || *st.lastHash != want {
		out.FromVersion = st.last + 1
		b.Queue(langGraphOriginalSQL, l.k, a.Session.ID, out.FromVersion, a.Session.Messages, nilIfZero(a.RunID))
	}
	out.ToVersion = out.FromVersion + 1
	blobSQL, cpSQL := l.insertSQL()
	b.Queue(blobSQL, thread, ns, child.version, a.NewMessages)
	b.Queue(cpSQL, thread, ns, child.id, st.id, child.checkpoint, child.metadata)
	b.Queue(langGraphRepairedSQL, l.k, a.Session.ID, out.ToVersion, a.NewMessages, nilIfZero(a.RunID),
		report[2], report[3], report[4], report[5], report[6], report[7], report[8], want, len(a.Session.Messages), out.FromVersion,
		report[16], report[17], report[18])
	if l.src.NotifyChannel != "" {
		b.Queue(notifySQL, l.src.NotifyChannel, notifyPayload(l.k, a.Session.ID, out.ToVersion, actionRepair))
	}
	b.Queue("COMMIT")
	n := b.Len()
	br = conn.SendBatch(ctx, b)
	for range n {
		if _, err = br.Exec(); err != nil {
			break
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if errors.As(err, &pgErr) && pgErr.Code == pgerrcode.UniqueViolation {
		return out, &conflictError{fmt.Sprintf("LangGraph wrote the thread while tmend did (%s)", pgErr.ConstraintName)}
	}
	if err != nil {
		return out, fmt.Errorf("write repaired thread: %w", err)
	}
	out.Applied = true
	return out, nil
}

// langGraphChild is a checkpoint written as LangGraph's updateState writes one.
type langGraphChild struct {
	id, version, checkpoint, metadata string
}

// child is the checkpoint after st whose messages channel holds list: a new uuid6 id
// after st's, channel_versions.messages the saver's next version (the largest version
// of any channel plus one, as _applyWrites bumps an updated channel), versions_seen as
// they were (no node ran), and metadata as updateState writes it (source "update", the
// parent's step plus one, its parents) with tmend's version and run (or the version
// restored) under "tmend".
func (l *langGraphLayout) child(st langGraphState, what string, value any) (langGraphChild, error) {
	var c langGraphChild
	var cp map[string]json.RawMessage
	if err := json.Unmarshal([]byte(st.checkpoint), &cp); err != nil {
		return c, fmt.Errorf("read checkpoint %s: %w", st.id, err)
	}
	var versions map[string]json.Number
	dec := json.NewDecoder(strings.NewReader(string(cp["channel_versions"])))
	dec.UseNumber()
	if err := dec.Decode(&versions); err != nil {
		return c, fmt.Errorf("read channel_versions of checkpoint %s: %w", st.id, err)
	}
	var top int64
	for ch, v := range versions {
		n, err := v.Int64()
		if err != nil {
			return c, fmt.Errorf("checkpoint %s: channel %q has version %s, not an integer; tmend writes the JS saver's integer versions only", st.id, ch, v)
		}
		top = max(top, n)
	}
	c.version = fmt.Sprint(top + 1)
	versions[langGraphChannel] = json.Number(c.version)

	var meta map[string]json.RawMessage
	if err := json.Unmarshal([]byte(st.metadata), &meta); err != nil {
		return c, fmt.Errorf("read metadata of checkpoint %s: %w", st.id, err)
	}
	step := int64(-1)
	if s, ok := meta["step"]; ok {
		if err := json.Unmarshal(s, &step); err != nil {
			return c, fmt.Errorf("checkpoint %s: metadata step %s is not an integer", st.id, s)
		}
	}
	parents := meta["parents"]
	if parents == nil {
		parents = json.RawMessage("{}")
	}
	now := time.Now()
	at := now
	if after := uuid6Time(st.id).Add(100 * time.Nanosecond); at.Before(after) {
		at = after // the parent's clock ran ahead of this host's
	}
	c.id = uuid6(at, step+1)
	if c.id <= st.id {
		return c, fmt.Errorf("checkpoint id %s is not a uuid6 tmend can follow: a new id would not sort after it", st.id)
	}
	version := ""
	if l.origin != nil {
		version = l.origin.Version
	}
	var err error
	set := func(m map[string]json.RawMessage, k string, v any) {
		if err == nil {
			m[k], err = json.Marshal(v)
		}
	}
	set(cp, "id", c.id)
	set(cp, "ts", now.UTC().Format("2006-01-02T15:04:05.000Z"))
	set(cp, "channel_versions", versions)
	delete(cp, "channel_values")
	newMeta := map[string]json.RawMessage{"parents": parents}
	set(newMeta, "source", "update")
	set(newMeta, "step", step+1)
	set(newMeta, "tmend", map[string]any{"version": version, what: value})
	if err != nil {
		return c, err
	}
	cpText, err := json.Marshal(cp)
	if err != nil {
		return c, err
	}
	metaText, err := json.Marshal(newMeta)
	c.checkpoint, c.metadata = string(cpText), string(metaText)
	return c, err
}

func (l *langGraphLayout) lock(ctx context.Context, tx pgx.Tx, id string) (*string, error) {
	thread, ns := parseLangGraphSessionID(id)
	if _, err := tx.Exec(ctx, langGraphLockSQL, thread, ns, l.k); err != nil {
		return nil, err
	}
	st, err := l.readState(tx.QueryRow(ctx, l.stateSQL(), thread, ns, l.k, id))
	return st.hash, err
}

// saveVersion saves the newest checkpoint's messages list.
func (l *langGraphLayout) saveVersion(ctx context.Context, tx pgx.Tx, id string, n int, kind string, runID int64) (string, int, error) {
	thread, ns := parseLangGraphSessionID(id)
	var hash string
	var size int
	err := tx.QueryRow(ctx, fmt.Sprintf(`INSERT INTO session_versions (source_key, session_id, version, kind, content, content_hash, size_bytes, run_id)
SELECT $3, $4, $5, $6, x.m, encode(sha256(convert_to(x.m, 'UTF8')), 'hex'), octet_length(x.m), $7
FROM (%s) n JOIN %s b ON b.thread_id = $1 AND b.checkpoint_ns = $2 AND b.channel = '%s'
  AND b.version = n.checkpoint->'channel_versions'->>'%[3]s' AND b.type = 'json'
CROSS JOIN LATERAL (SELECT convert_from(b.blob, 'UTF8') AS m) x
RETURNING content_hash, size_bytes`, l.newestSQL("c.checkpoint"), l.bl, langGraphChannel),
		thread, ns, l.k, id, n, kind, nilIfZero(runID)).Scan(&hash, &size)
	return hash, size, err
}

// restore writes version n's list as a further checkpoint, as a repair is written: the
// checkpoints before stay as they are.
func (l *langGraphLayout) restore(ctx context.Context, tx pgx.Tx, id string, n int) error {
	thread, ns := parseLangGraphSessionID(id)
	st, err := l.readState(tx.QueryRow(ctx, l.stateSQL(), thread, ns, l.k, id))
	if err != nil {
		return err
	}
	var list string
	if err := tx.QueryRow(ctx, versionContentSQL, l.k, id, n).Scan(&list); err != nil {
		return err
	}
	child, err := l.child(st, "restored_version", n)
	if err != nil {
		return err
	}
	blobSQL, cpSQL := l.insertSQL()
	if _, err := tx.Exec(ctx, blobSQL, thread, ns, child.version, list); err != nil {
		return err
	}
	_, err = tx.Exec(ctx, cpSQL, thread, ns, child.id, st.id, child.checkpoint, child.metadata)
	return err
}

const versionContentSQL = `SELECT content FROM session_versions WHERE source_key = $1 AND session_id = $2 AND version = $3`

// holdHash: the blob holds the version's list itself.
func (l *langGraphLayout) holdHash(_ context.Context, _ pgx.Tx, _, versionHash string) (string, error) {
	return versionHash, nil
}

// transcript: a version holds the list itself.
func (l *langGraphLayout) transcript(content string) (string, error) { return content, nil }

// estimateChanged is never called: without an updated-at column every run is full.
func (l *langGraphLayout) estimateChanged(context.Context, time.Time) (float64, error) {
	return 0, errors.New("LangGraph checkpoints have no updated-at column; every run is a full run")
}

// estimateThreads is the number of threads by the statistics of the checkpoints table:
// its rows times the share of distinct thread ids (threads' namespaces are not counted).
func (l *langGraphLayout) estimateThreads(ctx context.Context, q querier) (float64, error) {
	var n float64
	err := q.QueryRow(ctx, `SELECT greatest(c.reltuples, 0) * CASE WHEN st.n_distinct IS NULL THEN 1
  WHEN st.n_distinct < 0 THEN -st.n_distinct ELSE least(st.n_distinct / nullif(greatest(c.reltuples, 1), 0), 1) END
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_stats st ON st.schemaname = n.nspname AND st.tablename = c.relname AND st.attname = 'thread_id'
WHERE c.oid = $1::regclass`, l.cp).Scan(&n)
	return n, err
}

// split bounds partitions by thread ids sampled from the checkpoints (see splitPoints),
// each as the session id of the thread's root namespace.
func (l *langGraphLayout) split(ctx context.Context, q querier, fractions []float64, percent float64) ([]string, error) {
	var bounds []string
	err := q.QueryRow(ctx, fmt.Sprintf(`WITH s AS (SELECT thread_id AS k FROM %s t TABLESAMPLE SYSTEM ($2))
SELECT coalesce(array_agg(DISTINCT b ORDER BY b) FILTER (WHERE b < (SELECT k FROM s ORDER BY k DESC LIMIT 1)), '{}')::text[]
FROM unnest((SELECT percentile_disc($1::float8[]) WITHIN GROUP (ORDER BY k) FROM s)) AS u (b)`, l.cp), fractions, percent).Scan(&bounds)
	for i, b := range bounds {
		bounds[i] = langGraphSessionID(b, "")
	}
	return bounds, err
}
