package store

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tmend/tmend/store/model"
)

// messageLayout is a table holding one row per message (LangChain's
// langchain_chat_histories, the AI SDK chatbot's "Message_v2", Mastra's
// mastra_messages): a session is the rows of one session id, in the order of the order
// column and then the primary key. It reads a session as the array of its messages,
// and writes a repaired one by changing as few rows as it can (see planRows), matched
// by the engine's map of where each message came from. Its versions hold the session's
// rows whole, every column, as a JSON array of row objects, so rollback restores them
// exactly.
type messageLayout struct {
	pool *pgxpool.Pool
	src  Source
	t    messageTypes
	sql  messageSQL
	// meanRows is the mean rows per session of the pages read (1/1024ths), which sizes
	// the range scans (see scanPage).
	meanRows atomic.Int64
}

// messageTypes is what checkMessageSource found of the table.
type messageTypes struct {
	ident string // the quoted table name
	key   string
	// SQL types of the session id and primary key columns, from fixed lists.
	sid, pk  string
	pkColumn string
	// fields make a message: one, the message column, or the column map's.
	fields []msgField
	// The order column: its type, whether it is a timestamp, whether it is the primary
	// key, and the sequence that supplies its values ("" when it has none).
	ord       string
	ordTime   bool
	ordIsPK   bool
	ordSeq    string
	pkDefault bool // the primary key has a default, which new rows take
	// pkExplicit: new rows get their key from tmend: the message's id when the map
	// takes the key from it, else a random UUID (a uuid or text key without default).
	pkExplicit bool
	alsoType   string // the OrderAlsoColumn's type, when there is one
	// newRow are the NewRowColumns' types (as format_type names them), in their order.
	newRow    []string
	updatedAt string
	// columns are those an INSERT may set (not generated), in table order;
	// overriding is set when one is an identity column GENERATED ALWAYS, which
	// always lists.
	columns    []string
	overriding bool
	always     []string
	// noSessionIndex: no index starts with the session column (see sessionIndexAdvice).
	noSessionIndex bool
}

// messageSQL holds a messages table's statements, built once from quoted identifiers
// and the types checkMessageSource found.
type messageSQL struct {
	incr, incrAfter [4]string
	// scan and scanAfter read the rows of a range of sessions in order (the last
	// argument is how many), alone the rows of one session; holds are a page's holds,
	// anyHolds whether the source has any.
	scan, scanAfter              [4]string
	alone, holds, anyHolds       string
	changed, split               string
	lock, saveVersion            string
	insert, delete, update       string
	restoreDelete, restoreUpdate string
	restoreInsert                string
	transcriptHash               string
	nextValues, maxOrder         string
	estimate                     string
	// orderMark is a run's mark on a sequence order (the column's largest value), for
	// incremental runs without an updated-at column; "" when times serve instead.
	orderMark string

	// A write's (see write): its check, alone (0) or in a batch (1), and the repaired
	// versions and reports.
	check       [2]string
	saveRepairs string
}

// msgField is where one member of a message is kept: key "" is the whole message.
type msgField struct {
	key, column string
	// typ is the column's type as format_type names it, for casts.
	typ string
	// raw: the member's JSON text is the column's text (json, jsonb, the message
	// column, a text column mapped :json); otherwise a string member is the column's
	// text and other JSON values are cast from their JSON text.
	raw  bool
	isPK bool // the primary key: set on new rows only
}

var orderTypes = map[string]string{"int8": "bigint", "int4": "integer", "int2": "smallint",
	"timestamptz": "timestamptz", "timestamp": "timestamp"}

