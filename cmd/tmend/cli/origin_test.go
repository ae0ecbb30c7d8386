package cli

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/cmd/tmend/buildinfo"
	"github.com/tmend/tmend/store/model"
)

// TestRunsRecordWhoDidIt: a run and its reports record the OS user, the binary's
// version and the host; a session's rollback is a run of its own, which its report and
// versions name.
func TestRunsRecordWhoDidIt(t *testing.T) {
	t.Parallel()
	b := setupDB(t, 0, "0")
	insertSession(t, b, "a", brokenSession)
	host, err := os.Hostname()
	require.NoError(t, err)
	want := model.RunRow{Actor: cliActor(), TmendVersion: buildinfo.Get().Version, Host: host}
	require.NotEmpty(t, want.Actor)

	r := runCLI(t, "", b.env, "repair", "--session", "a")
	require.Equal(t, ExitOK, r.code, r.stderr)
	r = runCLI(t, "", b.env, "rollback", "--session", "a")
	require.Equal(t, ExitOK, r.code, r.stderr)
	rollbackLine := r.stdout

	r = runCLI(t, "", b.env, "report", "--json")
	require.Equal(t, ExitOK, r.code, r.stderr)
	var runs []model.RunRow
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var run model.RunRow
		require.NoError(t, json.Unmarshal([]byte(line), &run), line)
		runs = append(runs, run)
	}
	require.Len(t, runs, 2, "the repair and the rollback")
	rollback, repair := runs[0], runs[1]
	require.Equal(t, model.ModeRollback, rollback.Mode)
	require.Contains(t, rollbackLine, "restored 1, refused 0, failed 0 (rollback run "+jsonNumber(rollback.ID)+")")
	require.Equal(t, "a", rollback.Options["session_id"])
	for _, run := range runs {
		require.Equal(t, want.Actor, run.Actor, run.ID)
		require.Equal(t, want.TmendVersion, run.TmendVersion, run.ID)
		require.Equal(t, want.Host, run.Host, run.ID)
	}

	r = runCLI(t, "", b.env, "report", "--session", "a", "--json")
	require.Equal(t, ExitOK, r.code, r.stderr)
	var history struct {
		Reports  []model.ReportRow  `json:"reports"`
		Versions []model.VersionRow `json:"versions"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &history), r.stdout)
	runOf := map[model.SessionStatus]int64{}
	for _, rep := range history.Reports {
		require.NotNil(t, rep.RunID, rep.Status)
		runOf[rep.Status] = *rep.RunID
		require.Equal(t, want.Actor, rep.Actor, rep.Status)
		require.Equal(t, want.TmendVersion, rep.TmendVersion, rep.Status)
		require.Equal(t, want.Host, rep.Host, rep.Status)
	}
	require.Equal(t, map[model.SessionStatus]int64{model.StatusRepaired: repair.ID, model.StatusRolledBack: rollback.ID}, runOf)
	restored := history.Versions[len(history.Versions)-1]
	require.Equal(t, "restored", restored.Kind)
	require.NotNil(t, restored.RunID)
	require.Equal(t, rollback.ID, *restored.RunID, "the restored version names the rollback's run")

	// The text forms say it too.
	r = runCLI(t, "", b.env, "report", "--run", jsonNumber(rollback.ID))
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Regexp(t, `(?m)^actor\s+`+want.Actor+`$`, r.stdout)
	require.Regexp(t, `(?m)^rolls back\s+session a$`, r.stdout)
	require.Contains(t, r.stdout, "tmend "+want.TmendVersion+" on "+host)
	r = runCLI(t, "", b.env, "report", "--session", "a")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Regexp(t, `rolled_back\s+run `+jsonNumber(rollback.ID)+`, cli by `+want.Actor, r.stdout)
}

func jsonNumber(n int64) string { b, _ := json.Marshal(n); return string(b) }

// TestReportShowsARunningRunsCounts: while a scan runs, 'report --run' shows its counts
// as its partitions checkpoint, not zero until it ends.
func TestReportShowsARunningRunsCounts(t *testing.T) {
	t.Parallel()
	const sessions = 400
	b := setupDB(t, sessions, "0.1")
	done := make(chan result, 1)
	go func() {
		// Small, slow pages: the scan takes a few seconds, over several checkpoints.
		done <- runCLI(t, "", b.env, "scan", "--full", "--batch-size", "10", "--batch-pause", "60ms")
	}()
	var live model.RunRow
	for live.Counts.Scanned == 0 {
		select {
		case r := <-done:
			t.Fatalf("the scan ended before its counts were seen moving: %d\n%s", r.code, r.stderr)
		case <-time.After(50 * time.Millisecond):
		}
		r := runCLI(t, "", b.env, "report", "--run", "1", "--json")
		if r.code != ExitOK {
			continue // not recorded yet
		}
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &live), r.stdout)
		require.Equal(t, model.RunRunning, live.Status)
	}
	require.Less(t, live.Counts.Scanned, sessions)
	r := <-done
	require.Equal(t, ExitOK, r.code, r.stderr)
}
