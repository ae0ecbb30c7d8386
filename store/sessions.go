package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tmend/tmend/store/model"
)

// rowLayout is a table holding one row per session, its messages array in one column:
// tmend's own sessions table, and any table mapped with Source's IDColumn and
// MessagesColumn.
type rowLayout struct {
	pool *pgxpool.Pool
	src  Source
	k    string // the source's key (see checkSource)
	sql  sessionSQL
}

func newRowLayout(pool *pgxpool.Pool, src Source, t sourceTypes) *rowLayout {
	return &rowLayout{pool: pool, src: src, k: t.key, sql: buildSessionSQL(src, t)}
}

func (l *rowLayout) key() string        { return l.k }
func (l *rowLayout) hasUpdatedAt() bool { return l.sql.hasUpdatedAt }

// sessionSQL holds the statements for one source, built once from quoted identifiers and
// the column types found by checkSource.
type sessionSQL struct {
	// The page statements, indexed by the bounds of a Slice they take (sliceVariant),
	// which are the parameters after the others.
	full, fullAfter, incr, incrAfter    [4]string
	one, split, changed                 string
	lock, lockState, write, saveVersion string
	lockBatch, writeBatch               string // ApplyBatch's (applyBatch)
	restore                             string
	current, set                        string // an uncompacting rollback's (compaction.go)
	hasUpdatedAt                        bool
}

