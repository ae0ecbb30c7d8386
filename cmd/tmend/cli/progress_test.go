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

	tp.start("scanning", 100, true, "sessions")
	tp.set(10)
	tp.set(40)
	require.Regexp(t, `scanning .*40/100`, out.String())
	require.Regexp(t, `\[\d+s:\d+s\]`, out.String(), "elapsed and time left")

	log.Info().Msg("run finished")
	s := out.String()
	at := strings.Index(s, `{"level":"info"`)
	require.Positive(t, at)
	require.Equal(t, byte('\r'), s[at-1], "the bar's line is cleared before the log line: %q", s)

	// An estimate that is short grows rather than ending the bar.
	tp.set(150)
	tp.set(151)
	require.Regexp(t, `151/166`, out.String())

	out.Reset()
	tp.stop()
	require.Regexp(t, regexp.MustCompile(`^\r *\r$`), out.String(), "stop clears the bar")
	tp.set(160)
	log.Info().Msg("after")
	require.True(t, strings.HasPrefix(out.String(), "\r"))
	require.NotContains(t, out.String(), "160", "no bar after stop")
}
