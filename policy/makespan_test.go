package policy

import (
	"math"
	"math/rand"
	"testing"
)

func TestMinTotalDurationPerfByHand(t *testing.T) {
	// With both GPUs busy, a takes x of the v100 and 1−x of the k80, b the
	// rest: eff_a = 3x+1, eff_b = 2−x. Equal finish times 1000/(3x+1) =
	// 500/(2−x) give x = 0.6 and a makespan of 1000/2.8 = 2500/7 s.
	a := obAllocate(t, "min_total_duration_perf", obTwoJobs())
	if want := 2500.0 / 7; math.Abs(a.Objective-want) > 1e-6 {
		t.Fatalf("makespan %v, want %v", a.Objective, want)
	}
	m := a.Map()
	if math.Abs(m["a"]["v100"]-0.6) > 1e-6 || math.Abs(m["a"]["k80"]-0.4) > 1e-6 {
		t.Fatalf("job a got %v, want v100 0.6 k80 0.4", m["a"])
	}
}

func TestMinTotalDurationAgnosticIgnoresSpeedDifferences(t *testing.T) {
	// The agnostic variant sees a at 4 and b at 2 steps/s on both types:
	// each needs 250 s of one GPU, so it believes the makespan is 250 s
	// with both jobs busy all the time, whichever types they get. Measured
	// with the real speeds it cannot beat the aware optimum.
	p := obTwoJobs()
	agn := obAllocate(t, "min_total_duration", p)
	m := agn.Map()
	believed := math.Max(1000/(4*(m["a"]["v100"]+m["a"]["k80"])), 500/(2*(m["b"]["v100"]+m["b"]["k80"])))
	if math.Abs(believed-250) > 1e-6 {
		t.Fatalf("believed makespan %v, want 250", believed)
	}
	if aware := obAllocate(t, "min_total_duration_perf", p); agn.Objective < aware.Objective-1e-6 {
		t.Fatalf("agnostic makespan %v below the optimum %v", agn.Objective, aware.Objective)
	}
}

func TestMinTotalDurationMatchesBruteForce(t *testing.T) {
	for seed := int64(1); seed <= 4; seed++ {
		p := obTwoByTwo(seed)
		got := obAllocate(t, "min_total_duration_perf", p).Objective
		best := obGridSearch(p, func(eff [2]float64) float64 {
			return math.Max(p.Jobs[0].StepsRemaining/eff[0], p.Jobs[1].StepsRemaining/eff[1])
		})
		if got > best*(1+1e-9) || best > got*1.03 {
			t.Errorf("seed %d: LP makespan %v, grid search %v", seed, got, best)
		}
	}
}

// obTwoByTwo draws a 2-job, 2-type problem with one or two GPUs per type.
func obTwoByTwo(seed int64) *Problem {
	rng := rand.New(rand.NewSource(seed))
	p := &Problem{GPUs: map[string]int{"v100": 1 + rng.Intn(2), "k80": 1}}
	for _, id := range []string{"a", "b"} {
		since := 1000 * rng.Float64()
		p.Jobs = append(p.Jobs, Job{
			ID: id, ScaleFactor: 1, Weight: 1,
			Throughputs:    map[string]float64{"v100": 1 + 9*rng.Float64(), "k80": 0.5 + 2*rng.Float64()},
			StepsRemaining: 1000 + 9000*rng.Float64(), TimeSinceStart: since, IsolatedTime: since * rng.Float64(),
		})
	}
	return p
}

// obGridSearch minimizes cost(eff) over a grid of feasible allocations of a
// 2-job, 2-type problem (steps of 1/50 on each of the four fractions).
func obGridSearch(p *Problem, cost func(eff [2]float64) float64) float64 {
	const steps = 50
	types := p.Types()
	best := math.Inf(1)
	var x [2][2]float64
	for i0 := 0; i0 <= steps; i0++ {
		for i1 := 0; i0+i1 <= steps; i1++ {
			for i2 := 0; i2 <= steps; i2++ {
				for i3 := 0; i2+i3 <= steps; i3++ {
					x[0] = [2]float64{float64(i0) / steps, float64(i1) / steps}
					x[1] = [2]float64{float64(i2) / steps, float64(i3) / steps}
					if x[0][0]+x[1][0] > float64(p.GPUs[types[0]]) || x[0][1]+x[1][1] > float64(p.GPUs[types[1]]) {
						continue
					}
					var eff [2]float64
					for j := range eff {
						eff[j] = EffectiveThroughput(&p.Jobs[j], types, x[j][:])
					}
					if eff[0] > 0 && eff[1] > 0 {
						best = math.Min(best, cost(eff))
					}
				}
			}
		}
	}
	return best
}
