package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Source says where the sessions are: tmend's own sessions table, or the user's table
// with its own column names.
type Source struct {
	// Table is "table" or "schema.table". An unqualified name is looked up on the
	// search_path, where tmend's schema comes first.
	Table string
	// Layout is how the table keeps sessions: LayoutSessions ("" too), one row per
	// session, or LayoutMessages, one row per message.
	Layout Layout
	// One row per session: its id and its messages array.
	IDColumn       string
	MessagesColumn string
	// One row per message: the session it belongs to, the column that orders a
	// session's rows (an integer or a timestamp; the primary key breaks ties), and the
	// message (json, jsonb or text holding one JSON object).
	SessionColumn, OrderColumn, MessageColumn string
	// MessageMap, instead of MessageColumn, assembles a message from several columns,
	// one member each: {"id": <id>, "role": <role>, "parts": <parts>}.
	MessageMap []MapField
	// OrderAlsoColumn is a timestamptz column holding the order column's time as well
	// (Mastra's "createdAtZ" beside "createdAt", a UTC wall clock): rows tmend places get
	// it too.
	OrderAlsoColumn string
	// NewRowColumns give columns of the rows tmend inserts (a row per message) a value
	// of their own, cast from text to the column's type, where they would otherwise
	// copy the row before (the columns tmend does not set): a preset's, such as the
	// chatbot's "attachments", [] on a message tmend writes, which has none.
	NewRowColumns   []ColumnValue
	UpdatedAtColumn string // optional; without it every run is a full run

	// How tmend writes (both off by default, so a repair changes nothing but the
	// messages column and tells nobody):

	// TouchUpdatedAt sets UpdatedAtColumn to now() (the transaction's start) in the
	// transaction that writes a repaired version or restores one, so that applications
	// ordering or caching by it see the change. It reorders users' session lists by
	// repair time, and the next incremental run reads the sessions it wrote again. It
	// needs UpdatedAtColumn and the UPDATE privilege on it.
	TouchUpdatedAt bool
	// NotifyChannel, when set, sends pg_notify(NotifyChannel, payload) in the same
	// transaction for every session repaired or rolled back, so listeners learn of it when
	// (and only if) it commits. The payload is JSON: {"source": Key(), "session_id": ...,
	// "version": the version now stored, "action": "repair" or "rollback"}.
	// DefaultNotifyChannel is the conventional name.
	NotifyChannel string
}

// DefaultNotifyChannel is the channel applications LISTEN on when NotifyChannel is set to it.
const DefaultNotifyChannel = "tmend_session_changed"

// DefaultSource is tmend's own sessions table.
var DefaultSource = Source{Table: "sessions", IDColumn: "id", MessagesColumn: "messages", UpdatedAtColumn: "updated_at"}

// MapField is one member of a message assembled from columns: the member Key holds
// Column's value, as JSON: a json or jsonb column's value as it is, a text column's as
// a string unless JSON is set (the column holds a JSON value as text), any other
// column's as to_json gives it.
type MapField struct {
	Key, Column string
	JSON        bool
}

// ColumnValue is a value for a column, as text.
type ColumnValue struct{ Column, Value string }

// ParseMessageMap reads a column map written key=column,... (key=column:json for a
// text column holding JSON), e.g. id=id,role=role,parts=parts. Keys are letters, digits,
// and _ $ -; columns are spelled as Postgres spells them ("createdAt" in quotes).
func ParseMessageMap(s string) ([]MapField, error) {
	var out []MapField
	seen := map[string]bool{}
	for _, item := range strings.Split(s, ",") {
		key, col, ok := strings.Cut(strings.TrimSpace(item), "=")
		f := MapField{Key: key, Column: col}
		if c, found := strings.CutSuffix(col, ":json"); found {
			f.Column, f.JSON = c, true
		}
		if !ok || !validKey(key) || f.Column == "" {
			return nil, fmt.Errorf("%w: message map %q: want key=column[:json],...", ErrSource, s)
		}
		if seen[key] {
			return nil, fmt.Errorf("%w: message map %q: key %q twice", ErrSource, s, key)
		}
		seen[key] = true
		out = append(out, f)
	}
	return out, nil
}