func buildSessionSQL(src Source, t sourceTypes) sessionSQL {
	id := "t." + pgx.Identifier{src.IDColumn}.Sanitize()
	msgs := "t." + pgx.Identifier{src.MessagesColumn}.Sanitize()
	ua, uaType := "NULL::timestamptz", "timestamptz"
	if src.UpdatedAtColumn != "" {
		ua, uaType = "t."+pgx.Identifier{src.UpdatedAtColumn}.Sanitize(), t.updatedAt
	}
	// The lateral subquery (kept apart by OFFSET 0) turns the column into text once per
	// row; sessions over the size limit ($1 bytes) come back without their content.
	// The updated-at column comes twice: as a point in time (a timestamp column is the
	// database's wall clock, read in its time zone) for the quiet period, and as stored,
	// for the keyset cursor. $2 is the source's key.
	cols := fmt.Sprintf(`%[1]s::text AS sid, x.m, octet_length(x.m) AS sz, %[2]s::timestamptz AS ua, %[2]s AS pos,
  (SELECT h.content_hash FROM session_holds h WHERE h.source_key = $2 AND h.session_id = %[1]s::text) AS hold`, id, ua)
	from := fmt.Sprintf(`FROM %[1]s t CROSS JOIN LATERAL (SELECT %[2]s::text AS m OFFSET 0) x `, t.ident, msgs)
	idParam := func(n int) string { return fmt.Sprintf("$%d::%s", n, t.id) }
	s := sessionSQL{
		one: fmt.Sprintf(`SELECT sid, CASE WHEN sz > $1 THEN NULL ELSE m END, sz, ua, pos, hold, false FROM (SELECT %s %s WHERE %s = %s) p`,
			cols, from, id, idParam(3)),
		hasUpdatedAt: src.UpdatedAtColumn != "",
	}
	// A page is at most $3 rows and $4 bytes of content: rows are returned while the
	// content before them is within $4 bytes; the row that crosses it comes without its
	// content (deferred: the caller reads it alone when it has room), and ends the page.
	// Content over the size limit, and NULLs, count nothing.
	page := func(where, order, outer string) string {
		return fmt.Sprintf(`SELECT sid, CASE WHEN sz > $1 OR cum > $4 THEN NULL ELSE m END, sz, ua, pos, hold, cum > $4 AND counted > 0
FROM (SELECT *, sum(counted) OVER (ORDER BY %[5]s ROWS UNBOUNDED PRECEDING) AS cum FROM (
  SELECT %[1]s, %[6]s AS kid, CASE WHEN octet_length(x.m) > $1 THEN 0 ELSE coalesce(octet_length(x.m), 0) END AS counted
  %[2]s %[3]s ORDER BY %[4]s LIMIT $3) r) p
WHERE cum - counted <= $4 ORDER BY %[5]s`, cols, from, where, order, outer, id)
	}
	// A partition is a range of ids, compared in the column's own type (and collation):
	// read by keyset over the id's index, each session is read by one partition only.
	bounds := func(v, n int) string {
		var conds []string
		if v&1 != 0 {
			n++
			conds = append(conds, fmt.Sprintf("%s > %s", id, idParam(n)))
		}
		if v&2 != 0 {
			n++
			conds = append(conds, fmt.Sprintf("%s <= %s", id, idParam(n)))
		}
		return strings.Join(conds, " AND ")
	}
	for v := range 4 {
		s.full[v] = page(whereAll(bounds(v, 4)), id, "kid")
		s.fullAfter[v] = page(whereAll(fmt.Sprintf("%s > %s", id, idParam(5)), bounds(v, 5)), id, "kid")
		if s.hasUpdatedAt {
			// The window's bounds are points in time from the database's clock; they are
			// compared in the column's own type, converted in the database's time zone. The
			// cursor is a value read from the column, passed back in its type.
			window := fmt.Sprintf("%[1]s >= $5::timestamptz::%[2]s AND %[1]s < $6::timestamptz::%[2]s", ua, uaType)
			s.incr[v] = page(whereAll(window, bounds(v, 6)), ua+", "+id, "pos, kid")
			s.incrAfter[v] = page(whereAll(window, fmt.Sprintf("(%[1]s, %[2]s) > ($7::%[4]s, %[3]s)", ua, id, idParam(8), uaType), bounds(v, 8)),
				ua+", "+id, "pos, kid")
		}
	}
	if s.hasUpdatedAt {
		// The planner's estimate of the rows an incremental run from $1 reads.
		s.changed = fmt.Sprintf(`EXPLAIN (FORMAT JSON) SELECT 1 FROM %s t WHERE %s >= $1::timestamptz::%s`, t.ident, ua, uaType)
	}
	// The bounds of n partitions: the ids at fractions 1/n ... (n-1)/n of a sample of the
	// table ($2 percent of its pages), as text, without repeats and below the sample's
	// largest id (a small table may give fewer ranges than asked for, none empty).
	s.split = fmt.Sprintf(`WITH s AS (SELECT %[1]s AS k FROM %[2]s t TABLESAMPLE SYSTEM ($2))
SELECT coalesce(array_agg(DISTINCT b ORDER BY b) FILTER (WHERE b < (SELECT k FROM s ORDER BY k DESC LIMIT 1)), '{}')::text[]
FROM unnest((SELECT percentile_disc($1::float8[]) WITHIN GROUP (ORDER BY k) FROM s)) AS u (b)`, id, t.ident)
	s.lock = fmt.Sprintf(`SELECT encode(sha256(convert_to(%[1]s::text, 'UTF8')), 'hex') FROM %[2]s t WHERE %[3]s = %[4]s FOR UPDATE OF t`,
		msgs, t.ident, id, idParam(1))
	// Apply's statements: the hash of the row's content and tmend's last saved version,
	// and then the whole write as one statement (each statement costs Postgres more than
	// the rows here). The content is compared rather than the row version (xmin): system
	// columns are not covered by the column grants tmend's role has.
	s.lockState = fmt.Sprintf(`SELECT encode(sha256(convert_to(%[4]s::text, 'UTF8')), 'hex'),
  (SELECT coalesce(max(version), 0) FROM session_versions WHERE source_key = $2 AND session_id = $1),
  (SELECT content_hash FROM session_versions WHERE source_key = $2 AND session_id = $1 ORDER BY version DESC LIMIT 1)
FROM %[1]s t WHERE %[2]s = $1::text::%[3]s FOR UPDATE OF t`, t.ident, id, t.id, msgs)
	// The original version, when $20 says to save it, is $3 (what was read), or when that
	// is NULL (see sentBack) the locked row's content: its hash matched what was read, and
	// the statement's parts share one snapshot, so it is the content before the update.
	s.write = fmt.Sprintf(`WITH original AS (
  INSERT INTO session_versions (source_key, session_id, version, kind, content, content_hash, size_bytes, run_id)
  SELECT $16, $1, $2, 'original', coalesce($3::text, %[6]s::text), $4, $5, $6 FROM %[1]s t
  WHERE %[4]s = $1::text::%[5]s AND $20::bool
), written AS (
  UPDATE %[1]s t SET %[2]s = $7::%[3]s%[7]s WHERE %[4]s = $1::text::%[5]s RETURNING %[6]s::text AS m
), repaired AS (
  INSERT INTO session_versions (source_key, session_id, version, kind, content, content_hash, size_bytes, run_id)
  SELECT $16, $1, $8, 'repaired', m, encode(sha256(convert_to(m, 'UTF8')), 'hex'), octet_length(m), $6 FROM written
  RETURNING content_hash, size_bytes
), unheld AS (
  DELETE FROM session_holds WHERE source_key = $16 AND session_id = $1
)
INSERT INTO repair_reports (source_key, run_id, session_id, status, trigger, dialect, reason,
  issue_codes, stage_counts, actions, before_hash, after_hash, before_bytes, after_bytes, from_version, to_version,
  actor, tmend_version, host)
SELECT $16, $6, $1, $9, $10, nullif($11, ''), nullif($12, ''), $13, $14, $15, $4, r.content_hash, $5, r.size_bytes, $2, $8,
  nullif($17, ''), nullif($18, ''), nullif($19, '')
FROM repaired r`, t.ident, pgx.Identifier{src.MessagesColumn}.Sanitize(), t.messages, id, t.id, msgs, touchSQL(src))
	// ApplyBatch's: the sessions of $1 (text ids) that no other transaction holds, locked
	// in id order (so that concurrent batches never deadlock, although skipping the held
	// ones already makes them wait for none), each compared with the hash of what was
	// read ($3) and with its latest version; and the original version of each that
	// matches and whose latest version is not that content already, saved from the text
	// the hash was taken of (rendered below the lock: the row as locked, also after a
	// concurrent update). The check renders every row anyway, so the originals are not
	// sent back with the write, which cost tmend a copy of each into pgx's buffers and
	// Postgres their bind (BENCHMARKS.md, "The row batch's originals saved from its check").
	s.lockBatch = fmt.Sprintf(`WITH v AS (
  SELECT * FROM unnest($1::text[], $3::text[], $4::int8[]) AS v (sid, want, run_id)
), locked AS (
  SELECT %[2]s::text AS sid, x.m, encode(sha256(convert_to(x.m, 'UTF8')), 'hex') AS hash,
    (SELECT coalesce(max(version), 0) FROM session_versions WHERE source_key = $2 AND session_id = %[2]s::text) AS last,
    (SELECT content_hash FROM session_versions WHERE source_key = $2 AND session_id = %[2]s::text ORDER BY version DESC LIMIT 1) AS last_hash
  FROM %[1]s t CROSS JOIN LATERAL (SELECT %[4]s::text AS m OFFSET 0) x
  WHERE %[2]s = ANY($1::text[]::%[3]s[]) ORDER BY %[2]s FOR UPDATE OF t SKIP LOCKED
), checked AS MATERIALIZED (
  SELECT l.*, v.run_id, coalesce(l.hash = v.want, false) AS same, l.last_hash IS DISTINCT FROM v.want AS save
  FROM locked l JOIN v USING (sid)
), original AS (
  INSERT INTO session_versions (source_key, session_id, version, kind, content, content_hash, size_bytes, run_id)
  SELECT $2, sid, last + 1, 'original', m, hash, octet_length(m), run_id FROM checked WHERE same AND save
)
SELECT sid, same, last, save FROM checked`, t.ident, id, t.id, msgs)
	// And write's statement for all the sessions locked and matched, one row of v each.
	s.writeBatch = fmt.Sprintf(`WITH v AS (
  SELECT * FROM unnest($1::text[], $2::int[], $3::text[], $4::int[], $5::int8[], $6::text[], $7::int[], %[8]s)
    AS v (sid, from_v, want, size, run_id, m, to_v, %[9]s)
), written AS (
  UPDATE %[1]s t SET %[2]s = v.m::%[3]s%[7]s FROM v WHERE %[4]s = v.sid::%[5]s RETURNING v.sid, %[6]s::text AS m
), repaired AS (
  INSERT INTO session_versions (source_key, session_id, version, kind, content, content_hash, size_bytes, run_id)
  SELECT $8, w.sid, v.to_v, 'repaired', w.m, encode(sha256(convert_to(w.m, 'UTF8')), 'hex'), octet_length(w.m), v.run_id
  FROM written w JOIN v USING (sid)
  RETURNING session_id, content_hash, size_bytes
), unheld AS (
  DELETE FROM session_holds WHERE source_key = $8 AND session_id = ANY($1::text[])
)
INSERT INTO repair_reports (source_key, run_id, session_id, status, trigger, dialect, reason,
  issue_codes, stage_counts, actions, before_hash, after_hash, before_bytes, after_bytes, from_version, to_version,
  actor, tmend_version, host)
SELECT $8, v.run_id, v.sid, %[10]s, v.want, r.content_hash, v.size, r.size_bytes, v.from_v, v.to_v, %[11]s
FROM repaired r JOIN v ON v.sid = r.session_id`, t.ident, pgx.Identifier{src.MessagesColumn}.Sanitize(), t.messages, id, t.id, msgs,
		touchSQL(src), reportUnnest(9), reportColumns, reportHead, reportTail)
	// $1 is compared with session_versions' text column and with the id column, so it is
	// typed text and cast to the id column's type there.
	s.restore = fmt.Sprintf(`UPDATE %s t SET %s = (SELECT content FROM session_versions WHERE source_key = $3 AND session_id = $1::text AND version = $2)::%s%s
WHERE %s = $1::text::%s`, t.ident, pgx.Identifier{src.MessagesColumn}.Sanitize(), t.messages, touchSQL(src), id, t.id)
	s.current = fmt.Sprintf(`SELECT %s::text FROM %s t WHERE %s = %s`, msgs, t.ident, id, idParam(1))
	s.set = fmt.Sprintf(`UPDATE %s t SET %s = $2::text::%s%s WHERE %s = %s`,
		t.ident, pgx.Identifier{src.MessagesColumn}.Sanitize(), t.messages, touchSQL(src), id, idParam(1))
	// Versions are copied from the row itself, so what is saved is exactly what is stored.
	s.saveVersion = fmt.Sprintf(`INSERT INTO session_versions (source_key, session_id, version, kind, content, content_hash, size_bytes, run_id)
SELECT $6, $2, $3, $4, x.m, encode(sha256(convert_to(x.m, 'UTF8')), 'hex'), octet_length(x.m), $5
FROM %[1]s t CROSS JOIN LATERAL (SELECT %[2]s::text AS m OFFSET 0) x WHERE %[3]s = %[4]s
RETURNING content_hash, size_bytes`, t.ident, msgs, id, idParam(1))
	return s
}

