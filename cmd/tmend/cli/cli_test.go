package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"go.yaml.in/yaml/v3"

	"github.com/tmend/tmend/cmd/tmend/daemon"
	"github.com/tmend/tmend/migrations"
	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/store/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// pgx's pool health checker and the race detector's helpers outlive single tests.
		goleak.IgnoreTopFunction("github.com/jackc/pgx/v5/pgxpool.(*Pool).backgroundHealthCheck"),
	)
}

type result struct {
	code           int
	stdout, stderr string
}

// noEnv is an empty environment.
func noEnv(string) string { return "" }

// runCLI runs tmend in-process with the given environment (nothing else leaks in).
func runCLI(t *testing.T, stdin string, envs map[string]string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	getenv := func(k string) string { return envs[k] }
	code := Run(context.Background(), args, Env{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errb, Getenv: getenv})
	return result{code, out.String(), errb.String()}
}

func TestUsage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		code int
		out  string
	}{
		{"Help", []string{"--help"}, ExitOK, "Exit codes:"},
		{"CheckHelpExplainsStages", []string{"check", "--help"}, ExitOK,
			"  synthesize_missing_results    " + repair.StageSynthesizeMissingResults.Meaning() + "\n"},
		{"Version", []string{"version"}, ExitOK, "tmend dev"},
		{"VersionJSON", []string{"version", "--json"}, ExitOK, fmt.Sprintf(`"schema_version":%d,"river_schema_version":%d}`,
			migrations.Latest(), migrations.RiverLatest())},
		{"VersionFlag", []string{"--version"}, ExitOK, "tmend dev"},
		{"UnknownCommand", []string{"frobnicate"}, ExitUsage, ""},
		{"MistypedCommand", []string{"scna"}, ExitUsage, ""},
		{"UnknownFlag", []string{"version", "--nope"}, ExitUsage, ""},
		{"ExtraArgs", []string{"version", "x"}, ExitUsage, ""},
		{"MigrateDownNeedsCount", []string{"migrate", "down"}, ExitUsage, ""},
		{"MigrateDownBadCount", []string{"migrate", "down", "zero"}, ExitUsage, ""},
		{"MigrateDownTwoCounts", []string{"migrate", "down", "1", "2"}, ExitUsage, ""},
		{"MigrateUnknown", []string{"migrate", "bogus"}, ExitUsage, ""},
		{"MigrateAlone", []string{"migrate"}, ExitOK, "Available Commands:"},
		{"ImportTwoFiles", []string{"import", "a", "b"}, ExitUsage, ""},
		{"MigrateForceNeedsVersion", []string{"migrate", "force"}, ExitUsage, ""},
		{"BadDatabaseURL", []string{"migrate", "version", "--database-url", "postgres://a b@:x"}, ExitUsage, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := runCLI(t, "", nil, tt.args...)
			require.Equal(t, tt.code, r.code, "stdout=%s stderr=%s", r.stdout, r.stderr)
			require.Contains(t, r.stdout, tt.out)
			if tt.code != ExitOK {
				require.Contains(t, r.stderr, "tmend: ")
				require.NotContains(t, r.stderr, `\n`, "one message a line, with no escaped line breaks")
			}
		})
	}
}

func TestBadDatabaseURLSaysWhatOneLooksLike(t *testing.T) {
	t.Parallel()
	r := runCLI(t, "", nil, "migrate", "version", "--database-url", "mysql://app@db/x")
	require.Equal(t, ExitUsage, r.code)
	require.Contains(t, r.stderr, "(want postgres://USER:PASSWORD@HOST:PORT/DBNAME?OPTIONS, or libpq's key=value form)")
}

func TestUnknownPresetListsThePresets(t *testing.T) {
	t.Parallel()
	r := runCLI(t, "", nil, "scan", "--preset", "langchain")
	require.Equal(t, ExitUsage, r.code)
	require.True(t, strings.HasPrefix(r.stderr, `tmend: --preset "langchain": no such preset (want one of ai-sdk-chatbot, langchain-postgres, langgraph, mastra)`+"\n"), r.stderr)
}

func TestMistypedCommandSuggestsOnOneLine(t *testing.T) {
	t.Parallel()
	r := runCLI(t, "", nil, "rollbak")
	require.Equal(t, ExitUsage, r.code)
	require.True(t, strings.HasPrefix(r.stderr, "tmend: unknown command \"rollbak\" for \"tmend\"; did you mean rollback?\n"), r.stderr)
}

