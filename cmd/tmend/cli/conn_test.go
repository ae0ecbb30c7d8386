package cli

import (
	"regexp"
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

// TestImportIsAllOrNothing: a JSON array, a bad line or an id given twice, even after a
// full batch, imports nothing and says so; blank lines are skipped.
func TestImportIsAllOrNothing(t *testing.T) {
	t.Parallel()
	b := setupDB(t, 0, "0")
	lines := strings.SplitAfter(genJSONL(t, "--sessions", "1500", "--messages", "4"), "\n")
	lines = lines[:len(lines)-1] // the empty string after the last newline
	sessions := func() int { return b.count(t, "SELECT count(*) FROM sessions") }

	for name, tc := range map[string]struct{ input, want string }{
		"Array":       {"[" + strings.Join(lines[:2], ",") + "]\n", "the input is a JSON array, not JSON Lines"},
		"PrettyArray": {"[\n" + lines[0] + "]\n", "the input is a JSON array, not JSON Lines"},
		"DuplicateID": {strings.Join(lines, "") + lines[3], `line 1501: session id "s-000003" is also on line 4`},
		"BadLine":     {strings.Join(lines, "") + "{\"id\": 1\n", "line 1501:"},
		"NULEscape": {strings.Join(lines, "") + `{"id":"nul","messages":[{"role":"user","content":"a\\\u0000"}]}` + "\n",
			`line 1501: session "nul" holds the escape \u0000 (a NUL character), which Postgres jsonb cannot store; remove it`},
		"NotUTF8": {strings.Join(lines, "") + "{\"id\":\"latin1\",\"messages\":[{\"role\":\"user\",\"content\":\"caf\xe9\"}]}\n",
			"line 1501 is not UTF-8 text, which Postgres needs"},
		"NULInID": {strings.Join(lines, "") + `{"id":"a\u0000b","messages":[]}` + "\n",
			`line 1501: session id "a\x00b" holds a NUL character`},
	} {
		r := runCLI(t, tc.input, b.env, "import", "-")
		require.Equal(t, ExitRuntime, r.code, name)
		require.Contains(t, r.stderr, tc.want, name)
		require.Contains(t, r.stderr, "nothing was imported", name)
		require.Zero(t, sessions(), name)
	}

	// An escaped backslash before "u0000" is text, not a NUL.
	backslash := `{"id":"backslash","messages":[{"role":"user","content":"C:\\u0000"}]}`
	r := runCLI(t, "\n"+strings.Join(lines[:10], "\n \n")+"\n\n"+backslash+"\n", b.env, "import", "-")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "imported 11 sessions")
	require.Equal(t, 11, sessions())
}

// TestCheckHelpsPsqlExample: the query in check's example turns a table into JSON Lines
// that check reads, broken sessions found, none unreadable.
func TestCheckHelpsPsqlExample(t *testing.T) {
	t.Parallel()
	b := setupDB(t, 40, "0.5")
	example := newCheckCmd(&Env{}).Example
	m := regexp.MustCompile(`psql "\$DATABASE_URL" -AtXc "([^"]+)" \| tmend check -`).FindStringSubmatch(example)
	require.NotNil(t, m, example)
	rows, err := b.pool.Query(t.Context(), m[1])
	require.NoError(t, err)
	var in strings.Builder
	for rows.Next() {
		var line string
		require.NoError(t, rows.Scan(&line)) // as psql -At prints it: jsonb text, one line
		in.WriteString(line + "\n")
	}
	require.NoError(t, rows.Err())
	r := runCLI(t, in.String(), nil, "check", "--json", "-")
	require.Equal(t, ExitProblems, r.code, r.stderr)
	statuses := map[string]int{}
	for _, l := range jsonLines(t, r.stdout) {
		if s, ok := l["status"].(string); ok {
			statuses[s]++
		}
	}
	require.Positive(t, statuses["broken"], r.stdout)
	require.Equal(t, 40, statuses["broken"]+statuses["clean"], r.stdout)
}