// HasUpdatedAt reports whether the source supports incremental runs.
func (s *Store) HasUpdatedAt() bool { return s.layout.hasUpdatedAt() }

// Sessions returns one page of sessions in keyset order: at most q.Limit sessions and,
// when q.PageBytes is set, the content of those whose content before them is within
// q.PageBytes; the session that crosses it comes Deferred, without its content, last.
func (s *Store) Sessions(ctx context.Context, q model.Query) ([]model.Session, error) {
	return s.layout.sessions(ctx, q)
}

func (s *rowLayout) sessions(ctx context.Context, q model.Query) ([]model.Session, error) {
	var rows pgx.Rows
	var err error
	pageBytes := int64(q.PageBytes)
	if pageBytes <= 0 {
		pageBytes = math.MaxInt64
	}
	variant, bounds := sliceBounds(q.Slice)
	query := func(sql [4]string, args ...any) (pgx.Rows, error) {
		return s.pool.Query(ctx, sql[variant], append(args, bounds...)...)
	}
	switch {
	case q.Mode == model.ModeSession && q.Borrow:
		return s.borrowed(ctx, q)
	case q.Mode == model.ModeSession:
		rows, err = s.pool.Query(ctx, s.sql.one, q.MaxBytes, s.k, q.SessionID)
	case q.Mode == model.ModeIncremental && s.sql.hasUpdatedAt && !q.After.Started:
		rows, err = query(s.sql.incr, q.MaxBytes, s.k, q.Limit, pageBytes, q.From, q.To)
	case q.Mode == model.ModeIncremental && s.sql.hasUpdatedAt:
		rows, err = query(s.sql.incrAfter, q.MaxBytes, s.k, q.Limit, pageBytes, q.From, q.To, q.After.Position, q.After.ID)
	case !q.After.Started:
		rows, err = query(s.sql.full, q.MaxBytes, s.k, q.Limit, pageBytes)
	default:
		rows, err = query(s.sql.fullAfter, q.MaxBytes, s.k, q.Limit, pageBytes, q.After.ID)
	}
	if err != nil {
		return nil, classify(fmt.Errorf("read sessions: %w", err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (model.Session, error) {
		return scanSession(r.Scan, true)
	})
	if err != nil {
		return nil, classify(fmt.Errorf("read sessions: %w", err))
	}
	return out, nil
}

// borrowed reads one session (ModeSession) without copying its content: pgx reads a row
// whole into one buffer, and Messages is the content's bytes in it, valid while the rows
// stay open; Release closes them. For a session read alone, the copy doubled what the
// read held at its peak (BENCHMARKS.md, "A session read alone, not copied"). ctx bounds
// the read only: once the row is in, its end must not cut the connection the content
// lives in.
func (s *rowLayout) borrowed(ctx context.Context, q model.Query) ([]model.Session, error) {
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancel)
	rows, err := s.pool.Query(rctx, s.sql.one, q.MaxBytes, s.k, q.SessionID)
	if err != nil {
		cancel()
		return nil, classify(fmt.Errorf("read session %q: %w", q.SessionID, err))
	}
	release := sync.OnceFunc(func() { rows.Close(); cancel() })
	if !rows.Next() {
		release()
		if err := rows.Err(); err != nil {
			return nil, classify(fmt.Errorf("read session %q: %w", q.SessionID, err))
		}
		return nil, nil
	}
	if !stop() { // ctx ended while the row was read
		release()
		return nil, ctx.Err()
	}
	ss, err := scanSession(rows.Scan, false)
	if err != nil {
		release()
		return nil, classify(fmt.Errorf("read session %q: %w", q.SessionID, err))
	}
	if ss.Messages = rows.RawValues()[1]; ss.Messages == nil {
		release() // NULL, or over the size limit: nothing to hold
	} else {
		ss.Release = release
	}
	return []model.Session{ss}, nil
}

// scanSession reads a row of the sessions statements. With copyContent, the content goes
// straight into bytes (a NULL, over the size limit, stays nil); else the caller takes it.
// The size is NULL only when the column itself is.
func scanSession(scan func(...any) error, copyContent bool) (model.Session, error) {
	var ss model.Session
	var hold *string
	var ua, pos *time.Time
	var size *int
	var msgs any
	if copyContent {
		msgs = &ss.Messages
	}
	if err := scan(&ss.ID, msgs, &size, &ua, &pos, &hold, &ss.Deferred); err != nil {
		return ss, err
	}
	if size == nil {
		ss.Null = true
	} else {
		ss.Size = *size
	}
	if hold != nil {
		ss.HoldHash = *hold
	}
	if ua != nil {
		ss.UpdatedAt, ss.Position = *ua, *pos
	}
	return ss, nil
}

// conflictError aborts an Apply transaction that must not write.
type conflictError struct{ reason string }

func (e *conflictError) Error() string { return e.reason }

// Apply writes a repaired session in one transaction: lock the row, check it still holds
// what was read, save that content as a version unless the latest version already is it,
// write the repaired content, save it as a version, and insert the report. When the
// content changed (or the row is locked or gone) it writes nothing but a conflict report.
func (s *Store) Apply(ctx context.Context, a model.Apply) (model.Outcome, error) {
	var out model.Outcome
	want := model.ContentHash(a.Session.Messages)
	_, rows := s.layout.(*rowLayout)
	if a.Compaction != nil && !rows {
		return out, fmt.Errorf("compact session %q: %w", a.Session.ID, ErrCompactLayout)
	}
	if a.NewPieces != nil && !rows { // only rowLayout borrows (Query.Borrow)
		return out, fmt.Errorf("repair session %q: a repair in pieces is written to a table of one row per session only", a.Session.ID)
	}
	r := a.Report
	r.RunID, r.SessionID, r.Trigger = a.RunID, a.Session.ID, a.Trigger
	_, args, err := s.reportInsert(r)
	if err != nil {
		return out, err
	}
	err = retryTx(ctx, func() error {
		var err error
		out, err = s.layout.apply(ctx, a, want, args)
		return err
	})
	var ce *conflictError
	if errors.As(err, &ce) {
		return s.conflicted(ctx, a, want, ce)
	}
	if err != nil {
		return model.Outcome{}, fmt.Errorf("repair session %q: %w", a.Session.ID, err)
	}
	return out, nil
}

// conflicted records that a session changed after it was read (want is the hash of what
// was read): a conflict report, and nothing else written.
func (s *Store) conflicted(ctx context.Context, a model.Apply, want string, ce *conflictError) (model.Outcome, error) {
	r := a.Report
	r.RunID, r.SessionID, r.Trigger = a.RunID, a.Session.ID, a.Trigger
	r.Status, r.Reason = model.StatusConflict, ce.reason+"; left for the next run"
	r.BeforeHash, r.BeforeBytes = want, a.Session.Size
	if err := s.insertReport(ctx, s.pool, r); err != nil {
		return model.Outcome{}, classify(err)
	}
	return model.Outcome{Conflict: true}, nil
}

// apply is one attempt at Apply's transaction. It costs three round trips: BEGIN goes
// out with the lock and checks, the write with the next, and COMMIT once the write's
// count is read (execCounted; the statements cost Postgres less than the round trips
// between them). A transaction that fails or is refused is left
// open on purpose: the pool closes a connection released inside a transaction, and the
// server rolls it back.
func (s *rowLayout) apply(ctx context.Context, a model.Apply, want string, report []any) (out model.Outcome, err error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return out, err
	}
	defer conn.Release()

	b := &pgx.Batch{}
	b.Queue("BEGIN")
	// A live agent holding the row must not stall a run; it is retried next run.
	b.Queue("SET LOCAL lock_timeout = '5s'")
	b.Queue(s.sql.lockState, a.Session.ID, s.k)
	lease := a.Report.Lease
	if lease != nil {
		queueLease(b, lease)
	}
	br := conn.SendBatch(ctx, b)
	var curHash *string
	var last int
	var lastHash *string
	_, err = br.Exec()
	if err == nil {
		_, err = br.Exec()
	}
	if err == nil {
		err = br.QueryRow().Scan(&curHash, &last, &lastHash)
	}
	if err == nil && lease != nil {
		err = leaseHeld(br)
	}
	var pgErr *pgconn.PgError
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		err = &conflictError{"the session was deleted after it was read"}
	case errors.As(err, &pgErr) && pgErr.Code == pgerrcode.LockNotAvailable:
		err = &conflictError{"the session was locked by another writer for over 5s"}
	case err == nil && (curHash == nil || *curHash != want):
		err = &conflictError{"the session changed after it was read"}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return out, err
	}

	out.FromVersion = last
	// The row holds exactly what was read (same content, now locked); the repaired
	// version is saved from the row, so it is exactly what is stored.
	// Bytes, not strings: pgx sends them as the text they are, without another copy of
	// a content that may be tens of megabytes.
	saveOriginal := lastHash == nil || *lastHash != want
	if saveOriginal {
		out.FromVersion = last + 1
	}
	out.ToVersion = out.FromVersion + 1
	b = &pgx.Batch{}
	// Repairing ends a rollback's hold: the content changed, or someone asked for it.
	b.Queue(s.sql.write, a.Session.ID, out.FromVersion, sentBack(a.Session.Messages), want, len(a.Session.Messages),
		nilIfZero(a.RunID), sendArg(a), out.ToVersion, report[2], report[3], report[4], report[5], report[6], report[7],
		report[8], s.k, report[16], report[17], report[18], saveOriginal)
	if c := a.Compaction; c != nil {
		b.Queue(compactionSQL, s.k, a.Session.ID, out.ToVersion, nilIfZero(a.RunID), c.Boundary, c.Prefix, c.Report)
	}
	notify := s.src.NotifyChannel != ""
	if notify {
		b.Queue(notifySQL, s.src.NotifyChannel, notifyPayload(s.k, a.Session.ID, out.ToVersion, actionRepair))
	}
	counts := []int64{1} // the write's reports
	if a.Compaction != nil {
		counts = append(counts, -1)
	}
	if notify {
		counts = append(counts, -1)
	}
	if err := execCounted(ctx, conn, b, counts); err != nil {
		return out, fmt.Errorf("write repaired session: %w", err)
	}
	out.Applied = true
	return out, nil
}

