package model_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/store/model"
)

func TestSessionStatuses(t *testing.T) {
	t.Parallel()
	seen := map[model.SessionStatus]bool{}
	for _, st := range model.SessionStatuses() {
		require.False(t, seen[st], "%q listed twice", st)
		seen[st] = true
		got, err := model.ParseSessionStatus(string(st))
		require.NoError(t, err)
		require.Equal(t, st, got)
	}
	// Every status the engine gives is a session status.
	for _, st := range []repair.Status{repair.StatusClean, repair.StatusRepaired, repair.StatusPending,
		repair.StatusUnparseable, repair.StatusUnknownDialect, repair.StatusUnsupported, repair.StatusBroken} {
		require.True(t, seen[model.EngineStatus(st)], "engine status %q missing from SessionStatuses", st)
	}
	for _, bad := range []string{"", "repaird", "Repaired", "completed", "repaired "} {
		_, err := model.ParseSessionStatus(bad)
		require.ErrorContains(t, err, "unknown session status", bad)
	}
}

func TestRunStatuses(t *testing.T) {
	t.Parallel()
	for _, st := range model.RunStatuses() {
		got, err := model.ParseRunStatus(string(st))
		require.NoError(t, err)
		require.Equal(t, st, got)
	}
	for _, bad := range []string{"", "complete", "repaired", "Running"} {
		_, err := model.ParseRunStatus(bad)
		require.ErrorContains(t, err, "unknown run status", bad)
	}
}
