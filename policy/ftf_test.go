package policy

import (
	"errors"
	"math"
	"testing"
)

func TestFinishTimeFairnessSingleJobByHand(t *testing.T) {
	// Alone, the job's isolated share is the whole v100 (10 steps/s), and
	// the best allocation is the same: ρ = (100 + 1000/10) / (50 + 1000/10).
	p := &Problem{GPUs: map[string]int{"v100": 1}, Jobs: []Job{{
		ID: "a", Throughputs: map[string]float64{"v100": 10}, ScaleFactor: 1, Weight: 1,
		StepsRemaining: 1000, TimeSinceStart: 100, IsolatedTime: 50,
	}}}
	for _, name := range []string{"finish_time_fairness", "finish_time_fairness_perf", "finish_time_fairness_packed"} {
		if a := obAllocate(t, name, p); math.Abs(a.Objective-4.0/3) > 1e-6 {
			t.Errorf("%s: ρ %v, want 4/3", name, a.Objective)
		}
	}
}

func TestFinishTimeFairnessMatchesBruteForce(t *testing.T) {
	for seed := int64(1); seed <= 4; seed++ {
		p := obTwoByTwo(seed)
		iso := [2]float64{IsolatedThroughput(p, &p.Jobs[0]), IsolatedThroughput(p, &p.Jobs[1])}
		best := obGridSearch(p, func(eff [2]float64) float64 {
			worst := 0.0
			for j := range eff {
				jb := &p.Jobs[j]
				worst = math.Max(worst, themisRho(jb.TimeSinceStart, jb.StepsRemaining, eff[j], jb.IsolatedTime, iso[j]))
			}
			return worst
		})
		got := obAllocate(t, "finish_time_fairness_perf", p).Objective
		if got > best*(1+1e-6) || best > got*1.03 {
			t.Errorf("seed %d: bisection ρ %v, grid search %v", seed, got, best)
		}
	}
}

func TestFinishTimeFairnessMeetsItsOptimumForEveryJob(t *testing.T) {
	// Every job's ρ is at most the reported maximum, and the packed
	// variant without pairs solves the same problem.
	p := obRandomProblem(3, 20)
	a := obAllocate(t, "finish_time_fairness_perf", p)
	rho, err := FinishTimeFairness(p, a)
	if err != nil {
		t.Fatal(err)
	}
	if a.Stats.LPs < 1 {
		t.Errorf("solved %d LPs, want at least one", a.Stats.LPs)
	}
	for i, r := range rho {
		if r > a.Objective*(1+1e-9) {
			t.Errorf("job %s: ρ %v above the reported max %v", p.Jobs[i].ID, r, a.Objective)
		}
	}
	p.Pairs = nil
	if packed := obAllocate(t, "finish_time_fairness_packed", p); math.Abs(packed.Objective-a.Objective) > 1e-5*a.Objective {
		t.Errorf("packed without pairs %v, perf %v", packed.Objective, a.Objective)
	}
}

func TestAgnosticThroughputUsesV100OrFastest(t *testing.T) {
	p := &Problem{GPUs: map[string]int{"v100": 1, "k80": 1, "p100": 1}, Jobs: []Job{
		{ID: "a", Throughputs: map[string]float64{"v100": 4, "k80": 1, "p100": 0}},
		{ID: "b", Throughputs: map[string]float64{"k80": 1, "p100": 3}},
	}}
	tput := agnosticThroughput(p)
	tests := []struct {
		job  int
		typ  string
		want float64
	}{
		{0, "k80", 4}, {0, "v100", 4}, {0, "p100", 0}, // cannot run on p100
		{1, "k80", 3}, {1, "p100", 3}, {1, "v100", 0}, // no v100 entry: fastest
	}
	for _, tc := range tests {
		if got := tput(&p.Jobs[tc.job], tc.typ); got != tc.want {
			t.Errorf("job %s on %s: got %v, want %v", p.Jobs[tc.job].ID, tc.typ, got, tc.want)
		}
	}
}

func TestFinishTimeFairnessSkipsJobsThatCannotRun(t *testing.T) {
	p := obTwoJobs()
	p.Jobs = append(p.Jobs, Job{ID: "big", Throughputs: map[string]float64{"v100": 5}, ScaleFactor: 2, Weight: 1, StepsRemaining: 10})
	a := obAllocate(t, "finish_time_fairness_perf", p)
	if m := a.Map(); m["big"]["v100"] != 0 || m["big"]["k80"] != 0 {
		t.Fatalf("unrunnable job got %v", m["big"])
	}
	if math.IsInf(a.Objective, 0) || math.IsNaN(a.Objective) {
		t.Fatalf("objective %v", a.Objective)
	}
}