// checkMessageSource verifies a one-row-per-message mapping: the table, its columns'
// types, a single-column primary key, and the privileges tmend needs (SELECT on every
// column, since versions keep whole rows; INSERT, UPDATE and DELETE unless readOnly).
func checkMessageSource(ctx context.Context, q querier, s Source) (messageTypes, error) {
	var t messageTypes
	switch {
	case s.Table == "" || s.SessionColumn == "" || s.OrderColumn == "" || s.MessageColumn == "" && len(s.MessageMap) == 0:
		return t, fmt.Errorf("%w: the messages layout needs a table, a session column, an order column and a message column (or map)", ErrSource)
	case s.MessageColumn != "" && len(s.MessageMap) > 0:
		return t, fmt.Errorf("%w: give a message column or a message map, not both", ErrSource)
	}
	var oid uint32
	var err error
	if t.ident, oid, err = lookupTable(ctx, q, s); err != nil {
		return t, err
	}
	const columnsSQL = `SELECT a.attname, t.typname, format_type(a.atttypid, NULL), a.attgenerated <> '', a.attidentity = 'a', a.atthasdef OR a.attidentity <> '',
  coalesce(pg_get_serial_sequence($2, a.attname), ''),
  EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = a.attrelid AND i.indisprimary AND i.indnatts = 1 AND i.indkey[0] = a.attnum),
  (SELECT count(*) FROM pg_index i WHERE i.indrelid = a.attrelid AND i.indisprimary)
FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`
	type column struct {
		name, typ, format                     string
		generated, always, hasDefault, single bool
		seq                                   string
		pks                                   int
	}
	rows, err := q.Query(ctx, columnsSQL, oid, t.ident)
	if err != nil {
		return t, fmt.Errorf("read columns of %q: %w", s.Table, err)
	}
	cols, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (column, error) {
		var c column
		return c, r.Scan(&c.name, &c.typ, &c.format, &c.generated, &c.always, &c.hasDefault, &c.seq, &c.single, &c.pks)
	})
	if err != nil {
		return t, fmt.Errorf("read columns of %q: %w", s.Table, err)
	}
	byName := map[string]column{}
	for _, c := range cols {
		byName[c.name] = c
		if !c.generated {
			t.columns = append(t.columns, c.name)
			t.overriding = t.overriding || c.always
			if c.always {
				t.always = append(t.always, c.name)
			}
		}
		if c.single {
			t.pkColumn = c.name
		}
	}
	if t.pkColumn == "" {
		return t, fmt.Errorf("%w: table %q needs a single-column primary key (tmend tells its rows apart by it)", ErrSource, s.Table)
	}
	col := func(name, role string, types map[string]string, want string) (column, string, error) {
		c, ok := byName[name]
		if !ok {
			return c, "", fmt.Errorf("%w: table %q has no %s column %q", ErrSource, s.Table, role, name)
		}
		typ := types[c.typ]
		if typ == "" {
			return c, "", fmt.Errorf("%w: %s column %q of %q is %s; want %s", ErrSource, role, name, s.Table, c.typ, want)
		}
		return c, typ, nil
	}
	if _, t.sid, err = col(s.SessionColumn, "session", idTypes, "text, uuid or an integer type"); err != nil {
		return t, err
	}
	pk, typ, err := col(t.pkColumn, "primary key", idTypes, "text, uuid or an integer type")
	if err != nil {
		return t, err
	}
	t.pk, t.pkDefault = typ, pk.hasDefault
	ord, typ, err := col(s.OrderColumn, "order", orderTypes, "an integer or a timestamp")
	if err != nil {
		return t, err
	}
	t.ord, t.ordIsPK, t.ordSeq = typ, s.OrderColumn == t.pkColumn, ord.seq
	t.ordTime = typ == "timestamp" || typ == "timestamptz"
	if s.MessageColumn != "" {
		c, typ, err := col(s.MessageColumn, "message", messagesTypes, "jsonb, json or text")
		if err != nil {
			return t, err
		}
		t.fields = []msgField{{column: s.MessageColumn, typ: typ, raw: true, isPK: c.name == t.pkColumn}}
	}
	for _, f := range s.MessageMap {
		c, ok := byName[f.Column]
		switch {
		case !ok:
			return t, fmt.Errorf("%w: table %q has no column %q (message member %q)", ErrSource, s.Table, f.Column, f.Key)
		case c.generated:
			return t, fmt.Errorf("%w: column %q of %q is generated; tmend cannot write it", ErrSource, f.Column, s.Table)
		case f.Column == s.SessionColumn || f.Column == s.OrderColumn || f.Column == s.OrderAlsoColumn:
			return t, fmt.Errorf("%w: column %q of %q orders or groups the rows; it cannot be part of the message", ErrSource, f.Column, s.Table)
		case f.JSON && messagesTypes[c.typ] != "text":
			return t, fmt.Errorf("%w: column %q of %q is %s; :json is for a text column holding JSON", ErrSource, f.Column, s.Table, c.typ)
		}
		raw := f.JSON || c.typ == "json" || c.typ == "jsonb"
		t.fields = append(t.fields, msgField{key: f.Key, column: f.Column, typ: c.format, raw: raw, isPK: f.Column == t.pkColumn})
	}
	pkMapped := slices.ContainsFunc(t.fields, func(f msgField) bool { return f.isPK && f.key != "" })
	t.pkExplicit = !t.ordIsPK && (pkMapped || !t.pkDefault && (t.pk == "uuid" || t.pk == "text"))
	if s.OrderAlsoColumn != "" {
		c, ok := byName[s.OrderAlsoColumn]
		if !ok || !t.ordTime || c.typ != "timestamptz" && c.typ != "timestamp" {
			return t, fmt.Errorf("%w: the column that holds the order's time too (%q) must be a timestamp beside a timestamp order column", ErrSource, s.OrderAlsoColumn)
		}
		t.alsoType = c.typ
	}
	for _, v := range s.NewRowColumns {
		c, ok := byName[v.Column]
		switch {
		case !ok:
			return t, fmt.Errorf("%w: table %q has no column %q (a value for new rows)", ErrSource, s.Table, v.Column)
		case c.generated || v.Column == t.pkColumn || v.Column == s.SessionColumn || v.Column == s.OrderColumn ||
			v.Column == s.OrderAlsoColumn || v.Column == s.UpdatedAtColumn ||
			slices.ContainsFunc(t.fields, func(f msgField) bool { return f.column == v.Column }):
			return t, fmt.Errorf("%w: column %q of %q is one tmend sets or cannot set; it takes no value for new rows", ErrSource, v.Column, s.Table)
		}
		t.newRow = append(t.newRow, c.format)
	}
	if s.UpdatedAtColumn != "" {
		c, ok := byName[s.UpdatedAtColumn]
		if !ok {
			return t, fmt.Errorf("%w: table %q has no updated-at column %q", ErrSource, s.Table, s.UpdatedAtColumn)
		}
		if !updatedAtTypes[c.typ] {
			return t, fmt.Errorf("%w: updated-at column %q of %q is %s; want timestamptz or timestamp", ErrSource, s.UpdatedAtColumn, s.Table, c.typ)
		}
		t.updatedAt = c.typ
	}
	// The key names the message column, or the map's columns in braces.
	message := []string{s.MessageColumn}
	if len(s.MessageMap) > 0 {
		message = nil
		for _, f := range s.MessageMap {
			message = append(message, f.Column)
		}
	}
	const keySQL = `SELECT format('%I.%I(%I,%I,', n.nspname, c.relname, $2::text, $3::text) ||
  CASE WHEN cardinality($4::text[]) = 1 AND NOT $5 THEN format('%I', $4[1])
  ELSE '{' || (SELECT string_agg(format('%I', m), ',' ORDER BY i) FROM unnest($4) WITH ORDINALITY AS x (m, i)) || '}' END || ')'
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = $1`
	if err := q.QueryRow(ctx, keySQL, oid, s.SessionColumn, s.OrderColumn, message, len(s.MessageMap) > 0).Scan(&t.key); err != nil {
		return t, fmt.Errorf("name table %q: %w", s.Table, err)
	}
	const indexSQL = `SELECT NOT EXISTS (SELECT 1 FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
WHERE i.indrelid = $1 AND i.indisvalid AND i.indpred IS NULL AND a.attname = $2)`
	if err := q.QueryRow(ctx, indexSQL, oid, s.SessionColumn).Scan(&t.noSessionIndex); err != nil {
		return t, fmt.Errorf("read indexes of %q: %w", s.Table, err)
	}
	return t, nil
}

// sessionIndexAdvice says what a table without an index that starts with its session
// column costs, and the index to add, or "" when it has one. tmend reads such a table
// session by session: without that index, each page of a full run sorts the rest of the
// table, and each session read alone or by an incremental run reads all of it.
func sessionIndexAdvice(s Source, t messageTypes) string {
	if !t.noSessionIndex {
		return ""
	}
	sid, ord := pgx.Identifier{s.SessionColumn}.Sanitize(), pgx.Identifier{s.OrderColumn}.Sanitize()
	return fmt.Sprintf("%s has no index that starts with its session column %s, so each page of a full run sorts the rest "+
		"of the table and each session read alone or by an incremental run reads all of it; add one: CREATE INDEX ON %s (%s, %s)",
		t.ident, sid, t.ident, sid, ord)
}

