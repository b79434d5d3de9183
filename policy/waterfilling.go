package policy

import (
	"fmt"
	"math"
	"sort"
)

// Water filling (Gavel §4.3 and Appendix A.1): weighted max-min repeated
// until every job is bottlenecked, with hierarchical weights.
//
// Every job has a promised level (normalized throughput, see maxmin.go),
// 0 at first. Each iteration solves one LP: raise every job that carries
// weight w_j from its promise L_j to L_j + w_j·tau, as far as tau can go,
// while every other job keeps its promise. The raised jobs' promises then
// move up by w_j·tau, and the bottlenecked ones are frozen. Weights are
// recomputed over the jobs not yet frozen:
//
//   - a job outside any entity is its own group with its own weight;
//   - an entity's weight is split over its unfrozen jobs, in proportion to
//     their job weights ("fairness"), or given whole to its earliest unfrozen
//     job ("fifo": when the head is bottlenecked its weight passes to the
//     next job in arrival order, so jobs fill up one after another).
//
// Bottleneck test. Instead of the paper's MILP we read the LP's duals. If
// the level row of class c has a positive dual, the dual certifies that no
// allocation keeping every other raised job at L+w·tau and every frozen job
// at its promise lets c exceed L_c+w_c·tau: with λ the duals of the raised
// rows (Σ λ_c·w_c = 1 because tau is free), every feasible X has
// Σ λ_c·(level_c(X) − L_c − w_c·tau) ≤ 0, so if all terms are ≥ 0 the ones
// with λ_c > 0 are exactly 0. So every class with a positive dual is
// bottlenecked, and at least one class has one, which bounds the iterations
// by the number of classes. Bottlenecked classes without a positive dual
// are caught in a later iteration, whose tau is then 0: the end result is
// the same weighted water-filling allocation, only possibly one LP later.
//
// Two exact shortcuts keep long FIFO queues cheap (without pairs): a job
// promised its solo maximum cannot rise at all and is frozen at once; and
// once an iteration stalls (tau = 0), one LP per type finds the types that
// cannot have any spare capacity while every promise is kept. A job whose
// promise is 0 and whose types are all such exhausted types can never get
// time, so it is frozen at 0 without an LP, and when every type is
// exhausted no job can rise (scaling a risen job back to its promise would
// free capacity), so the filling is over.

func init() {
	register("max_min_fairness_water_filling", func(Options) Policy {
		return &waterFillingPolicy{name: "max_min_fairness_water_filling", agnostic: true}
	})
	register("max_min_fairness_water_filling_perf", func(Options) Policy {
		return &waterFillingPolicy{name: "max_min_fairness_water_filling_perf"}
	})
	register("max_min_fairness_water_filling_packed", func(Options) Policy {
		return &waterFillingPolicy{name: "max_min_fairness_water_filling_packed", packed: true}
	})
}

// waterFillingPolicy is the hierarchical water-filling max-min policy.
type waterFillingPolicy struct {
	name     string
	agnostic bool
	packed   bool
	solver   levelSolver
	memory   levelMemory
}

func (pol *waterFillingPolicy) Name() string { return pol.name }

func (pol *waterFillingPolicy) Traits() Traits {
	return Traits{TypeAware: !pol.agnostic, Packs: pol.packed, Objective: ObjectiveMinNormalizedThroughput}
}

func (pol *waterFillingPolicy) Allocate(p *Problem) (*Allocation, error) {
	m, err := newMMModel(p, pol.agnostic, pol.packed)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", pol.name, err)
	}
	m.solver = pol.solver
	groups, err := wfGroups(p)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", pol.name, err)
	}
	pol.memory.restore(p, m)
	sol, stats, err := m.waterFill(groups)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", pol.name, err)
	}
	pol.memory.save(p, m)
	return m.allocation(p, pol.name, sol, stats)
}

// wfGroup is a set of jobs that shares one weight.
type wfGroup struct {
	weight float64
	fifo   bool
	// jobs in the order the group serves them (arrival order for fifo).
	jobs []int
}

// wfGroups builds the weight groups: one per entity that has jobs, and one
// per job without an entity.
func wfGroups(p *Problem) ([]wfGroup, error) {
	var groups []wfGroup
	byEntity := make(map[string]int)
	for j := range p.Jobs {
		job := &p.Jobs[j]
		if job.Entity == "" {
			weight := job.Weight
			if weight == 0 {
				weight = 1 // the documented default; newMMModel rejected bad weights
			}
			groups = append(groups, wfGroup{weight: weight, jobs: []int{j}})
			continue
		}
		g, ok := byEntity[job.Entity]
		if !ok {
			e, known := p.Entities[job.Entity]
			if !known {
				return nil, fmt.Errorf("job %q: unknown entity %q", job.ID, job.Entity)
			}
			weight := e.Weight
			if weight == 0 {
				weight = 1
			}
			if !(weight > 0) || math.IsInf(weight, 0) {
				return nil, fmt.Errorf("entity %q: weight %v, want a positive number", job.Entity, e.Weight)
			}
			var fifo bool
			switch e.Policy {
			case "", "fairness":
			case "fifo":
				fifo = true
			default:
				return nil, fmt.Errorf("entity %q: policy %q, want \"fairness\" or \"fifo\"", job.Entity, e.Policy)
			}
			g = len(groups)
			byEntity[job.Entity] = g
			groups = append(groups, wfGroup{weight: weight, fifo: fifo})
		}
		groups[g].jobs = append(groups[g].jobs, j)
	}
	for g := range groups {
		if groups[g].fifo {
			jobs := groups[g].jobs
			sort.SliceStable(jobs, func(a, b int) bool { return p.Jobs[jobs[a]].Arrival < p.Jobs[jobs[b]].Arrival })
		}
	}
	return groups, nil
}

