package store

import (
	"errors"
	"testing"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/store/model"
)

// A server that refuses what tmend sent (protocol violation, FATAL) would refuse it
// again: the session fails rather than being retried as an outage for ever.
func TestProtocolViolationIsNotAnOutage(t *testing.T) {
	t.Parallel()
	for code, outage := range map[string]bool{
		pgerrcode.ProtocolViolation:                       false,
		pgerrcode.ConnectionFailure:                       true,
		pgerrcode.AdminShutdown:                           true,
		pgerrcode.UniqueViolation:                         false,
		pgerrcode.SQLClientUnableToEstablishSQLConnection: true,
	} {
		err := classify(&pgconn.PgError{Severity: "FATAL", Code: code})
		require.Equal(t, outage, errors.Is(err, model.ErrUnavailable), code)
	}
}
