package console

import (
	"fmt"
	"html/template"
	"strings"
	"time"

	"github.com/tmend/tmend/compact"
	"github.com/tmend/tmend/repair"
)

// funcs are the templates' helpers. Every string they return is text that html/template
// escapes where it lands; none returns template.HTML.
var funcs = template.FuncMap{
	"ts": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05") },
	"tsp": func(t *time.Time) string {
		if t == nil {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04:05")
	},
	"sessionURL": func(id string) string { return sessionURL(id, 0, 0) },
	"diffURL":    sessionURL,
	"runURL": func(id any) string {
		switch v := id.(type) {
		case *int64:
			if v == nil {
				return ""
			}
			return fmt.Sprintf("/runs/%d", *v)
		case int64:
			return fmt.Sprintf("/runs/%d", v)
		}
		return ""
	},
	// action is what an action did, after its stage, which the template shows with its meaning.
	"action": func(a repair.Action) string {
		s := string(a.Action)
		if a.CallID != "" {
			s += " " + a.CallID
		}
		if a.Detail != "" {
			s += ": " + a.Detail
		}
		return s
	},
	"issue": func(code string) term { return termOf(code, repair.IssueCode(code).Meaning()) },
	"stage": stageTerm,
	"bytes": humanBytes,
	"short": func(h string) string { return h[:min(12, len(h))] },
	"seq": func(a, b int) string {
		if a == b {
			return fmt.Sprintf("#%d", a)
		}
		return fmt.Sprintf("#%d–#%d", a, b)
	},
}

// term is an issue code or stage name as the console shows it: in words, with its
// meaning (the line check --help prints) as the tooltip and the code itself.
type term struct {
	Code, Label, Meaning string
}

// stageTerm is a report action's stage in words: a repair stage, or compact_RULE with
// the compaction rule's meaning.
func stageTerm(name string) term {
	if rule, ok := strings.CutPrefix(name, compact.StagePrefix); ok {
		return termOf(name, compact.Rule(rule).Meaning())
	}
	return termOf(name, repair.Stage(name).Meaning())
}

// humanBytes is a size in kB or MB (powers of 1000, as the compaction stubs write them).
func humanBytes(n int64) string {
	switch {
	case n < 1000:
		return fmt.Sprintf("%d bytes", n)
	case n < 1000*1000:
		return fmt.Sprintf("%.1f kB", float64(n)/1000)
	}
	return fmt.Sprintf("%.1f MB", float64(n)/1e6)
}

func termOf(code, meaning string) term {
	label := strings.ReplaceAll(code, "_", " ")
	if label != "" {
		label = strings.ToUpper(label[:1]) + label[1:]
	}
	return term{Code: code, Label: label, Meaning: meaning}
}
