package daemon_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/store/model"
)

// TestAPIRecordsItsActor: a repair and a rollback through the API record api:write on
// their runs and reports; the rollback's report names its run.
func TestAPIRecordsItsActor(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	rd, w := "Bearer "+readToken, "Bearer "+apiToken

	code, m := callJSON(t, "POST", b.base+"/v1/sessions/a/repair", w, "")
	require.Equal(t, 200, code, m)
	repairRun := int64(m["id"].(float64))
	code, m = callJSON(t, "POST", b.base+"/v1/sessions/a/rollback", w, "{}")
	require.Equal(t, 200, code, m)

	code, m = callJSON(t, "GET", fmt.Sprintf("%s/v1/runs/%d", b.base, repairRun), rd, "")
	require.Equal(t, 200, code, m)
	require.Equal(t, model.ActorAPI, m["actor"])

	code, m = callJSON(t, "GET", b.base+"/v1/sessions/a/reports", rd, "")
	require.Equal(t, 200, code, m)
	items := m["items"].([]any)
	require.Len(t, items, 2)
	rolledBack := items[0].(map[string]any) // newest first
	require.Equal(t, string(model.StatusRolledBack), rolledBack["status"])
	require.NotNil(t, rolledBack["run_id"], "a rollback names its run")
	for _, it := range items {
		require.Equal(t, model.ActorAPI, it.(map[string]any)["actor"])
	}
	code, m = callJSON(t, "GET", fmt.Sprintf("%s/v1/runs/%d", b.base, int64(rolledBack["run_id"].(float64))), rd, "")
	require.Equal(t, 200, code, m)
	require.Equal(t, string(model.ModeRollback), m["mode"])
	require.Equal(t, model.ActorAPI, m["actor"])

	_, metrics := call(t, "GET", b.base+"/metrics", "", "")
	require.Contains(t, metrics, `tmend_runs_total{mode="rollback",status="completed",trigger="api"} 1`, "the rollback's run is counted")
}