// checkMessagePrivileges: every column is read (versions keep whole rows); a repair
// inserts, updates and deletes rows, and may lock the table against appends while it
// places rows.
func checkMessagePrivileges(ctx context.Context, q querier, s Source, t messageTypes, readOnly bool) error {
	need := []string{"SELECT"}
	if !readOnly {
		need = append(need, "INSERT", "UPDATE", "DELETE")
	}
	seq := t.ordSeq
	if readOnly {
		seq = ""
	}
	// One round trip: the first privilege on the table this role lacks, and whether it
	// may use the order column's sequence.
	var missing string
	var seqOK bool
	err := q.QueryRow(ctx, `SELECT coalesce((SELECT p FROM unnest($2::text[]) WITH ORDINALITY AS u (p, i)
  WHERE NOT has_table_privilege($1::regclass, p) ORDER BY i LIMIT 1), ''),
  CASE WHEN $3 = '' THEN true ELSE has_sequence_privilege($3, 'USAGE') END`,
		t.ident, need, seq).Scan(&missing, &seqOK)
	if err != nil {
		return fmt.Errorf("check privileges on %q: %w", s.Table, err)
	}
	if missing != "" {
		return fmt.Errorf("%w: this role may not %s on %q (GRANT %s ON %s TO ...)", ErrSource, missing, s.Table, missing, t.ident)
	}
	if !seqOK {
		return fmt.Errorf("%w: this role may not use the sequence %s of %q's order column (GRANT USAGE ON SEQUENCE %s TO ...)",
			ErrSource, t.ordSeq, s.Table, t.ordSeq)
	}
	return nil
}

func openMessageLayout(ctx context.Context, pool *pgxpool.Pool, src Source, readOnly bool) (*messageLayout, error) {
	t, err := checkMessageSource(ctx, pool, src)
	if err == nil {
		err = checkMessagePrivileges(ctx, pool, src, t, readOnly)
	}
	if err != nil {
		return nil, err
	}
	return &messageLayout{pool: pool, src: src, t: t, sql: buildMessageSQL(src, t)}, nil
}

func (l *messageLayout) key() string { return l.t.key }

// hasUpdatedAt: incremental runs select the sessions with a row changed since the last
// run by the updated-at column, else with a row added, by a timestamp order column or
// a sequence's mark (see marked).
func (l *messageLayout) hasUpdatedAt() bool { return true }

// marked: incremental runs go by the sequence order's marks on the runs, not by times.
func (l *messageLayout) marked() bool { return l.src.UpdatedAtColumn == "" && !l.t.ordTime }

