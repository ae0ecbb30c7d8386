package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/repair/gen"
	"github.com/tmend/tmend/scanner"
	"github.com/tmend/tmend/store/model"
	"github.com/tmend/tmend/store/storetest"
)

// chromium finds the browser: TMEND_CHROMIUM (scripts/test.sh sets it, installing
// Debian's chromium when there is none), else one on PATH. Without one the test fails:
// the console's promises (no script runs, no console errors) are only checked in a browser.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("TMEND_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome-stable", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no Chromium found: run the tests with `bash scripts/test.sh` (it installs Debian's chromium when it can), " +
		"or set TMEND_CHROMIUM to a Chrome or Chromium binary")
	return ""
}

// browser is a headless Chromium tab that records every console message, uncaught
// exception and logged warning or error while the test runs.
type browser struct {
	ctx       context.Context
	artifacts string
	mu        sync.Mutex
	problems  []string
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium(t)), chromedp.WindowSize(1280, 900))
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium refuses to run as root with its sandbox
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	b := &browser{ctx: ctx, artifacts: os.Getenv("TMEND_ARTIFACTS")}
	if b.artifacts == "" {
		b.artifacts = t.TempDir()
	}
	require.NoError(t, os.MkdirAll(b.artifacts, 0o755))
	t.Logf("screenshots in %s", b.artifacts)

	messages := chromedp.Console(ctx) // starts the browser
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range messages {
			if err != nil {
				return
			}
			// Every console call and exception counts; of the browser's own log, warnings
			// and errors (a CSP violation, a failed request).
			if m.Source == "" || m.Type == chromedp.ConsoleWarning || m.Type == chromedp.ConsoleError {
				b.mu.Lock()
				b.problems = append(b.problems, fmt.Sprintf("%s (%s %s:%d)", m, m.Source, m.URL, m.Line))
				b.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { cancelTab(); cancelAlloc(); <-done })
	return b
}

// do runs steps, each bounded by a minute.
func (b *browser) do(t *testing.T, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	require.NoError(t, chromedp.Do(ctx, steps...), what)
}

func get[T any](t *testing.T, b *browser, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	require.NoError(t, err)
	return v
}

func eval[T any](t *testing.T, b *browser, expr string) T {
	t.Helper()
	return get(t, b, chromedp.Evaluate[T](expr))
}

// requireClean fails on anything the browser logged, and on what a page must have: th
// elements with a scope, and a label for every control.
func (b *browser) requireClean(t *testing.T, page string) {
	t.Helper()
	b.mu.Lock()
	problems := b.problems
	b.problems = nil
	b.mu.Unlock()
	require.Empty(t, problems, "the browser logged problems on %s", page)
	require.Zero(t, eval[int](t, b, `document.querySelectorAll('th:not([scope])').length`), "%s: table headers without scope", page)
	require.Zero(t, eval[int](t, b, `Array.from(document.querySelectorAll('input:not([type=hidden]), select'))
		.filter(e => e.labels.length === 0 && !e.getAttribute('aria-label')).length`), "%s: controls without a label", page)
}

// screenshot saves the whole page, or the element sel, as name.png.
func (b *browser) screenshot(t *testing.T, name, sel string) {
	t.Helper()
	var png []byte
	if sel == "" {
		png = get(t, b, chromedp.FullScreenshot(100))
	} else {
		png = get(t, b, chromedp.Screenshot(chromedp.CSS(sel)))
	}
	require.NoError(t, os.WriteFile(filepath.Join(b.artifacts, name+".png"), png, 0o644))
}