// TestOptionsAreValidatedBeforeConnecting: every command's options are checked before
// it opens the database (unreachable here, which would be exit 1).
func TestOptionsAreValidatedBeforeConnecting(t *testing.T) {
	t.Parallel()
	envs := map[string]string{"TMEND_DATABASE_URL": "postgres://127.0.0.1:1/x?connect_timeout=2"}
	for _, args := range [][]string{
		{"scan", "--full", "--session", "x"},
		{"scan", "--limit", "-1"},
		{"scan", "--workers", "many"},
		{"scan", "--max-inflight-bytes", "0"},
		{"scan", "--workers", "-1"},
		{"worker", "--batch-size", "0"},
		{"serve", "--max-bytes", "0"},
		{"repair", "--session", "x", "--max-bytes", "-1"},
		{"scan", "--dialect", "klingon"},
		{"scan", "--log-level", "loud"},
		{"repair"},
		{"report", "--diff"},
		{"report", "--version", "3"},
		{"report", "--session", "x", "--diff", "--version", "1"},
		{"report", "--since", "yesterday"},
		{"report", "--status", "repaird"},
		{"rollback"},
		{"rollback", "--session", "x", "--run", "1"},
		{"rollback", "--run", "1", "--to-version", "2"},
		{"prune", "--older-than", "1d1x"},
		{"prune", "--older-than", "0d"},
		{"serve", "--prune-schedule", "@daily", "--prune-older-than", "-1d"},
		{"import", "--log-level", "loud"},
		{"migrate", "down", "1", "--all"},
		{"migrate", "force", "-2"},
		{"migrate", "force", "99"},
		{"gen", "--messages", "2"},
		{"check", "--workers", "0"},
		{"fix", "--max-bytes", "0"},
	} {
		r := runCLI(t, "", envs, args...)
		require.Equal(t, ExitUsage, r.code, "%v: %s", args, r.stderr)
		require.NotContains(t, r.stderr, "connect", "%v", args)
	}
	// Over the engine's limit, with input that would otherwise be fixed.
	r := runCLI(t, "[]", envs, "fix", "--max-bytes", "3000000000")
	require.Equal(t, ExitUsage, r.code, r.stderr)
	require.Contains(t, r.stderr, "the engine's limit")
}

func TestEveryCommandHasHelpWithExample(t *testing.T) {
	t.Parallel()
	root := NewRootCommand(&Env{Getenv: os.Getenv})
	for _, c := range allCommands(root) {
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" || c.HasParent() && c.Parent().Name() == "completion" {
			continue
		}
		require.NotEmpty(t, c.Example, "%s has no example", c.CommandPath())
		r := runCLI(t, "", nil, append(strings.Fields(c.CommandPath())[1:], "--help")...)
		require.Equal(t, ExitOK, r.code, c.CommandPath())
		require.Contains(t, r.stdout, "Examples:", c.CommandPath())
	}
}

func TestMigrateAgainstPostgres(t *testing.T) {
	t.Parallel()
	url := storetest.NewDBURL(t)
	envs := map[string]string{"TMEND_DATABASE_URL": url}

	r := runCLI(t, "", envs, "migrate", "version")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "clean")
	r = runCLI(t, "", envs, "migrate", "version", "--json")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.JSONEq(t, fmt.Sprintf(`{"schema":"tmend","version":%d,"dirty":false,"latest":%[1]d,"river_version":%d,"river_latest":%[2]d}`,
		migrations.Latest(), migrations.RiverLatest()), r.stdout)

	r = runCLI(t, "", envs, "migrate", "down", "--all")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "at version 0")
	require.Contains(t, r.stdout, "the schema is behind this binary: run `tmend migrate up`")

	// The flag beats the environment: a bad env URL is never used.
	r = runCLI(t, "", map[string]string{"TMEND_DATABASE_URL": "postgres://nowhere.invalid/x"},
		"migrate", "up", "--database-url", url)
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "clean")
	require.Contains(t, r.stdout, fmt.Sprintf("at version %d", migrations.Latest()))
	require.Contains(t, r.stdout, fmt.Sprintf("River's tables at version %d", migrations.RiverLatest()))
	require.NotContains(t, r.stdout, "behind")
}

// TestEveryValidationErrorOnALineOfItsOwn: options that fail together are printed one a
// line, not as one line holding "\n".
func TestEveryValidationErrorOnALineOfItsOwn(t *testing.T) {
	t.Parallel()
	r := runCLI(t, "", nil, "scan", "--partitions", "999")
	require.Equal(t, ExitUsage, r.code, r.stderr)
	require.Contains(t, r.stderr, "\ntmend: --partitions must be between 0 (automatic) and 256\n")
	require.True(t, strings.HasPrefix(r.stderr, "tmend: no database configured"), r.stderr)
	require.NotContains(t, r.stderr, `\n`)
}

