package store

import (
	"fmt"
	"slices"
	"strings"
)

// presets map the tables agent platforms create themselves, as their own code creates
// them (research/storage-formats.md; the DDL is in store/testdata).
var presets = map[string]Source{
	// LangChain JS PostgresChatMessageHistory: a SERIAL id orders a session's rows.
	"langchain-postgres": {Table: "langchain_chat_histories", Layout: LayoutMessages,
		SessionColumn: "session_id", OrderColumn: "id", MessageColumn: "message"},
}

// Presets lists the presets' names.
func Presets() []string {
	names := make([]string, 0, len(presets))
	for n := range presets {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Preset returns the source a preset names.
func Preset(name string) (Source, error) {
	src, ok := presets[name]
	if !ok {
		return Source{}, fmt.Errorf("%w: unknown preset %q (want one of %s)", ErrSource, name, strings.Join(Presets(), ", "))
	}
	return src, nil
}