// requireFits fails when the page scrolls sideways, when the status strip is not in
// the first screen, or when a column of the runs table that shows is cut off.
func (b *browser) requireFits(t *testing.T, page string) {
	t.Helper()
	require.True(t, eval[bool](t, b, `document.documentElement.scrollWidth <= window.innerWidth`), "%s: wider than the window", page)
	require.True(t, eval[bool](t, b, `(r => r.width > 0 && r.top >= 0 && r.top < window.innerHeight)(
		document.querySelector('#status').getBoundingClientRect())`), "%s: the status strip is not in the first screen", page)
	cut := eval[[]string](t, b, `Array.from(document.querySelectorAll('table.runs thead th'))
		.filter(th => { const r = th.getBoundingClientRect(); return r.width > 0 && (r.left < 0 || r.right > window.innerWidth); })
		.map(th => th.textContent)`)
	require.Empty(t, cut, "%s: run columns outside the window", page)
}

func (b *browser) text(t *testing.T, sel string) string {
	t.Helper()
	return get(t, b, chromedp.TextContent(chromedp.CSS(sel)))
}

// generatedScans adds n scans, each of a few generated sessions of another dialect, most
// of them broken, so that the charts have runs, issue codes and dialects to show.
func (b *testBundle) generatedScans(t *testing.T, n int) {
	t.Helper()
	dialects := repair.Dialects()
	for i := range n {
		var sessions []model.Session
		require.NoError(t, gen.Generate(gen.Config{Seed: uint64(i + 1), Dialect: dialects[i%len(dialects)], Sessions: 3 + 2*i,
			Messages: 8, FaultRate: 0.8}, func(s gen.Session) error {
			msgs, err := json.Marshal(s.Messages)
			sessions = append(sessions, model.Session{ID: fmt.Sprintf("gen-%d-%s", i, s.ID), Messages: msgs})
			return err
		}))
		storetest.Sessions(t, b.pool, sessions...)
		res, err := b.scanner.Run(t.Context(), scanner.RunOptions{Trigger: model.TriggerCron, Mode: model.ModeFull})
		require.NoError(t, err)
		require.Positive(t, res.Counts.Repaired)
	}
}

