package sim

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/gavel-slurm/gavel-slurm/internal/throughputs"
	"github.com/gavel-slurm/gavel-slurm/internal/workload"
)

// speedups returns the single-GPU models of the reference table that gain
// the most and the least from a v100 over a k80.
func speedups(t *testing.T, table *throughputs.Table) (most, least string) {
	t.Helper()
	hi, lo := 0.0, math.Inf(1)
	for _, m := range table.Models() {
		v, k := table.Isolated(m, 1, "v100"), table.Isolated(m, 1, "k80")
		if v <= 0 || k <= 0 {
			continue
		}
		if r := v / k; r > hi {
			hi, most = r, m
		}
		if r := v / k; r < lo {
			lo, least = r, m
		}
	}
	if hi < 2*lo {
		t.Fatalf("reference table: speed-ups %v and %v too close for the test", hi, lo)
	}
	return most, least
}

func estimateConfig(t *testing.T, gpus map[string]int, noise float64) Config {
	t.Helper()
	cfg, err := Defaults()
	if err != nil {
		t.Fatal(err)
	}
	cfg.GPUs = gpus
	cfg.PolicyName = "max_min_fairness_perf"
	cfg.Estimate = &Estimation{Noise: noise}
	return cfg
}

// hours is a job of model that runs about h hours on a v100.
func hours(table *throughputs.Table, model string, h, arrival float64) workload.Job {
	return workload.Job{Model: model, ScaleFactor: 1, Priority: 1, Arrival: arrival,
		TotalSteps: math.Round(h * 3600 * table.Isolated(model, 1, "v100"))}
}

func TestEstimatedRatesConvergeToTrueOnes(t *testing.T) {
	cfg := estimateConfig(t, nil, 0)
	model, _ := speedups(t, cfg.Table)
	cases := []struct {
		name  string
		noise float64
		noRef bool
		tol   float64 // relative
	}{
		// Equal intervals average to the rate itself.
		{"exact measurements", 0, false, 1e-12},
		// The moving average halves the weight of older intervals: its
		// spread is about 0.05/√3 (3%), and 10% is over three of those.
		{"5% noise", 0.05, false, 0.10},
		// A measured rate owes nothing to the table.
		{"no reference table", 0, true, 1e-12},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := estimateConfig(t, map[string]int{"v100": 1, "k80": 1}, c.noise)
			cfg.Estimate.NoReference = c.noRef
			res, err := Run(cfg, Jobs{hours(cfg.Table, model, 5, 0)}.Source())
			if err != nil {
				t.Fatal(err)
			}
			rec := res.Jobs[0]
			if !res.Estimated || rec.Estimated == nil || res.EstimateError == nil {
				t.Fatalf("run not marked estimated: %v, %v, %v", res.Estimated, rec.Estimated, res.EstimateError)
			}
			// Every type it ran on for a round is measured by the end.
			ran := 0
			for k, typ := range res.Types {
				if rec.TimePerType[k] < cfg.RoundSeconds {
					continue
				}
				ran++
				truth := cfg.Table.Isolated(model, 1, typ)
				if got := rec.Estimated[k]; math.Abs(got-truth) > c.tol*truth {
					t.Errorf("%s: policy's rate %v, true %v (tolerance %v%%)", typ, got, truth, 100*c.tol)
				}
			}
			if ran == 0 {
				t.Fatalf("the job ran a full round on no type: %v", rec.TimePerType)
			}
		})
	}
}

// Before anything is measured the two unknown jobs look alike to the
// policy, which then splits every type evenly between them. Once measured,
// the job that gains most from a v100 should get most of it.
func TestUnknownJobMovesToItsFastestType(t *testing.T) {
	cfg := estimateConfig(t, map[string]int{"v100": 1, "k80": 1}, 0)
	most, least := speedups(t, cfg.Table)
	for _, order := range [][2]string{{most, least}, {least, most}} {
		jobs := Jobs{hours(cfg.Table, order[0], 40, 0), hours(cfg.Table, order[1], 40, 0)}
		res, err := Run(cfg, jobs.Source())
		if err != nil {
			t.Fatal(err)
		}
		v100 := 0
		for v100 < len(res.Types) && res.Types[v100] != "v100" {
			v100++
		}
		for _, rec := range res.Jobs {
			held := rec.TimePerType[0] + rec.TimePerType[1]
			share := rec.TimePerType[v100] / held
			if rec.Model == most && share < 0.75 {
				t.Errorf("%v: %s spent %.0f%% of its time on the v100, want most of it", order, rec.Model, 100*share)
			}
			if rec.Model == least && share > 0.25 {
				t.Errorf("%v: %s spent %.0f%% of its time on the v100, want little", order, rec.Model, 100*share)
			}
		}
	}
}

// Under estimation the policy sees different rates, but jobs progress at
// their true ones: a job alone on one GPU type finishes when its true rate
// says, whatever the estimator believed.
func TestEstimationKeepsTrueProgress(t *testing.T) {
	cfg := estimateConfig(t, map[string]int{"v100": 1}, 0.2)
	model, _ := speedups(t, cfg.Table)
	job := hours(cfg.Table, model, 3, 0)
	res, err := Run(cfg, Jobs{job}.Source())
	if err != nil {
		t.Fatal(err)
	}
	rate := cfg.Table.Isolated(model, 1, "v100")
	// Whole rounds run int(rate·360) steps, the last one what remains.
	perRound := math.Trunc(rate * cfg.RoundSeconds)
	full := math.Floor(job.TotalSteps / perRound)
	want := full*perRound/rate + (job.TotalSteps-full*perRound)/rate
	if got := res.Jobs[0].JCT(); math.Abs(got-want) > 1e-6*want {
		t.Errorf("JCT %v, want %v", got, want)
	}
}

func TestEstimationErrors(t *testing.T) {
	cases := map[string]struct {
		noise   float64
		policy  string
		wantErr string
		wantIs  error
	}{
		"negative noise":  {noise: -0.1, policy: "max_min_fairness_perf", wantErr: "estimation noise"},
		"NaN noise":       {noise: math.NaN(), policy: "max_min_fairness_perf", wantErr: "estimation noise"},
		"packing policy":  {policy: "max_min_fairness_packed", wantIs: errEstimatePairs},
		"gandiva also":    {policy: "gandiva", wantIs: errEstimatePairs},
		"not a packer ok": {policy: "fifo_perf"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := estimateConfig(t, map[string]int{"v100": 1, "k80": 1}, c.noise)
			cfg.PolicyName = c.policy
			_, err := Run(cfg, Jobs{mkjob("ResNet-18 (batch size 32)", 1000, 0)}.Source())
			switch {
			case c.wantErr == "" && c.wantIs == nil && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
				t.Fatalf("error %v, want one containing %q", err, c.wantErr)
			case c.wantIs != nil && !errors.Is(err, c.wantIs):
				t.Fatalf("error %v, want %v", err, c.wantIs)
			}
		})
	}
}
