package store

import "context"

// CheckSourceForTest runs checkSource on a given connection (to test privileges under
// another role).
func CheckSourceForTest(ctx context.Context, q querier, s Source, readOnly bool) (sourceTypes, error) {
	return checkSource(ctx, q, s, readOnly)
}

// CheckMessageSourceForTest runs the messages layout's checks on a given connection.
func CheckMessageSourceForTest(ctx context.Context, q querier, s Source, readOnly bool) error {
	t, err := checkMessageSource(ctx, q, s)
	if err != nil {
		return err
	}
	return checkMessagePrivileges(ctx, q, s, t, readOnly)
}

// UUID6ForTest, LangGraphSessionIDForTest and ParseLangGraphSessionIDForTest make
// LangGraph checkpoint ids and thread session ids.
var (
	UUID6ForTest                   = uuid6
	LangGraphSessionIDForTest      = langGraphSessionID
	ParseLangGraphSessionIDForTest = parseLangGraphSessionID
)

// SendBackMaxForTest is the largest session whose original is sent back with its write.
const SendBackMaxForTest = sendBackMax
