package compact

import (
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/tmend/tmend/repair"
)

// Category is what a tool does, which decides how much of its old results a model still
// needs. The strings appear in reports and never change.
type Category string

// The categories.
const (
	CategoryRead  Category = "read"
	CategoryQuery Category = "query"
	CategoryWrite Category = "write"
	CategoryExec  Category = "exec"
	CategoryOther Category = "other"
)

// Categories lists them in the order names are matched.
func Categories() []Category {
	return []Category{CategoryRead, CategoryQuery, CategoryWrite, CategoryExec, CategoryOther}
}

// defaultCategories are the common tool names of each category (globs, any case).
var defaultCategories = map[Category][]string{
	CategoryRead:  {"read_file", "read", "view", "cat", "open_file", "list_dir", "ls", "glob", "read_*", "list_*"},
	CategoryQuery: {"grep*", "search*", "*_search", "semantic_search", "web_fetch", "fetch_url", "webfetch", "list_code_usages", "find*"},
	CategoryWrite: {"write*", "edit*", "create_file", "apply_patch", "str_replace*", "multiedit", "notebookedit"},
	CategoryExec:  {"bash", "shell", "exec*", "run_*", "run_in_terminal", "local_shell", "terminal"},
}

// DefaultProtectTools are tools whose calls and results are never compacted: plans,
// todo lists and memories are state the model keeps on purpose.
var DefaultProtectTools = []string{"todo*", "memory*", "task", "plan*", "skill*"}

// Rule names one compaction rule. The strings appear in reports and never change.
type Rule string

// The rules, in the order they claim a content (the first that applies wins).
const (
	RuleDedupe          Rule = "dedupe"
	RuleSupersedeWrites Rule = "supersede_writes"
	RulePurgeErrors     Rule = "purge_errors"
	RuleClearOld        Rule = "clear_old"
	RuleSoftTrim        Rule = "soft_trim"
	RuleClearInputs     Rule = "clear_inputs"
)

// Rules lists every rule.
func Rules() []Rule {
	return []Rule{RuleDedupe, RuleSupersedeWrites, RulePurgeErrors, RuleClearOld, RuleSoftTrim, RuleClearInputs}
}

// StagePrefix starts the report stage of a compaction action: compact_RULE.
const StagePrefix = "compact_"

// Meaning is what the rule does, in one line: the console shows it for stage compact_RULE.
func (r Rule) Meaning() string {
	switch r {
	case RuleDedupe:
		return "replaces a result identical to a later call's with the same tool and arguments by a stub naming that call"
	case RuleSupersedeWrites:
		return "clips the large arguments (file contents) of a write whose file is later written or read again; the path stays"
	case RulePurgeErrors:
		return "clips the large arguments of a failed call several user turns old; its error text stays"
	case RuleClearOld:
		return "replaces old results of reads and searches (and long command outputs) by a stub: tool, arguments, size, lines, hash"
	case RuleSoftTrim:
		return "keeps the head and tail of another long old result, with a note of what was trimmed"
	case RuleClearInputs:
		return "clips old long string arguments, keeping their start, size, lines and hash"
	}
	return ""
}

// Profile names a preset of Options.
type Profile string

// The profiles.
const (
	Conservative Profile = "conservative"
	Standard     Profile = "standard"
	Aggressive   Profile = "aggressive"
)

// Profiles lists them.
func Profiles() []Profile { return []Profile{Conservative, Standard, Aggressive} }

