package store_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/compact"
	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/repair/gen"
	"github.com/tmend/tmend/scanner"
	"github.com/tmend/tmend/store"
	"github.com/tmend/tmend/store/model"
	"github.com/tmend/tmend/store/storetest"
)

// compactScan runs a full scan with --compact=aggressive over tmend's sessions table.
func compactScan(t *testing.T, b *testBundle, dryRun bool) model.RunResult {
	t.Helper()
	sc := scanner.New(b.store, zerolog.Nop(), scanner.Config{Source: "test", Compact: compact.Aggressive,
		Repair: repair.Options{QuietPeriod: -1}})
	res, err := sc.Run(t.Context(), scanner.RunOptions{Trigger: model.TriggerCLI, Mode: model.ModeFull, DryRun: dryRun,
		Force: true, KeepOutcomes: true})
	require.NoError(t, err)
	return res
}

// TestScanCompactsAfterRepair: a scan with --compact repairs and compacts in one write
// per session, keeps the prior content and the compaction beside the written version,
// and counts and reports what it saved; a dry run writes nothing and reports the same
// saving.
func TestScanCompactsAfterRepair(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	sessions := storetest.Generated(t, b.pool, gen.Config{Seed: 11, Dialect: repair.OpenAIChat, Sessions: 6, Messages: 600,
		Workload: gen.WorkloadCoding, FaultRate: 0.5})
	// One session was active a minute ago: the idle gate (1h) reads the table's
	// updated_at and leaves its compaction for later.
	active := sessions[0].ID
	_, err := b.pool.Exec(ctx, `UPDATE sessions SET updated_at = now() - interval '1 minute' WHERE id = $1`, active)
	require.NoError(t, err)
	before := map[string]string{}
	for _, s := range sessions {
		before[s.ID] = storetest.Content(t, b.pool, s.ID)
	}

	dry := compactScan(t, b, true)
	require.Positive(t, dry.Compaction.Compacted, "nothing to compact: make the sessions longer")
	require.Zero(t, dry.Compaction.Rejected)
	for id, content := range before {
		require.Equal(t, content, storetest.Content(t, b.pool, id), "a dry run wrote %s", id)
	}
	var drySaved int64
	for _, o := range dry.Outcomes {
		if o.Compaction != nil && o.Compaction.Status == compact.StatusCompacted {
			require.Contains(t, []model.SessionStatus{model.StatusWouldCompact, model.StatusWouldRepair}, o.Status)
			drySaved += int64(o.Compaction.SavedBytes())
		}
	}
	require.Equal(t, dry.Compaction.SavedBytes, drySaved)

	res := compactScan(t, b, false)
	require.Equal(t, dry.Compaction, res.Compaction, "the dry run reported another saving than the run made")
	storetest.AllClean(t, b.pool)
	var compacted, alsoRepaired int
	for _, o := range res.Outcomes {
		if o.Compaction == nil || o.Compaction.Status != compact.StatusCompacted {
			continue
		}
		compacted++
		after := storetest.Content(t, b.pool, o.SessionID)
		require.Less(t, len(after), len(before[o.SessionID]), o.SessionID)
		// The written version holds the compaction; the version before it, what was there.
		var boundary, version int
		var prefix string
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT c.boundary, c.version, c.prefix FROM session_compactions c
WHERE c.session_id = $1`, o.SessionID).Scan(&boundary, &version, &prefix))
		require.Equal(t, o.ToVersion, version)
		require.Equal(t, o.Compaction.Boundary, boundary)
		prior, err := b.store.Version(ctx, o.SessionID, o.FromVersion)
		require.NoError(t, err)
		require.Equal(t, before[o.SessionID], prior.Content)
		var status string
		var actions string
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT status, actions::text FROM repair_reports WHERE session_id = $1 AND to_version = $2`,
			o.SessionID, o.ToVersion).Scan(&status, &actions))
		require.Equal(t, string(o.Status), status)
		require.Contains(t, actions, `"stage": "compact_`)
		if o.Status == model.StatusRepaired {
			alsoRepaired++
		} else {
			require.Equal(t, model.StatusCompacted, o.Status)
			require.True(t, strings.HasPrefix(before[o.SessionID][1:], prefix), "the kept prefix is not the content's")
		}
	}
	require.Equal(t, res.Compaction.Compacted, compacted)
	require.Equal(t, len(sessions)-1, compacted)
	var n int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM session_compactions WHERE session_id = $1`, active).Scan(&n))
	require.Zero(t, n, "the active session was compacted")
	require.Positive(t, alsoRepaired, "no session was both repaired and compacted")
	require.Less(t, alsoRepaired, compacted, "no clean session was compacted")

	// The metrics read the runs' rows: the dry run's compactions saved nothing.
	_, ended, err := b.store.RunTotals(ctx, []float64{1}, func([]store.RunGroup) bool { return false })
	require.NoError(t, err)
	require.Equal(t, res.Compaction, ended.Sessions.Compaction)

	// Compacting again changes nothing.
	again := compactScan(t, b, false)
	require.Zero(t, again.Compaction.Compacted)
	require.Zero(t, again.Counts.Repaired)
}

// TestRollbackOfACompactionKeepsAppendedTurns: after the platform appended turns to a
// compacted session, rollback restores the prefix as it was before compaction in front
// of what the session holds now; when the compacted prefix itself changed, it refuses.
func TestRollbackOfACompactionKeepsAppendedTurns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	storetest.Generated(t, b.pool, gen.Config{Seed: 11, Dialect: repair.OpenAIChat, Sessions: 6, Messages: 600,
		Workload: gen.WorkloadCoding, FaultRate: 0.5})
	res := compactScan(t, b, false)
	var ids []string
	repairedToo := map[string]bool{}
	for _, o := range res.Outcomes {
		if o.Compaction != nil && o.Compaction.Status == compact.StatusCompacted {
			ids = append(ids, o.SessionID)
			repairedToo[o.SessionID] = o.Status == model.StatusRepaired
		}
	}
	require.GreaterOrEqual(t, len(ids), 2)
	// rollback --run finds every session the run wrote, compacted or repaired.
	written, err := b.store.RunSessions(ctx, res.RunID)
	require.NoError(t, err)
	require.Equal(t, res.Counts.Repaired+res.ByStatus[model.StatusCompacted], len(written))
	// Prune keeps what undoing the compactions needs: their versions, and so the
	// compactions kept with them.
	compactions := func() int {
		var n int
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM session_compactions`).Scan(&n))
		return n
	}
	require.Equal(t, len(ids), compactions())
	_, _, err = b.store.Prune(ctx, time.Now().Add(time.Hour), false, false)
	require.NoError(t, err)
	require.Equal(t, len(ids), compactions())
	const appended = `[{"role":"user","content":"and now?"},{"role":"assistant","content":"done"}]`

	for i, id := range ids[1:] {
		var c struct {
			Boundary int
			Prefix   string
			Version  int
		}
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT boundary, prefix, version FROM session_compactions WHERE session_id = $1`, id).
			Scan(&c.Boundary, &c.Prefix, &c.Version))
		_, err := b.pool.Exec(ctx, `UPDATE sessions SET messages = messages || $2::jsonb WHERE id = $1`, id, appended)
		require.NoError(t, err)
		current := storetest.Content(t, b.pool, id)

		req := model.RollbackRequest{SessionID: id, Trigger: model.TriggerCLI}
		if i%2 == 1 { // as rollback --run asks, naming the versions
			req.Written, req.To = c.Version, c.Version-1
		}
		rb, err := b.store.Rollback(ctx, req)
		require.NoError(t, err)
		require.Equal(t, model.RollbackRestored, rb.Status, rb.Reason)
		// Expected: the messages before compaction, then the current ones from the
		// boundary on, appended turns included.
		var cur []json.RawMessage
		require.NoError(t, json.Unmarshal([]byte(current), &cur))
		var prefix []json.RawMessage
		require.NoError(t, json.Unmarshal([]byte("["+c.Prefix+"]"), &prefix))
		require.Len(t, prefix, c.Boundary)
		want, err := json.Marshal(append(prefix, cur[c.Boundary:]...))
		require.NoError(t, err)
		var same bool
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT messages = $2::jsonb FROM sessions WHERE id = $1`, id, string(want)).Scan(&same))
		require.True(t, same, "session %s was not restored to its prefix before compaction and its current suffix", id)
		if !repairedToo[id] {
			// A clean session compacted: that is its original content, turns appended.
			prior, err := b.store.Version(ctx, id, c.Version-1)
			require.NoError(t, err)
			require.NoError(t, b.pool.QueryRow(ctx, `SELECT messages = $2::jsonb || $3::jsonb FROM sessions WHERE id = $1`,
				id, prior.Content, appended).Scan(&same))
			require.True(t, same, "session %s is not its original with the appended turns", id)
		}
		// What was there before the rollback is kept.
		require.Equal(t, rb.Written-1, rb.Preserved)
		kept, err := b.store.Version(ctx, id, rb.Preserved)
		require.NoError(t, err)
		require.Equal(t, current, kept.Content)
	}

	// A compacted message edited since: the prefix is no longer what tmend wrote.
	id := ids[0]
	_, err = b.pool.Exec(ctx, `UPDATE sessions SET messages = jsonb_set(messages, '{0,content}', '"edited"') || $2::jsonb WHERE id = $1`,
		id, appended)
	require.NoError(t, err)
	current := storetest.Content(t, b.pool, id)
	rb, err := b.store.Rollback(ctx, model.RollbackRequest{SessionID: id, Trigger: model.TriggerCLI})
	require.NoError(t, err)
	require.Equal(t, model.RollbackRefused, rb.Status)
	require.Contains(t, rb.Reason, "compacted")
	require.Equal(t, current, storetest.Content(t, b.pool, id))
}

