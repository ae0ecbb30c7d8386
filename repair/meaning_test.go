package repair_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/repair"
)

// TestEveryCodeHasAMeaning: check --help and the console explain every stage and issue
// code from these lines; a new one without its line fails here.
func TestEveryCodeHasAMeaning(t *testing.T) {
	t.Parallel()
	for _, st := range repair.Stages() {
		require.NotEmpty(t, st.Meaning(), st)
	}
	for _, ic := range repair.IssueCodes() {
		require.Equal(t, ic.Meaning, ic.Code.Meaning())
		require.NotEmpty(t, ic.Code.Meaning(), ic.Code)
	}
	require.Empty(t, repair.IssueCode("no_such_code").Meaning())
	require.Empty(t, repair.Stage("no_such_stage").Meaning())
}