// sendBackMax is the largest session whose original version Apply sends back with the
// write, as read (a batch saves the text its check rendered). A larger one is copied
// from the locked row by the write statement instead:
// sent back, it would be held twice more in the client, in pgx's parameter buffer and in
// its Bind message. Below it, sending is cheaper for PostgreSQL than rendering the
// column's text again (BENCHMARKS.md, "A writing scan's copies").
const sendBackMax = 1 << 20

// sentBack is the original version's content the write sends: msgs, or nil (NULL) when
// the statement copies it from the row (over sendBackMax).
func sentBack(msgs []byte) []byte {
	if len(msgs) > sendBackMax {
		return nil
	}
	return msgs
}

// applyBatch is apply for several sessions at once (see batchLayout), in three round
// trips as well: BEGIN goes out with the locks, the checks, the original versions and
// the lease, then one write statement for all the sessions that match, then COMMIT.
func (s *rowLayout) applyBatch(ctx context.Context, as []model.Apply, wants []string, reports [][]any) ([]batchResult, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()

	ids, runs := make([]string, len(as)), make([]*int64, len(as))
	for i, a := range as {
		ids[i], runs[i] = a.Session.ID, nilIfZero(a.RunID)
	}
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue("SET LOCAL lock_timeout = '5s'") // for the lease's lock
	b.Queue(s.sql.lockBatch, ids, s.k, wants, runs)
	lease := as[0].Report.Lease
	if lease != nil {
		queueLease(b, lease)
	}
	type state struct {
		same, save bool // save: the original version is saved (when same), as version last+1
		last       int
	}
	locked := make(map[string]state, len(as))
	br := conn.SendBatch(ctx, b)
	_, err = br.Exec()
	if err == nil {
		_, err = br.Exec()
	}
	if err == nil {
		var rows pgx.Rows
		rows, err = br.Query()
		if err == nil {
			var id string
			var st state
			_, err = pgx.ForEachRow(rows, []any{&id, &st.same, &st.last, &st.save}, func() error {
				locked[id] = st
				return nil
			})
		}
	}
	if err == nil && lease != nil {
		err = leaseHeld(br)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}

	res := make([]batchResult, len(as))
	var w struct {
		ids, want      []string
		from, size, to []int
		newMsgs        [][]byte
		runs           []*int64
		reports        reportArrays
		compactions    []int
	}
	for i, a := range as {
		st, ok := locked[a.Session.ID]
		switch {
		case !ok:
			res[i].alone = true
			continue
		case !st.same:
			res[i].conflict = &conflictError{"the session changed after it was read"}
			continue
		}
		out := &res[i].out
		out.FromVersion = st.last
		if st.save {
			out.FromVersion = st.last + 1
		}
		out.ToVersion, out.Applied = out.FromVersion+1, true
		w.ids, w.want = append(w.ids, a.Session.ID), append(w.want, wants[i])
		w.from, w.size, w.to = append(w.from, out.FromVersion), append(w.size, len(a.Session.Messages)), append(w.to, out.ToVersion)
		w.newMsgs, w.runs = append(w.newMsgs, a.NewMessages), append(w.runs, runs[i])
		w.reports.add(reports[i])
		if a.Compaction != nil {
			w.compactions = append(w.compactions, i)
		}
	}
	b = &pgx.Batch{}
	if len(w.ids) > 0 {
		args := append([]any{w.ids, w.from, w.want, w.size, w.runs, w.newMsgs, w.to, s.k}, w.reports.args()...)
		b.Queue(s.sql.writeBatch, args...)
		for _, i := range w.compactions {
			a, c := as[i], as[i].Compaction
			b.Queue(compactionSQL, s.k, a.Session.ID, res[i].out.ToVersion, nilIfZero(a.RunID), c.Boundary, c.Prefix, c.Report)
		}
		if s.src.NotifyChannel != "" {
			payloads := make([]string, 0, len(w.ids))
			for i, id := range w.ids {
				payloads = append(payloads, notifyPayload(s.k, id, w.to[i], actionRepair))
			}
			b.Queue(notifyBatchSQL, s.src.NotifyChannel, payloads)
		}
	}
	counts := make([]int64, b.Len())
	for i := range counts {
		counts[i] = -1
	}
	if len(w.ids) > 0 {
		counts[0] = int64(len(w.ids)) // the write's reports
	}
	if err := execCounted(ctx, conn, b, counts); err != nil {
		return nil, fmt.Errorf("write repaired sessions: %w", err)
	}
	return res, nil
}

