package policy

import (
	"errors"
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"
)

// mmMaxMinPolicies are the policies every generic max-min check runs on.
var mmMaxMinPolicies = []string{
	"max_min_fairness",
	"max_min_fairness_perf",
	"max_min_fairness_packed",
	"max_min_fairness_water_filling",
	"max_min_fairness_water_filling_perf",
	"max_min_fairness_water_filling_packed",
}

// mmRow returns the row of the allocation with the given key.
func mmRow(t *testing.T, a *Allocation, key string) map[string]float64 {
	t.Helper()
	row, ok := a.Map()[key]
	if !ok {
		t.Fatalf("%s: no row %q", a.Policy, key)
	}
	return row
}

func mmClose(got, want, tol float64) bool {
	return math.Abs(got-want) <= tol*math.Max(1, math.Abs(want))
}

// mmJobLevel is sf·throughput/(weight·proportional throughput) of job j,
// computed from the allocation's rows (its own and its pairs'), the
// quantity the max-min policies report the minimum of.
func mmJobLevel(p *Problem, a *Allocation, j int, agnostic bool) float64 {
	job := &p.Jobs[j]
	tput := func(t string) float64 {
		v := job.Throughputs[t]
		if agnostic && v > 0 {
			return 1
		}
		return v
	}
	norm := 1.0
	if !agnostic {
		norm = ProportionalThroughput(p, job)
	}
	eff := 0.0
	rows := a.Map()
	for t, x := range rows[job.ID] {
		eff += tput(t) * x
	}
	for _, pair := range p.Pairs {
		row, ok := rows[pair.Jobs[0]+"+"+pair.Jobs[1]]
		if !ok {
			continue
		}
		side := -1
		for s, id := range pair.Jobs {
			if id == job.ID {
				side = s
			}
		}
		if side < 0 {
			continue
		}
		for t, x := range row {
			eff += pair.Throughputs[t][side] * x
		}
	}
	w := job.Weight
	if w == 0 {
		w = 1
	}
	return float64(job.ScaleFactor) * eff / (w * norm)
}

func TestMaxMinPaperHeterogeneityExample(t *testing.T) {
	// §4.1: 1 V100 + 1 K80, three jobs with v100/k80 throughputs 4/1, 3/1
	// and 2/1. The paper gives the rounded allocation below and says jobs
	// get about 10% more than under the isolated 1/3 split.
	p := &Problem{GPUs: map[string]int{"v100": 1, "k80": 1}, Jobs: []Job{
		{ID: "0", Throughputs: map[string]float64{"v100": 4, "k80": 1}, ScaleFactor: 1, Weight: 1},
		{ID: "1", Throughputs: map[string]float64{"v100": 3, "k80": 1}, ScaleFactor: 1, Weight: 1},
		{ID: "2", Throughputs: map[string]float64{"v100": 2, "k80": 1}, ScaleFactor: 1, Weight: 1},
	}}
	want := map[string]map[string]float64{
		"0": {"v100": 0.45, "k80": 0},
		"1": {"v100": 0.45, "k80": 0.09},
		"2": {"v100": 0.09, "k80": 0.91},
	}
	for _, name := range []string{"max_min_fairness_perf", "max_min_fairness_water_filling_perf", "max_min_fairness_packed"} {
		t.Run(name, func(t *testing.T) {
			a := obAllocate(t, name, p)
			for id, types := range want {
				row := mmRow(t, a, id)
				for typ, x := range types {
					if math.Abs(row[typ]-x) > 0.01 {
						t.Errorf("job %s on %s: %.4f, want ≈ %.2f", id, typ, row[typ], x)
					}
				}
			}
			// Job 0 gets 5/11 of the V100: level 4·(5/11)/2.5 = 8/11,
			// which the other two jobs match.
			if !mmClose(a.Objective, 8.0/11, 1e-6) {
				t.Errorf("objective %.6f, want 8/11", a.Objective)
			}
			isolated := math.Inf(1)
			for j := range p.Jobs {
				isolated = math.Min(isolated, IsolatedThroughput(p, &p.Jobs[j])/ProportionalThroughput(p, &p.Jobs[j]))
			}
			if gain := a.Objective/isolated - 1; gain < 0.08 || gain > 0.10 {
				t.Errorf("gain over the isolated split %.3f, want 8-10%%", gain)
			}
		})
	}
}

