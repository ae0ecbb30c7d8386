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
	// The Vercel AI chatbot template: a UIMessage {id, role, parts} a row, ordered by
	// "createdAt", the row's uuid its id; a message tmend inserts has no attachments.
	"ai-sdk-chatbot": {Table: `"Message_v2"`, Layout: LayoutMessages,
		SessionColumn: `"chatId"`, OrderColumn: `"createdAt"`,
		MessageMap:    []MapField{{Key: "id", Column: "id"}, {Key: "role", Column: "role"}, {Key: "parts", Column: "parts"}},
		NewRowColumns: []ColumnValue{{Column: "attachments", Value: "[]"}}},
	// Mastra (@mastra/pg): a format-2 message a row, its content object as JSON text,
	// ordered by "createdAt", which "createdAtZ" repeats as a timestamptz.
	"mastra": {Table: "mastra_messages", Layout: LayoutMessages,
		SessionColumn: "thread_id", OrderColumn: `"createdAt"`, OrderAlsoColumn: `"createdAtZ"`,
		MessageMap: []MapField{{Key: "id", Column: "id"}, {Key: "role", Column: "role"},
			{Key: "content", Column: "content", JSON: true}, {Key: "type", Column: "type"}}},
	// LangGraph's PostgresSaver (JS @langchain/langgraph-checkpoint-postgres): a thread's
	// messages are the messages channel of its newest checkpoint (see langGraphLayout).
	"langgraph": {Table: "checkpoints", Layout: LayoutLangGraph},
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