// validKey keeps message keys to a set that needs no escaping anywhere.
func validKey(k string) bool {
	if k == "" {
		return false
	}
	for _, r := range k {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '$' || r == '-') {
			return false
		}
	}
	return true
}

// Layout is how a table keeps its sessions.
type Layout string

// The layouts.
const (
	LayoutSessions Layout = "sessions" // one row per session, holding the messages array
	LayoutMessages Layout = "messages" // one row per message
	// LayoutLangGraph is LangGraph's PostgresSaver tables: Table names its checkpoints
	// table, whose schema holds checkpoint_blobs and checkpoint_writes too.
	LayoutLangGraph Layout = "langgraph"
)

// Name is what the source's incremental position (scan_state) and its runs' source
// column are kept under, never shown: users see the source's key (Store.Key), which
// names the table as it resolved, schema included.
func (s Source) Name() string {
	if s.Layout == LayoutLangGraph {
		return fmt.Sprintf("%s(langgraph)", s.Table)
	}
	if s.Layout == LayoutMessages {
		return fmt.Sprintf("%s(messages:%s,%s,%s,%s)", s.Table, s.SessionColumn, s.OrderColumn, s.messageName(), s.UpdatedAtColumn)
	}
	return fmt.Sprintf("%s(%s,%s,%s)", s.Table, s.IDColumn, s.MessagesColumn, s.UpdatedAtColumn)
}

// messageName is the message column, or the column map as written.
func (s Source) messageName() string {
	if len(s.MessageMap) == 0 {
		return s.MessageColumn
	}
	items := make([]string, len(s.MessageMap))
	for i, f := range s.MessageMap {
		items[i] = f.Key + "=" + f.Column
		if f.JSON {
			items[i] += ":json"
		}
	}
	return "{" + strings.Join(items, ",") + "}"
}

// ErrSource reports a source mapping that does not fit the database.
var ErrSource = errors.New("session source")

// sourceTypes are the SQL types a checked source's columns have, used to cast parameters
// so that comparisons use the columns' indexes. They come from a fixed list, never from
// user input.
type sourceTypes struct {
	id       string // text, uuid, bigint, integer
	messages string // jsonb, json, text
	// updatedAt is timestamptz or timestamp (the database's local time).
	updatedAt string
	ident     string // the quoted table name
	// key identifies the source in tmend's tables: the table as it resolved (schema
	// included) and the two columns that make a session, as format('%I.%I(%I,%I)') has it.
	key string
}

var idTypes = map[string]string{"text": "text", "varchar": "text", "bpchar": "text", "uuid": "uuid",
	"int8": "bigint", "int4": "integer", "int2": "smallint"}

var messagesTypes = map[string]string{"jsonb": "jsonb", "json": "json", "text": "text", "varchar": "text"}

var updatedAtTypes = map[string]bool{"timestamptz": true, "timestamp": true}

func (s Source) identifier() pgx.Identifier {
	parts, _ := splitIdentifier(s.Table) // checked by normalize
	return pgx.Identifier(parts)
}

// splitIdentifier splits a name as Postgres spells it into its dot-separated parts: a
// part in double quotes is taken exactly, dots and all ("" is a quote); an unquoted part
// is taken as written up to the next dot, quotes and all (not folded to lower case:
// Message_v2 names "Message_v2", as it always has in tmend's options).
func splitIdentifier(s string) ([]string, error) {
	var parts []string
	for i := 0; ; {
		var part strings.Builder
		if i < len(s) && s[i] == '"' {
			i++
			for {
				j := strings.IndexByte(s[i:], '"')
				if j < 0 {
					return nil, fmt.Errorf("name %q: unterminated quote", s)
				}
				part.WriteString(s[i : i+j])
				i += j + 1
				if i < len(s) && s[i] == '"' {
					part.WriteByte('"')
					i++
					continue
				}
				break
			}
		} else {
			j := strings.IndexByte(s[i:], '.')
			if j < 0 {
				j = len(s) - i
			}
			part.WriteString(s[i : i+j])
			i += j
		}
		if part.Len() == 0 {
			return nil, fmt.Errorf("name %q: empty part", s)
		}
		parts = append(parts, part.String())
		switch {
		case i == len(s):
			return parts, nil
		case s[i] != '.':
			return nil, fmt.Errorf("name %q: a quoted part must end at a dot", s)
		}
		i++
	}
}