func buildMessageSQL(src Source, t messageTypes) messageSQL {
	q := func(name string) string { return pgx.Identifier{name}.Sanitize() }
	sid, pk, ord := "t."+q(src.SessionColumn), "t."+q(t.pkColumn), "t."+q(src.OrderColumn)
	// The message's JSON text, built from its fields: the message column's text, or an
	// object of the map's members (keys are from a set that needs no escaping).
	msg := "t." + q(t.fields[0].column) + "::text"
	if t.fields[0].key != "" {
		parts := make([]string, len(t.fields))
		for i, f := range t.fields {
			v := fmt.Sprintf("coalesce(to_json(t.%s)::text, 'null')", q(f.column))
			if f.raw {
				v = fmt.Sprintf("coalesce(t.%s::text, 'null')", q(f.column))
			}
			sep := ","
			if i == 0 {
				sep = "{"
			}
			parts[i] = fmt.Sprintf(`'%s"%s":' || %s`, sep, f.key, v)
		}
		msg = "(" + strings.Join(parts, " || ") + " || '}')"
	}
	order := ord + ", " + pk
	// Order values travel as integers: a timestamp as microseconds since 1970 (its wall
	// clock for a timestamp without time zone), exact both ways.
	ordKey := ord + "::int8"
	ordVal := func(p string) string { return p + "::" + t.ord }
	if t.ordTime {
		ordKey = fmt.Sprintf("round(extract(epoch FROM %s) * 1000000)::int8", ord)
		ordVal = func(p string) string {
			if t.ord == "timestamptz" {
				return fmt.Sprintf("(to_timestamp(0) + %s * interval '1 microsecond')", p)
			}
			return fmt.Sprintf("('epoch'::timestamp + %s * interval '1 microsecond')", p)
		}
	}
	// When a session last changed, for the quiet period: its latest updated-at, else its
	// latest order value when that is a time.
	ua, uaType := "NULL::timestamptz", "timestamptz"
	switch {
	case src.UpdatedAtColumn != "":
		ua, uaType = "t."+q(src.UpdatedAtColumn), t.updatedAt
	case t.ordTime:
		ua = ord
	}
	idParam := func(n int) string { return fmt.Sprintf("$%d::text::%s", n, t.sid) }
	sha := func(x string) string { return fmt.Sprintf("encode(sha256(convert_to(%s, 'UTF8')), 'hex')", x) }
	transcript := fmt.Sprintf("'[' || coalesce(string_agg(%s, ',' ORDER BY %s), '') || ']'", msg, order)
	rowsJSON := fmt.Sprintf("'[' || coalesce(string_agg(row_to_json(t)::text, ',' ORDER BY %s), '') || ']'", order)
	session := func(n int, lock string) string {
		return fmt.Sprintf("(SELECT * FROM %s t WHERE %s = %s%s) t", t.ident, sid, idParam(n), lock)
	}

	bounds := func(v, n int) []string {
		var conds []string
		if v&1 != 0 {
			n++
			conds = append(conds, fmt.Sprintf("%s > %s", sid, idParam(n)))
		}
		if v&2 != 0 {
			n++
			conds = append(conds, fmt.Sprintf("%s <= %s", sid, idParam(n)))
		}
		return conds
	}
	// The ordered read of full runs (see scanPage): the session id, the key, the order
	// value, the message and the xmin of each row, and its latest change when there is one.
	read := []string{sid + "::text", pk + "::text", ordKey, msg, "t.xmin"}
	if src.UpdatedAtColumn != "" || t.ordTime {
		read = append(read, ua+"::timestamptz")
	}
	cols := strings.Join(read, ", ")
	scan := func(conds []string, n int) string {
		return fmt.Sprintf("SELECT %s FROM %s t %s ORDER BY %s, %s LIMIT $%d", cols, t.ident, whereAll(conds...), sid, order, n+1)
	}
	// An incremental run's page: the first $1 sessions with a row in the window ($2, $3)
	// in session id order, and their rows as the ordered read gives them, each session's
	// through the (session, order) index (LATERAL: a generic plan hashed the whole table).
	// When the window holds few rows from the page's start on (fewer than 64 a session of
	// the page), the sessions are found from all of them, read through the index of the
	// window's column; else, as after a long pause, by walking the (session, order)
	// index from the page's start, which stops at the page's last session. The walk
	// alone read a quarter of the index for each page with 2% of 100k sessions changed,
	// and all of it for a run that found nothing. (Each subquery is ordered by the index
	// it is for, so that no plan takes another way.)
	as, outer := make([]string, len(read)), make([]string, len(read))
	for i, c := range read {
		as[i], outer[i] = fmt.Sprintf("%s AS c%d", c, i), fmt.Sprintf("r.c%d", i)
	}
	changedPage := func(window, by string, conds []string) string {
		where := whereAll(append([]string{window}, conds...)...)
		return fmt.Sprintf(`WITH c AS MATERIALIZED (SELECT %[1]s AS kid FROM %[2]s t %[3]s ORDER BY %[4]s LIMIT $1 * 64),
s AS ((SELECT DISTINCT kid FROM c WHERE (SELECT count(*) FROM c) < $1 * 64 ORDER BY 1 LIMIT $1)
  UNION ALL (SELECT DISTINCT %[1]s FROM %[2]s t %[3]s AND (SELECT count(*) FROM c) >= $1 * 64 ORDER BY 1 LIMIT $1))
SELECT %[5]s FROM s CROSS JOIN LATERAL (SELECT %[6]s, %[7]s AS o, %[8]s AS k FROM %[2]s t WHERE %[1]s = s.kid ORDER BY %[7]s, %[8]s) r
ORDER BY s.kid, r.o, r.k`, sid, t.ident, where, by, strings.Join(outer, ", "), strings.Join(as, ", "), ord, pk)
	}
	var s messageSQL
	s.alone = fmt.Sprintf("SELECT %s FROM %s t WHERE %s = %s ORDER BY %s", cols, t.ident, sid, idParam(1), order)
	s.holds = `SELECT session_id, content_hash FROM session_holds WHERE source_key = $1 AND session_id = ANY($2::text[])`
	s.anyHolds = `SELECT EXISTS (SELECT FROM session_holds WHERE source_key = $1)`
	for v := range 4 {
		conds := bounds(v, 0)
		s.scan[v] = scan(conds, len(conds))
		conds = append([]string{fmt.Sprintf("%s > %s", sid, idParam(1))}, bounds(v, 1)...)
		s.scanAfter[v] = scan(conds, len(conds))
		// The sessions with a row changed (or, by the order's time, added) in the window;
		// on a sequence, with a row above the mark of the latest completed run that
		// started at or before the window's start ($3), which is a run before the last one
		// when the window overlaps it: a row that took its value before that run started
		// and committed after is still read. No such run: all.
		window, by := fmt.Sprintf("%[1]s >= $2::timestamptz::%[2]s AND %[1]s < $3::timestamptz::%[2]s", ua, uaType), ua
		if src.UpdatedAtColumn == "" && !t.ordTime {
			window, by = markWindow(ord, "$2", "$3"), ord
		}
		s.incr[v] = changedPage(window, by, bounds(v, 3))
		s.incrAfter[v] = changedPage(window, by, append([]string{fmt.Sprintf("%s > %s", sid, idParam(4))}, bounds(v, 4)...))
	}
	if src.UpdatedAtColumn != "" || t.ordTime {
		s.changed = fmt.Sprintf(`EXPLAIN (FORMAT JSON) SELECT DISTINCT %s FROM %s t WHERE %s >= $1::timestamptz::%s`, sid, t.ident, ua, uaType)
	} else {
		s.changed = fmt.Sprintf(`EXPLAIN (FORMAT JSON) SELECT DISTINCT %s FROM %s t WHERE %s`, sid, t.ident, markWindow(ord, "$2", "$1"))
		s.orderMark = fmt.Sprintf(`SELECT max(%s)::int8 FROM %s t`, ord, t.ident)
	}
	s.split = fmt.Sprintf(`WITH s AS (SELECT %[1]s AS k FROM %[2]s t TABLESAMPLE SYSTEM ($2))
SELECT coalesce(array_agg(DISTINCT b ORDER BY b) FILTER (WHERE b < (SELECT k FROM s ORDER BY k DESC LIMIT 1)), '{}')::text[]
FROM unnest((SELECT percentile_disc($1::float8[]) WITHIN GROUP (ORDER BY k) FROM s)) AS u (b)`, sid, t.ident)
	// Sessions, not rows: the table's rows times the share of distinct session ids.
	s.estimate = `SELECT greatest(c.reltuples, 0) * CASE WHEN st.n_distinct IS NULL THEN 1
  WHEN st.n_distinct < 0 THEN -st.n_distinct ELSE least(st.n_distinct / nullif(greatest(c.reltuples, 1), 0), 1) END
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_stats st ON st.schemaname = n.nspname AND st.tablename = c.relname AND st.attname = $2
WHERE c.oid = $1::regclass`

	s.lock = fmt.Sprintf(`SELECT %s FROM %s`, sha(rowsJSON), session(1, " FOR UPDATE OF t"))
	s.transcriptHash = fmt.Sprintf(`SELECT %s FROM %s`, sha(transcript), session(1, ""))
	// A version is the session's rows, every column, as a JSON array in order.
	s.saveVersion = fmt.Sprintf(`INSERT INTO session_versions (source_key, session_id, version, kind, content, content_hash, size_bytes, run_id)
SELECT $2, $1, $3, $5, x.c, encode(sha256(convert_to(x.c, 'UTF8')), 'hex'), octet_length(x.c), $4
FROM (SELECT %s AS c FROM %s) x RETURNING content_hash, size_bytes`, rowsJSON, session(1, ""))

	// A write's check (see write), for the sessions of $1 (text ids): their rows locked
	// in session and key order, and for each session whether its rows are whole (none
	// skipped or deleted meanwhile) and still those read ($3: their keys in order as a
	// JSON array; $4: their xmins in order, joined by commas: a row updated or inserted
	// again since it was read has another), tmend's last version, and the rows as a
	// version's content (each row made JSON once), saved here as the session's prior
	// version when they match, unless the latest version holds them. In a batch
	// (check[1]) rows another transaction holds are skipped, so that concurrent batches
	// never wait for each other; a session's own write (check[0]) waits.
	check := func(skip string) string {
		return fmt.Sprintf(`WITH v AS (
  SELECT * FROM unnest($1::text[], $3::text[], $4::text[], $5::int8[]) AS v (sid, keys, xmins, run_id)
), x AS (
  SELECT r.kid, r.kid::text AS sid, array_agg(r.k::text ORDER BY r.o, r.k) AS keys,
    string_agg(r.xm::text, ',' ORDER BY r.o, r.k) AS xmins, '[' || string_agg(r.j, ',' ORDER BY r.o, r.k) || ']' AS c,
    count(*) = (SELECT count(*) FROM %[4]s w WHERE w.%[6]s = r.kid) AS whole
  FROM (SELECT %[1]s AS kid, %[2]s AS k, %[3]s AS o, t.xmin AS xm, row_to_json(t)::text AS j FROM %[4]s t
    WHERE %[1]s = ANY($1::text[]::%[5]s[]) ORDER BY %[1]s, %[2]s FOR UPDATE OF t%[7]s) r
  GROUP BY r.kid
), m AS (
  SELECT x.sid, x.c, encode(sha256(convert_to(x.c, 'UTF8')), 'hex') AS rh, v.run_id,
    coalesce(l.version, 0) AS last, l.content_hash AS last_hash, x.whole,
    x.whole AND to_jsonb(x.keys) = v.keys::jsonb AND x.xmins = v.xmins AS matched
  FROM x JOIN v USING (sid)
  LEFT JOIN LATERAL (SELECT version, content_hash FROM session_versions
    WHERE source_key = $2 AND session_id = x.sid ORDER BY version DESC LIMIT 1) l ON true
), original AS (
  INSERT INTO session_versions (source_key, session_id, version, kind, content, content_hash, size_bytes, run_id)
  SELECT $2, sid, last + 1, 'original', c, rh, octet_length(c), run_id FROM m WHERE matched AND last_hash IS DISTINCT FROM rh
)
SELECT sid, whole, matched, last, last_hash, rh FROM m`, sid, pk, ord, t.ident, t.sid, q(src.SessionColumn), skip)
	}
	s.check = [2]string{check(""), check(" SKIP LOCKED")}
	// The repaired versions and reports of a write's sessions, and the end of their
	// holds: v's rows are a session id, its version, run, prior version, sizes, the prior
	// version's hash, its keys as read (a JSON array), and its report. A repaired version
	// is the session's rows that were read or that this transaction wrote (after the
	// appends wait, at its top level): a message appended by the platform since the check
	// is not tmend's, and a rollback must not take it for tmend's write. The rows read
	// are locked, so those appends are the sessions' only rows neither read nor written
	// here: a set difference, hashed or sorted once, never a search of the keys read for
	// each row (that was quadratic: 56,000 rows took over 75 s). It is empty but for
	// such an append.
	s.saveRepairs = fmt.Sprintf(`WITH v AS (
  SELECT * FROM unnest($1::text[], $3::int[], $4::int8[], $5::int[], $6::int[], $7::int[], $8::text[], $9::text[], %[1]s)
    AS v (sid, n, run_id, from_v, size, after, before, keys, %[2]s)
), appended AS MATERIALIZED (
  SELECT %[9]s::text AS k FROM %[6]s t WHERE %[7]s = ANY($1::text[]::%[8]s[]) AND t.xmin <> pg_current_xact_id()::xid
  EXCEPT SELECT jsonb_array_elements_text(v.keys::jsonb) FROM v
), repaired AS (
  INSERT INTO session_versions (source_key, session_id, version, kind, content, content_hash, size_bytes, run_id)
  SELECT $2, v.sid, v.n, 'repaired', x.c, encode(sha256(convert_to(x.c, 'UTF8')), 'hex'), octet_length(x.c), v.run_id
  FROM v CROSS JOIN LATERAL (SELECT %[5]s AS c FROM (SELECT * FROM %[6]s t WHERE %[7]s = v.sid::%[8]s
    AND %[9]s::text NOT IN (SELECT k FROM appended)) t) x
  RETURNING session_id, content_hash
), unheld AS (
  DELETE FROM session_holds WHERE source_key = $2 AND session_id = ANY($1::text[])
)
INSERT INTO repair_reports (source_key, run_id, session_id, status, trigger, dialect, reason,
  issue_codes, stage_counts, actions, before_hash, after_hash, before_bytes, after_bytes, from_version, to_version,
  actor, tmend_version, host)
SELECT $2, v.run_id, v.sid, %[3]s, v.before, r.content_hash, v.size, v.after, v.from_v, v.n, %[4]s
FROM repaired r JOIN v ON v.sid = r.session_id`, reportUnnest(10), reportColumns, reportHead, reportTail,
		rowsJSON, t.ident, sid, t.sid, pk)

	// The writes. New rows copy the columns tmend does not set from a template row of
	// the session (the row before them); tmend sets the message's columns, the order
	// value, the NewRowColumns and, when it must, the primary key. $n+i is field i's
	// values (text), then each NewRowColumn's value (text).
	touch := ""
	if src.TouchUpdatedAt && src.UpdatedAtColumn != "" {
		touch = ", " + q(src.UpdatedAtColumn) + " = now()"
	}
	also := func(v string) string { return v + " AT TIME ZONE 'UTC'" }
	unnest := func(fixed ...string) (args, names string) {
		var a, nm []string
		for i, f := range fixed {
			typ, name, _ := strings.Cut(f, " ")
			a, nm = append(a, fmt.Sprintf("$%d::%s[]", i+1, typ)), append(nm, name)
		}
		for i := range t.fields {
			a, nm = append(a, fmt.Sprintf("$%d::text[]", len(fixed)+i+1)), append(nm, fmt.Sprintf("f%d", i))
		}
		return strings.Join(a, ", "), strings.Join(nm, ", ")
	}
	fieldOf := func(c string) int {
		return slices.IndexFunc(t.fields, func(f msgField) bool { return f.column == c })
	}
	newRowOf := func(c string) int {
		return slices.IndexFunc(src.NewRowColumns, func(v ColumnValue) bool { return v.Column == c })
	}
	var names, values []string
	for _, c := range t.columns {
		v := "s." + q(c)
		switch i, j := fieldOf(c), newRowOf(c); {
		case c == src.OrderColumn:
			v = ordVal("v.o")
		case c == t.pkColumn && t.pkExplicit:
			v = "v.k::" + t.pk
		case c == t.pkColumn && t.pkDefault:
			continue
		case i >= 0:
			// A member the message does not have is the template's (Mastra's type).
			v = fmt.Sprintf("coalesce(v.f%d::%s, s.%s)", i, t.fields[i].typ, q(c))
		case c == src.OrderAlsoColumn:
			v = also(ordVal("v.o"))
		case c == src.UpdatedAtColumn && touch != "":
			v = "now()"
		case j >= 0:
			v = fmt.Sprintf("$%d::text::%s", 3+len(t.fields)+j+1, t.newRow[j])
		}
		names, values = append(names, q(c)), append(values, v)
	}
	overriding := ""
	if t.overriding {
		overriding = " OVERRIDING SYSTEM VALUE"
	}
	args, cols := unnest("text tk", "int8 o", "text k")
	s.insert = fmt.Sprintf(`INSERT INTO %s AS t (%s)%s
SELECT %s FROM unnest(%s) WITH ORDINALITY AS v (%s, i)
JOIN %s s ON s.%s = v.tk::%s ORDER BY v.i`, t.ident, strings.Join(names, ", "), overriding, strings.Join(values, ", "),
		args, cols, t.ident, q(t.pkColumn), t.pk)
	s.delete = fmt.Sprintf(`DELETE FROM %s t WHERE %s = ANY($1::text[]::%s[])`, t.ident, pk, t.pk)
	sets := []string{fmt.Sprintf("%s = CASE WHEN v.r THEN %s ELSE %s END", q(src.OrderColumn), ordVal("v.o"), ord)}
	if src.OrderAlsoColumn != "" {
		sets = append(sets, fmt.Sprintf("%[1]s = CASE WHEN v.r THEN %[2]s ELSE t.%[1]s END", q(src.OrderAlsoColumn), also(ordVal("v.o"))))
	}
	for i, f := range t.fields {
		if !f.isPK {
			sets = append(sets, fmt.Sprintf("%[1]s = CASE WHEN v.c THEN v.f%[2]d::%[3]s ELSE t.%[1]s END", q(f.column), i, f.typ))
		}
	}
	args, cols = unnest("text k", "bool c", "int8 o", "bool r")
	s.update = fmt.Sprintf(`UPDATE %s t SET %s%s FROM unnest(%s) AS v (%s) WHERE %s = v.k::%s`,
		t.ident, strings.Join(sets, ", "), touch, args, cols, pk, t.pk)
	if t.ordSeq != "" {
		s.nextValues = `SELECT coalesce(array_agg(nextval($1::text::regclass)), '{}') FROM generate_series(1, $2)`
	}
	s.maxOrder = fmt.Sprintf(`SELECT coalesce(max(%s), 0)::int8 FROM %s t`, ord, t.ident)

	// Rollback: the session's rows made those of a saved version, every column as it
	// was, changing as few rows as it can: rows the version lacks are deleted, rows that
	// differ are updated in place (their key kept, so a row another table refers to,
	// such as the chatbot's "Vote_v2", stays), missing ones inserted: a key another
	// session holds now fails the insert, rather than a row left out.
	version := fmt.Sprintf(`json_populate_recordset(NULL::%s,
  (SELECT content FROM session_versions WHERE source_key = $3 AND session_id = $1 AND version = $2)::json) v`, t.ident)
	s.restoreDelete = fmt.Sprintf(`DELETE FROM %s t WHERE %s = %s AND NOT EXISTS (SELECT FROM %s WHERE v.%s = %s)`,
		t.ident, sid, idParam(1), version, q(t.pkColumn), pk)
	var quoted, restoreCols, restoreVals []string
	for _, c := range t.columns {
		quoted = append(quoted, q(c))
		// An identity column GENERATED ALWAYS cannot be set by UPDATE; a repair never
		// changes it in a row it keeps.
		if c != t.pkColumn && !slices.Contains(t.always, c) {
			restoreCols, restoreVals = append(restoreCols, q(c)), append(restoreVals, "v."+q(c))
		}
	}
	// A row's JSON text compares every column exactly (json has no equality).
	s.restoreUpdate = fmt.Sprintf(`UPDATE %s t SET (%s) = ROW(%s) FROM %s
WHERE %s = v.%s AND %s = %s AND row_to_json(t)::text <> row_to_json(v)::text`,
		t.ident, strings.Join(restoreCols, ", "), strings.Join(restoreVals, ", "), version, pk, q(t.pkColumn), sid, idParam(1))
	s.restoreInsert = fmt.Sprintf(`INSERT INTO %[1]s (%[2]s)%[3]s
SELECT %[2]s FROM %[4]s WHERE NOT EXISTS (SELECT FROM %[1]s x WHERE x.%[5]s = v.%[5]s AND x.%[6]s = %[7]s)`,
		t.ident, strings.Join(quoted, ", "), overriding, version, q(t.pkColumn), q(src.SessionColumn), idParam(1))
	return s
}

