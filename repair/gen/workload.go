package gen

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strings"
)

// Workload names the kind of tool traffic a session carries.
type Workload string

const (
	// WorkloadPlain is short made-up results (the default; corpora depend on its bytes).
	WorkloadPlain Workload = ""
	// WorkloadCoding is a coding agent's traffic: file reads (the same file read again,
	// unchanged), searches, directory listings, writes and edits carrying file contents,
	// commands with long logs, some of them failing, and web fetches. Results run from a
	// few hundred bytes to tens of kilobytes, as in real sessions; it is what compaction
	// is measured on.
	WorkloadCoding Workload = "coding"
)

// ParseWorkload accepts "plain" or "" and "coding".
func ParseWorkload(s string) (Workload, error) {
	switch s {
	case "", "plain":
		return WorkloadPlain, nil
	case string(WorkloadCoding):
		return WorkloadCoding, nil
	}
	return "", fmt.Errorf("unknown workload %q (want plain or coding)", s)
}

var codingFiles = []string{"main.go", "server.go", "handler.go", "config.go", "store.go", "cache.go",
	"retry.go", "session.go", "index.go", "log.go", "query.go", "model.go"}

var commands = []string{"go test ./...", "go build ./...", "go vet ./...", "make lint", "git status",
	"git diff --stat", "npm test", "ls -la"}

// coding rewrites the calls and results of evs as WorkloadCoding traffic, in place; the
// conversation's shape (turns, ids, how many calls each turn makes) stays.
func coding(rng *rand.Rand, evs []event) {
	version := map[string]int{}
	content := func(path string) string {
		h := fnv.New64a()
		h.Write([]byte(path))
		r := rand.New(rand.NewPCG(h.Sum64(), uint64(version[path]))) // a file reads the same until written
		n := 40 + r.IntN(360)
		var b strings.Builder
		fmt.Fprintf(&b, "// %s (revision %d)\npackage main\n\n", path, version[path])
		for i := 0; i < n; i++ {
			fmt.Fprintf(&b, "\t%s := %s(%s, %d) // %s\n", words[r.IntN(len(words))], words[r.IntN(len(words))],
				words[r.IntN(len(words))], r.IntN(1000), sentence(r, words, 2, 6))
		}
		return b.String()
	}
	for ei := range evs {
		e := &evs[ei]
		if e.kind != evAssistant {
			continue
		}
		for ci := range e.calls {
			c := &e.calls[ci]
			if c.malformed != "" || c.invalid {
				continue
			}
			path := "/src/" + codingFiles[rng.IntN(len(codingFiles))]
			var args any
			var out string
			failed := false
			switch x := rng.IntN(100); {
			case x < 35:
				c.name, args, out = "read_file", obj{{"path", path}}, content(path)
			case x < 48:
				pat := words[rng.IntN(len(words))]
				c.name, args = "grep", obj{{"pattern", pat}, {"path", "/src"}}
				var b strings.Builder
				for i, n := 0, 5+rng.IntN(60); i < n; i++ {
					fmt.Fprintf(&b, "/src/%s:%d: %s %s\n", codingFiles[rng.IntN(len(codingFiles))], 1+rng.IntN(400), pat, sentence(rng, words, 3, 10))
				}
				out = b.String()
			case x < 53:
				c.name, args = "list_dir", obj{{"path", "/src"}}
				out = strings.Join(codingFiles, "\n")
			case x < 63:
				version[path]++
				c.name, args = "write_file", obj{{"path", path}, {"content", content(path)}}
				out = fmt.Sprintf("wrote %s", path)
			case x < 70:
				c.name, args = "edit_file", obj{{"path", path}, {"old_str", sentence(rng, words, 20, 120)}, {"new_str", sentence(rng, words, 20, 160)}}
				out = fmt.Sprintf("edited %s", path)
			case x < 92:
				cmd := commands[rng.IntN(len(commands))]
				c.name, args = "bash", obj{{"command", cmd}}
				var b strings.Builder
				for i, n := 0, 5+rng.IntN(250); i < n; i++ {
					fmt.Fprintf(&b, "%s %s\n", strings.Repeat("=", rng.IntN(3)), sentence(rng, words, 4, 14))
				}
				if failed = rng.IntN(5) == 0; failed {
					fmt.Fprintf(&b, "error: %s failed: exit status 1\n", cmd)
				}
				out = b.String()
			default:
				c.name, args = "fetch_url", obj{{"url", "https://example.com/docs/" + words[rng.IntN(len(words))]}}
				out = sentence(rng, words, 100, 900)
			}
			a, _ := json.Marshal(args)
			c.args = string(a)
			for ri := range evs[ei+1:] {
				if r := &evs[ei+1+ri]; r.kind == evResults {
					for k := range r.results {
						if r.results[k].id == c.id {
							r.results[k].name, r.results[k].text, r.results[k].failed = c.name, out, failed
						}
					}
					break
				}
			}
		}
	}
}