// column returns a column name as Postgres spells it (see splitIdentifier).
func column(name string) (string, error) {
	if name == "" {
		return "", nil
	}
	parts, err := splitIdentifier(name)
	if err == nil && len(parts) != 1 {
		err = fmt.Errorf("column %q: want one name, not a qualified one", name)
	}
	if err != nil {
		return "", err
	}
	return parts[0], nil
}

// normalize checks the names of the table and columns and takes the quotes off the
// columns, so that the checks and the statements use them as Postgres has them.
func (s Source) normalize() (Source, error) {
	parts, err := splitIdentifier(s.Table)
	switch {
	case s.Table == "":
		return s, nil // the layout's check says what is missing
	case err != nil:
		return s, fmt.Errorf("%w: table: %v", ErrSource, err)
	case len(parts) > 2:
		return s, fmt.Errorf("%w: table %q: want table or schema.table", ErrSource, s.Table)
	}
	for _, c := range []*string{&s.IDColumn, &s.MessagesColumn, &s.SessionColumn, &s.OrderColumn, &s.MessageColumn,
		&s.UpdatedAtColumn, &s.OrderAlsoColumn} {
		if *c, err = column(*c); err != nil {
			return s, fmt.Errorf("%w: %v", ErrSource, err)
		}
	}
	fields := make([]MapField, len(s.MessageMap))
	for i, f := range s.MessageMap {
		fields[i] = f
		if fields[i].Column, err = column(f.Column); err != nil {
			return s, fmt.Errorf("%w: %v", ErrSource, err)
		}
	}
	s.MessageMap = fields
	values := make([]ColumnValue, len(s.NewRowColumns))
	for i, v := range s.NewRowColumns {
		values[i] = v
		if values[i].Column, err = column(v.Column); err != nil {
			return s, fmt.Errorf("%w: %v", ErrSource, err)
		}
	}
	s.NewRowColumns = values
	return s, nil
}

// lookupTable checks the write settings every layout shares, quotes s's table name and
// finds the table's oid.
func lookupTable(ctx context.Context, q querier, s Source) (ident string, oid uint32, err error) {
	if err := checkWriteSettings(s); err != nil {
		return "", 0, err
	}
	ident = s.identifier().Sanitize()
	var found *uint32
	if err := q.QueryRow(ctx, "SELECT to_regclass($1)::oid", ident).Scan(&found); err != nil {
		return ident, 0, fmt.Errorf("look up table %q: %w", s.Table, err)
	}
	if found == nil {
		return ident, 0, errNoTable(s)
	}
	return ident, *found, nil
}

// checkWriteSettings checks the write settings every layout shares.
func checkWriteSettings(s Source) error {
	switch {
	case s.TouchUpdatedAt && s.UpdatedAtColumn == "":
		return fmt.Errorf("%w: touching the updated-at column needs one", ErrSource)
	case len(s.NotifyChannel) > maxChannelBytes:
		return fmt.Errorf("%w: notify channel %q is longer than %d bytes", ErrSource, s.NotifyChannel, maxChannelBytes)
	}
	return nil
}

func errNoTable(s Source) error {
	if len(s.identifier()) > 1 {
		return fmt.Errorf("%w: table %q does not exist", ErrSource, s.Table)
	}
	return fmt.Errorf("%w: table %q does not exist in tmend's schema or in public (give schema.table for a table elsewhere)", ErrSource, s.Table)
}

// sourceColumnsSQL reads what checkSource checks in one round trip: whether table $1
// exists, its key ($2, $3 the id and messages columns), and its columns, each with its
// type and whether this role may select and update it. A table that does not exist is
// one row of NULLs but the first.
const sourceColumnsSQL = `SELECT r.oid IS NOT NULL,
  CASE WHEN c.oid IS NOT NULL THEN format('%I.%I(%I,%I)', n.nspname, c.relname, $2::text, $3::text) END,
  a.attname, t.typname, has_column_privilege(r.oid, a.attnum, 'SELECT'), has_column_privilege(r.oid, a.attnum, 'UPDATE')
FROM (SELECT to_regclass($1)::oid AS oid) r
LEFT JOIN pg_class c ON c.oid = r.oid
LEFT JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_attribute a ON a.attrelid = r.oid AND a.attnum > 0 AND NOT a.attisdropped
LEFT JOIN pg_type t ON t.oid = a.atttypid`

