package whatif

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Hours formats seconds for people: "2h05m", "14m30s", "45s".
func Hours(s float64) string {
	if math.IsNaN(s) || math.IsInf(s, 0) {
		return "-"
	}
	d := time.Duration(math.Round(s)) * time.Second
	switch {
	case d >= time.Hour:
		return fmt.Sprintf("%dh%02dm", d/time.Hour, (d%time.Hour)/time.Minute)
	case d >= time.Minute:
		return fmt.Sprintf("%dm%02ds", d/time.Minute, (d%time.Minute)/time.Second)
	}
	return fmt.Sprintf("%ds", d/time.Second)
}

func signedPercent(v float64) string { return fmt.Sprintf("%+.1f%%", 100*v) }

// counts renders a map of counts as "a: 1, b: 2" in key order.
func counts(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s: %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// Summary lines describe the inputs: window, cluster, what was left out
// and where rates came from.
func (r *Report) Summary() []string {
	var gpus []string
	for _, t := range slices.Sorted(maps.Keys(r.Cluster)) {
		gpus = append(gpus, fmt.Sprintf("%s=%d", t, r.Cluster[t]))
	}
	left := 0
	for _, n := range r.Skipped {
		left += n
	}
	lines := []string{
		fmt.Sprintf("%d jobs from %s to %s on %s", r.Jobs, r.From.UTC().Format(time.RFC3339), r.To.UTC().Format(time.RFC3339), strings.Join(gpus, " ")),
		fmt.Sprintf("left out: %d (%s)", left, counts(r.Skipped)),
		fmt.Sprintf("rates on other GPU types from: %s", counts(r.Sources)),
		fmt.Sprintf("typed requests: %s (%d jobs kept on their type); %d jobs tagged", r.Typed, r.Pinned, r.Tagged),
	}
	var set []string
	for _, k := range slices.Sorted(maps.Keys(r.Settings)) {
		set = append(set, k+"="+r.Settings[k])
	}
	if len(set) > 0 {
		lines = append(lines, "replay settings: "+strings.Join(set, " "))
	}
	for _, n := range r.Notes {
		lines = append(lines, "note: "+n)
	}
	return lines
}

// WriteText prints the report as tables.
func (r *Report) WriteText(out io.Writer) error {
	var b strings.Builder
	for _, l := range r.Summary() {
		b.WriteString(l + "\n")
	}
	b.WriteString("\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "schedule\tjobs\tavg JCT\tp95 JCT\tavg wait\tp95 wait\tFTF mean\tFTF p95\tJCT vs slurm\t")
	row := func(f Figures, vs string) {
		ftfMean, ftfP95 := "-", "-"
		if f.FTF != nil {
			ftfMean, ftfP95 = fmt.Sprintf("%.2f", f.FTF.Mean), fmt.Sprintf("%.2f", f.FTF.P95)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", f.Name, f.Jobs, Hours(f.AvgJCT), Hours(f.P95JCT),
			Hours(f.AvgWait), Hours(f.P95Wait), ftfMean, ftfP95, vs)
	}
	ratio := func(f Figures) string {
		if r.Slurm.AvgJCT <= 0 {
			return "-"
		}
		return fmt.Sprintf("%.2fx", f.AvgJCT/r.Slurm.AvgJCT)
	}
	row(r.Real, ratio(r.Real))
	row(r.Slurm, ratio(r.Slurm))
	for _, f := range r.Runs {
		row(f, ratio(f))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(&b, "\nSlurm replay against the history: avg JCT %s (%s), avg wait %s (%s)\n",
		signedPercent(r.Error.RelAvgJCT), signedHours(r.Error.AvgJCT), signedPercent(r.Error.RelAvgWait), signedHours(r.Error.AvgWait))
	for _, a := range slices.Sorted(maps.Keys(r.Error.Accounts)) {
		e := r.Error.Accounts[a]
		fmt.Fprintf(&b, "  %s: avg JCT %s, avg wait %s\n", a, signedPercent(e.RelAvgJCT), signedHours(e.AvgWait))
	}
	if len(r.Policies) > 0 {
		b.WriteString("\nper policy, mean over seeds, against the Slurm replay:\n")
		tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "policy\tseeds\tavg JCT\tp95 JCT\tavg wait\tFTF mean\tJCT vs slurm\t")
		for _, p := range r.Policies {
			ftf := "-"
			if p.FTFMean > 0 {
				ftf = fmt.Sprintf("%.2f", p.FTFMean)
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%.2fx\t\n", p.Policy, p.Seeds, Hours(p.AvgJCT), Hours(p.P95JCT), Hours(p.AvgWait), ftf, p.JCTvsSlurm)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	b.WriteString("\nshare of GPU time per account (the entity: the account unless --entities user or a tag's entity=):\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	accounts := accountNames(r)
	fmt.Fprintf(tw, "schedule\t%s\t\n", strings.Join(accounts, "\t"))
	for _, f := range r.all() {
		cells := make([]string, len(accounts))
		for k, a := range accounts {
			cells[k] = fmt.Sprintf("%.1f%%", 100*shareOf(f, a))
		}
		fmt.Fprintf(tw, "%s\t%s\t\n", f.Name, strings.Join(cells, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(r.Failed)) {
		fmt.Fprintf(&b, "\nreplay %s failed: %s\n", name, r.Failed[name])
	}
	_, err := io.WriteString(out, b.String())
	return err
}

func signedHours(s float64) string {
	if s < 0 {
		return "-" + Hours(-s)
	}
	return "+" + Hours(s)
}

// all lists the real history, the baseline and every run.
func (r *Report) all() []Figures {
	return append([]Figures{r.Real, r.Slurm}, r.Runs...)
}

func accountNames(r *Report) []string {
	seen := map[string]bool{}
	for _, a := range r.Real.Accounts {
		seen[a.Name] = true
	}
	return slices.Sorted(maps.Keys(seen))
}

func shareOf(f Figures, account string) float64 {
	for _, a := range f.Accounts {
		if a.Name == account {
			return a.Share
		}
	}
	return 0
}