// TestClearedShowsWhatStubsReplaced: report --cleared's rows come from the saved
// versions: each action's original text, longer than the stub that replaced it.
func TestClearedShowsWhatStubsReplaced(t *testing.T) {
	t.Parallel()
	b := setup(t)
	storetest.Generated(t, b.pool, gen.Config{Seed: 11, Dialect: repair.OpenAIChat, Sessions: 6, Messages: 600,
		Workload: gen.WorkloadCoding, FaultRate: 0.5})
	res := compactScan(t, b, false)
	for _, o := range res.Outcomes {
		if o.Compaction == nil || o.Compaction.Status != compact.StatusCompacted {
			continue
		}
		if o.Status != model.StatusRepaired {
			continue // the harder case: a repaired session, whose kept prefix is the repair's output
		}
		cleared, err := b.store.Cleared(t.Context(), o.SessionID, true)
		require.NoError(t, err)
		require.Len(t, cleared, len(o.Compaction.Actions))
		perMessage := map[int]int{}
		for _, a := range o.Compaction.Actions {
			perMessage[a.MessageIndex]++
		}
		for i, c := range cleared {
			if perMessage[c.MessageIndex] == 1 {
				// Only the content replaced, not the message around it.
				require.NotContains(t, c.Original, `"role"`, "%s: action %d", o.SessionID, i)
				require.LessOrEqual(t, len(c.Original), c.BytesBefore+8, "%s: action %d", o.SessionID, i)
			}
			require.Equal(t, o.Compaction.Actions[i], c.Action)
			require.Equal(t, o.ToVersion, c.Version)
			require.NotEmpty(t, c.Original, "%s: action %d", o.SessionID, i)
			require.Less(t, len(c.Stub), len(c.Original), "%s: action %d", o.SessionID, i)
		}
		return
	}
	t.Fatal("nothing was compacted")
}