// checkSource verifies that the table and columns exist with usable types and that this
// role may read (and, unless readOnly, update) the table.
func checkSource(ctx context.Context, q querier, s Source, readOnly bool) (sourceTypes, error) {
	var t sourceTypes
	switch {
	case s.Table == "" || s.IDColumn == "" || s.MessagesColumn == "":
		return t, fmt.Errorf("%w: table, id column and messages column are required", ErrSource)
	}
	if err := checkWriteSettings(s); err != nil {
		return t, err
	}
	t.ident = s.identifier().Sanitize()
	type column struct {
		typ                string
		selectOK, updateOK bool
	}
	cols := map[string]column{}
	exists := false
	rows, err := q.Query(ctx, sourceColumnsSQL, once, t.ident, s.IDColumn, s.MessagesColumn)
	if err != nil {
		return t, fmt.Errorf("read columns of %q: %w", s.Table, err)
	}
	var key, name, typName *string
	var sel, upd *bool
	_, err = pgx.ForEachRow(rows, []any{&exists, &key, &name, &typName, &sel, &upd}, func() error {
		if key != nil {
			t.key = *key
		}
		if name != nil {
			cols[*name] = column{typ: *typName, selectOK: *sel, updateOK: *upd}
		}
		return nil
	})
	if err != nil {
		return t, fmt.Errorf("read columns of %q: %w", s.Table, err)
	}
	if !exists {
		return t, errNoTable(s)
	}
	col := func(name, role string, allowed func(string) bool, want string) (string, error) {
		c, ok := cols[name]
		if !ok {
			return "", fmt.Errorf("%w: table %q has no %s column %q", ErrSource, s.Table, role, name)
		}
		if !allowed(c.typ) {
			return "", fmt.Errorf("%w: %s column %q of %q is %s; want %s", ErrSource, role, name, s.Table, c.typ, want)
		}
		return c.typ, nil
	}
	typ, err := col(s.IDColumn, "id", func(t string) bool { return idTypes[t] != "" }, "text, uuid or an integer type")
	if err != nil {
		return t, err
	}
	t.id = idTypes[typ]
	if typ, err = col(s.MessagesColumn, "messages", func(t string) bool { return messagesTypes[t] != "" }, "jsonb, json or text"); err != nil {
		return t, err
	}
	t.messages = messagesTypes[typ]
	if s.UpdatedAtColumn != "" {
		typ, err := col(s.UpdatedAtColumn, "updated-at", func(t string) bool { return updatedAtTypes[t] }, "timestamptz or timestamp")
		if err != nil {
			return t, err
		}
		t.updatedAt = typ
	}
	// Column privileges, so a role granted only SELECT (id, messages, updated_at) and
	// UPDATE (messages) passes: that is all tmend needs.
	type need struct{ column, priv string }
	needs := []need{{s.IDColumn, "SELECT"}, {s.MessagesColumn, "SELECT"}}
	if s.UpdatedAtColumn != "" {
		needs = append(needs, need{s.UpdatedAtColumn, "SELECT"})
	}
	if !readOnly {
		needs = append(needs, need{s.MessagesColumn, "UPDATE"})
		if s.TouchUpdatedAt {
			needs = append(needs, need{s.UpdatedAtColumn, "UPDATE"})
		}
	}
	for _, n := range needs {
		ok := cols[n.column].selectOK
		if n.priv == "UPDATE" {
			ok = cols[n.column].updateOK
		}
		if !ok {
			return t, fmt.Errorf("%w: this role may not %s column %q of %q (GRANT %s (%s) ON %s TO ...)",
				ErrSource, n.priv, n.column, s.Table, n.priv, pgx.Identifier{n.column}.Sanitize(), t.ident)
		}
	}
	return t, nil
}
