package cli

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// A scan, repair or rollback that failed some sessions (here a trigger of the table
// refuses their writes) says so with exit 4, in text and JSON alike, while the other
// sessions are handled; the printed result is the only thing on stdout.
func TestFailedSessionsExit4(t *testing.T) {
	t.Parallel()
	b := setupDB(t, 30, "1")
	ctx := t.Context()
	for _, sql := range []string{
		`CREATE TABLE public.refused (id text PRIMARY KEY)`,
		`INSERT INTO public.refused VALUES ('s-000001'), ('s-000002')`,
		`CREATE FUNCTION public.refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM public.refused WHERE id = NEW.id) THEN RAISE EXCEPTION 'no writes to %', NEW.id; END IF;
  RETURN NEW;
END $$`,
		`CREATE TRIGGER refuse BEFORE UPDATE ON tmend.sessions FOR EACH ROW EXECUTE FUNCTION public.refuse()`,
	} {
		_, err := b.pool.Exec(ctx, sql)
		require.NoError(t, err)
	}

	r := runCLI(t, "", b.env, "scan", "--full", "--json")
	require.Equal(t, ExitFailed, r.code, r.stderr)
	requireShape(t, "Run", r.stdout) // one object: no error object after it
	var run struct {
		ID     int64          `json:"id"`
		Status string         `json:"status"`
		Counts map[string]int `json:"counts"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &run))
	require.Equal(t, "completed", run.Status)
	require.Equal(t, 2, run.Counts["failed"])
	require.Positive(t, run.Counts["repaired"], "the other sessions were repaired")
	require.Equal(t, 30, run.Counts["scanned"])
	require.Contains(t, r.stderr, "2 of 30 sessions failed")

	r = runCLI(t, "", b.env, "repair", "--session", "s-000001")
	require.Equal(t, ExitFailed, r.code, r.stderr)
	require.Contains(t, r.stdout, "failed")
	r = runCLI(t, "", b.env, "repair", "--session", "s-000001", "--dry-run")
	require.Equal(t, ExitProblems, r.code, "a dry run writes nothing, so nothing fails: %s", r.stderr)

	// A rollback whose restore the table refuses fails that session, and restores the rest.
	_, err := b.pool.Exec(ctx, `INSERT INTO public.refused SELECT min(session_id) FROM repair_reports WHERE status = 'repaired'`)
	require.NoError(t, err)
	r = runCLI(t, "", b.env, "rollback", "--run", fmt.Sprint(run.ID), "--json")
	require.Equal(t, ExitFailed, r.code, r.stderr)
	requireShape(t, "RollbackOutcome", r.stdout)
	require.Contains(t, r.stderr, fmt.Sprintf("1 of %d sessions failed", run.Counts["repaired"]))
	// Refused but none failed is exit 1, as before.
	r = runCLI(t, "", b.env, "rollback", "--session", "s-000001") // never written
	require.Equal(t, ExitRuntime, r.code, r.stderr)
	require.Contains(t, r.stdout, "refused")
}

// Asked to repair one session, a run that left it as it is (here: not a transcript tmend
// can read) exits 3 like its dry run, not 0; a clean one exits 0.
func TestRepairOfASessionLeftAsItIsExits3(t *testing.T) {
	t.Parallel()
	b := setupDB(t, 3, "0")
	_, err := b.pool.Exec(t.Context(), `INSERT INTO tmend.sessions (id, messages) VALUES ('odd', '{"not": "a transcript"}')`)
	require.NoError(t, err)

	r := runCLI(t, "", b.env, "repair", "--session", "odd")
	require.Equal(t, ExitProblems, r.code, r.stderr)
	require.Contains(t, r.stdout, "unparseable")
	r = runCLI(t, "", b.env, "repair", "--session", "s-000001")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "is clean")
}
