package report

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/gavel-slurm/gavel-slurm/internal/sim"
	"github.com/gavel-slurm/gavel-slurm/internal/sim/plot"
)

// Mean is the seed average of one policy at one arrival rate.
type Mean struct {
	Policy string
	Rate   float64
	// AvgJCTHours is the mean over seeds of the runs' average JCT, in
	// hours. It is NaN when any seed has no result (it failed or
	// saturated) or when no seed ran: an average over the seeds that
	// happened to finish would favour the lucky ones.
	AvgJCTHours float64
	// Saturated is set when some seed stopped because the cluster could
	// not keep up, so that the gap reads as "off the chart", not as "not
	// measured".
	Saturated bool
}

// MeansOverSeeds averages the outcomes over their seeds: one Mean per
// policy and rate, policies in the given order, each with the rates in
// ascending order. Outcomes of other policies or rates are ignored.
func MeansOverSeeds(policies []string, rates []float64, outcomes []sim.Outcome) []Mean {
	type key struct {
		policy string
		rate   float64
	}
	sum := map[key]float64{}
	count := map[key]int{}
	missing := map[key]bool{}
	saturated := map[key]bool{}
	for _, o := range outcomes {
		k := key{o.Policy, o.Rate}
		if o.Result == nil {
			missing[k] = true
			saturated[k] = saturated[k] || o.Saturated()
			continue
		}
		sum[k] += o.Result.AvgJCT / 3600
		count[k]++
	}
	sorted := slices.Clone(rates)
	sort.Float64s(sorted)
	out := make([]Mean, 0, len(policies)*len(sorted))
	for _, p := range policies {
		for _, r := range sorted {
			k := key{p, r}
			m := Mean{Policy: p, Rate: r, AvgJCTHours: math.NaN(), Saturated: saturated[k]}
			if count[k] > 0 && !missing[k] {
				m.AvgJCTHours = sum[k] / float64(count[k])
			}
			out = append(out, m)
		}
	}
	return out
}

// AvgJCTChart plots the seed-averaged JCT against the arrival rate, one
// line per policy (in the order of policies). A rate without a mean is a
// gap, marked as saturated where a seed saturated.
func AvgJCTChart(subtitle string, policies []string, rates []float64, outcomes []sim.Outcome) plot.Chart {
	chart := plot.Chart{Title: "Average JCT vs input rate", Subtitle: subtitle, XLabel: "input rate (jobs/hour)", YLabel: "average JCT (hours)"}
	means := MeansOverSeeds(policies, rates, outcomes)
	for _, p := range policies {
		s := plot.Series{Name: p}
		for _, m := range means {
			if m.Policy != p {
				continue
			}
			if m.Saturated {
				s.Saturated = append(s.Saturated, m.Rate)
			}
			s.X = append(s.X, m.Rate)
			s.Y = append(s.Y, m.AvgJCTHours)
		}
		chart.Series = append(chart.Series, s)
	}
	return chart
}

// Axes lists the policies and rates of outcomes in the order they first
// appear, and their seeds in ascending order: the grid of sweeps read back
// from their CSVs.
func Axes(outcomes []sim.Outcome) (policies []string, rates []float64, seeds []int64) {
	for _, o := range outcomes {
		if !slices.Contains(policies, o.Policy) {
			policies = append(policies, o.Policy)
		}
		if !slices.Contains(rates, o.Rate) {
			rates = append(rates, o.Rate)
		}
		if !slices.Contains(seeds, o.Seed) {
			seeds = append(seeds, o.Seed)
		}
	}
	slices.Sort(seeds)
	return policies, rates, seeds
}

// Setup is what a sweep's chart states about the runs behind it.
type Setup struct {
	// Cluster is the number of GPUs of each type.
	Cluster map[string]int
	// MultiGPU is set when the workload drew multi-GPU scale factors.
	MultiGPU bool
	// Window is the measured job ids [first, end); end 0 measures all.
	Window [2]int
	// Seeds are the seeds averaged over.
	Seeds []int64
}

// Subtitle states the setup in one line: cluster, workload, measured jobs
// and seeds, e.g. "36 k80, 36 v100; single-GPU; jobs 0-7; mean over seeds 0,1".
func (s Setup) Subtitle() string {
	types := make([]string, 0, len(s.Cluster))
	for t := range s.Cluster {
		types = append(types, t)
	}
	sort.Strings(types)
	counts := make([]string, len(types))
	for i, t := range types {
		counts[i] = fmt.Sprintf("%d %s", s.Cluster[t], t)
	}
	work := "single-GPU"
	if s.MultiGPU {
		work = "multi-GPU"
	}
	jobs := "all jobs"
	if s.Window[1] > 0 {
		jobs = fmt.Sprintf("jobs %d-%d", s.Window[0], s.Window[1]-1)
	}
	seeds := make([]string, len(s.Seeds))
	for i, seed := range s.Seeds {
		seeds[i] = strconv.FormatInt(seed, 10)
	}
	return fmt.Sprintf("%s; %s; %s; mean over seeds %s", strings.Join(counts, ", "), work, jobs, strings.Join(seeds, ","))
}