// markWindow is the condition on a sequence order of an incremental run whose window
// starts at the parameter start, for the source the parameter key names.
func markWindow(ord, key, start string) string {
	return fmt.Sprintf(`%s > coalesce((SELECT r.order_mark FROM repair_runs r WHERE r.source_key = %s AND r.status = 'completed'
  AND NOT r.dry_run AND r.order_mark IS NOT NULL AND r.started_at <= %s::timestamptz ORDER BY r.started_at DESC LIMIT 1), -9223372036854775808)`, ord, key, start)
}

// sessions reads a page: the rows of each session, assembled into its transcript (see
// scanPage).
func (l *messageLayout) sessions(ctx context.Context, q model.Query) ([]model.Session, error) {
	out, err := l.scanPage(ctx, q)
	if err != nil {
		return nil, classify(fmt.Errorf("read sessions: %w", err))
	}
	return out, nil
}

// queueBegin queues the start of a repair's transaction: BEGIN, the lock timeout and,
// when the write places rows on a sequence order (places), the wait for the appends in
// flight. A sequence hands out values in the order rows are inserted, not committed: a
// message appended by a transaction in flight may hold a value below those placed here,
// and land among them. So the fresh new values are taken first, and then the write waits
// for the table's writers in flight, by a SHARE ROW EXCLUSIVE lock that it drops at once
// (a lock taken in a subtransaction goes with its rollback): writers after that take
// values above these, and the rows are checked after the wait, so an append that landed
// in the session is a conflict. New writers wait only for that moment, not for this
// transaction. An order without a sequence takes max + 1, so its writes hold the lock
// until commit and are one at a time. It reports whether the values come from the
// sequence (else the write reads the maximum).
func (l *messageLayout) queueBegin(b *pgx.Batch, places bool, fresh int) (sequence bool) {
	b.Queue("BEGIN")
	b.Queue("SET LOCAL lock_timeout = '5s'")
	if l.orderKind() != orderSequence || !places {
		return false
	}
	lock := "LOCK TABLE " + l.t.ident + " IN SHARE ROW EXCLUSIVE MODE"
	if l.t.ordSeq == "" {
		b.Queue(lock)
		return false
	}
	b.Queue(l.sql.nextValues, l.t.ordSeq, fresh)
	b.Queue("SAVEPOINT appends")
	b.Queue(lock)
	b.Queue("ROLLBACK TO SAVEPOINT appends")
	b.Queue("RELEASE SAVEPOINT appends") // the writes at the top level: their xmin is the transaction's
	return true
}