// wfWeights gives every unfrozen job its share of its group's weight.
func (m *mmModel) wfWeights(groups []wfGroup, frozen []bool, weight []float64) {
	for j := range weight {
		weight[j] = 0
	}
	for _, g := range groups {
		if g.fifo {
			for _, j := range g.jobs {
				if !frozen[j] {
					weight[j] = g.weight
					break
				}
			}
			continue
		}
		total := 0.0
		for _, j := range g.jobs {
			if !frozen[j] {
				total += m.jobs[j].weight
			}
		}
		for _, j := range g.jobs {
			if !frozen[j] {
				weight[j] = g.weight * m.jobs[j].weight / total
			}
		}
	}
}

// waterFill runs the iterations and returns the last LP's solution, which
// keeps every final promise.
func (m *mmModel) waterFill(groups []wfGroup) (*mmSolution, Stats, error) {
	var stats Stats
	n := len(m.jobs)
	packed := len(m.pairs) > 0
	frozen := make([]bool, n)
	level := make([]float64, n)
	weight := make([]float64, n)
	soloMax := make([]float64, n)
	pairsOf := m.pairsByJob()
	for j := range m.jobs {
		frozen[j] = !m.jobs[j].runnable
		if !frozen[j] {
			soloMax[j] = m.soloMaxLevel(j, pairsOf)
		}
	}
	exhausted := make([]bool, len(m.types))
	for t, c := range m.capacity {
		exhausted[t] = c == 0
	}
	anyExhausted := false
	var last *mmSolution
	for {
		m.wfWeights(groups, frozen, weight)
		if !packed && anyExhausted && m.freezeStarved(groups, frozen, level, weight, exhausted) {
			break
		}
		raised := false
		for j := range weight {
			raised = raised || weight[j] > 0
		}
		if !raised {
			break
		}
		sol, err := m.solve(weight, level, -1, &stats)
		if err != nil {
			return nil, stats, fmt.Errorf("water filling iteration %d: %w", stats.LPs, err)
		}
		last = sol
		// A rise within the solver's tolerance (floors carry a 1e-9
		// relative slack) is a stall, not progress: keeping the promises
		// unchanged then avoids splitting classes over rounding noise.
		tau := math.Max(sol.tau, 0)
		stalled := true
		for j := range weight {
			if weight[j] > 0 && weight[j]*tau > 1e-7*math.Max(1, level[j]) {
				stalled = false
				break
			}
		}
		if stalled {
			tau = 0
		}
		froze := false
		for j := range weight {
			if weight[j] == 0 {
				continue
			}
			level[j] += weight[j] * tau
			if sol.bottlenecked[sol.classes.Of[j]] || level[j] >= soloMax[j]*(1-1e-9) {
				frozen[j], froze = true, true
			}
		}
		if !froze {
			// Rounding hid every dual: freeze the class with the largest
			// one, which is the binding class.
			best := -1
			for c, d := range sol.dual {
				if weight[sol.classes.Members[c][0]] > 0 && (best < 0 || d > sol.dual[best]) {
					best = c
				}
			}
			for _, j := range sol.classes.Members[best] {
				frozen[j] = true
			}
		}
		if !packed && stalled {
			all, err := m.markExhausted(level, exhausted, &stats)
			if err != nil {
				return nil, stats, err
			}
			anyExhausted = true
			if all {
				break
			}
		}
	}
	if last == nil {
		last = m.emptySolution() // nothing can run
	}
	return last, stats, nil
}

// freezeStarved freezes, until none is left, every raised job whose promise
// is 0 and whose usable types are all exhausted, passing its weight on.
// It returns true when every type is exhausted (nothing can rise any more).
func (m *mmModel) freezeStarved(groups []wfGroup, frozen []bool, level, weight []float64, exhausted []bool) bool {
	all := true
	for _, e := range exhausted {
		all = all && e
	}
	if all {
		return true
	}
	for changed := true; changed; {
		changed = false
		for j := range weight {
			if weight[j] == 0 || level[j] > 0 {
				continue
			}
			starved := true
			for t, r := range m.jobs[j].rate {
				if r > 0 && !exhausted[t] {
					starved = false
					break
				}
			}
			if starved {
				frozen[j], changed = true, true
			}
		}
		if changed {
			m.wfWeights(groups, frozen, weight)
		}
	}
	return false
}

// markExhausted finds the types that cannot have spare capacity while every
// promise is kept, and reports whether all types are exhausted.
func (m *mmModel) markExhausted(level []float64, exhausted []bool, stats *Stats) (bool, error) {
	noWeight := make([]float64, len(m.jobs))
	all := true
	for t := range m.types {
		if exhausted[t] {
			continue
		}
		sol, err := m.solve(noWeight, level, t, stats)
		if err != nil {
			return false, fmt.Errorf("spare capacity of %s: %w", m.types[t], err)
		}
		if m.capacity[t]-sol.objective <= 1e-9*m.capacity[t] {
			exhausted[t] = true
		} else {
			all = false
		}
	}
	return all, nil
}