func (s *rowLayout) lock(ctx context.Context, tx pgx.Tx, id string) (*string, error) {
	var h *string
	err := tx.QueryRow(ctx, s.sql.lock, id).Scan(&h)
	return h, err
}

func (s *rowLayout) saveVersion(ctx context.Context, tx pgx.Tx, id string, n int, kind string, runID int64) (string, int, error) {
	var hash string
	var size int
	err := tx.QueryRow(ctx, s.sql.saveVersion, id, id, n, kind, nilIfZero(runID), s.k).Scan(&hash, &size)
	return hash, size, err
}

func (s *rowLayout) restore(ctx context.Context, tx pgx.Tx, id string, n int) error {
	_, err := tx.Exec(ctx, s.sql.restore, id, n, s.k)
	return err
}

// holdHash: the row holds the transcript itself.
func (s *rowLayout) holdHash(_ context.Context, _ pgx.Tx, _, versionHash string) (string, error) {
	return versionHash, nil
}

// transcript: a version holds the transcript itself.
func (s *rowLayout) transcript(content string) (string, error) { return content, nil }

func (s *rowLayout) estimateChanged(ctx context.Context, since time.Time) (float64, error) {
	return estimateRows(ctx, s.pool, s.sql.changed, since)
}

func (s *rowLayout) split(ctx context.Context, q querier, fractions []float64, percent float64) ([]string, error) {
	var bounds []string
	err := q.QueryRow(ctx, s.sql.split, fractions, percent).Scan(&bounds)
	return bounds, err
}
