package model_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/store/model"
)

func TestParseDurationAndSince(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]time.Duration{"90m": 90 * time.Minute, "7d": 7 * 24 * time.Hour,
		"1d12h": 36 * time.Hour, "0d": 0, "1w": 7 * 24 * time.Hour, "1y": 365 * 24 * time.Hour,
		"1y2w": (365 + 14) * 24 * time.Hour, "720h": 720 * time.Hour, "1.5h": 90 * time.Minute} {
		got, err := model.ParseDuration(v)
		require.NoError(t, err, v)
		require.Equal(t, want, got, v)
	}
	for _, v := range []string{"", "yesterday", "d", "xd", "1d1x", "1w1y", "1x"} {
		_, err := model.ParseDuration(v)
		require.Error(t, err, v)
	}

	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Time{"": {}, "7d": now.Add(-7 * 24 * time.Hour),
		"2026-11-20T03:00:00Z": time.Date(2026, 11, 20, 3, 0, 0, 0, time.UTC)} {
		got, err := model.ParseSince(v, now)
		require.NoError(t, err, v)
		require.True(t, want.Equal(got), "%s: %v", v, got)
	}
	_, err := model.ParseSince("yesterday", now)
	require.ErrorContains(t, err, `got "yesterday"`)
}
