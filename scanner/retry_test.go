package scanner

import (
	"fmt"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/store/model"
)

// TestDatabaseLossIsRetriedForAbout30s holds the defaults to README.md's "retried with
// backoff (about 30s)": Retries attempts, with waits doubling from RetryBase between them.
func TestDatabaseLossIsRetriedForAbout30s(t *testing.T) {
	t.Parallel()
	var c Config
	c.defaults()
	var waits time.Duration // the waits' mean; each is jittered to between half and 1.5 times
	for a := 1; a < c.Retries; a++ {
		waits += c.RetryBase << (a - 1)
	}
	require.InDelta(t, float64(30*time.Second), float64(waits), float64(5*time.Second), "waits %s", waits)

	// retry makes that many attempts and waits that long between them (at a scale of 1ms).
	s := New(nil, zerolog.Nop(), Config{RetryBase: time.Millisecond})
	attempts := 0
	start := time.Now()
	err := s.retry(t.Context(), "read", func() error {
		attempts++
		return fmt.Errorf("%w: connection refused", model.ErrUnavailable)
	})
	require.ErrorIs(t, err, model.ErrUnavailable)
	require.ErrorContains(t, err, fmt.Sprintf("still unavailable after %d attempts", c.Retries))
	require.Equal(t, c.Retries, attempts)
	require.GreaterOrEqual(t, time.Since(start), waits/time.Duration(c.RetryBase/time.Millisecond)/2)
}