// Options tune a compaction. Start from ForProfile.
type Options struct {
	// Dialect forces a dialect; "" detects it as repair does.
	Dialect repair.Dialect
	// Rules enabled; a rule not in it never applies.
	Rules map[Rule]bool
	// ClearCategories are the categories whose old results clear_old replaces by a stub.
	ClearCategories map[Category]bool
	// KeepToolUses and KeepTurns: the last tool uses and user turns kept whole.
	KeepToolUses, KeepTurns int
	// ProtectFirstTurn keeps the first user turn whole (the task and its first reads).
	ProtectFirstTurn bool
	// BatchTurns: the boundary moves only in steps of this many user turns, so that a
	// growing session's compacted prefix changes now and then, not every turn.
	BatchTurns int
	// SameCall: dedupe replaces an older read or query result when the same call is made
	// later, even when the later output differs (the older one is stale).
	SameCall bool
	// SoftTrimMax, SoftTrimHead, SoftTrimTail: results over Max characters keep Head and
	// Tail characters.
	SoftTrimMax, SoftTrimHead, SoftTrimTail int
	// ClearInputsOver: string arguments longer than this are clipped by clear_inputs.
	ClearInputsOver int
	// ErrorTurns: inputs of failed calls this many user turns old are clipped.
	ErrorTurns int
	// MinTokens: sessions smaller than this (estimated) are left alone.
	MinTokens int
	// ClearAtLeast: a compaction that saves fewer tokens (estimated) is not written, as
	// rewriting a cached prefix costs more than it saves.
	ClearAtLeast int
	// IdleFor: sessions changed more recently than this (UpdatedAt) are left alone, so a
	// rewrite lands when the provider's prompt cache has expired anyway. 0 disables.
	IdleFor time.Duration
	// Now and UpdatedAt decide IdleFor; a zero UpdatedAt (a file without one) passes.
	Now, UpdatedAt time.Time
	// Overrides map tool-name globs to categories ahead of the built-in names; the first
	// that matches wins.
	Overrides []Override
	// ProtectTools are tool-name globs never compacted.
	ProtectTools []string
}

// ForProfile returns the options of profile p.
func ForProfile(p Profile) (Options, error) {
	o := Options{
		KeepToolUses: 10, KeepTurns: 2, ProtectFirstTurn: true, BatchTurns: 8,
		SoftTrimMax: 4000, SoftTrimHead: 1500, SoftTrimTail: 1500, ClearInputsOver: 2000, ErrorTurns: 4,
		MinTokens: 50_000, ClearAtLeast: 10_000, IdleFor: time.Hour, ProtectTools: DefaultProtectTools,
		Rules:           map[Rule]bool{},
		ClearCategories: map[Category]bool{CategoryRead: true, CategoryQuery: true, CategoryExec: true},
	}
	for _, r := range Rules() {
		o.Rules[r] = true
	}
	switch p {
	case Conservative:
		o.Rules = map[Rule]bool{RuleDedupe: true, RuleClearOld: true}
		o.ClearCategories = map[Category]bool{CategoryRead: true, CategoryQuery: true}
		o.KeepToolUses, o.ClearAtLeast = 20, 20_000
	case Standard, "":
	case Aggressive:
		o.KeepToolUses, o.KeepTurns, o.BatchTurns, o.SameCall = 5, 1, 4, true
		o.MinTokens, o.ClearAtLeast = 20_000, 5_000
	default:
		return Options{}, fmt.Errorf("unknown profile %q (want conservative, standard or aggressive)", p)
	}
	return o, nil
}

// Override puts the tools matching Glob in Category.
type Override struct {
	Glob     string
	Category Category
}

// ParseCategory accepts a category name.
func ParseCategory(s string) (Category, error) {
	for _, c := range Categories() {
		if string(c) == s {
			return c, nil
		}
	}
	return "", fmt.Errorf("unknown category %q (want read, query, write, exec or other)", s)
}

// categoryOf returns tool's category: an override first, then the built-in names.
func (o *Options) categoryOf(tool string) Category {
	t := strings.ToLower(tool)
	for _, ov := range o.Overrides {
		if globMatch(ov.Glob, t) {
			return ov.Category
		}
	}
	for _, c := range Categories() {
		for _, g := range defaultCategories[c] {
			if globMatch(g, t) {
				return c
			}
		}
	}
	return CategoryOther
}

func (o *Options) protected(tool string) bool {
	for _, g := range o.ProtectTools {
		if globMatch(g, strings.ToLower(tool)) {
			return true
		}
	}
	return false
}

// globMatch matches a tool-name glob in any case; a bad glob matches the name itself.
func globMatch(glob, name string) bool {
	glob = strings.ToLower(glob)
	ok, err := path.Match(glob, name)
	return ok || err != nil && glob == name
}
