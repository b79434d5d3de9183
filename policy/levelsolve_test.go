package policy

import (
	"fmt"
	"math"
	"math/rand"
	"testing"
)

// levelCase describes a family of random max-min problems for comparing
// the price decomposition with the full LP.
type levelCase struct {
	name  string
	jobs  int
	types int
	// gpus is the largest GPU count of a type (counts are drawn from
	// 1..gpus, so scale factors above a type's count occur when it is
	// small).
	gpus int
	// distinct jobs draw every rate; otherwise jobs copy one of kinds
	// templates.
	distinct bool
	kinds    int
	// zeroRate is the chance that a job cannot run on a type.
	zeroRate float64
	maxSF    int
}

var levelCases = []levelCase{
	{name: "distinct", jobs: 300, types: 3, gpus: 120, distinct: true, zeroRate: 0, maxSF: 8},
	{name: "distinct-zero-rates", jobs: 300, types: 3, gpus: 120, distinct: true, zeroRate: 0.3, maxSF: 4},
	{name: "distinct-few-gpus", jobs: 120, types: 4, gpus: 6, distinct: true, zeroRate: 0.1, maxSF: 8},
	{name: "identical", jobs: 300, types: 3, gpus: 80, kinds: 4, zeroRate: 0.2, maxSF: 2},
	{name: "undersubscribed", jobs: 40, types: 3, gpus: 200, distinct: true, zeroRate: 0.2, maxSF: 4},
	{name: "two-types", jobs: 200, types: 2, gpus: 60, distinct: true, zeroRate: 0.1, maxSF: 8},
}

// levelRandomProblem draws a problem of case c.
func levelRandomProblem(rng *rand.Rand, c levelCase) *Problem {
	p := &Problem{GPUs: map[string]int{}}
	types := make([]string, c.types)
	for k := range types {
		types[k] = fmt.Sprintf("t%d", k)
		p.GPUs[types[k]] = 1 + rng.Intn(c.gpus)
	}
	draw := func() Job {
		j := Job{Throughputs: map[string]float64{}, ScaleFactor: 1 + rng.Intn(c.maxSF), Weight: 1 + rng.Float64()}
		for _, t := range types {
			if rng.Float64() >= c.zeroRate {
				j.Throughputs[t] = 0.2 + 10*rng.Float64()
			}
		}
		return j
	}
	var kinds []Job
	for i := 0; i < c.kinds; i++ {
		kinds = append(kinds, draw())
	}
	for i := 0; i < c.jobs; i++ {
		var j Job
		if c.distinct {
			j = draw()
		} else {
			j = kinds[rng.Intn(len(kinds))]
		}
		j.ID = fmt.Sprint(i)
		j.Arrival = float64(i)
		p.Jobs = append(p.Jobs, j)
	}
	return p
}

// levelSolveBoth solves one LP of the max-min family with the full LP and
// with the decomposition.
func levelSolveBoth(t *testing.T, p *Problem, weight, floor []float64, minimizeType int) (full, dec *mmSolution, m *mmModel) {
	t.Helper()
	for _, solver := range []levelSolver{levelFull, levelDecomposed} {
		mm, err := newMMModel(p, false, false)
		if err != nil {
			t.Fatal(err)
		}
		mm.solver = solver
		var stats Stats
		sol, err := mm.solve(weight, floor, minimizeType, &stats)
		if err != nil {
			t.Fatalf("solver %d: %v", solver, err)
		}
		if solver == levelFull {
			full = sol
		} else {
			dec, m = sol, mm
		}
	}
	return full, dec, m
}

// levelCheckSolution checks a decomposed solution against the LP's
// constraints: fractions in [0, 1] and only where the job can run, every
// job's time at most 1, every type's GPUs, and every level requirement.
func levelCheckSolution(t *testing.T, m *mmModel, sol *mmSolution, weight, floor []float64, minimizeType int) {
	t.Helper()
	const tol = 1e-7
	used := make([]float64, len(m.types))
	x := m.jobFractions(sol)
	for j, row := range x {
		job := &m.jobs[j]
		sum, level := 0.0, 0.0
		for k, v := range row {
			if v < 0 || v > 1 {
				t.Fatalf("job %d: fraction %v on type %d", j, v, k)
			}
			if v > 0 && job.rate[k] == 0 {
				t.Fatalf("job %d: %v of the time on type %d where it cannot run", j, v, k)
			}
			sum += v
			level += v * job.rate[k]
			used[k] += v * job.sf
		}
		if sum > 1+tol {
			t.Fatalf("job %d runs %v of the time", j, sum)
		}
		need := floor[j]
		if minimizeType < 0 {
			need += weight[j] * sol.tau
		}
		if job.runnable && level < need*(1-tol)-tol {
			t.Fatalf("job %d: level %v below its requirement %v", j, level, need)
		}
	}
	for k, u := range used {
		if u > m.capacity[k]*(1+tol)+tol {
			t.Fatalf("type %d: %v GPUs used of %v", k, u, m.capacity[k])
		}
	}
}