func TestMaxMinWaterFillingPaperExample(t *testing.T) {
	// §4.3: four identical jobs with weights 3, 1, 1, 1 on four identical
	// GPUs. One max-min LP gives job 1 a full GPU and the others 1/3 each;
	// water filling then raises jobs 2-4 to full GPUs too.
	p := &Problem{GPUs: map[string]int{"v100": 4}}
	for i, w := range []float64{3, 1, 1, 1} {
		p.Jobs = append(p.Jobs, Job{ID: fmt.Sprint(i + 1), Throughputs: map[string]float64{"v100": 5}, ScaleFactor: 1, Weight: w})
	}
	tests := []struct {
		policy string
		want   []float64
	}{
		{"max_min_fairness", []float64{1, 1.0 / 3, 1.0 / 3, 1.0 / 3}},
		{"max_min_fairness_perf", []float64{1, 1.0 / 3, 1.0 / 3, 1.0 / 3}},
		{"max_min_fairness_water_filling", []float64{1, 1, 1, 1}},
		{"max_min_fairness_water_filling_perf", []float64{1, 1, 1, 1}},
		{"max_min_fairness_water_filling_packed", []float64{1, 1, 1, 1}},
	}
	for _, tc := range tests {
		t.Run(tc.policy, func(t *testing.T) {
			a := obAllocate(t, tc.policy, p)
			for i, want := range tc.want {
				if got := mmRow(t, a, p.Jobs[i].ID)["v100"]; !mmClose(got, want, 1e-6) {
					t.Errorf("job %d: %.6f, want %.6f", i+1, got, want)
				}
			}
			// min level/weight: job 1 holds one GPU at weight 3.
			if !mmClose(a.Objective, 1.0/3, 1e-6) {
				t.Errorf("objective %.6f, want 1/3", a.Objective)
			}
		})
	}
}

// mmRandomProblem draws a problem whose jobs are copies of a few templates
// (so classes have several members), with some zero throughputs, scale
// factors 1 and 2, weights 1 and 2, and (with pairs) candidate pairs
// between jobs of equal scale factor.
func mmRandomProblem(rng *rand.Rand, jobs, templates int, pairs bool) *Problem {
	types := []string{"k80", "p100", "v100"}
	p := &Problem{GPUs: map[string]int{}}
	for _, t := range types {
		p.GPUs[t] = 1 + rng.Intn(jobs/2+1)
	}
	type template struct {
		tput map[string]float64
		sf   int
		w    float64
	}
	pool := make([]template, templates)
	for i := range pool {
		tp := template{tput: map[string]float64{}, sf: 1 + rng.Intn(2), w: float64(1 + rng.Intn(2))}
		for _, t := range types {
			if rng.Float64() < 0.8 {
				tp.tput[t] = 0.5 + 10*rng.Float64()
			}
		}
		if len(tp.tput) == 0 {
			tp.tput["v100"] = 1
		}
		pool[i] = tp
	}
	for j := 0; j < jobs; j++ {
		tp := pool[rng.Intn(templates)]
		p.Jobs = append(p.Jobs, Job{ID: fmt.Sprintf("j%d", j), Throughputs: tp.tput, ScaleFactor: tp.sf, Weight: tp.w, Arrival: float64(j)})
	}
	if pairs {
		for a := 0; a < jobs; a++ {
			for b := a + 1; b < jobs; b++ {
				if p.Jobs[a].ScaleFactor != p.Jobs[b].ScaleFactor || rng.Float64() < 0.5 {
					continue
				}
				tp := map[string][2]float64{}
				for _, t := range types {
					ta, tb := p.Jobs[a].Throughputs[t], p.Jobs[b].Throughputs[t]
					if ta > 0 && tb > 0 {
						tp[t] = [2]float64{ta * (0.4 + 0.5*rng.Float64()), tb * (0.4 + 0.5*rng.Float64())}
					}
				}
				p.Pairs = append(p.Pairs, Pair{Jobs: [2]string{p.Jobs[a].ID, p.Jobs[b].ID}, Throughputs: tp})
			}
		}
	}
	return p
}

func TestMaxMinFeasibleOnRandomProblems(t *testing.T) {
	for seed := int64(1); seed <= 8; seed++ {
		rng := rand.New(rand.NewSource(seed))
		p := mmRandomProblem(rng, 6+rng.Intn(20), 2+rng.Intn(5), true)
		for _, name := range mmMaxMinPolicies {
			t.Run(fmt.Sprintf("seed%d/%s", seed, name), func(t *testing.T) {
				a := obAllocate(t, name, p)
				mmCheckFeasible(t, p, a)
			})
		}
	}
}

