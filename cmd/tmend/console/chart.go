package console

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/store/model"
)

// chart is a bar chart drawn as SVG on the server: sessions per run, runs in time order.
// Colours come from the stylesheet through classes (the CSP allows no inline style).
type chart struct {
	ID, Title, Desc string
	Width, Height   int
	Bars            []bar
	Ticks           []tick
	Labels          []label
	Legend          []legend
	// PlotLeft, PlotRight and Baseline frame the plot.
	PlotLeft, PlotRight, Baseline int
	Empty                         bool
}

type bar struct {
	X, Y, W, H string
	Class      string
	Title      string
}

type tick struct {
	Y     string
	Value int
	// Text is Value as the axis shows it, short enough for the margin (12k).
	Text string
}

type label struct {
	X    string
	Text string
}

type legend struct {
	Class string
	Term  term
	Total int
}

// series is one kind of bar: how many sessions (or issues) of a run it counts.
type series struct {
	term  term
	class string
	count func(model.RunRow) int
}

// Chart geometry, in SVG units (the SVG scales to its box).
const (
	chartW, chartH           = 720, 220
	padLeft, padRight, padUp = 64, 8, 14
	padDown                  = 40
	// digitW is the width of a digit of an axis label as a phone shows it (22 units; 14
	// on wider screens), gapW the least space between two labels.
	digitW, gapW = 14, 12
)

// runCharts draws the scans that wrote repairs (not dry runs or rollbacks) among runs,
// oldest first: repaired and failed sessions side by side, then the sessions by issue code
// and by dialect stacked.
func runCharts(runs []model.RunRow) []chart {
	var scans []model.RunRow
	for _, r := range runs {
		if !r.DryRun && r.Mode != model.ModeRollback && r.Status != model.RunRunning {
			scans = append(scans, r)
		}
	}
	slices.Reverse(scans)
	outcome := []series{
		{termOf("repaired", ""), "s-repaired", func(r model.RunRow) int { return r.Counts.Repaired }},
		{termOf("failed", ""), "s-failed", func(r model.RunRow) int { return r.Counts.Failed }},
	}
	var issues, dialects []series
	for i, ic := range repair.IssueCodes() {
		code := string(ic.Code)
		issues = append(issues, series{termOf(code, ic.Meaning), fmt.Sprintf("s%d", i%12), func(r model.RunRow) int { return r.Summary.ByIssue[code] }})
	}
	for i, d := range repair.Dialects() {
		name := string(d)
		dialects = append(dialects, series{term{Code: name, Label: name}, fmt.Sprintf("s%d", i%12), func(r model.RunRow) int { return r.Summary.ByDialect[name] }})
	}
	return []chart{
		barChart("chart-outcome", "Repaired and failed sessions per run",
			"Sessions each scan repaired and failed, one bar pair per run, oldest run on the left.", scans, outcome, false),
		// A session with two issues has two: these are issues, not sessions.
		barChart("chart-issue", "Issues found per run, by code",
			"Issues each scan found, by code, one bar per run; a session with several issues counts once for each.", scans, issues, true),
		barChart("chart-dialect", "Sessions by dialect per run",
			"Sessions that were not clean in each scan, by dialect, one bar per run.", scans, dialects, true),
	}
}

func f1(v float64) string { return fmt.Sprintf("%.1f", v) }

// niceMax is the top of the scale for a largest value n: four ticks of a step of 1, 1.5,
// 2, 2.5, 3, 4, 5, 6 or 8 times a power of ten, whole numbers only.
func niceMax(n int) int {
	need := max(1, (n+3)/4)
	for p := 1; ; p *= 10 {
		for _, m := range []int{10, 15, 20, 25, 30, 40, 50, 60, 80} {
			if step := m * p / 10; step >= need && m*p%10 == 0 {
				return 4 * step
			}
		}
	}
}

// shortNumber writes an axis value in at most four characters: 950, 7.5k, 10k, 1.2M.
func shortNumber(v int) string {
	switch {
	case v < 1000:
		return strconv.Itoa(v)
	case v < 1_000_000:
		return strings.TrimSuffix(strings.TrimSuffix(fmt.Sprintf("%.1f", float64(v)/1000), "0"), ".") + "k"
	}
	return strings.TrimSuffix(strings.TrimSuffix(fmt.Sprintf("%.1f", float64(v)/1e6), "0"), ".") + "M"
}

func barChart(id, title, desc string, runs []model.RunRow, ss []series, stacked bool) chart {
	c := chart{ID: id, Title: title, Desc: desc, Width: chartW, Height: chartH,
		PlotLeft: padLeft, PlotRight: chartW - padRight, Baseline: chartH - padDown}
	totals := make([]int, len(ss))
	top := 0
	for _, r := range runs {
		sum := 0
		for k, s := range ss {
			n := s.count(r)
			totals[k] += n
			if stacked {
				sum += n
			} else {
				sum = max(sum, n)
			}
		}
		top = max(top, sum)
	}
	for k, s := range ss {
		if totals[k] > 0 || !stacked {
			c.Legend = append(c.Legend, legend{Class: s.class, Term: s.term, Total: totals[k]})
		}
	}
	if len(runs) == 0 || top == 0 {
		c.Empty = true
		return c
	}
	scaleMax := niceMax(top)
	plotW := float64(chartW - padLeft - padRight)
	plotH := float64(chartH - padUp - padDown)
	y := func(v int) float64 { return float64(chartH-padDown) - plotH*float64(v)/float64(scaleMax) }
	for i := 0; i <= 4; i++ {
		v := scaleMax * i / 4
		c.Ticks = append(c.Ticks, tick{Y: f1(y(v)), Value: v, Text: shortNumber(v)})
	}
	// One slot per run, labelled with its id under its bars: every step-th run, so that
	// the widest id fits.
	slot := plotW / float64(len(runs))
	widest := 0
	for _, r := range runs {
		widest = max(widest, len(strconv.FormatInt(r.ID, 10)))
	}
	step := max(1, int(math.Ceil(float64(widest*digitW+gapW)/slot)))
	for i, r := range runs {
		x0 := float64(padLeft) + slot*float64(i)
		when := r.StartedAt.UTC().Format("2006-01-02 15:04")
		if stacked {
			w := slot * 0.7
			base := 0
			for _, s := range ss {
				n := s.count(r)
				if n == 0 {
					continue
				}
				c.Bars = append(c.Bars, bar{X: f1(x0 + slot*0.15), Y: f1(y(base + n)), W: f1(w), H: f1(y(base) - y(base+n)),
					Class: s.class, Title: fmt.Sprintf("run %d, %s UTC: %d %s", r.ID, when, n, strings.ToLower(s.term.Label))})
				base += n
			}
		} else {
			w := slot * 0.8 / float64(len(ss))
			for k, s := range ss {
				n := s.count(r)
				c.Bars = append(c.Bars, bar{X: f1(x0 + slot*0.1 + w*float64(k)), Y: f1(y(n)), W: f1(w), H: f1(y(0) - y(n)),
					Class: s.class, Title: fmt.Sprintf("run %d, %s UTC: %d %s", r.ID, when, n, strings.ToLower(s.term.Label))})
			}
		}
		if (len(runs)-1-i)%step == 0 { // the newest run always has its label
			c.Labels = append(c.Labels, label{X: f1(x0 + slot/2), Text: strconv.FormatInt(r.ID, 10)})
		}
	}
	return c
}