// levelAgree tells whether two objective values agree to a relative 1e-6
// (absolute near 0).
func levelAgree(a, b float64) bool {
	return math.Abs(a-b) <= 1e-6*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}

func TestLevelDecompositionMatchesFullLP(t *testing.T) {
	for _, c := range levelCases {
		for seed := int64(1); seed <= 4; seed++ {
			t.Run(fmt.Sprintf("%s/seed%d", c.name, seed), func(t *testing.T) {
				rng := rand.New(rand.NewSource(seed))
				p := levelRandomProblem(rng, c)
				m, err := newMMModel(p, false, false)
				if err != nil {
					t.Fatal(err)
				}
				n := len(m.jobs)
				weight := make([]float64, n)
				for j := range weight {
					if m.jobs[j].runnable {
						weight[j] = m.jobs[j].weight
					}
				}
				zero := make([]float64, n)

				// Plain max-min.
				full, dec, dm := levelSolveBoth(t, p, weight, zero, -1)
				if !levelAgree(full.tau, dec.tau) {
					t.Fatalf("max-min: decomposed τ %.12g, full LP %.12g", dec.tau, full.tau)
				}
				t.Log("max-min")
				levelCheckSolution(t, dm, dec, weight, zero, -1)

				// A water-filling step: some jobs keep part of what the
				// first optimum gave them, the others rise from there.
				floor := make([]float64, n)
				raise := make([]float64, n)
				for j, row := range dm.jobFractions(dec) {
					for k, v := range row {
						floor[j] += v * m.jobs[j].rate[k]
					}
					floor[j] *= 0.5 + 0.5*rng.Float64()
					if rng.Float64() < 0.5 {
						raise[j] = weight[j]
					}
				}
				full, dec, dm = levelSolveBoth(t, p, raise, floor, -1)
				if !levelAgree(full.tau, dec.tau) {
					t.Fatalf("with floors: decomposed τ %.12g, full LP %.12g", dec.tau, full.tau)
				}
				t.Log("floors")
				levelCheckSolution(t, dm, dec, raise, floor, -1)

				// The spare-capacity LP of water filling: least GPU time
				// on one type that keeps every floor.
				for k := range m.types {
					full, dec, dm = levelSolveBoth(t, p, zero, floor, k)
					if !levelAgree(full.objective, dec.objective) {
						t.Fatalf("least time on type %d: decomposed %.12g, full LP %.12g", k, dec.objective, full.objective)
					}
					levelCheckSolution(t, dm, dec, zero, floor, k)
				}
			})
		}
	}
}

// TestLevelDualsCertifyBottlenecks checks the duals the decomposition
// derives: they must satisfy Σ w_j·μ_j = 1 over the raised classes (the τ
// column's condition), and every class they mark bottlenecked must be one
// that cannot rise alone (the full LP cannot lift it above its level while
// the others keep theirs).
func TestLevelDualsCertifyBottlenecks(t *testing.T) {
	for seed := int64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			rng := rand.New(rand.NewSource(seed))
			p := levelRandomProblem(rng, levelCases[0])
			m, err := newMMModel(p, false, false)
			if err != nil {
				t.Fatal(err)
			}
			weight := make([]float64, len(m.jobs))
			for j := range weight {
				weight[j] = m.jobs[j].weight
			}
			_, dec, _ := levelSolveBoth(t, p, weight, make([]float64, len(weight)), -1)
			sum := 0.0
			for c, members := range dec.classes.Members {
				sum += weight[members[0]] * dec.dual[c]
			}
			if math.Abs(sum-1) > 1e-6 {
				t.Fatalf("Σ w·μ = %v, want 1", sum)
			}
			// Raise one bottlenecked job alone, everyone else keeping the
			// level the optimum promised: it must not rise.
			var level []float64
			for j, row := range m.jobFractions(dec) {
				l := 0.0
				for k, v := range row {
					l += v * m.jobs[j].rate[k]
				}
				level = append(level, math.Min(l, weight[j]*dec.tau))
			}
			checked := 0
			for c, b := range dec.bottlenecked {
				if !b || checked == 3 {
					continue
				}
				checked++
				j := dec.classes.Members[c][0]
				one := make([]float64, len(weight))
				one[j] = 1
				full, _, _ := levelSolveBoth(t, p, one, level, -1)
				if full.tau > 1e-6*math.Max(1, level[j]) {
					t.Errorf("job %d marked bottlenecked rises by %v alone", j, full.tau)
				}
			}
			if checked == 0 {
				t.Fatal("no class marked bottlenecked")
			}
		})
	}
}

