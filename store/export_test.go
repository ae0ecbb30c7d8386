package store

import "context"

// CheckSourceForTest runs checkSource on a given connection (to test privileges under
// another role).
func CheckSourceForTest(ctx context.Context, q querier, s Source, readOnly bool) (sourceTypes, error) {
	return checkSource(ctx, q, s, readOnly)
}

// UUID6ForTest, LangGraphSessionIDForTest and ParseLangGraphSessionIDForTest make
// LangGraph checkpoint ids and thread session ids.
var (
	UUID6ForTest                   = uuid6
	LangGraphSessionIDForTest      = langGraphSessionID
	ParseLangGraphSessionIDForTest = parseLangGraphSessionID
)