// TestConsoleInABrowser signs in, walks from the runs to a run, a repaired session and
// its diff, rolls the session back from the page, and checks that a transcript's markup
// stays text, that live progress follows a running run, and that no page logs anything
// to the browser's console.
func TestConsoleInABrowser(t *testing.T) {
	t.Parallel()
	start := time.Now()
	b := setup(t)
	b.generatedScans(t, 4)
	br := newBrowser(t)
	css := func(sel string) chromedp.CSS { return chromedp.CSS(sel) }
	repaired := storetest.Content(t, b.pool, brokenID)

	// Sign in: the runs page sends us to the form and back.
	br.do(t, "open the console", chromedp.Navigate(b.base+"/"), chromedp.WaitVisible(css("#token")))
	require.Equal(t, b.base+"/login?next=%2F", get(t, br, chromedp.Location()))
	br.requireClean(t, "sign-in page")
	br.screenshot(t, "console-login", "")
	br.do(t, "sign in", chromedp.SendKeys(css("#token"), writeToken), chromedp.Submit(css("#token")),
		chromedp.WaitVisible(css("#runs-title")))

	// The runs: both scans, and charts with bars.
	require.Positive(t, eval[int](t, br, `document.querySelectorAll('figure svg rect').length`))
	runs := br.text(t, "table.runs tbody")
	require.Contains(t, runs, "cron")
	require.Contains(t, runs, "cli")
	require.Contains(t, br.text(t, "section.charts"), "Tool call without result")
	br.requireClean(t, "runs page")
	br.requireFits(t, "runs page on a desktop")
	br.screenshot(t, "console-runs", "")

	// On a phone: the status strip first, then the runs with the columns that matter
	// inside the screen, the charts after them.
	br.do(t, "runs on a phone", chromedp.EmulateViewport(390, 844), chromedp.Reload(), chromedp.WaitVisible(css("#runs-title")))
	br.requireFits(t, "runs page on a phone")
	require.Equal(t, 5, eval[int](t, br, `Array.from(document.querySelectorAll('table.runs thead th'))
		.filter(th => th.getBoundingClientRect().width > 0).length`), "run, status, changed, failed, started")
	require.True(t, eval[bool](t, br, `document.querySelector('table.runs').getBoundingClientRect().bottom <
		document.querySelector('section.charts').getBoundingClientRect().top`), "the runs come before the charts")
	br.requireClean(t, "runs page on a phone")
	br.screenshot(t, "console-phone", "")
	br.do(t, "desktop", chromedp.EmulateViewport(1280, 900))

	// A run: its totals and sessions, and a preview of its rollback that changes nothing.
	br.do(t, "open the run", chromedp.Click(css(fmt.Sprintf(`table.runs a[href="/runs/%d"]`, b.runs[0]))),
		chromedp.WaitVisible(css("#sessions")))
	require.Contains(t, br.text(t, ".totals"), "Synthesize missing results")
	require.Contains(t, br.text(t, "#sessions ~ .scroll table"), brokenID)
	br.requireClean(t, "run page")
	br.screenshot(t, "console-run", "")
	br.do(t, "preview the run's rollback", chromedp.Click(css(`form[action$="/rollback"] button`)),
		chromedp.WaitVisible(css(`button.danger`)))
	require.Contains(t, br.text(t, "main"), "Nothing has changed yet. Rolling back would restore 2 sessions and refuse 0.")
	require.Equal(t, repaired, storetest.Content(t, b.pool, brokenID))
	br.requireClean(t, "rollback preview")
	br.screenshot(t, "console-run-rollback-preview", "")

	// A repaired session: its timeline and the diff of the repair, block by block.
	br.do(t, "open the session", chromedp.Navigate(fmt.Sprintf("%s/runs/%d", b.base, b.runs[0])), chromedp.WaitVisible(css("#sessions")),
		chromedp.Click(css(`#sessions ~ .scroll a[href="/session?id=s-broken"]`)), chromedp.WaitVisible(css("#diff-table")))
	diff := br.text(t, "#diff-table")
	for _, s := range []string{"synthesized", "dropped_orphan", "toolu_cat", "toolu_gone",
		"synthesize_missing_results insert toolu_cat", "drop_orphan_results drop toolu_gone", "[tmend]"} {
		require.Contains(t, diff, s)
	}
	require.Contains(t, br.text(t, ".timeline"), "repaired")
	// The long tool result is folded, and all of it is there.
	require.True(t, eval[bool](t, br, `Array.from(document.querySelectorAll('#diff-table details:not([open]) pre'))
		.some(p => p.textContent.split('long-listing-line').length > 150)`))
	br.requireClean(t, "session page")
	br.screenshot(t, "console-session", "")
	br.screenshot(t, "console-diff", "#diff-table")

	// On a phone the page does not scroll sideways.
	br.do(t, "phone", chromedp.EmulateViewport(390, 844), chromedp.Reload(), chromedp.WaitVisible(css("#diff-table")))
	require.False(t, eval[bool](t, br, `document.documentElement.scrollWidth > window.innerWidth + 1`), "wider than a phone")
	br.screenshot(t, "console-session-phone", "")
	br.do(t, "desktop", chromedp.EmulateViewport(1280, 900))

	// Markup in a transcript is text: nothing runs, the title stays.
	br.do(t, "hostile session", chromedp.Navigate(b.base+sessionPath(hostileID)), chromedp.WaitVisible(css("#diff-table")),
		chromedp.Click(css(`[data-expand="diff-table"]`)))
	require.True(t, eval[bool](t, br, `Array.from(document.querySelectorAll('#diff-table details')).every(d => d.open)`),
		"expand all opens every folded content")
	require.Equal(t, "undefined", eval[string](t, br, `String(window.__pwned)`))
	require.Equal(t, `Session `+hostileID+` · tmend`, get(t, br, chromedp.Title()))
	page := br.text(t, "main")
	require.Contains(t, page, `<script>document.title='pwned';window.__pwned=1</script>`)
	require.Contains(t, page, `</pre></td></tr></table><script>window.__pwned=4</script>`)
	br.requireClean(t, "hostile session page")
	br.screenshot(t, "console-hostile", "")

	// Roll the session back from its page; the database holds the original again.
	br.do(t, "roll back", chromedp.Navigate(b.base+sessionPath(brokenID)), chromedp.WaitVisible(css("#diff-table")),
		chromedp.Click(css(`button[form="rollback-1"]`)), chromedp.WaitVisible(css(`[role="status"]`)))
	require.Contains(t, br.text(t, `[role="status"]`), "Restored version 1 as version 3")
	require.JSONEq(t, brokenSession, storetest.Content(t, b.pool, brokenID))
	br.requireClean(t, "rollback result")
	br.screenshot(t, "console-session-rollback", "")

	// Live progress: the runs page follows a running run until it ends, without reloading.
	ctx := t.Context()
	id, _, err := b.store.StartRun(ctx, model.Run{Trigger: model.TriggerAPI, Mode: model.ModeFull, Source: b.store.Source().Name()})
	require.NoError(t, err)
	row := fmt.Sprintf(`tr:has(a[href="/runs/%d"])`, id)
	field := func(name string) string {
		return fmt.Sprintf(`document.querySelector('%s [data-field="%s"]').textContent`, row, name)
	}
	br.do(t, "a running run", chromedp.Navigate(b.base+"/"), chromedp.WaitVisible(css(row+"[data-live-run]")))
	eval[chromedp.Void](t, br, `window.sameDocument = true`)
	require.Equal(t, "running", eval[string](t, br, field("status")))
	require.NoError(t, b.store.InsertReport(ctx, model.Report{RunID: id, SessionID: "x", Status: model.StatusRepaired, Trigger: model.TriggerAPI}))
	get(t, br, chromedp.Poll[bool](field("repaired")+` === "1"`, chromedp.WithPollingTimeout(15*time.Second)))
	get(t, br, chromedp.Poll[bool](`document.querySelector('#running [data-live-run] [data-field="repaired"]').textContent === "1"`,
		chromedp.WithPollingTimeout(15*time.Second)))
	require.NoError(t, b.store.FinishRun(ctx, model.Finish{RunID: id, Status: model.RunCompleted,
		Counts: model.RunCounts{Scanned: 7, Clean: 6, Repaired: 1}, Source: b.store.Source().Name()}))
	get(t, br, chromedp.Poll[bool](field("status")+` === "completed"`, chromedp.WithPollingTimeout(15*time.Second)))
	require.Equal(t, "7", eval[string](t, br, field("scanned")))
	require.True(t, eval[bool](t, br, `window.sameDocument === true`), "the page was reloaded")
	br.requireClean(t, "runs page with a running run")

	// Keyboard: the first Tab reaches the skip link, which moves focus to the content.
	br.do(t, "keyboard", chromedp.Navigate(b.base+"/reports"), chromedp.WaitVisible(css("table.list")), chromedp.KeyEvent(kb.Tab))
	require.Equal(t, "Skip to content", eval[string](t, br, `document.activeElement.textContent`))
	br.do(t, "skip", chromedp.KeyEvent(kb.Enter))
	require.Equal(t, "main", eval[string](t, br, `document.activeElement.id`))
	br.requireClean(t, "reports page")
	br.screenshot(t, "console-reports", "")

	// Signing out ends the sign-in.
	br.do(t, "sign out", chromedp.Click(css(`.signout button`)), chromedp.WaitVisible(css("#token")),
		chromedp.Navigate(b.base+"/reports"), chromedp.WaitVisible(css("#token")))
	br.requireClean(t, "signed out")
	t.Logf("browser test took %s", time.Since(start).Round(time.Millisecond))
}
