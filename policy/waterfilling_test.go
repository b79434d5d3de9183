package policy

import (
	"fmt"
	"math"
	"math/rand"
	"testing"
)

// wfIdentical returns n identical single-GPU jobs named prefix0..prefixN-1
// in the given entity.
func wfIdentical(prefix string, n int, entity string, arrival0 float64) []Job {
	var jobs []Job
	for i := 0; i < n; i++ {
		jobs = append(jobs, Job{
			ID: fmt.Sprintf("%s%d", prefix, i), Throughputs: map[string]float64{"v100": 2, "k80": 1},
			ScaleFactor: 1, Weight: 1, Entity: entity, Arrival: arrival0 + float64(i),
		})
	}
	return jobs
}

func TestWaterFillingEntityWeights(t *testing.T) {
	// Entity A (weight 2) and entity B (weight 1), three identical jobs
	// each, on a cluster too small for all: both entities are bottlenecked
	// by capacity, so A's jobs together get twice B's normalized throughput.
	tests := []struct {
		name             string
		policyA, policyB string
	}{
		{"fairness/fairness", "fairness", "fairness"},
		{"fifo/fairness", "fifo", "fairness"},
		{"fifo/fifo", "fifo", "fifo"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := &Problem{
				GPUs:     map[string]int{"v100": 2, "k80": 1},
				Entities: map[string]Entity{"A": {Weight: 2, Policy: tc.policyA}, "B": {Weight: 1, Policy: tc.policyB}},
				Jobs:     append(wfIdentical("a", 3, "A", 0), wfIdentical("b", 3, "B", 10)...),
			}
			a := obAllocate(t, "max_min_fairness_water_filling_perf", p)
			mmCheckFeasible(t, p, a)
			var sumA, sumB float64
			for j := range p.Jobs {
				level := mmJobLevel(p, a, j, false)
				if p.Jobs[j].Entity == "A" {
					sumA += level
				} else {
					sumB += level
				}
			}
			if !mmClose(sumA, 2*sumB, 1e-6) {
				t.Errorf("entity A total %.6f, B total %.6f: want a 2:1 ratio", sumA, sumB)
			}
		})
	}
}

func TestWaterFillingFIFOInsideEntity(t *testing.T) {
	// A FIFO entity alone on 2 GPUs: the two earliest arrivals (c then a)
	// get a full GPU each, the latest gets nothing, whatever the problem
	// order.
	p := &Problem{
		GPUs:     map[string]int{"v100": 2},
		Entities: map[string]Entity{"E": {Weight: 1, Policy: "fifo"}},
		Jobs: []Job{
			{ID: "a", Throughputs: map[string]float64{"v100": 1}, ScaleFactor: 1, Entity: "E", Arrival: 5},
			{ID: "b", Throughputs: map[string]float64{"v100": 1}, ScaleFactor: 1, Entity: "E", Arrival: 9},
			{ID: "c", Throughputs: map[string]float64{"v100": 1}, ScaleFactor: 1, Entity: "E", Arrival: 1},
		},
	}
	want := map[string]float64{"a": 1, "b": 0, "c": 1}
	for _, name := range []string{"max_min_fairness_water_filling", "max_min_fairness_water_filling_perf", "max_min_fairness_water_filling_packed"} {
		t.Run(name, func(t *testing.T) {
			a := obAllocate(t, name, p)
			for id, x := range want {
				if got := mmRow(t, a, id)["v100"]; !mmClose(got, x, 1e-6) {
					t.Errorf("job %s: %.6f, want %v", id, got, x)
				}
			}
		})
	}
}

func TestWaterFillingFIFOHeadFillsBeforeNext(t *testing.T) {
	// A FIFO entity (weight 1) next to a lone job (weight 1) on 3 GPUs. The
	// head of the queue and the lone job rise together; the head saturates
	// at one GPU, then the second queued job takes the entity's weight and
	// rises with the lone job until the GPUs run out: 1, 1, 1 — and the
	// third queued job gets nothing.
	p := &Problem{
		GPUs:     map[string]int{"v100": 3},
		Entities: map[string]Entity{"Q": {Weight: 1, Policy: "fifo"}},
		Jobs: []Job{
			{ID: "lone", Throughputs: map[string]float64{"v100": 1}, ScaleFactor: 1, Weight: 1},
			{ID: "q1", Throughputs: map[string]float64{"v100": 1}, ScaleFactor: 1, Entity: "Q", Arrival: 1},
			{ID: "q2", Throughputs: map[string]float64{"v100": 1}, ScaleFactor: 1, Entity: "Q", Arrival: 2},
			{ID: "q3", Throughputs: map[string]float64{"v100": 1}, ScaleFactor: 1, Entity: "Q", Arrival: 3},
		},
	}
	a := obAllocate(t, "max_min_fairness_water_filling_perf", p)
	for id, x := range map[string]float64{"lone": 1, "q1": 1, "q2": 1, "q3": 0} {
		if got := mmRow(t, a, id)["v100"]; !mmClose(got, x, 1e-6) {
			t.Errorf("job %s: %.6f, want %v", id, got, x)
		}
	}
}