// readBegin reads the results of what queueBegin queued: the sequence's new values,
// ascending, when it took them.
func (l *messageLayout) readBegin(br pgx.BatchResults, places bool) ([]int64, error) {
	exec := func(n int) error {
		for range n {
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		return nil
	}
	if err := exec(2); err != nil { // BEGIN, SET
		return nil, err
	}
	if l.orderKind() != orderSequence || !places {
		return nil, nil
	}
	if l.t.ordSeq == "" {
		return nil, exec(1) // LOCK
	}
	var values []int64
	if err := br.QueryRow().Scan(&values); err != nil {
		return nil, err
	}
	slices.Sort(values)
	return values, exec(4) // SAVEPOINT, LOCK, ROLLBACK TO, RELEASE
}

// prepared is a session's write before its transaction: how its rows change, and the
// columns of each message written.
type prepared struct {
	plan             rowPlan
	inserts, updates [][]*string
}

// orderKind is how new order values are found for the table's order column.
func (l *messageLayout) orderKind() orderKind {
	if l.t.ordTime {
		return orderTime
	}
	return orderSequence
}

// prepare plans a session's row changes and splits the messages written into columns.
func (l *messageLayout) prepare(a model.Apply) (prepared, error) {
	var p prepared
	if a.Origins == nil || a.Session.Rows == nil {
		return p, errors.New("a session kept one row per message is written by the origins of its messages")
	}
	plan, err := planRows(a.Session.Rows, a.Origins, l.orderKind())
	if err != nil {
		return p, fmt.Errorf("plan the rows: %w", err)
	}
	if len(plan.inserts) > 0 && !l.t.pkDefault && !l.t.pkExplicit && !l.t.ordIsPK {
		return p, fmt.Errorf("a new row needs a primary key, and column %q has no default and is not a text or uuid column", l.t.pkColumn)
	}
	p.plan = plan
	p.inserts = make([][]*string, len(plan.inserts))
	for i, r := range plan.inserts {
		if p.inserts[i], err = l.decompose(r.msg); err != nil {
			return p, err
		}
	}
	p.updates = make([][]*string, len(plan.updates))
	for i, u := range plan.updates {
		if u.msg != nil {
			if p.updates[i], err = l.decompose(u.msg); err != nil {
				return p, err
			}
		}
	}
	return p, nil
}

// queueRows queues the row changes of sessions' plans, their order values filled: one
// INSERT, one DELETE and one UPDATE for them all, each with the rows it must change.
func (l *messageLayout) queueRows(queue func(n int64, sql string, args ...any), ps []*prepared) {
	// Sized once: grown by append, the arrays of a session of hundreds of thousands of
	// rows left several times their size as garbage.
	var ni, nd, nu int
	for _, p := range ps {
		ni, nd, nu = ni+len(p.plan.inserts), nd+len(p.plan.deletes), nu+len(p.plan.updates)
	}
	tk, o, k, ins := make([]string, 0, ni), make([]int64, 0, ni), make([]*string, 0, ni), make([][]*string, 0, ni)
	dels := make([]string, 0, nd)
	keys, c, uo, r, ups := make([]string, 0, nu), make([]bool, 0, nu), make([]int64, 0, nu), make([]bool, 0, nu), make([][]*string, 0, nu)
	for _, p := range ps {
		for i, in := range p.plan.inserts {
			tk, o = append(tk, in.template), append(o, in.order)
			var key *string
			if l.t.pkExplicit {
				key = l.newKey(p.inserts[i])
			}
			k = append(k, key)
		}
		ins = append(ins, p.inserts...)
		dels = append(dels, p.plan.deletes...)
		for _, u := range p.plan.updates {
			keys, c, uo, r = append(keys, u.key), append(c, u.msg != nil), append(uo, u.order), append(r, u.reorder)
		}
		ups = append(ups, p.updates...)
	}
	if len(tk) > 0 {
		args := append([]any{tk, o, k}, l.fieldArrays(ins)...)
		for _, v := range l.src.NewRowColumns {
			args = append(args, v.Value)
		}
		queue(int64(len(tk)), l.sql.insert, args...)
	}
	if len(dels) > 0 {
		queue(int64(len(dels)), l.sql.delete, dels)
	}
	if len(keys) > 0 {
		queue(int64(len(keys)), l.sql.update, append([]any{keys, c, uo, r}, l.fieldArrays(ups)...)...)
	}
}

// referenced says what to do when a row the repair deletes is referenced by another
// table's foreign key (a vote on a duplicated message, for one): the transaction rolled
// back, so the session is as it was.
func referenced(err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != pgerrcode.ForeignKeyViolation {
		return err
	}
	return fmt.Errorf("a row the repair deletes is referenced by another table (%s, foreign key %q); the session is left as it was: "+
		"remove those references, or make the foreign key ON DELETE CASCADE or SET NULL, then run again: %w", pgErr.Detail, pgErr.ConstraintName, err)
}

// decompose splits a message into its fields' column values: the message itself for a
// message column; for a map, each member's JSON text (a raw field) or, for a string,
// the string. A member no field keeps is refused: writing the message would lose it
// (a sessionError: the session fails).
func (l *messageLayout) decompose(msg []byte) ([]*string, error) {
	if l.t.fields[0].key == "" {
		m := string(msg)
		return []*string{&m}, nil
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(msg, &members); err != nil {
		return nil, &sessionError{fmt.Errorf("a repaired message is not a JSON object: %w", err)}
	}
	out := make([]*string, len(l.t.fields))
	for i, f := range l.t.fields {
		raw, ok := members[f.key]
		delete(members, f.key)
		if !ok || string(raw) == "null" {
			continue
		}
		v := string(raw)
		if !f.raw && raw[0] == '"' {
			if err := json.Unmarshal(raw, &v); err != nil {
				return nil, &sessionError{fmt.Errorf("member %q: %w", f.key, err)}
			}
		}
		out[i] = &v
	}
	for k := range members {
		return nil, &sessionError{fmt.Errorf("a repaired message has a member %q that no column of the message map keeps", k)}
	}
	return out, nil
}

// fieldArrays turns messages' field values into one array a field, as the write
// statements take them (nil rows: unchanged messages).
func (l *messageLayout) fieldArrays(msgs [][]*string) []any {
	out := make([]any, len(l.t.fields))
	for i := range l.t.fields {
		col := make([]*string, len(msgs))
		for j, m := range msgs {
			if m != nil {
				col[j] = m[i]
			}
		}
		out[i] = col
	}
	return out
}

// newKey is a new row's primary key: the message's own id when the map keeps it in the
// key, else a random UUID.
func (l *messageLayout) newKey(fields []*string) *string {
	for i, f := range l.t.fields {
		if f.isPK && f.key != "" && fields[i] != nil {
			return fields[i]
		}
	}
	k := newUUID()
	return &k
}

// newUUID returns a random (version 4) UUID, for new rows of a table whose text or uuid
// primary key has no default.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

func (l *messageLayout) lock(ctx context.Context, tx pgx.Tx, id string) (*string, error) {
	var h *string
	err := tx.QueryRow(ctx, l.sql.lock, id).Scan(&h)
	return h, err
}

func (l *messageLayout) saveVersion(ctx context.Context, tx pgx.Tx, id string, n int, kind string, runID int64) (string, int, error) {
	var hash string
	var size int
	err := tx.QueryRow(ctx, l.sql.saveVersion, id, l.t.key, n, nilIfZero(runID), kind).Scan(&hash, &size)
	return hash, size, err
}

// restore makes the session's rows those of version n. Appends are kept out
// while it does, for the same reason as in apply.
func (l *messageLayout) restore(ctx context.Context, tx pgx.Tx, id string, n int) error {
	if _, err := tx.Exec(ctx, "LOCK TABLE "+l.t.ident+" IN SHARE ROW EXCLUSIVE MODE"); err != nil {
		return err
	}
	for _, q := range []string{l.sql.restoreDelete, l.sql.restoreUpdate, l.sql.restoreInsert} {
		if _, err := tx.Exec(ctx, q, id, n, l.t.key); err != nil {
			return err
		}
	}
	return nil
}

// holdHash: a version holds rows; a read session is the transcript they make.
func (l *messageLayout) holdHash(ctx context.Context, tx pgx.Tx, id, _ string) (string, error) {
	var h string
	err := tx.QueryRow(ctx, l.sql.transcriptHash, id).Scan(&h)
	return h, err
}

// transcript turns a version's rows back into the transcript they make, as the
// sessions read builds it: the message column's text, or the map's members.
func (l *messageLayout) transcript(content string) (string, error) {
	var rows []map[string]json.RawMessage
	if err := json.Unmarshal([]byte(content), &rows); err != nil {
		return "", fmt.Errorf("read saved rows: %w", err)
	}
	// text is a column's text as ::text gives it: a JSON string's contents, else the JSON.
	text := func(v json.RawMessage) (string, error) {
		if len(v) > 0 && v[0] == '"' {
			var s string
			err := json.Unmarshal(v, &s)
			return s, err
		}
		return string(v), nil
	}
	var b strings.Builder
	b.WriteByte('[')
	for i, r := range rows {
		if i > 0 {
			b.WriteByte(',')
		}
		for j, f := range l.t.fields {
			v := r[f.column]
			if len(v) == 0 {
				v = json.RawMessage("null")
			}
			if f.key != "" {
				b.WriteString(map[bool]string{true: "{", false: ","}[j == 0] + `"` + f.key + `":`)
			}
			if f.raw && (f.key == "" || string(v) != "null") {
				s, err := text(v)
				if err != nil {
					return "", fmt.Errorf("read saved rows: %w", err)
				}
				if f.key == "" || l.isTextColumn(f) {
					b.WriteString(s)
					continue
				}
			}
			b.Write(v)
		}
		if l.t.fields[0].key != "" {
			b.WriteByte('}')
		}
	}
	b.WriteByte(']')
	return b.String(), nil
}

// isTextColumn: a field whose column holds its JSON as text (row_to_json gives it as a
// string).
func (l *messageLayout) isTextColumn(f msgField) bool {
	return f.typ == "text" || f.typ == "character varying" || f.typ == "character"
}

func (l *messageLayout) estimateChanged(ctx context.Context, since time.Time) (float64, error) {
	args := []any{since}
	if l.marked() {
		args = append(args, l.t.key)
	}
	return estimateRows(ctx, l.pool, l.sql.changed, args...)
}

func (l *messageLayout) split(ctx context.Context, q querier, fractions []float64, percent float64) ([]string, error) {
	var bounds []string
	err := q.QueryRow(ctx, l.sql.split, fractions, percent).Scan(&bounds)
	return bounds, err
}

// estimateSessions is the number of sessions by the table's statistics: its rows times
// the share of distinct session ids.
func (l *messageLayout) estimateSessions(ctx context.Context, q querier) (float64, error) {
	var n float64
	err := q.QueryRow(ctx, l.sql.estimate, l.t.ident, l.src.SessionColumn).Scan(&n)
	return n, err
}