// TestBadScheduleSaysWhatOneLooksLike: the cron parser's reason alone ("expected
// exactly 5 fields") does not show the syntax.
func TestBadScheduleSaysWhatOneLooksLike(t *testing.T) {
	t.Parallel()
	envs := map[string]string{"TMEND_DATABASE_URL": "postgres://127.0.0.1:1/x?connect_timeout=2"}
	for _, args := range [][]string{{"serve", "--schedule", "every day"}, {"serve", "--prune-schedule", "sundays"}} {
		r := runCLI(t, "", envs, args...)
		require.Equal(t, ExitUsage, r.code, "%v: %s", args, r.stderr)
		require.Contains(t, r.stderr, "want cron syntax: minute hour day-of-month month day-of-week, as '0 3 * * *'", "%v", args)
	}
}

func TestUnreachableDatabaseIsRuntimeError(t *testing.T) {
	t.Parallel()
	r := runCLI(t, "", map[string]string{"TMEND_DATABASE_URL": "postgres://127.0.0.1:1/x?connect_timeout=2"},
		"migrate", "version")
	require.Equal(t, ExitRuntime, r.code)
	require.Contains(t, r.stderr, "connect to database")
	// One line that says what to check, not pgx's text with each try on a line of its own.
	require.Contains(t, r.stderr, "connection refused: is PostgreSQL running there")
	require.NotContains(t, r.stderr, `\n`)
	require.Equal(t, 1, strings.Count(r.stderr, "\n"), r.stderr)
}

// TestConnectErrorsSayWhatToCheck: a server that refuses the database or the role is
// named as such, with what to change.
func TestConnectErrorsSayWhatToCheck(t *testing.T) {
	t.Parallel()
	url := storetest.NewDBURL(t)
	r := runCLI(t, "", nil, "migrate", "version", "--database-url", storetest.WithDatabase(url, "tmend_no_such_database"))
	require.Equal(t, ExitRuntime, r.code)
	require.Contains(t, r.stderr, `database "tmend_no_such_database" does not exist (SQLSTATE 3D000): create the database, or name one`)
}

func allCommands(c *cobra.Command) []*cobra.Command {
	out := []*cobra.Command{c}
	for _, sub := range c.Commands() {
		out = append(out, allCommands(sub)...)
	}
	return out
}

// TestDatabasePasswordNeverPrinted: every path that can carry the database URL (flag,
// environment, config file, parse errors, connect errors, the logged effective config,
// JSON errors) keeps the password out of stdout and stderr.
func TestDatabasePasswordNeverPrinted(t *testing.T) {
	t.Parallel()
	bad := []string{
		"postgres://u:Pa%zzSECRET@h/db",
		"postgres://u:pa ss SECRET@h/db",
		"postgres://u:SECRET@[::1/db",
		"host=h user=u password='se cret SECRET' bad",
		`host=h user=u password='se\' SECRET' port=x`,
		"postgres://u@h/db?password=SECRET&x=%zz",
	}
	unreachable := []string{
		"postgres://u:SECRET@127.0.0.1:1/db?connect_timeout=2",
		"host=127.0.0.1 port=1 user=u password='se cret SECRET' connect_timeout=2",
	}
	check := func(t *testing.T, r result, code int) {
		t.Helper()
		require.Equal(t, code, r.code, "stdout=%s stderr=%s", r.stdout, r.stderr)
		for _, frag := range []string{"SEC", "CRET", "se cret"} {
			require.NotContains(t, r.stdout, frag)
			require.NotContains(t, r.stderr, frag)
		}
	}
	dir := t.TempDir()
	for i, url := range append(bad, unreachable...) {
		code := ExitUsage
		if i >= len(bad) {
			code = ExitRuntime
		}
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			check(t, runCLI(t, "", nil, "migrate", "version", "--database-url", url), code)
			check(t, runCLI(t, "", map[string]string{"TMEND_DATABASE_URL": url}, "scan", "--log-level", "debug"), code)
			check(t, runCLI(t, "", map[string]string{"DATABASE_URL": url}, "report", "--json"), code)
			cfg := filepath.Join(dir, fmt.Sprintf("c%d.yaml", i))
			b, err := yaml.Marshal(map[string]string{"database_url": url})
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(cfg, b, 0o600))
			check(t, runCLI(t, "", nil, "rollback", "--session", "x", "--config", cfg), code)
		})
	}
	t.Run("BrokenConfigFile", func(t *testing.T) {
		t.Parallel()
		for i, text := range []string{
			"database_url: postgres://u:SECRET@h/db\n  oops: [\n",
			"database_url: 'postgres://u:SECRET@h/db\n",
			"database_url: postgres://u:SECRET@h/db\ndatabase_url: postgres://u:SECRET@h/db\n",
			"database_url: [postgres://u:SECRET@h/db]\n",
			"database_url:\n  password: SECRET\n",
		} {
			cfg := filepath.Join(dir, fmt.Sprintf("broken%d.yaml", i))
			require.NoError(t, os.WriteFile(cfg, []byte(text), 0o600))
			check(t, runCLI(t, "", nil, "scan", "--config", cfg), ExitUsage)
		}
	})
	t.Run("URLAsArgument", func(t *testing.T) {
		t.Parallel()
		check(t, runCLI(t, "", nil, "migrate", "version", "postgres://u:SECRET@h/db"), ExitUsage)
	})
}