// wfCanRise tells whether job j's level can go above its level in a while
// every other job keeps its own: the definition of not bottlenecked,
// checked with a per-job LP straight from §3.1 (no classes).
func wfCanRise(t *testing.T, p *Problem, a *Allocation, j int) bool {
	t.Helper()
	types := p.Types()
	lp := newLinearProgram(0)
	lp.Maximize()
	cols := make([][]int, len(p.Jobs))
	for k := range p.Jobs {
		cols[k] = make([]int, len(types))
		for i, typ := range types {
			cols[k][i] = -1
			if p.Jobs[k].Throughputs[typ] > 0 && p.GPUs[typ] >= p.Jobs[k].ScaleFactor {
				cols[k][i] = lp.AddColumn(0, 1, 0)
			}
		}
	}
	for i, typ := range types {
		var cs []int
		var coefs []float64
		for k := range p.Jobs {
			if cols[k][i] >= 0 {
				cs = append(cs, cols[k][i])
				coefs = append(coefs, float64(p.Jobs[k].ScaleFactor))
			}
		}
		lp.AddRow(cs, coefs, -Inf, float64(p.GPUs[typ]))
	}
	for k := range p.Jobs {
		var cs []int
		var ones, rates []float64
		norm := ProportionalThroughput(p, &p.Jobs[k])
		for i, typ := range types {
			if cols[k][i] >= 0 {
				cs = append(cs, cols[k][i])
				ones = append(ones, 1)
				rates = append(rates, float64(p.Jobs[k].ScaleFactor)*p.Jobs[k].Throughputs[typ]/norm)
			}
		}
		if len(cs) == 0 {
			continue
		}
		lp.AddRow(cs, ones, -Inf, 1)
		if k == j {
			for n, c := range cs {
				lp.SetObjective(c, rates[n])
			}
			continue
		}
		w := p.Jobs[k].Weight
		if w == 0 {
			w = 1
		}
		lp.AddRow(cs, rates, w*mmJobLevel(p, a, k, false)*(1-1e-9), Inf)
	}
	res, err := lp.Solve()
	if err != nil {
		t.Fatalf("rise LP for job %d: %v", j, err)
	}
	w := p.Jobs[j].Weight
	if w == 0 {
		w = 1
	}
	return res.Objective > w*mmJobLevel(p, a, j, false)*(1+1e-5)+1e-6
}

func TestWaterFillingLeavesEveryJobBottlenecked(t *testing.T) {
	// The check must tell a single max-min LP (which may leave jobs able
	// to rise) from water filling.
	risers := 0
	for seed := int64(1); seed <= 8; seed++ {
		rng := rand.New(rand.NewSource(400 + seed))
		p := mmRandomProblem(rng, 6+rng.Intn(20), 2+rng.Intn(5), false)
		flat := obAllocate(t, "max_min_fairness_perf", p)
		for j := range p.Jobs {
			if wfCanRise(t, p, flat, j) {
				risers++
			}
		}
	}
	if risers == 0 {
		t.Fatal("no job can rise under plain max-min on any seed: the check is blind")
	}
	for seed := int64(1); seed <= 8; seed++ {
		rng := rand.New(rand.NewSource(400 + seed))
		p := mmRandomProblem(rng, 6+rng.Intn(20), 2+rng.Intn(5), false)
		hier := seed%2 == 0
		if hier {
			p.Entities = map[string]Entity{"F": {Weight: 2, Policy: "fairness"}, "Q": {Weight: 1, Policy: "fifo"}}
			for j := range p.Jobs {
				switch rng.Intn(3) {
				case 0:
					p.Jobs[j].Entity = "F"
				case 1:
					p.Jobs[j].Entity = "Q"
				}
			}
		}
		t.Run(fmt.Sprintf("seed%d/hierarchical=%v", seed, hier), func(t *testing.T) {
			a := obAllocate(t, "max_min_fairness_water_filling_perf", p)
			mmCheckFeasible(t, p, a)
			for j := range p.Jobs {
				if wfCanRise(t, p, a, j) {
					t.Errorf("job %s (level %.6f) can still rise: not Pareto efficient", p.Jobs[j].ID, mmJobLevel(p, a, j, false))
				}
			}
			// Flat water filling starts from the max-min optimum, so its
			// minimum is the single LP's.
			if !hier {
				flat := obAllocate(t, "max_min_fairness_perf", p)
				if !mmClose(a.Objective, flat.Objective, 1e-6) {
					t.Errorf("objective %.9f, max-min %.9f", a.Objective, flat.Objective)
				}
			}
		})
	}
}

func TestWaterFillingStatsCountLPs(t *testing.T) {
	p := &Problem{GPUs: map[string]int{"v100": 4}}
	for i, w := range []float64{3, 1, 1, 1} {
		p.Jobs = append(p.Jobs, Job{ID: fmt.Sprint(i), Throughputs: map[string]float64{"v100": 1}, ScaleFactor: 1, Weight: w})
	}
	a := obAllocate(t, "max_min_fairness_water_filling_perf", p)
	// Two levels of filling: job 0 saturates first, then the rest.
	if a.Stats.LPs != 2 || a.Stats.Classes != 2 {
		t.Errorf("stats %+v, want 2 LPs over 2 classes", a.Stats)
	}
	if math.IsNaN(a.Objective) {
		t.Fatal("objective is NaN")
	}
}
