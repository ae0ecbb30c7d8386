package cli

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
)

// TestProgressBarAndLogLinesShareTheTerminal: the bar shows the total and the time
// left; a log line written while it shows starts on a line of its own (the bar is
// cleared first), and stop leaves the line empty for what the command prints next.
func TestProgressBarAndLogLinesShareTheTerminal(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	tp := &termProgress{w: &out} // no throttle: every set redraws
	log := loggerTo(tp, false, zerolog.InfoLevel)

	tp.start("importing", 100, false, "sessions")
	tp.set(10)
	tp.set(40)
	require.Regexp(t, `importing .*40/100`, out.String())
	require.Regexp(t, `\[\d+s:\d+s\]`, out.String(), "elapsed and time left")

	log.Info().Msg("run finished")
	s := out.String()
	at := strings.Index(s, `{"level":"info"`)
	require.Positive(t, at)
	require.Equal(t, byte('\r'), s[at-1], "the bar's line is cleared before the log line: %q", s)

	out.Reset()
	tp.stop()
	require.Regexp(t, regexp.MustCompile(`^(\r *\r)+$`), out.String(), "stop clears the bar")
	tp.set(160)
	log.Info().Msg("after")
	require.True(t, strings.HasPrefix(out.String(), "\r"))
	require.NotContains(t, out.String(), "160", "no bar after stop")
}

// TestProgressOfAnEstimateShowsNoShareOrTimeLeft: an estimated total is shown as "about
// N" beside the count and the rate, never as a share or a time left, and goes once the
// count passes it.
func TestProgressOfAnEstimateShowsNoShareOrTimeLeft(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	tp := &termProgress{w: &out}
	tp.start("scanning", 100, true, "sessions")
	tp.set(40)
	require.Regexp(t, `scanning \(about 100\) \(40/-, [0-9]+ sessions/s\)`, out.String())
	tp.set(100)
	require.Regexp(t, `scanning \(about 100\) \(100/-, [0-9]+ sessions/s\)`, out.String())
	out.Reset()
	tp.set(151)
	require.Regexp(t, `scanning \(151/-, [0-9]+ sessions/s\)`, out.String())
	require.NotContains(t, out.String(), "about")
	tp.stop()
	require.NotRegexp(t, `%|/100|:\d+s\]`, out.String())
}
