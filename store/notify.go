package store

import (
	"encoding/json"

	"github.com/jackc/pgx/v5"
)

// What Source.TouchUpdatedAt and Source.NotifyChannel add to the statements that write a
// session's content.

// maxChannelBytes is the longest channel name Postgres takes (NAMEDATALEN - 1).
const maxChannelBytes = 63

// notifySQL sends a notification that is delivered when the transaction commits.
const notifySQL = `SELECT pg_notify($1, $2)`

// notifyBatchSQL sends one notification a payload of $2 to the channel $1.
const notifyBatchSQL = `SELECT pg_notify($1, p) FROM unnest($2::text[]) p`

// The actions a notification reports.
const (
	actionRepair   = "repair"
	actionRollback = "rollback"
)

// touchSQL is the SET clause's tail that sets the updated-at column to the transaction's
// time, or nothing. A timestamp (without time zone) column gets the database's wall clock,
// as tmend reads it.
func touchSQL(src Source) string {
	if !src.TouchUpdatedAt || src.UpdatedAtColumn == "" {
		return ""
	}
	return ", " + pgx.Identifier{src.UpdatedAtColumn}.Sanitize() + " = now()"
}

// notifyPayload is the JSON a listener receives. Postgres refuses payloads of 8000 bytes
// or more, which only a session id of nearly that length reaches.
func notifyPayload(key, sessionID string, version int, action string) string {
	b, _ := json.Marshal(struct {
		Source    string `json:"source"`
		SessionID string `json:"session_id"`
		Version   int    `json:"version"`
		Action    string `json:"action"`
	}{key, sessionID, version, action}) // strings and an int: cannot fail
	return string(b)
}