// TestLevelPoliciesMatchFullLP runs whole policies both ways on problems
// with distinct jobs.
func TestLevelPoliciesMatchFullLP(t *testing.T) {
	c := levelCase{jobs: 260, types: 3, gpus: 100, distinct: true, zeroRate: 0.15, maxSF: 8}
	for seed := int64(1); seed <= 3; seed++ {
		rng := rand.New(rand.NewSource(seed))
		p := levelRandomProblem(rng, c)
		p.Entities = map[string]Entity{"a": {Weight: 3}, "b": {Weight: 1, Policy: "fifo"}}
		for i := range p.Jobs {
			j := &p.Jobs[i]
			j.StepsRemaining = 1000 + 1e5*rng.Float64()
			j.TimeSinceStart = 36000 * rng.Float64()
			j.IsolatedTime = j.TimeSinceStart * (0.2 + 0.8*rng.Float64())
			switch rng.Intn(3) {
			case 0:
				j.Entity = "a"
			case 1:
				j.Entity = "b"
			}
		}
		policies := []struct {
			name     string
			allocate func(levelSolver) (*Allocation, error)
		}{
			{"max_min_fairness_perf", func(s levelSolver) (*Allocation, error) {
				return (&maxMinPolicy{name: "max_min_fairness_perf", solver: s}).Allocate(p)
			}},
			{"max_min_fairness_water_filling_perf", func(s levelSolver) (*Allocation, error) {
				return (&waterFillingPolicy{name: "max_min_fairness_water_filling_perf", solver: s}).Allocate(p)
			}},
			{"finish_time_fairness_perf", func(s levelSolver) (*Allocation, error) {
				return minMaxFinishTimeFairness(p, "finish_time_fairness_perf", realThroughput, false, s)
			}},
		}
		for _, pol := range policies {
			t.Run(fmt.Sprintf("seed%d/%s", seed, pol.name), func(t *testing.T) {
				full, err := pol.allocate(levelFull)
				if err != nil {
					t.Fatal(err)
				}
				dec, err := pol.allocate(levelDecomposed)
				if err != nil {
					t.Fatal(err)
				}
				mmCheckFeasible(t, p, dec)
				if !levelAgree(full.Objective, dec.Objective) {
					t.Fatalf("objective: decomposed %.12g, full LP %.12g", dec.Objective, full.Objective)
				}
				if pol.name == "max_min_fairness_water_filling_perf" {
					// Water filling's answer is unique in every job's level.
					lf, ld := mmLevels(p, full), mmLevels(p, dec)
					for j := range lf {
						if math.Abs(lf[j]-ld[j]) > 1e-5*math.Max(1, lf[j]) {
							t.Fatalf("job %d: level %v decomposed, %v full LP", j, ld[j], lf[j])
						}
					}
				}
			})
		}
	}
}

// mmLevels is every job's normalized level under allocation a.
func mmLevels(p *Problem, a *Allocation) []float64 {
	levels := make([]float64, len(p.Jobs))
	for j := range p.Jobs {
		levels[j] = mmJobLevel(p, a, j, false)
	}
	return levels
}

