package whatif

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/gavel-slurm/gavel-slurm/internal/htmlpage"
	"github.com/gavel-slurm/gavel-slurm/internal/sim/plot"
)

// maxUsePoints bounds the points of a use-over-time curve: longer
// timelines are averaged into this many equal spans.
const maxUsePoints = 800

// WriteHTML writes the report as one self-contained page: the tables of
// WriteText and charts of JCT, share per account and GPU use over time.
func (r *Report) WriteHTML(out io.Writer) error {
	p, err := r.page()
	if err != nil {
		return err
	}
	return htmlpage.Write(out, p)
}

// shown is the schedules the charts draw: the history, the Slurm replay
// and each policy's first seed (more seeds would crowd the lines; the
// tables give them all).
func (r *Report) shown() []string {
	out := []string{"history", "slurm replay"}
	seen := map[string]bool{}
	for _, f := range r.Runs {
		if !seen[f.Policy] {
			seen[f.Policy] = true
			out = append(out, f.Name)
		}
	}
	return out
}

func (r *Report) page() (htmlpage.Page, error) {
	p := htmlpage.Page{
		Title:    "What if: the site's jobs under each policy",
		Subtitle: fmt.Sprintf("%d jobs finished from %s to %s", r.Jobs, r.From.UTC().Format(time.RFC3339), r.To.UTC().Format(time.RFC3339)),
		Footer:   "gavel-slurm whatif. JCT: submission to end; wait: eligible to first start; FTF: JCT over the JCT under the isolated policy.",
	}
	inputs := htmlpage.Section{Heading: "What was replayed", Paragraphs: r.Summary()}
	inputs.Tables = append(inputs.Tables, countTable("Jobs left out, by reason", "reason", r.Skipped),
		countTable("Where each job's rates on the other GPU types came from", "source", r.Sources))
	p.Sections = append(p.Sections, inputs)

	base := htmlpage.Section{Heading: "Slurm's order, replayed against what happened",
		Paragraphs: []string{fmt.Sprintf("The baseline replays the history in Slurm's order (recorded priority, then submission; backfill by time limits). "+
			"Against the history its average JCT is off by %s (%s) and its average wait by %s (%s). Every policy is read against this replay, not against the raw history.",
			signedPercent(r.Error.RelAvgJCT), signedHours(r.Error.AvgJCT), signedPercent(r.Error.RelAvgWait), signedHours(r.Error.AvgWait))}}
	acct := htmlpage.Table{Caption: "Per account: history and replay", NumericColumns: []int{1, 2, 3, 4, 5, 6},
		Header: []string{"account", "jobs", "avg wait (history)", "avg wait (replay)", "avg JCT (history)", "avg JCT (replay)", "JCT error"}}
	replayed := map[string]Account{}
	for _, a := range r.Slurm.Accounts {
		replayed[a.Name] = a
	}
	for _, a := range r.Real.Accounts {
		b := replayed[a.Name]
		acct.Rows = append(acct.Rows, []string{a.Name, fmt.Sprint(a.Jobs), Hours(a.AvgWait), Hours(b.AvgWait), Hours(a.AvgJCT), Hours(b.AvgJCT),
			signedPercent(r.Error.Accounts[a.Name].RelAvgJCT)})
	}
	base.Tables = append(base.Tables, acct)
	p.Sections = append(p.Sections, base)

	pol := htmlpage.Section{Heading: "Each policy against the Slurm replay"}
	all := htmlpage.Table{Caption: "Every schedule", NumericColumns: []int{1, 2, 3, 4, 5, 6, 7, 8},
		Header: []string{"schedule", "jobs", "avg JCT", "p95 JCT", "avg wait", "p95 wait", "FTF mean", "FTF p95", "JCT vs Slurm replay"}}
	for _, f := range r.all() {
		ftfMean, ftfP95 := "-", "-"
		if f.FTF != nil {
			ftfMean, ftfP95 = fmt.Sprintf("%.2f", f.FTF.Mean), fmt.Sprintf("%.2f", f.FTF.P95)
		}
		vs := "-"
		if r.Slurm.AvgJCT > 0 {
			vs = fmt.Sprintf("%.2fx", f.AvgJCT/r.Slurm.AvgJCT)
		}
		all.Rows = append(all.Rows, []string{f.Name, fmt.Sprint(f.Jobs), Hours(f.AvgJCT), Hours(f.P95JCT), Hours(f.AvgWait), Hours(f.P95Wait), ftfMean, ftfP95, vs})
	}
	pol.Tables = append(pol.Tables, all)
	// JCTs span orders of magnitude on most sites: a log axis keeps the
	// short jobs, most of them, apart.
	cdf := plot.Chart{Title: "Job completion time", XLabel: "JCT (hours, log scale)", YLabel: "fraction of jobs", LogX: true}
	for _, name := range r.shown() {
		jcts := r.JCTs(name)
		s := plot.Series{Name: name, Steps: true}
		for k, v := range jcts {
			s.X = append(s.X, v/3600)
			s.Y = append(s.Y, float64(k+1)/float64(len(jcts)))
		}
		cdf.Series = append(cdf.Series, s)
	}
	svg, err := cdf.SVG()
	if err != nil {
		return p, fmt.Errorf("JCT chart: %w", err)
	}
	pol.Charts = append(pol.Charts, htmlpage.Chart{Caption: "JCT CDF of the history, the Slurm replay and each policy (first seed)", SVG: svg})
	p.Sections = append(p.Sections, pol)

	share := htmlpage.Section{Heading: "Share of GPU time per account"}
	accounts := accountNames(r)
	bars := plot.BarChart{Title: "GPU time received", YLabel: "share of all GPU-seconds (%)", Groups: accounts}
	shareTable := htmlpage.Table{Caption: "Share of GPU time per account", Header: append([]string{"schedule"}, accounts...)}
	for k := range accounts {
		shareTable.NumericColumns = append(shareTable.NumericColumns, k+1)
	}
	byName := map[string]Figures{}
	for _, f := range r.all() {
		byName[f.Name] = f
		row := []string{f.Name}
		for _, a := range accounts {
			row = append(row, fmt.Sprintf("%.1f%%", 100*shareOf(f, a)))
		}
		shareTable.Rows = append(shareTable.Rows, row)
	}
	for _, name := range r.shown() {
		s := plot.BarSeries{Name: name}
		for _, a := range accounts {
			s.Values = append(s.Values, 100*shareOf(byName[name], a))
		}
		bars.Series = append(bars.Series, s)
	}
	svg, err = bars.SVG()
	if err != nil {
		return p, fmt.Errorf("share chart: %w", err)
	}
	share.Tables = append(share.Tables, shareTable)
	share.Charts = append(share.Charts, htmlpage.Chart{Caption: "Share of GPU time per account", SVG: svg})
	p.Sections = append(p.Sections, share)

	use := htmlpage.Section{Heading: "GPU use per type over time",
		Paragraphs: []string{"Busy GPUs of each type, in hours from the first submission of the window."}}
	types := slices.Sorted(maps.Keys(r.Cluster))
	for _, name := range r.shown() {
		s := r.Sched[name]
		if s == nil {
			continue
		}
		c := plot.Chart{Title: "GPUs in use: " + name, XLabel: "time (hours)", YLabel: "busy GPUs"}
		for _, t := range types {
			c.Series = append(c.Series, useSeries(s.Use, t))
		}
		svg, err := c.SVG()
		if err != nil {
			return p, fmt.Errorf("use chart of %s: %w", name, err)
		}
		use.Charts = append(use.Charts, htmlpage.Chart{Caption: "GPU use per type: " + name, SVG: svg})
	}
	p.Sections = append(p.Sections, use)
	if len(r.Failed) > 0 {
		failed := htmlpage.Section{Heading: "Replays that failed"}
		for _, name := range slices.Sorted(maps.Keys(r.Failed)) {
			failed.Paragraphs = append(failed.Paragraphs, name+": "+r.Failed[name])
		}
		p.Sections = append(p.Sections, failed)
	}
	return p, nil
}

