package compact_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/compact"
	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/repair/gen"
)

// repaired generates coding sessions of dialect d, a share of them broken, and returns
// them repaired: compaction's input.
func repaired(t testing.TB, d repair.Dialect, n, msgs int, seed uint64) [][]byte {
	t.Helper()
	var out [][]byte
	err := gen.Generate(gen.Config{Seed: seed, Dialect: d, Sessions: n, Messages: msgs, Workload: gen.WorkloadCoding,
		FaultRate: 0.5}, func(s gen.Session) error {
		b, err := json.Marshal(s.Messages)
		if err != nil {
			return err
		}
		res, err := repair.Repair(b, repair.Options{Force: true})
		if err == nil {
			out = append(out, res.Messages)
		}
		return nil
	})
	require.NoError(t, err)
	return out
}

// checkInvariants compacts in and asserts what compaction promises (research note 8.10):
// I1 calls and results with their ids, tools and positions unchanged; I2 no new check
// issue; I3 every other part and message the same byte for byte, only tool contents
// before the boundary differ; I4 the suffix from the boundary byte-identical; I5 a
// second run changes nothing; I6 smaller; never rejected.
func checkInvariants(t testing.TB, name string, in []byte, opts compact.Options) compact.Report {
	t.Helper()
	res := compact.Compact(in, opts)
	r := res.Report
	require.NotEqual(t, compact.StatusRejected, r.Status, "%s: rejected: %s", name, r.Reason)
	if r.Status != compact.StatusCompacted {
		require.Equal(t, string(in), string(res.Messages), "%s: %s but changed", name, r.Status)
		return r
	}
	out := res.Messages
	require.Less(t, len(out), len(in), name)
	require.Equal(t, len(in)-len(out), r.SavedBytes(), name)

	before, err := repair.Inspect(in, repair.Options{})
	require.NoError(t, err, name)
	after, err := repair.Inspect(out, repair.Options{})
	require.NoError(t, err, "%s: output unreadable", name)
	require.Equal(t, before.Dialect, after.Dialect, name)
	require.Len(t, after.Messages, len(before.Messages), name)
	edited := map[[2]int]bool{}
	for _, a := range r.Actions {
		edited[[2]int{a.MessageIndex, a.PartIndex}] = true
		require.Less(t, a.BytesAfter, a.BytesBefore, "%s: %+v", name, a)
		require.Less(t, a.MessageIndex, r.Boundary, "%s: %+v", name, a)
	}
	for i, bm := range before.Messages {
		am := after.Messages[i]
		require.Equal(t, bm.Kind, am.Kind, "%s message %d", name, i)
		require.Len(t, am.Parts, len(bm.Parts), "%s message %d", name, i)
		changed := false
		for k, bp := range bm.Parts {
			ap := am.Parts[k]
			require.Equal(t, bp.Kind, ap.Kind, "%s %d/%d", name, i, k)
			require.Equal(t, bp.CallID, ap.CallID, "%s %d/%d", name, i, k)
			require.Equal(t, bp.ToolName, ap.ToolName, "%s %d/%d", name, i, k)
			if !bytes.Equal(bp.Raw, ap.Raw) {
				require.True(t, edited[[2]int{i, k}], "%s: part %d/%d changed without an action", name, i, k)
				changed = true
			}
		}
		if !bytes.Equal(bm.Raw, am.Raw) {
			require.True(t, changed, "%s: message %d changed outside its tool parts", name, i)
		}
	}
	// I4: every byte from the boundary's message on.
	if r.Boundary < len(before.Messages) {
		tailIn := in[msgOffset(in, before, r.Boundary):]
		require.True(t, bytes.HasSuffix(out, tailIn), "%s: suffix from message %d changed", name, r.Boundary)
	}
	vb, err := repair.Validate(in, repair.Options{QuietPeriod: -1})
	require.NoError(t, err, name)
	va, err := repair.Validate(out, repair.Options{QuietPeriod: -1})
	require.NoError(t, err, name)
	require.LessOrEqual(t, len(va.Issues), len(vb.Issues), "%s: new issues %v", name, va.Issues)
	again := compact.Compact(out, opts)
	require.NotEqual(t, compact.StatusCompacted, again.Report.Status, "%s: second run changed %v", name, again.Report.Actions)
	require.Equal(t, string(out), string(again.Messages), "%s: second run changed the output", name)
	require.Equal(t, string(out), string(compact.Compact(in, opts).Messages), "%s: not deterministic", name)
	return r
}

