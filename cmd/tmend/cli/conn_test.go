package cli

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/store/storetest"
)

// TestNoDatabaseConfigured: without a URL or a libpq variable, a command that needs the
// database says how to configure one (exit 2) instead of trying the local socket as the
// OS user; a libpq variable alone counts as configured.
func TestNoDatabaseConfigured(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"scan"}, {"report"}, {"import", "-"}, {"migrate", "up"}, {"prune", "--older-than", "1d"}} {
		r := runCLI(t, "", nil, args...)
		require.Equal(t, ExitUsage, r.code, "%v: %s", args, r.stderr)
		for _, hint := range []string{"no database configured", "--database-url postgres://", "TMEND_DATABASE_URL", "PGHOST"} {
			require.Contains(t, r.stderr, hint, "%v", args)
		}
		require.NotContains(t, r.stderr, "connect to database", "%v", args)
	}
	// pgx reads PG* from the process environment, not runCLI's, so this one tries the
	// default socket: what matters is that it tries.
	r := runCLI(t, "", map[string]string{"PGHOST": "/nonexistent"}, "report")
	require.Equal(t, ExitRuntime, r.code, r.stderr)
	require.NotContains(t, r.stderr, "no database configured")
}

// TestConnectingLine: the line naming the database is a debug line on the command line,
// with each part its own field, quoted once.
func TestConnectingLine(t *testing.T) {
	t.Parallel()
	url := storetest.NewDBURL(t)
	env := map[string]string{"TMEND_DATABASE_URL": url}

	r := runCLI(t, "", env, "report")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.NotContains(t, r.stderr, "connecting")

	r = runCLI(t, "", env, "report", "--log-level", "debug")
	require.Equal(t, ExitOK, r.code, r.stderr)
	var line string
	for _, l := range strings.Split(r.stderr, "\n") {
		if strings.Contains(l, `"message":"connecting"`) {
			line = l
		}
	}
	require.NotEmpty(t, line, r.stderr)
	require.Contains(t, line, `"level":"debug"`)
	require.Regexp(t, `"database":"tmend_test_[0-9a-f]+"`, line)
	require.NotContains(t, line, `\"`)
}