func countTable(caption, what string, m map[string]int) htmlpage.Table {
	t := htmlpage.Table{Caption: caption, Header: []string{what, "jobs"}, NumericColumns: []int{1}}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		t.Rows = append(t.Rows, []string{k, fmt.Sprint(m[k])})
	}
	if len(t.Rows) == 0 {
		t.Rows = [][]string{{"none", "0"}}
	}
	return t
}

// useSeries is type t's busy GPUs over the spans, as steps, averaged
// into at most maxUsePoints equal spans.
func useSeries(use []Use, t string) plot.Series {
	s := plot.Series{Name: t, Steps: true}
	if len(use) == 0 {
		return s
	}
	start, end := use[0].Start, use[len(use)-1].End
	if len(use) <= maxUsePoints || !(end > start) {
		for _, u := range use {
			s.X = append(s.X, u.Start/3600)
			s.Y = append(s.Y, u.Busy[t])
		}
		last := use[len(use)-1]
		s.X = append(s.X, last.End/3600)
		s.Y = append(s.Y, last.Busy[t])
		return s
	}
	width := (end - start) / maxUsePoints
	sums := make([]float64, maxUsePoints)
	for _, u := range use {
		// Spread each span's GPU-seconds over the bins it covers.
		for b := int((u.Start - start) / width); b < maxUsePoints; b++ {
			lo, hi := start+float64(b)*width, start+float64(b+1)*width
			overlap := math.Min(hi, u.End) - math.Max(lo, u.Start)
			if lo >= u.End {
				break
			}
			if overlap > 0 {
				sums[b] += overlap * u.Busy[t]
			}
		}
	}
	for b, v := range sums {
		s.X = append(s.X, (start+float64(b)*width)/3600)
		s.Y = append(s.Y, v/width)
	}
	s.X = append(s.X, end/3600)
	s.Y = append(s.Y, sums[maxUsePoints-1]/width)
	return s
}
