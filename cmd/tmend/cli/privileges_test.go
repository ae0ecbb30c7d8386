package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/store"
	"github.com/tmend/tmend/store/storetest"
)

const brokenChat = `[{"role":"user","content":"ls"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}}]}]`

// leastPrivilegeRole creates a login role with exactly the grants deploy/README.md
// documents ("1. The database role") on a user table public.conversations, and returns
// the database URL as that role and the schema tmend owns.
func leastPrivilegeRole(t *testing.T, adminURL string) (roleURL, schema string) {
	t.Helper()
	ctx := t.Context()
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	role := "tmend_lp_" + hex.EncodeToString(b)
	admin, err := pgx.Connect(ctx, adminURL)
	require.NoError(t, err)
	defer func() { _ = admin.Close(context.Background()) }()
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), adminURL)
		if err != nil {
			t.Errorf("drop role %s: %v", role, err)
			return
		}
		defer func() { _ = c.Close(context.Background()) }()
		if _, err := c.Exec(context.Background(), fmt.Sprintf("DROP OWNED BY %[1]s CASCADE; DROP ROLE %[1]s", role)); err != nil {
			t.Errorf("drop role %s: %v", role, err)
		}
	})
	// The application's table, with a column tmend has no business reading.
	_, err = admin.Exec(ctx, `CREATE TABLE public.conversations (conv_id text PRIMARY KEY, payload jsonb NOT NULL,
  modified_at timestamptz NOT NULL DEFAULT '2026-01-01', owner_email text NOT NULL DEFAULT 'someone@example.com')`)
	require.NoError(t, err)
	// Word for word the statements of deploy/README.md, with this test's names.
	for _, stmt := range []string{
		fmt.Sprintf(`CREATE ROLE %s LOGIN PASSWORD 'lp-secret'`, role),
		fmt.Sprintf(`CREATE SCHEMA %[1]s AUTHORIZATION %[1]s`, role),
		fmt.Sprintf(`GRANT USAGE ON SCHEMA public TO %s`, role),
		fmt.Sprintf(`GRANT SELECT (conv_id, payload, modified_at), UPDATE (payload) ON public.conversations TO %s`, role),
	} {
		_, err := admin.Exec(ctx, stmt)
		require.NoError(t, err, stmt)
	}
	u, err := url.Parse(adminURL)
	require.NoError(t, err)
	u.User = url.UserPassword(role, "lp-secret")
	return u.String(), role
}

// tmend works with exactly the documented grants: migrate up, a dry run, a scan that
// repairs, report, an on-demand repair and a rollback, all as the least-privilege role.
func TestLeastPrivilegeRole(t *testing.T) {
	t.Parallel()
	adminURL := storetest.NewDBURL(t)
	roleURL, schema := leastPrivilegeRole(t, adminURL)
	admin, err := store.Connect(t.Context(), adminURL, store.DefaultSchema)
	require.NoError(t, err)
	t.Cleanup(admin.Close)
	for i := range 5 {
		_, err := admin.Exec(t.Context(), `INSERT INTO public.conversations (conv_id, payload) VALUES ($1, $2)`, fmt.Sprintf("c%d", i), brokenChat)
		require.NoError(t, err)
	}
	content := func(id string) string {
		var s string
		require.NoError(t, admin.QueryRow(t.Context(), `SELECT payload::text FROM public.conversations WHERE conv_id = $1`, id).Scan(&s))
		return s
	}
	before := content("c0")

	env := map[string]string{"TMEND_DATABASE_URL": roleURL, "TMEND_SCHEMA": schema, "TMEND_TABLE": "public.conversations",
		"TMEND_ID_COLUMN": "conv_id", "TMEND_MESSAGES_COLUMN": "payload", "TMEND_UPDATED_AT_COLUMN": "modified_at"}
	r := runCLI(t, "", env, "migrate", "up")
	require.Equal(t, ExitOK, r.code, r.stderr)
	r = runCLI(t, "", env, "scan", "--dry-run")
	require.Equal(t, ExitProblems, r.code, r.stderr)
	r = runCLI(t, "", env, "scan", "--limit", "4")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Regexp(t, `(?m)^  repaired\s+4$`, r.stdout)
	r = runCLI(t, "", env, "scan")
	require.Equal(t, ExitOK, r.code, r.stderr)
	r = runCLI(t, "", env, "report", "--session", "c0")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "repaired")
	require.NotEqual(t, before, content("c0"))

	r = runCLI(t, "", env, "rollback", "--session", "c0")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Equal(t, before, content("c0"))
	r = runCLI(t, "", env, "repair", "--session", "c0")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Contains(t, content("c0"), "[tmend]")
	r = runCLI(t, "", env, "rollback", "--session", "c0", "--force")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Equal(t, before, content("c0"))
}

// Only `migrate up` creates anything: report and dry runs against a schema that does not
// exist (or is not migrated) fail, and leave no schema and no migrations table behind.
func TestReadOnlyCommandsCreateNothing(t *testing.T) {
	t.Parallel()
	b := setupDB(t, 0, "0")
	exists := func(sql string, args ...any) bool {
		var ok bool
		require.NoError(t, b.pool.QueryRow(t.Context(), sql, args...).Scan(&ok))
		return ok
	}
	_, err := b.pool.Exec(t.Context(), `CREATE SCHEMA empty_schema`)
	require.NoError(t, err)
	for _, schema := range []string{"never_made", "empty_schema"} {
		for _, args := range [][]string{{"report"}, {"scan", "--dry-run"}, {"report", "--session", "x"}, {"migrate", "version"}} {
			r := runCLI(t, "", b.env, append(args, "--schema", schema)...)
			if args[0] != "migrate" {
				require.Equal(t, ExitRuntime, r.code, "%v: %s", args, r.stderr)
				require.Contains(t, r.stderr, "run `tmend migrate up`", args)
			}
			require.Equal(t, schema == "empty_schema", exists(`SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, schema), args)
			require.False(t, exists(`SELECT to_regclass(format('%I.schema_migrations', $1::text)) IS NOT NULL`, schema), args)
		}
	}
	_ = time.Second
}
