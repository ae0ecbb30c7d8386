package repair_test

import (
	"fmt"
	"testing"

	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/repair/gen"
)

var benchSizes = []struct {
	name     string
	messages int
}{{"small", 10}, {"medium", 45}, {"large", 400}}

// benchKinds are the corpora of each size: clean, broken, and broken with texts in many
// scripts (gen.TextUnicode).
var benchKinds = []string{"clean", "broken", "unicode"}

// benchCorpus is 64 OpenClaw sessions of the given size and kind.
func benchCorpus(b *testing.B, messages int, kind string) [][]byte {
	b.Helper()
	cfg := gen.Config{Seed: 42, Dialect: repair.OpenClaw, Sessions: 64, Messages: messages}
	if kind != "clean" {
		cfg.FaultRate = 1
	}
	if kind == "unicode" {
		cfg.Text = gen.TextUnicode
	}
	var out [][]byte
	if err := gen.Generate(cfg, func(s gen.Session) error { out = append(out, arrayOf(s.Messages)); return nil }); err != nil {
		b.Fatal(err)
	}
	return out
}

func benchEach(b *testing.B, fn func(in []byte)) {
	for _, size := range benchSizes {
		for _, kind := range benchKinds {
			b.Run(size.name+"/"+kind, func(b *testing.B) {
				corpus := benchCorpus(b, size.messages, kind)
				var bytes int64
				for _, c := range corpus {
					bytes += int64(len(c))
				}
				b.SetBytes(bytes / int64(len(corpus)))
				b.ReportAllocs()
				n := 0
				for b.Loop() {
					fn(corpus[n%len(corpus)])
					n++
				}
				b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "sessions/s")
			})
		}
	}
}

func BenchmarkRepair(b *testing.B) {
	benchEach(b, func(in []byte) {
		if _, err := repair.Repair(in, repair.Options{}); err != nil {
			b.Fatal(err)
		}
	})
}

func BenchmarkValidate(b *testing.B) {
	benchEach(b, func(in []byte) {
		if _, err := repair.Validate(in, repair.Options{}); err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkRepairManyBlocks repairs one Anthropic transcript of n tool_use blocks in one
// assistant message, answered by one user message of n tool_result blocks (every tenth
// missing, so the pairing, the synthesis and the rebuild all run): the cost must grow
// linearly with n.
func BenchmarkRepairManyBlocks(b *testing.B) {
	for _, n := range []int{10_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("blocks=%d", n), func(b *testing.B) {
			in := manyBlocks(n)
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			for b.Loop() {
				res, err := repair.Repair(in, repair.Options{})
				if err != nil || res.Report.Status != repair.StatusRepaired {
					b.Fatal(err, res.Report.Status)
				}
			}
			b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "blocks/s")
		})
	}
}

func manyBlocks(n int) []byte {
	out := []byte(`[{"role":"user","content":"go"},{"role":"assistant","content":[`)
	for i := range n {
		if i > 0 {
			out = append(out, ',')
		}
		out = fmt.Appendf(out, `{"type":"tool_use","id":"toolu_%d","name":"f","input":{}}`, i)
	}
	out = append(out, `]},{"role":"user","content":[`...)
	first := true
	for i := range n {
		if i%10 == 9 {
			continue
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		out = fmt.Appendf(out, `{"type":"tool_result","tool_use_id":"toolu_%d","content":"ok"}`, i)
	}
	return append(out, `]}]`...)
}

// BenchmarkManyKeys validates one message of n members: the duplicate-key check must grow
// linearly with n.
func BenchmarkManyKeys(b *testing.B) {
	for _, n := range []int{10_000, 40_000} {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			in := []byte(`[{"role":"user","content":"x"`)
			for i := range n {
				in = fmt.Appendf(in, `,"k%d":1`, i)
			}
			in = append(in, `}]`...)
			b.SetBytes(int64(len(in)))
			for b.Loop() {
				if _, err := repair.Repair(in, repair.Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRepairLangChain repairs 64 medium LangChain sessions in each stored form, plain
// and with a chat model's copies of each call, clean and all broken.
func BenchmarkRepairLangChain(b *testing.B) {
	for _, v := range []string{"flat", "flat-openai", "data", "data-anthropic", "lc", "lc-responses"} {
		for _, kind := range []string{"clean", "broken"} {
			b.Run(v+"/"+kind, func(b *testing.B) {
				cfg := gen.Config{Seed: 42, Dialect: repair.LangChain, Variant: v, Sessions: 64, Messages: 45}
				if kind == "broken" {
					cfg.FaultRate = 1
				}
				benchRepairs(b, cfg)
			})
		}
	}
}

// BenchmarkRepairInPlace repairs 64 medium clean sessions of the dialects whose calls are
// parts of their messages, repaired in place (AI SDK UIMessage, Mastra).
func BenchmarkRepairInPlace(b *testing.B) {
	for _, d := range []repair.Dialect{repair.AISDKUI, repair.Mastra} {
		b.Run(string(d), func(b *testing.B) {
			benchRepairs(b, gen.Config{Seed: 42, Dialect: d, Sessions: 64, Messages: 45})
		})
	}
}

// benchRepairs repairs the sessions cfg generates, one after the other, round and round.
func benchRepairs(b *testing.B, cfg gen.Config) {
	var corpus [][]byte
	var bytes int64
	if err := gen.Generate(cfg, func(s gen.Session) error {
		corpus = append(corpus, arrayOf(s.Messages))
		bytes += int64(len(corpus[len(corpus)-1]))
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(bytes / int64(len(corpus)))
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		if _, err := repair.Repair(corpus[n%len(corpus)], repair.Options{}); err != nil {
			b.Fatal(err)
		}
		n++
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "sessions/s")
}