// TestLevelAnyStartGivesTheOptimum starts the decomposition from poor
// placements (every unit folded onto its slowest type, which overloads
// types and holds floors where they do not fit) and checks that it still
// ends at the full LP's optimum: the start may only cost masters.
func TestLevelAnyStartGivesTheOptimum(t *testing.T) {
	for _, c := range levelCases {
		for seed := int64(1); seed <= 3; seed++ {
			t.Run(fmt.Sprintf("%s/seed%d", c.name, seed), func(t *testing.T) {
				rng := rand.New(rand.NewSource(seed))
				p := levelRandomProblem(rng, c)
				m, err := newMMModel(p, false, false)
				if err != nil {
					t.Fatal(err)
				}
				// Floors from a feasible point: part of the max-min
				// optimum's levels.
				weight := make([]float64, len(m.jobs))
				for j := range weight {
					if m.jobs[j].runnable {
						weight[j] = m.jobs[j].weight
					}
				}
				full, _, _ := levelSolveBoth(t, p, weight, make([]float64, len(weight)), -1)
				lp := &levelLP{capacity: m.capacity, raise: true, costType: -1}
				for j, row := range m.jobFractions(full) {
					level := 0.0
					for k, v := range row {
						level += v * m.jobs[j].rate[k]
					}
					u := levelUnit{rate: m.jobs[j].rate, load: m.jobs[j].sf, floor: level * rng.Float64()}
					if rng.Float64() < 0.5 {
						u.weight = weight[j]
					}
					lp.units = append(lp.units, u)
				}
				slowest := make([]levelPlace, len(lp.units))
				for u := range lp.units {
					slowest[u] = placeExplicit
					for k, r := range lp.units[u].rate {
						if r > 0 && (slowest[u] == placeExplicit || r < lp.units[u].rate[slowest[u].b]) {
							slowest[u] = levelPlace{-1, k}
						}
					}
				}
				explicit := make([]levelPlace, len(lp.units))
				for u := range explicit {
					explicit[u] = placeExplicit
				}
				for _, mode := range []int{-1, 0} {
					lp.raise, lp.costType = mode < 0, mode
					if !lp.raise {
						for u := range lp.units {
							lp.units[u].weight = 0
						}
					}
					want, err := solveLevel(lp, nil, explicit)
					if err != nil {
						t.Fatal(err)
					}
					got, err := solveLevel(lp, &levelWarm{prices: make([]float64, len(lp.capacity))}, slowest)
					if err != nil {
						t.Fatal(err)
					}
					if !levelAgree(got.objective, want.objective) {
						t.Fatalf("mode %d: from the slowest types %.12g, full LP %.12g", mode, got.objective, want.objective)
					}
				}
			})
		}
	}
}

// TestLevelPolicyRemembersLastRound allocates twice with one policy value:
// the second call starts from the first one's prices and placements and
// needs one master; after jobs leave and arrive the answer is still the
// exact optimum a fresh policy finds.
func TestLevelPolicyRemembersLastRound(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	p := levelRandomProblem(rng, levelCase{jobs: 400, types: 3, gpus: 150, distinct: true, zeroRate: 0.1, maxSF: 8})
	for _, name := range []string{"max_min_fairness_perf", "max_min_fairness_water_filling_perf"} {
		t.Run(name, func(t *testing.T) {
			newPolicy := func() Policy {
				if name == "max_min_fairness_perf" {
					return &maxMinPolicy{name: name, solver: levelDecomposed}
				}
				return &waterFillingPolicy{name: name, solver: levelDecomposed}
			}
			pol := newPolicy()
			first, err := pol.Allocate(p)
			if err != nil {
				t.Fatal(err)
			}
			again, err := pol.Allocate(p)
			if err != nil {
				t.Fatal(err)
			}
			if !levelAgree(first.Objective, again.Objective) {
				t.Fatalf("same problem twice: objective %v then %v", first.Objective, again.Objective)
			}
			if name == "max_min_fairness_perf" && again.Stats.LPs != 1 {
				t.Errorf("same problem again took %d LPs, want 1 (first took %d)", again.Stats.LPs, first.Stats.LPs)
			}
			// A tenth of the jobs leave and new ones arrive.
			next := *p
			next.Jobs = append([]Job(nil), p.Jobs[len(p.Jobs)/10:]...)
			extra := levelRandomProblem(rng, levelCase{jobs: 40, types: 3, gpus: 1, distinct: true, zeroRate: 0.1, maxSF: 8})
			for i, j := range extra.Jobs {
				j.ID = fmt.Sprintf("new%d", i)
				next.Jobs = append(next.Jobs, j)
			}
			warm, err := pol.Allocate(&next)
			if err != nil {
				t.Fatal(err)
			}
			cold, err := newPolicy().Allocate(&next)
			if err != nil {
				t.Fatal(err)
			}
			mmCheckFeasible(t, &next, warm)
			if !levelAgree(warm.Objective, cold.Objective) {
				t.Fatalf("after arrivals: objective %v from the last round's start, %v fresh", warm.Objective, cold.Objective)
			}
		})
	}
}
