package scanner

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/store/model"
)

// slowWrites is a store whose writes last until their context ends, as a statement
// PostgreSQL is still working on when its job's time is up.
type slowWrites struct {
	Store
	reports []model.Report
}

func (s *slowWrites) ApplyBatch(ctx context.Context, as []model.Apply) ([]model.Outcome, []error) {
	<-ctx.Done()
	errs := make([]error, len(as))
	for i := range errs {
		errs[i] = ctx.Err()
	}
	return make([]model.Outcome, len(as)), errs
}

func (s *slowWrites) InsertReports(_ context.Context, rs []model.Report) error {
	s.reports = append(s.reports, rs...)
	return nil
}

// A write that outlasts its partition job's time fails the attempt (River retries it
// from the checkpoint) while the job's context still lives; on a retry, it fails its
// session instead, recorded with the reason, and the attempt goes on: a session too
// large to write in a job's time is reported once, not retried until the job's
// attempts run out. A retry's write begun after half the attempt's time had no fair
// chance: it fails the attempt again.
func TestAWriteLongerThanItsJobFailsTheSessionOnARetry(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name       string
		retry      bool
		begunAgo   time.Duration // the attempt began this long before the write
		failsAlone bool
	}{
		{"first attempt", false, 0, false},
		{"retry", true, 0, true},
		{"retry, write begun late", true, time.Second, false},
	} {
		st := &slowWrites{}
		s := New(st, zerolog.Nop(), Config{})
		// The job's time: the write gets a quarter less, the rest is left to record it.
		ctx, stop := context.WithTimeout(t.Context(), 400*time.Millisecond)
		run, cancel := context.WithCancelCause(ctx)
		batch := []write{{apply: model.Apply{Session: model.Session{ID: "big"}, Report: model.Report{SessionID: "big"}}}}
		ds := s.write(run, &model.RunResult{}, batch, cancel, partScan{retry: c.retry, began: time.Now().Add(-c.begunAgo)})
		require.NoError(t, ctx.Err(), "%s: the write must end before its job's time", c.name)
		if !c.failsAlone {
			require.Empty(t, ds, c.name)
			require.Empty(t, st.reports, c.name)
			require.ErrorContains(t, context.Cause(run), "the write took longer than its partition job may run", c.name)
			require.ErrorContains(t, context.Cause(run), "the job is retried from its checkpoint", c.name)
		} else {
			require.NoError(t, run.Err(), "%s: the attempt goes on", c.name)
			require.Len(t, ds, 1)
			require.Equal(t, model.StatusFailed, ds[0].out.Status)
			require.Contains(t, ds[0].out.Reason, "on a retry too: raise --rescue-after")
			require.Len(t, st.reports, 1)
			require.Equal(t, model.StatusFailed, st.reports[0].Status)
		}
		stop()
	}
}