// TestFlagsMeanSomething: a command lists only the flags it uses; the write settings are
// on every command that writes sessions.
func TestFlagsMeanSomething(t *testing.T) {
	t.Parallel()
	root := NewRootCommand(&Env{Getenv: noEnv})
	for cmd, tt := range map[string]struct{ has, hasNot []string }{
		"scan":       {has: []string{"touch-updated-at", "notify-channel", "force", "workers", "overlap", "dialect"}},
		"repair":     {has: []string{"touch-updated-at", "notify-channel", "force", "max-bytes"}, hasNot: []string{"workers", "batch-size", "max-inflight-bytes", "overlap", "batch-pause"}},
		"rollback":   {has: []string{"touch-updated-at", "notify-channel"}},
		"serve":      {has: []string{"touch-updated-at", "notify-channel", "quiet-period"}, hasNot: []string{"force"}},
		"worker":     {has: []string{"touch-updated-at", "notify-channel", "workers"}, hasNot: []string{"force", "dialect", "target", "failed-turns", "quiet-period", "max-bytes"}},
		"report":     {hasNot: []string{"touch-updated-at", "notify-channel"}},
		"prune":      {hasNot: []string{"table", "id-column", "messages-column", "updated-at-column", "touch-updated-at"}},
		"migrate up": {hasNot: []string{"log-level"}},
	} {
		c, _, err := root.Find(strings.Fields(cmd))
		require.NoError(t, err)
		for _, f := range tt.has {
			require.NotNil(t, c.Flags().Lookup(f), "%s --%s", cmd, f)
		}
		for _, f := range tt.hasNot {
			require.Nil(t, c.Flags().Lookup(f), "%s --%s", cmd, f)
			require.Nil(t, c.InheritedFlags().Lookup(f), "%s --%s", cmd, f)
		}
	}
}

// TestServeHelpListsEveryRoute: serve --help lists the routes from the daemon's own
// tables, among them those an older hand-written list missed.
func TestServeHelpListsEveryRoute(t *testing.T) {
	t.Parallel()
	r := runCLI(t, "", nil, "serve", "--help")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, daemon.RouteHelp())
	for _, route := range []string{"GET /v1/openapi.yaml ", "GET /v1/sessions/{id}/versions ", "GET /v1/sessions/{id}/diff ",
		"POST /v1/runs/{id}/rollback ", "GET /readyz ", "GET /healthz ", "GET /console/api/runs/{id} ", "GET / "} {
		require.Contains(t, r.stdout, "  "+route, "serve --help does not list %s", route)
	}
}

// TestDurationFlagsSayTheyNeedAUnit: every duration flag, and its TMEND_ variable, given a
// number alone names the flag and asks for a unit instead of printing Go's parse error.
func TestDurationFlagsSayTheyNeedAUnit(t *testing.T) {
	t.Parallel()
	var e Env
	n := 0
	for _, c := range allCommands(NewRootCommand(&e)) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if f.Value.Type() != "duration" {
				return
			}
			n++
			args := append(strings.Fields(c.CommandPath())[1:], "--"+f.Name, "30")
			r := runCLI(t, "", nil, args...)
			require.Equal(t, ExitUsage, r.code, "%v: %s", args, r.stderr)
			require.Contains(t, r.stderr, `"--`+f.Name+`"`, args)
			require.Contains(t, r.stderr, `"30" needs a unit, e.g. 30s or 30m`, args)
			require.NotContains(t, r.stderr, "time:", args)
		})
	}
	require.GreaterOrEqual(t, n, 8, "the duration flags were found")
	r := runCLI(t, "", map[string]string{"TMEND_QUIET_PERIOD": "30", "TMEND_DATABASE_URL": "postgres://u@127.0.0.1:1/db"}, "scan")
	require.Equal(t, ExitUsage, r.code, r.stderr)
	require.Contains(t, r.stderr, `--quiet-period: "30" needs a unit, e.g. 30s or 30m`)
	r = runCLI(t, "", nil, "scan", "--overlap", "soon")
	require.Equal(t, ExitUsage, r.code, r.stderr)
	require.Contains(t, r.stderr, `"soon" is not a duration: give a number and a unit, e.g. 30s, 5m or 1h30m`)
}
