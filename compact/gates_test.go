package compact_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/compact"
	"github.com/tmend/tmend/repair"
)

func TestGates(t *testing.T) {
	in := repaired(t, repair.Anthropic, 1, 300, 3)[0]
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cases := map[string]func(o *compact.Options){
		compact.SkipTooSmall:     func(o *compact.Options) { o.MinTokens = len(in)/4 + 1 },
		compact.SkipClearAtLeast: func(o *compact.Options) { o.ClearAtLeast = len(in) / 4 },
		compact.SkipRecent:       func(o *compact.Options) { o.IdleFor, o.Now, o.UpdatedAt = time.Hour, now, now.Add(-59*time.Minute) },
	}
	for reason, set := range cases {
		o := eager(t, compact.Standard)
		set(&o)
		res := compact.Compact(in, o)
		require.Equal(t, compact.StatusSkipped, res.Report.Status, reason)
		require.Equal(t, reason, res.Report.Reason)
		require.Equal(t, string(in), string(res.Messages), reason)
	}
	o := eager(t, compact.Standard)
	o.IdleFor, o.Now, o.UpdatedAt = time.Hour, now, now.Add(-61*time.Minute)
	require.Equal(t, compact.StatusCompacted, compact.Compact(in, o).Report.Status, "idle past the cache lifetime")
}

// TestBoundaryMovesInBatches grows a session a user turn at a time, as a platform
// appends to what tmend wrote, and compacts each time: the boundary only moves every
// BatchTurns turns, and while it stays nothing is rewritten (the provider's cached
// prefix stays valid).
func TestBoundaryMovesInBatches(t *testing.T) {
	in := repaired(t, repair.Anthropic, 1, 900, 5)[0]
	var msgs []json.RawMessage
	require.NoError(t, json.Unmarshal(in, &msgs))
	ol, err := repair.Inspect(in, repair.Options{})
	require.NoError(t, err)
	var turns []int
	for i, m := range ol.Messages {
		if m.Kind == "user" && (len(m.Parts) == 0 || m.Parts[0].Kind != repair.PartResult) {
			turns = append(turns, i)
		}
	}
	require.Greater(t, len(turns), 40)
	o := eager(t, compact.Standard)
	moves, last, rewrites := 0, -1, 0
	var cur []json.RawMessage // what tmend wrote last, to which the platform appends
	for k, end := range turns[1:] {
		cur = append(cur, msgs[len(cur):end]...)
		b, _ := json.Marshal(cur)
		res := compact.Compact(b, o)
		if res.Report.Boundary != last {
			moves++
		}
		if res.Report.Status == compact.StatusCompacted {
			rewrites++
			require.NotEqual(t, last, res.Report.Boundary, "turn %d: prefix rewritten without a boundary move", k)
		}
		last = res.Report.Boundary
		cur = cur[:0]
		require.NoError(t, json.Unmarshal(res.Messages, &cur))
	}
	require.Positive(t, rewrites)
	require.LessOrEqual(t, moves, len(turns)/o.BatchTurns+2, "boundary moved %d times over %d turns", moves, len(turns))
	t.Logf("%d turns: boundary moved %d times, %d rewrites", len(turns), moves, rewrites)
}

// TestEveryRuleHasAMeaning: the console explains each compact_RULE stage by its rule's
// Meaning, so a new rule needs one.
func TestEveryRuleHasAMeaning(t *testing.T) {
	for _, r := range compact.Rules() {
		require.NotEmpty(t, r.Meaning(), r)
	}
}
