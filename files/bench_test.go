package files_test

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/tmend/tmend/files"
	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/repair/gen"
)

// BenchmarkFix is 'tmend fix FILE' in process: 2,000 OpenClaw sessions of 45 messages,
// as in scripts/bench-fix.sh's corpora, read from a file (so mapped where the system
// can) and repaired on every core. Its CPU profile is the build's PGO profile
// (scripts/pgo.sh).
func BenchmarkFix(b *testing.B) {
	corpora := []struct {
		name string
		cfg  gen.Config
	}{
		{"broken", gen.Config{FaultRate: 1, Seed: 1}},
		{"mostly-clean", gen.Config{FaultRate: 0.02, Seed: 2}},
		{"unicode", gen.Config{FaultRate: 1, Seed: 3, Text: gen.TextUnicode}},
	}
	for _, c := range corpora {
		b.Run(c.name, func(b *testing.B) {
			c.cfg.Dialect, c.cfg.Sessions, c.cfg.Messages = repair.OpenClaw, 2000, 45
			path := filepath.Join(b.TempDir(), "in.jsonl")
			f, err := os.Create(path)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := gen.WriteJSONLines(b.Context(), f, c.cfg); err != nil {
				b.Fatal(err)
			}
			fi, err := f.Stat()
			if err != nil || f.Close() != nil {
				b.Fatal(err)
			}
			b.SetBytes(fi.Size())
			for b.Loop() {
				f, err := os.Open(path)
				if err != nil {
					b.Fatal(err)
				}
				res, err := files.Run(b.Context(), f, io.Discard, files.Options{Fix: true})
				_ = f.Close()
				if err != nil || res.Failed > 0 {
					b.Fatal(err, res.Failed)
				}
			}
		})
	}
}
