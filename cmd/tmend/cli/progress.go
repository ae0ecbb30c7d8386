package cli

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/schollz/progressbar/v3"
)

// termProgress is a progress bar on a terminal that the command's log lines share: a log
// line clears the bar first (the bar redraws at its next update), so no line lands on
// the bar's. It is the logger's writer.
type termProgress struct {
	mu       sync.Mutex
	w        io.Writer
	throttle time.Duration            // the least time between redraws
	bar      *progressbar.ProgressBar // nil when no bar is shown
	desc     string                   // what the bar says, without the estimate
	about    int64                    // the estimated total while the count is below it, else 0
}

func (t *termProgress) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.bar != nil {
		_ = t.bar.Clear() // best effort: the log line matters more
	}
	return t.w.Write(p)
}

// start shows a bar of total units with the time left; total <= 0 (unknown) shows a
// spinner with the count and the rate. An estimated total shows as that spinner too,
// with "about N" beside it until the count passes N: a share and a time left from a
// guess (a table's statistics a big import made stale) sat at 99% with no time left
// for most of a scan. unit "" counts bytes.
func (t *termProgress) start(desc string, total int64, estimate bool, unit string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.desc, t.about = desc, 0
	if total <= 0 {
		total = -1
	}
	if estimate && total > 0 {
		t.about, total = total, -1
		desc = fmt.Sprintf("%s (about %d)", desc, t.about)
	}
	opts := []progressbar.Option{progressbar.OptionSetWriter(t.w), progressbar.OptionSetDescription(desc),
		progressbar.OptionShowCount(), progressbar.OptionThrottle(t.throttle), progressbar.OptionClearOnFinish()}
	if unit == "" {
		opts = append(opts, progressbar.OptionShowBytes(true))
	} else {
		opts = append(opts, progressbar.OptionShowIts(), progressbar.OptionSetItsString(unit))
	}
	t.bar = progressbar.NewOptions64(total, opts...)
}

// set moves the bar to n; past an estimate, the estimate goes.
func (t *termProgress) set(n int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.bar == nil {
		return
	}
	if t.about > 0 && n > t.about {
		t.about = 0
		t.bar.Describe(t.desc)
	}
	_ = t.bar.Set64(n) // a terminal that cannot be written loses only the bar
}

// stop clears the bar for good, before the command prints its result or its last log
// lines.
func (t *termProgress) stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.bar == nil {
		return
	}
	// Finish ends a spinner's redraw goroutine (Exit alone leaves it ticking); with
	// OptionClearOnFinish it clears the line.
	_ = t.bar.Finish()
	_ = t.bar.Clear()
	_ = t.bar.Exit()
	t.bar = nil
}

// progressLogger is newLogger for a command that shows progress: on a terminal, its log
// lines go through the returned termProgress; elsewhere there is none (nil).
func progressLogger(e *Env, level zerolog.Level) (zerolog.Logger, *termProgress) {
	if !isTerminal(e.Stderr) {
		return newLogger(e, level), nil
	}
	tp := &termProgress{w: e.Stderr, throttle: 100 * time.Millisecond}
	return loggerTo(tp, true, level), tp
}

// countingReader reports the bytes read so far.
type countingReader struct {
	r    io.Reader
	n    int64
	seen func(int64)
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	c.seen(c.n)
	return n, err
}

// inputSize is the size of a regular file, else 0 (a pipe, a terminal).
func inputSize(r io.Reader) int64 {
	f, ok := r.(*os.File)
	if !ok {
		return 0
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return 0
	}
	return fi.Size()
}