// mmCheckFeasible checks the §3.1 constraints on an allocation: fractions
// in [0,1], every job's time alone and in pairs at most 1, GPUs used per
// type at most the type's count, no time where a rate is 0.
func mmCheckFeasible(t *testing.T, p *Problem, a *Allocation) {
	t.Helper()
	const tol = 1e-6
	if err := VerifyAllocation(p, a, tol); err != nil {
		t.Error(err)
	}
	if len(a.Rows) < len(p.Jobs) {
		t.Fatalf("%d rows for %d jobs", len(a.Rows), len(p.Jobs))
	}
	byID := map[string]*Job{}
	for j := range p.Jobs {
		byID[p.Jobs[j].ID] = &p.Jobs[j]
		if got := a.Rows[j].Key(); got != p.Jobs[j].ID {
			t.Errorf("row %d is %q, want job %q", j, got, p.Jobs[j].ID)
		}
	}
	pairs := map[string]*Pair{}
	for i := range p.Pairs {
		pairs[p.Pairs[i].Jobs[0]+"+"+p.Pairs[i].Jobs[1]] = &p.Pairs[i]
	}
	timeOf := map[string]float64{}
	used := map[string]float64{}
	for _, row := range a.Rows {
		sf := float64(byID[row.Jobs[0]].ScaleFactor)
		for i, typ := range a.Types {
			x := row.Fractions[i]
			if x < -tol || x > 1+tol {
				t.Errorf("row %s on %s: fraction %v outside [0,1]", row.Key(), typ, x)
			}
			if x <= tol {
				continue
			}
			if len(row.Jobs) == 1 && byID[row.Jobs[0]].Throughputs[typ] == 0 {
				t.Errorf("job %s gets %v on %s where its throughput is 0", row.Key(), x, typ)
			}
			if len(row.Jobs) == 2 {
				pair := pairs[row.Key()]
				if pair == nil {
					t.Fatalf("row %s is no pair of the problem", row.Key())
				}
				if r := pair.Throughputs[typ]; r[0] == 0 || r[1] == 0 {
					t.Errorf("pair %s gets %v on %s where a co-located rate is 0", row.Key(), x, typ)
				}
				if byID[row.Jobs[1]].ScaleFactor != byID[row.Jobs[0]].ScaleFactor {
					t.Errorf("pair %s mixes scale factors", row.Key())
				}
			}
			used[typ] += sf * x
			for _, id := range row.Jobs {
				timeOf[id] += x
			}
		}
	}
	for id, x := range timeOf {
		if x > 1+tol {
			t.Errorf("job %s runs %.6f of the time (alone and in pairs)", id, x)
		}
	}
	for typ, n := range p.GPUs {
		if used[typ] > float64(n)*(1+tol)+tol {
			t.Errorf("type %s: %.6f GPUs used of %d", typ, used[typ], n)
		}
	}
}

func TestMaxMinSharingIncentive(t *testing.T) {
	// Every job keeping its isolated 1/n share is feasible, so no max-min
	// policy may do worse than it on its own objective (measured in the
	// policy's own view: all throughputs 1 for the agnostic ones).
	// (Hierarchical FIFO deliberately starves late jobs, so this property
	// is about the flat policies.)
	for seed := int64(1); seed <= 6; seed++ {
		rng := rand.New(rand.NewSource(seed))
		p := mmRandomProblem(rng, 5+rng.Intn(25), 3+rng.Intn(5), true)
		for _, name := range mmMaxMinPolicies {
			agnostic := !strings.Contains(name, "_perf") && !strings.Contains(name, "_packed")
			t.Run(fmt.Sprintf("seed%d/%s", seed, name), func(t *testing.T) {
				a := obAllocate(t, name, p)
				iso := obAllocate(t, "isolated", p)
				// minLevel is the smallest level over the jobs that can run.
				minLevel := func(a *Allocation, agnostic bool) float64 {
					least := math.Inf(1)
					for j := range p.Jobs {
						if CanRun(p, &p.Jobs[j]) {
							least = math.Min(least, mmJobLevel(p, a, j, agnostic))
						}
					}
					return least
				}
				if got, floor := minLevel(a, agnostic), minLevel(iso, agnostic); got < floor*(1-1e-6) {
					t.Errorf("min level %.6f below the isolated split's %.6f", got, floor)
				}
				// The reported objective is the min level of the rows under
				// the measured throughputs, for every variant.
				if got := minLevel(a, false); !mmClose(a.Objective, got, 1e-6) {
					t.Errorf("objective %.6f, rows give %.6f", a.Objective, got)
				}
			})
		}
	}
}

