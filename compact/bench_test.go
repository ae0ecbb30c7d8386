package compact_test

import (
	"testing"

	"github.com/tmend/tmend/compact"
	"github.com/tmend/tmend/repair"
)

// benchCorpus is long coding sessions (about 800 messages) in three dialects, repaired.
func benchCorpus(b *testing.B) (corpus [][]byte, size int64) {
	for _, d := range []repair.Dialect{repair.Anthropic, repair.OpenAIChat, repair.OpenAIResponses} {
		for _, s := range repaired(b, d, 2, 800, 11) {
			corpus = append(corpus, s)
			size += int64(len(s))
		}
	}
	return corpus, size
}

// BenchmarkCompact is compaction's throughput (standard profile, gates off, so every
// session is compacted and checked); BenchmarkRepairSame is repair's on the same input.
func BenchmarkCompact(b *testing.B) {
	corpus, size := benchCorpus(b)
	o := eager(b, compact.Standard)
	b.SetBytes(size)
	b.ResetTimer()
	for b.Loop() {
		for _, s := range corpus {
			if r := compact.Compact(s, o); r.Report.Status != compact.StatusCompacted {
				b.Fatal(r.Report.Status, r.Report.Reason)
			}
		}
	}
}

func BenchmarkRepairSame(b *testing.B) {
	corpus, size := benchCorpus(b)
	b.SetBytes(size)
	b.ResetTimer()
	for b.Loop() {
		for _, s := range corpus {
			if _, err := repair.Repair(s, repair.Options{}); err != nil {
				b.Fatal(err)
			}
		}
	}
}