// ftfReferenceRho finds the optimal max ρ by plain bisection to 1e-10 over
// feasibility LPs written straight from the definitions: per-job (and, when
// packed, per-pair) columns, the §3.1 constraints, and eff_j >= R_j/(ρ·D_j − t_j)
// for every job that can run. It shares nothing with the policy but LP.
func ftfReferenceRho(t *testing.T, p *Problem, packed bool) float64 {
	t.Helper()
	types := p.Types()
	index := map[string]int{}
	for j := range p.Jobs {
		index[p.Jobs[j].ID] = j
	}
	feasible := func(rho float64) bool {
		lp := newLinearProgram(0)
		effCols := make([][]int, len(p.Jobs))
		effCoefs := make([][]float64, len(p.Jobs))
		capCols := make([][]int, len(types))
		capCoefs := make([][]float64, len(types))
		for j := range p.Jobs {
			job := &p.Jobs[j]
			for k, typ := range types {
				if job.Throughputs[typ] > 0 && p.GPUs[typ] >= job.ScaleFactor {
					c := lp.AddColumn(0, 1, 0)
					effCols[j] = append(effCols[j], c)
					effCoefs[j] = append(effCoefs[j], job.Throughputs[typ])
					capCols[k] = append(capCols[k], c)
					capCoefs[k] = append(capCoefs[k], float64(job.ScaleFactor))
				}
			}
		}
		timeCols := make([][]int, len(p.Jobs))
		for j := range p.Jobs {
			timeCols[j] = append(timeCols[j], effCols[j]...)
		}
		if packed {
			for _, pr := range p.Pairs {
				a, b := index[pr.Jobs[0]], index[pr.Jobs[1]]
				sf := p.Jobs[a].ScaleFactor
				if sf != p.Jobs[b].ScaleFactor {
					continue
				}
				for k, typ := range types {
					r := pr.Throughputs[typ]
					if r[0] <= 0 || r[1] <= 0 || p.GPUs[typ] < sf {
						continue
					}
					c := lp.AddColumn(0, 1, 0)
					for s, j := range []int{a, b} {
						effCols[j] = append(effCols[j], c)
						effCoefs[j] = append(effCoefs[j], r[s])
						timeCols[j] = append(timeCols[j], c)
					}
					capCols[k] = append(capCols[k], c)
					capCoefs[k] = append(capCoefs[k], float64(sf))
				}
			}
		}
		for j := range p.Jobs {
			job := &p.Jobs[j]
			if len(timeCols[j]) == 0 || !CanRun(p, job) {
				continue
			}
			ones := make([]float64, len(timeCols[j]))
			for k := range ones {
				ones[k] = 1
			}
			lp.AddRow(timeCols[j], ones, -Inf, 1)
			d := job.IsolatedTime + job.StepsRemaining/IsolatedThroughput(p, job)
			slack := rho*d - job.TimeSinceStart
			if slack <= 0 {
				return false
			}
			lp.AddRow(effCols[j], effCoefs[j], job.StepsRemaining/slack, Inf)
		}
		for k, typ := range types {
			lp.AddRow(capCols[k], capCoefs[k], -Inf, float64(p.GPUs[typ]))
		}
		_, err := lp.Solve()
		if err != nil && !errors.Is(err, ErrInfeasible) {
			t.Fatalf("reference LP at ρ = %g: %v", rho, err)
		}
		return err == nil
	}
	lo, hi := 0.0, 1.0
	for !feasible(hi) {
		lo, hi = hi, 2*hi
	}
	for hi-lo > 1e-10*hi {
		if mid := (lo + hi) / 2; feasible(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

func TestFinishTimeFairnessMatchesPlainBisection(t *testing.T) {
	// The policy's search (dual bounds, probes at the lower bound) must
	// land on the same optimum as a plain bisection, within 1e-6.
	for seed := int64(1); seed <= 12; seed++ {
		p := obRandomProblem(seed, 20)
		for _, tc := range []struct {
			policy string
			packed bool
		}{{"finish_time_fairness_perf", false}, {"finish_time_fairness_packed", true}} {
			a := obAllocate(t, tc.policy, p)
			if err := VerifyAllocation(p, a, 1e-7); err != nil {
				t.Errorf("seed %d %s: %v", seed, tc.policy, err)
			}
			want := ftfReferenceRho(t, p, tc.packed)
			if math.Abs(a.Objective-want) > 1e-6*want {
				t.Errorf("seed %d %s: max ρ %.9f, plain bisection %.9f", seed, tc.policy, a.Objective, want)
			}
		}
	}
}

func TestFinishTimeFairnessIsScaleInvariant(t *testing.T) {
	// Slower throughputs with proportionally longer histories describe the
	// same situation in other units: the optimal max ρ must not change,
	// whether the rates are steps per second or per week.
	for seed := int64(1); seed <= 6; seed++ {
		base := obAllocate(t, "finish_time_fairness_perf", obRandomProblem(seed, 16)).Objective
		for _, scale := range []float64{1e-7, 1e6} {
			p := obRandomProblem(seed, 16)
			for i := range p.Jobs {
				j := &p.Jobs[i]
				for typ := range j.Throughputs {
					j.Throughputs[typ] *= scale
				}
				j.TimeSinceStart /= scale
				j.IsolatedTime /= scale
			}
			if got := obAllocate(t, "finish_time_fairness_perf", p).Objective; math.Abs(got-base) > 1e-6*base {
				t.Errorf("seed %d, throughputs ×%g: max ρ %.9f, unscaled %.9f", seed, scale, got, base)
			}
		}
	}
}