func TestMaxMinZeroThroughputGetsNoTime(t *testing.T) {
	p := &Problem{GPUs: map[string]int{"k80": 4, "v100": 1}, Jobs: []Job{
		{ID: "v100-only", Throughputs: map[string]float64{"v100": 2, "k80": 0}, ScaleFactor: 1, Weight: 1},
		{ID: "k80-only", Throughputs: map[string]float64{"k80": 1}, ScaleFactor: 1, Weight: 1},
		{ID: "both", Throughputs: map[string]float64{"v100": 3, "k80": 1}, ScaleFactor: 1, Weight: 1},
		{ID: "nowhere", Throughputs: map[string]float64{}, ScaleFactor: 1, Weight: 1},
	}}
	for _, name := range mmMaxMinPolicies {
		t.Run(name, func(t *testing.T) {
			a := obAllocate(t, name, p)
			if x := mmRow(t, a, "v100-only")["k80"]; x != 0 {
				t.Errorf("v100-only job gets %v of a k80", x)
			}
			if x := mmRow(t, a, "k80-only")["v100"]; x != 0 {
				t.Errorf("k80-only job gets %v of a v100", x)
			}
			for typ, x := range mmRow(t, a, "nowhere") {
				if x != 0 {
					t.Errorf("job without throughputs gets %v of %s", x, typ)
				}
			}
			if a.Objective <= 0 {
				t.Errorf("objective %v: the job that runs nowhere must not count", a.Objective)
			}
		})
	}
}

