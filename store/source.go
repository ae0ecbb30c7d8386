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
	UpdatedAtColumn                           string // optional; without it every run is a full run

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

// Layout is how a table keeps its sessions.
type Layout string

// The layouts.
const (
	LayoutSessions Layout = "sessions" // one row per session, holding the messages array
	LayoutMessages Layout = "messages" // one row per message
)

// Layouts lists the layouts.
func Layouts() []Layout { return []Layout{LayoutSessions, LayoutMessages} }

// Name identifies the source in runs and scan state.
func (s Source) Name() string {
	if s.Layout == LayoutMessages {
		return fmt.Sprintf("%s(messages:%s,%s,%s,%s)", s.Table, s.SessionColumn, s.OrderColumn, s.MessageColumn, s.UpdatedAtColumn)
	}
	return fmt.Sprintf("%s(%s,%s,%s)", s.Table, s.IDColumn, s.MessagesColumn, s.UpdatedAtColumn)
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
	return pgx.Identifier(strings.Split(s.Table, "."))
}

// checkSource verifies that the table and columns exist with usable types and that this
// role may read (and, unless readOnly, update) the table.
func checkSource(ctx context.Context, q querier, s Source, readOnly bool) (sourceTypes, error) {
	var t sourceTypes
	switch {
	case s.Table == "" || s.IDColumn == "" || s.MessagesColumn == "":
		return t, fmt.Errorf("%w: table, id column and messages column are required", ErrSource)
	case strings.Count(s.Table, ".") > 1:
		return t, fmt.Errorf("%w: table %q: want table or schema.table", ErrSource, s.Table)
	case s.TouchUpdatedAt && s.UpdatedAtColumn == "":
		return t, fmt.Errorf("%w: touching the updated-at column needs one", ErrSource)
	case len(s.NotifyChannel) > maxChannelBytes:
		return t, fmt.Errorf("%w: notify channel %q is longer than %d bytes", ErrSource, s.NotifyChannel, maxChannelBytes)
	}
	t.ident = s.identifier().Sanitize()
	var oid *uint32
	if err := q.QueryRow(ctx, "SELECT to_regclass($1)::oid", t.ident).Scan(&oid); err != nil {
		return t, fmt.Errorf("look up table %q: %w", s.Table, err)
	}
	if oid == nil {
		return t, fmt.Errorf("%w: table %q does not exist (or is not on the search_path)", ErrSource, s.Table)
	}
	const columnsSQL = `SELECT a.attname, t.typname FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped`
	rows, err := q.Query(ctx, columnsSQL, *oid)
	if err != nil {
		return t, fmt.Errorf("read columns of %q: %w", s.Table, err)
	}
	cols, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([2]string, error) {
		var c [2]string
		return c, r.Scan(&c[0], &c[1])
	})
	if err != nil {
		return t, fmt.Errorf("read columns of %q: %w", s.Table, err)
	}
	const keySQL = `SELECT format('%I.%I(%I,%I)', n.nspname, c.relname, $2::text, $3::text)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = $1`
	if err := q.QueryRow(ctx, keySQL, *oid, s.IDColumn, s.MessagesColumn).Scan(&t.key); err != nil {
		return t, fmt.Errorf("name table %q: %w", s.Table, err)
	}
	typeOf := map[string]string{}
	for _, c := range cols {
		typeOf[c[0]] = c[1]
	}
	col := func(name, role string, allowed func(string) bool, want string) (string, error) {
		typ, ok := typeOf[name]
		if !ok {
			return "", fmt.Errorf("%w: table %q has no %s column %q", ErrSource, s.Table, role, name)
		}
		if !allowed(typ) {
			return "", fmt.Errorf("%w: %s column %q of %q is %s; want %s", ErrSource, role, name, s.Table, typ, want)
		}
		return typ, nil
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
	need := map[string][]string{s.IDColumn: {"SELECT"}, s.MessagesColumn: {"SELECT"}}
	if s.UpdatedAtColumn != "" {
		need[s.UpdatedAtColumn] = []string{"SELECT"}
	}
	if !readOnly {
		need[s.MessagesColumn] = append(need[s.MessagesColumn], "UPDATE")
		if s.TouchUpdatedAt {
			need[s.UpdatedAtColumn] = append(need[s.UpdatedAtColumn], "UPDATE")
		}
	}
	for column, privs := range need {
		for _, p := range privs {
			var ok bool
			if err := q.QueryRow(ctx, "SELECT has_column_privilege($1::oid, $2, $3)", *oid, column, p).Scan(&ok); err != nil {
				return t, fmt.Errorf("check privileges on %q: %w", s.Table, err)
			}
			if !ok {
				return t, fmt.Errorf("%w: this role may not %s column %q of %q (GRANT %s (%s) ON %s TO ...)",
					ErrSource, p, column, s.Table, p, pgx.Identifier{column}.Sanitize(), t.ident)
			}
		}
	}
	return t, nil
}