// msgOffset returns where message k of ol starts in msgs (messages may repeat each
// other's bytes, so each is searched for after the one before).
func msgOffset(msgs []byte, ol repair.Outline, k int) int {
	at := 0
	for i := 0; i <= k; i++ {
		at += bytes.Index(msgs[at:], ol.Messages[i].Raw)
		if i < k {
			at += len(ol.Messages[i].Raw)
		}
	}
	return at
}

func TestInvariantsOverGeneratedSessions(t *testing.T) {
	for _, d := range repair.Dialects() {
		t.Run(string(d), func(t *testing.T) {
			for _, p := range compact.Profiles() {
				compacted := 0
				for i, in := range repaired(t, d, 4, 120, 7) {
					r := checkInvariants(t, string(p)+"/"+strconv.Itoa(i), in, eager(t, p))
					if r.Status == compact.StatusCompacted {
						compacted++
					}
				}
				require.Positive(t, compacted, "%s: nothing compacted", p)
			}
		})
	}
}

// tiny compacts whatever it can, so that the small golden and fuzz inputs are compacted.
func tiny(t testing.TB) compact.Options {
	o := eager(t, compact.Aggressive)
	o.KeepToolUses, o.KeepTurns, o.BatchTurns, o.ProtectFirstTurn = 0, 1, 1, false
	o.SoftTrimMax, o.SoftTrimHead, o.SoftTrimTail, o.ClearInputsOver, o.ErrorTurns = 8, 2, 2, 4, 0
	o.ClearCategories[compact.CategoryOther] = true
	return o
}

// FuzzCompact checks the invariants on arbitrary input, repaired first as tmend compact
// does: go test ./compact -run '^$' -fuzz FuzzCompact. Its seeds are the engine's golden
// and fuzz inputs and a generated coding session.
func FuzzCompact(f *testing.F) {
	for _, in := range seedInputs(f) {
		f.Add(in)
	}
	f.Add(repaired(f, repair.OpenAIChat, 1, 40, 1)[0])
	f.Fuzz(func(t *testing.T, in []byte) {
		if res, err := repair.Repair(in, repair.Options{Force: true}); err == nil {
			in = res.Messages
		}
		checkInvariants(t, "fuzz", in, tiny(t))
	})
}

func TestInvariantsOverGoldenAndFuzzInputs(t *testing.T) {
	compacted := 0
	inputs := seedInputs(t)
	for i, in := range inputs {
		// Compaction reads repaired transcripts, as tmend compact hands it.
		if res, err := repair.Repair(in, repair.Options{Force: true}); err == nil {
			in = res.Messages
		}
		if checkInvariants(t, "input "+strconv.Itoa(i), in, tiny(t)).Status == compact.StatusCompacted {
			compacted++
		}
	}
	require.Positive(t, compacted)
	t.Logf("%d of %d inputs compacted", compacted, len(inputs))
}

// seedInputs are the engine's golden inputs and its fuzz corpus.
func seedInputs(t testing.TB) [][]byte {
	var inputs [][]byte
	golden, err := filepath.Glob("../repair/testdata/golden/*.jsonl")
	require.NoError(t, err)
	require.NotEmpty(t, golden)
	for _, path := range golden {
		f, err := os.Open(path)
		require.NoError(t, err)
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			var c struct {
				Input json.RawMessage `json:"input"`
			}
			require.NoError(t, json.Unmarshal(sc.Bytes(), &c))
			inputs = append(inputs, c.Input)
		}
		require.NoError(t, f.Close())
	}
	fuzz, err := filepath.Glob("../repair/testdata/fuzz/FuzzRepair/*")
	require.NoError(t, err)
	require.NotEmpty(t, fuzz)
	for _, path := range fuzz {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		lit := strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[1])
		s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lit, "[]byte("), ")"))
		require.NoError(t, err, path)
		inputs = append(inputs, []byte(s))
	}
	return inputs
}