func TestMaxMinRejectsBadInput(t *testing.T) {
	good := func() *Problem {
		return &Problem{GPUs: map[string]int{"v100": 1}, Jobs: []Job{
			{ID: "a", Throughputs: map[string]float64{"v100": 1}, ScaleFactor: 1},
			{ID: "b", Throughputs: map[string]float64{"v100": 1}, ScaleFactor: 1},
		}}
	}
	tests := []struct {
		name   string
		policy string
		break_ func(p *Problem)
		want   string
	}{
		{"scale factor 0", "max_min_fairness_perf", func(p *Problem) { p.Jobs[0].ScaleFactor = 0 }, "scale factor"},
		{"negative weight", "max_min_fairness", func(p *Problem) { p.Jobs[1].Weight = -1 }, "weight"},
		{"NaN throughput", "max_min_fairness_perf", func(p *Problem) { p.Jobs[0].Throughputs["v100"] = math.NaN() }, "throughput"},
		{"negative GPUs", "max_min_fairness_perf", func(p *Problem) { p.GPUs["k80"] = -2 }, "GPUs"},
		{"unknown entity", "max_min_fairness_water_filling_perf", func(p *Problem) { p.Jobs[0].Entity = "ghost" }, "unknown entity"},
		{"bad entity policy", "max_min_fairness_water_filling", func(p *Problem) {
			p.Jobs[0].Entity = "e"
			p.Entities = map[string]Entity{"e": {Weight: 1, Policy: "lottery"}}
		}, "policy"},
		{"pair with unknown job", "max_min_fairness_packed", func(p *Problem) {
			p.Pairs = []Pair{{Jobs: [2]string{"a", "zz"}, Throughputs: map[string][2]float64{"v100": {1, 1}}}}
		}, "unknown job"},
		{"pair with itself", "max_min_fairness_packed", func(p *Problem) {
			p.Pairs = []Pair{{Jobs: [2]string{"a", "a"}, Throughputs: map[string][2]float64{"v100": {1, 1}}}}
		}, "itself"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := good()
			tc.break_(p)
			pol, err := New(tc.policy, Options{})
			if err != nil {
				t.Fatal(err)
			}
			_, err = pol.Allocate(p)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

// mmPerJobMaxMin solves the weighted max-min LP with one set of variables
// per job and per pair (no classes), straight from the §3.1 definitions:
// the reference the class-aggregated policies must match.
func mmPerJobMaxMin(t *testing.T, p *Problem, agnostic, packed bool) float64 {
	t.Helper()
	types := p.Types()
	lp := newLinearProgram(0)
	lp.Maximize()
	tau := lp.AddColumn(-Inf, Inf, 1)
	index := map[string]int{}
	levelCols := make([][]int, len(p.Jobs))
	levelCoefs := make([][]float64, len(p.Jobs))
	timeCols := make([][]int, len(p.Jobs))
	capCols := make([][]int, len(types))
	capCoefs := make([][]float64, len(types))
	norm := make([]float64, len(p.Jobs))
	for j := range p.Jobs {
		job := &p.Jobs[j]
		index[job.ID] = j
		norm[j] = 1
		if !agnostic {
			norm[j] = ProportionalThroughput(p, job)
		}
		for i, typ := range types {
			v := job.Throughputs[typ]
			if v <= 0 || p.GPUs[typ] < job.ScaleFactor {
				continue
			}
			if agnostic {
				v = 1
			}
			c := lp.AddColumn(0, 1, 0)
			levelCols[j] = append(levelCols[j], c)
			levelCoefs[j] = append(levelCoefs[j], float64(job.ScaleFactor)*v/norm[j])
			timeCols[j] = append(timeCols[j], c)
			capCols[i] = append(capCols[i], c)
			capCoefs[i] = append(capCoefs[i], float64(job.ScaleFactor))
		}
	}
	if packed {
		for _, pair := range p.Pairs {
			a, b := index[pair.Jobs[0]], index[pair.Jobs[1]]
			sf := p.Jobs[a].ScaleFactor
			if sf != p.Jobs[b].ScaleFactor {
				continue
			}
			for i, typ := range types {
				r := pair.Throughputs[typ]
				if r[0] <= 0 || r[1] <= 0 || p.GPUs[typ] < sf {
					continue
				}
				c := lp.AddColumn(0, 1, 0)
				for s, j := range []int{a, b} {
					levelCols[j] = append(levelCols[j], c)
					levelCoefs[j] = append(levelCoefs[j], float64(sf)*r[s]/norm[j])
					timeCols[j] = append(timeCols[j], c)
				}
				capCols[i] = append(capCols[i], c)
				capCoefs[i] = append(capCoefs[i], float64(sf))
			}
		}
	}
	for j := range p.Jobs {
		if len(levelCols[j]) == 0 {
			continue
		}
		w := p.Jobs[j].Weight
		if w == 0 {
			w = 1
		}
		lp.AddRow(append(levelCols[j], tau), append(levelCoefs[j], -w), 0, Inf)
		ones := make([]float64, len(timeCols[j]))
		for k := range ones {
			ones[k] = 1
		}
		lp.AddRow(timeCols[j], ones, -Inf, 1)
	}
	for i, typ := range types {
		lp.AddRow(capCols[i], capCoefs[i], -Inf, float64(p.GPUs[typ]))
	}
	res, err := lp.Solve()
	if errors.Is(err, ErrInfeasible) || err != nil {
		t.Fatalf("per-job reference LP: %v", err)
	}
	return res.Objective
}

func TestMaxMinClassesMatchPerJobLP(t *testing.T) {
	tests := []struct {
		policy           string
		agnostic, packed bool
	}{
		{"max_min_fairness", true, false},
		{"max_min_fairness_perf", false, false},
		{"max_min_fairness_packed", false, true},
	}
	for seed := int64(1); seed <= 10; seed++ {
		rng := rand.New(rand.NewSource(100 + seed))
		p := mmRandomProblem(rng, 8+rng.Intn(30), 2+rng.Intn(4), true)
		for _, tc := range tests {
			t.Run(fmt.Sprintf("seed%d/%s", seed, tc.policy), func(t *testing.T) {
				a := obAllocate(t, tc.policy, p)
				want := mmPerJobMaxMin(t, p, tc.agnostic, tc.packed)
				// The policy's own objective, in its own view of the
				// throughputs (Objective reports measured ones).
				got := math.Inf(1)
				for j := range p.Jobs {
					if CanRun(p, &p.Jobs[j]) {
						got = math.Min(got, mmJobLevel(p, a, j, tc.agnostic))
					}
				}
				if !mmClose(got, want, 1e-6) {
					t.Errorf("min level %.9f, per-job LP %.9f", got, want)
				}
				if !tc.packed && a.Stats.Classes >= len(p.Jobs) {
					t.Errorf("%d classes for %d jobs drawn from few templates: no aggregation", a.Stats.Classes, len(p.Jobs))
				}
				if a.Stats.LPs != 1 {
					t.Errorf("%d LPs, want 1", a.Stats.LPs)
				}
			})
		}
	}
}

func TestMaxMinPackedClassesOnSymmetricPairs(t *testing.T) {
	// Pairs whose rates depend only on the two jobs' templates, between all
	// jobs of equal scale factor: the pair structure is symmetric, so the
	// classes stay those of the templates and the objective must still be
	// the per-job LP's.
	for seed := int64(1); seed <= 6; seed++ {
		rng := rand.New(rand.NewSource(300 + seed))
		p := mmRandomProblem(rng, 10+rng.Intn(25), 2+rng.Intn(3), false)
		rates := map[[2]string][2]float64{}
		for a := range p.Jobs {
			for b := a + 1; b < len(p.Jobs); b++ {
				ja, jb := &p.Jobs[a], &p.Jobs[b]
				if ja.ScaleFactor != jb.ScaleFactor {
					continue
				}
				// Jobs of one template share the Throughputs map.
				key := [2]string{fmt.Sprintf("%p", ja.Throughputs), fmt.Sprintf("%p", jb.Throughputs)}
				if key[0] > key[1] {
					key[0], key[1] = key[1], key[0]
					ja, jb = jb, ja
				}
				r, ok := rates[key]
				if !ok {
					r = [2]float64{0.4 + 0.5*rng.Float64(), 0.4 + 0.5*rng.Float64()}
					if key[0] == key[1] {
						r[1] = r[0]
					}
					rates[key] = r
				}
				tp := map[string][2]float64{}
				for typ, v := range ja.Throughputs {
					if w := jb.Throughputs[typ]; v > 0 && w > 0 {
						tp[typ] = [2]float64{v * r[0], w * r[1]}
					}
				}
				p.Pairs = append(p.Pairs, Pair{Jobs: [2]string{ja.ID, jb.ID}, Throughputs: tp})
			}
		}
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			a := obAllocate(t, "max_min_fairness_packed", p)
			want := mmPerJobMaxMin(t, p, false, true)
			if !mmClose(a.Objective, want, 1e-6) {
				t.Errorf("objective %.9f, per-job LP %.9f", a.Objective, want)
			}
			if a.Stats.Classes >= len(p.Jobs) {
				t.Errorf("%d classes for %d jobs on a symmetric pair structure", a.Stats.Classes, len(p.Jobs))
			}
			mmCheckFeasible(t, p, a)
		})
	}
}

func TestMaxMinPackedNotWorseThanUnpacked(t *testing.T) {
	for seed := int64(1); seed <= 8; seed++ {
		rng := rand.New(rand.NewSource(200 + seed))
		p := mmRandomProblem(rng, 6+rng.Intn(20), 2+rng.Intn(4), true)
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			packed := obAllocate(t, "max_min_fairness_packed", p)
			plain := obAllocate(t, "max_min_fairness_perf", p)
			if packed.Objective < plain.Objective*(1-1e-6) {
				t.Errorf("packed %.6f below unpacked %.6f", packed.Objective, plain.Objective)
			}
		})
	}
}

func TestMaxMinPackedUsesGoodPairs(t *testing.T) {
	// Two jobs, one GPU: alone they get half the GPU each (level 1/2 of
	// their rate); co-located at 80% of their solo rate each they both get
	// 0.8, so the pair row takes the whole GPU.
	p := &Problem{GPUs: map[string]int{"v100": 1}, Jobs: []Job{
		{ID: "a", Throughputs: map[string]float64{"v100": 10}, ScaleFactor: 1, Weight: 1},
		{ID: "b", Throughputs: map[string]float64{"v100": 4}, ScaleFactor: 1, Weight: 1},
	}, Pairs: []Pair{{Jobs: [2]string{"a", "b"}, Throughputs: map[string][2]float64{"v100": {8, 3.2}}}}}
	a := obAllocate(t, "max_min_fairness_packed", p)
	if x := mmRow(t, a, "a+b")["v100"]; !mmClose(x, 1, 1e-6) {
		t.Errorf("pair row %.6f, want 1", x)
	}
	if !mmClose(a.Objective, 0.8, 1e-6) {
		t.Errorf("objective %.6f, want 0.8", a.Objective)
	}
	mmCheckFeasible(t, p, a)
}
