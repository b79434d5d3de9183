package policy

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"
)

// The pooled agnostic FTF must give the optimal max ρ of the λ-LP search
// and a feasible allocation that leaves no usable GPU idle; where its
// conditions do not hold the LP search must still run.
func TestPooledFTFMatchesTheLPSearch(t *testing.T) {
	cases := []struct {
		name   string
		c      levelCase
		pooled bool // whether the pooled path applies
		mixed  bool // whether jobs differ in the types they can use
	}{
		{"single-GPU, light", levelCase{jobs: 40, types: 3, gpus: 36, distinct: true, maxSF: 1}, true, false},
		{"multi-GPU, contended", levelCase{jobs: 300, types: 3, gpus: 8, distinct: true, maxSF: 1}, true, false},
		{"some jobs cannot run on a type", levelCase{jobs: 60, types: 3, gpus: 36, distinct: true, zeroRate: 0.2, maxSF: 1}, true, true},
		{"multi-GPU, some jobs cannot run on a type", levelCase{jobs: 300, types: 3, gpus: 8, distinct: true, zeroRate: 0.3, maxSF: 1}, true, true},
		{"more types than pooling takes", levelCase{jobs: 60, types: maxPooledTypes + 1, gpus: 8, distinct: true, zeroRate: 0.2, maxSF: 1}, false, true},
	}
	for _, tc := range cases {
		for seed := int64(1); seed <= 4; seed++ {
			t.Run(fmt.Sprintf("%s/seed%d", tc.name, seed), func(t *testing.T) {
				rng := rand.New(rand.NewSource(seed))
				p := levelRandomProblem(rng, tc.c)
				for k := range p.GPUs {
					p.GPUs[k] = tc.c.gpus // every type can hold every job
				}
				for i := range p.Jobs {
					j := &p.Jobs[i]
					if strings.HasPrefix(tc.name, "multi-GPU") {
						j.ScaleFactor = []int{1, 2, 4, 8}[rng.Intn(4)]
					}
					j.StepsRemaining = 1000 + 1e5*rng.Float64()
					j.TimeSinceStart = 36000 * rng.Float64()
					j.IsolatedTime = j.TimeSinceStart * (0.2 + 0.8*rng.Float64())
				}
				if tc.mixed {
					// At least one job must lack a type for the test to
					// mean anything.
					p.Jobs[0].Throughputs = map[string]float64{"t0": 1}
				}
				auto, full := agnosticBothWays(t, p)
				if auto.Stats.Pooled != tc.pooled || full.Stats.Pooled {
					t.Fatalf("pooled: %v (full LP %v), want %v", auto.Stats.Pooled, full.Stats.Pooled, tc.pooled)
				}
				if !tc.pooled || tc.mixed {
					return
				}
				// No GPU idle that some job could still use.
				used, free := 0.0, 0.0
				for k, typ := range auto.Types {
					for j, row := range auto.Rows {
						used += row.Fractions[k] * float64(jobScale(&p.Jobs[j]))
					}
					free += float64(p.GPUs[typ])
				}
				capped := true
				for _, row := range auto.Rows {
					if sum(row.Fractions) < 1-1e-9 {
						capped = false
					}
				}
				if !capped && used < free*(1-1e-9) {
					t.Errorf("%.6g of %.0f GPUs allocated while some job has time left", used, free)
				}
			})
		}
	}
}

// agnosticProblem is p with every rate as the agnostic policy sees it.
func agnosticProblem(p *Problem, tput throughputFunc) *Problem {
	v := *p
	v.Jobs = make([]Job, len(p.Jobs))
	for i := range p.Jobs {
		j := p.Jobs[i]
		j.Throughputs = map[string]float64{}
		for t := range p.GPUs {
			if r := tput(&p.Jobs[i], t); r > 0 {
				j.Throughputs[t] = r
			}
		}
		v.Jobs[i] = j
	}
	return &v
}

// When the jobs that can use only some types need more than those types
// hold, that set of types bounds the optimum, not the whole cluster: here
// ten jobs share 2 t0 GPUs while the t1 GPUs are mostly spare.
func TestPooledFTFHonoursEverySetOfTypes(t *testing.T) {
	p := &Problem{GPUs: map[string]int{"t0": 2, "t1": 20}}
	for i := 0; i < 20; i++ {
		// The t0-only jobs are far behind and set the optimal ρ; the
		// jobs that can use t1 are far ahead and need almost nothing
		// for it, so one raise factor for all would leave them near 0.
		j := Job{ID: fmt.Sprint(i), Throughputs: map[string]float64{"t0": 2 + float64(i%3)}, ScaleFactor: 1 + i%2, Weight: 1,
			StepsRemaining: 5e4 + 1e3*float64(i), TimeSinceStart: 36000, IsolatedTime: 3600}
		if i >= 10 {
			j.Throughputs["t1"] = j.Throughputs["t0"]
			j.TimeSinceStart, j.IsolatedTime = 3600, 360000
		}
		p.Jobs = append(p.Jobs, j)
	}
	auto, _ := agnosticBothWays(t, p)
	if !auto.Stats.Pooled {
		t.Fatal("pooled path not taken")
	}
	// The t1 GPUs the t0-only jobs cannot use hold every job that can
	// use them (15 GPUs for 20): none of those may be left short of all
	// its time.
	for j := 10; j < 20; j++ {
		if got := sum(auto.Rows[j].Fractions); got < 1-1e-9 {
			t.Errorf("job %d gets %.6g of its time while t1 GPUs are idle", j, got)
		}
	}
}

// agnosticBothWays solves p's agnostic finish-time fairness with the
// pooled solution where it applies (auto) and with the LP search (full),
// checks that auto is feasible, and that both reach the same max ρ in the
// agnostic view (their optima may differ under the real rates).
func agnosticBothWays(t *testing.T, p *Problem) (auto, full *Allocation) {
	t.Helper()
	tput := agnosticThroughput(p)
	auto, err := minMaxFinishTimeFairness(p, "finish_time_fairness", tput, false, levelAuto)
	if err != nil {
		t.Fatal(err)
	}
	full, err = minMaxFinishTimeFairness(p, "finish_time_fairness", tput, false, levelFull)
	if err != nil {
		t.Fatal(err)
	}
	mmCheckFeasible(t, p, auto)
	view := agnosticProblem(p, tput)
	pooledRho, err := MaxFinishTimeFairness(view, auto)
	if err != nil {
		t.Fatal(err)
	}
	lpRho, err := MaxFinishTimeFairness(view, full)
	if err != nil {
		t.Fatal(err)
	}
	if !levelAgree(pooledRho, lpRho) {
		t.Fatalf("max ρ in the agnostic view: pooled %.12g, LP search %.12g", pooledRho, lpRho)
	}
	return auto, full
}

func sum(xs []float64) float64 {
	total := 0.0
	for _, x := range xs {
		total += x
	}
	return total
}
