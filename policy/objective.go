package policy

import (
	"errors"
	"fmt"
	"math"
)

// Metrics of an allocation, computed the same way for every policy so that
// allocations of different policies can be compared (the command prints
// them, the tests check sharing incentive with them). They always use the
// jobs' measured throughputs, also for the heterogeneity-agnostic policies:
// they measure what the jobs would experience, not what a policy believed.

// JobThroughputs returns each job's effective throughput (steps/s) under a,
// indexed like p.Jobs. A pair row contributes to both members at their
// co-located rates.
func JobThroughputs(p *Problem, a *Allocation) ([]float64, error) {
	index := make(map[string]int, len(p.Jobs))
	for i := range p.Jobs {
		index[p.Jobs[i].ID] = i
	}
	pairs := newPairIndex(p)
	eff := make([]float64, len(p.Jobs))
	for _, r := range a.Rows {
		if len(r.Fractions) != len(a.Types) {
			return nil, fmt.Errorf("row %s has %d fractions for %d types", r.Key(), len(r.Fractions), len(a.Types))
		}
		switch len(r.Jobs) {
		case 1:
			i, ok := index[r.Jobs[0]]
			if !ok {
				return nil, fmt.Errorf("row %s: unknown job", r.Key())
			}
			for k, t := range a.Types {
				eff[i] += p.Jobs[i].Throughput(t) * r.Fractions[k]
			}
		case 2:
			ia, okA := index[r.Jobs[0]]
			ib, okB := index[r.Jobs[1]]
			pr, swapped := pairs.find(p, r.Jobs[0], r.Jobs[1])
			if !okA || !okB || pr == nil {
				return nil, fmt.Errorf("row %s: not a pair of the problem", r.Key())
			}
			for k, t := range a.Types {
				tp := pr.Throughputs[t]
				if swapped {
					tp[0], tp[1] = tp[1], tp[0]
				}
				eff[ia] += tp[0] * r.Fractions[k]
				eff[ib] += tp[1] * r.Fractions[k]
			}
		default:
			return nil, fmt.Errorf("row %s: %d jobs, want 1 or 2", r.Key(), len(r.Jobs))
		}
	}
	return eff, nil
}

// CanRun reports whether some GPU type of the cluster can run job j: the
// job has a positive throughput there and the type has at least its scale
// factor of GPUs.
func CanRun(p *Problem, j *Job) bool {
	for t, n := range p.GPUs {
		if j.Throughput(t) > 0 && n >= jobScale(j) {
			return true
		}
	}
	return false
}

// TotalThroughput is Σ_j effective throughput (steps/s): the objective of
// max_sum_throughput_perf.
func TotalThroughput(p *Problem, a *Allocation) (float64, error) {
	eff, err := JobThroughputs(p, a)
	if err != nil {
		return 0, err
	}
	sum := 0.0
	for _, e := range eff {
		sum += e
	}
	return sum, nil
}

// MinNormalizedThroughput is min_j sf_j·eff_j / (w_j·ProportionalThroughput_j)
// over the jobs that can run somewhere (see CanRun): the max-min fairness
// objective. A value >= 1 means every job does at least as well as under an
// equal share. Jobs that no allocation can serve are left out, or one such
// job would pin the objective of every allocation at 0.
func MinNormalizedThroughput(p *Problem, a *Allocation) (float64, error) {
	eff, err := JobThroughputs(p, a)
	if err != nil {
		return 0, err
	}
	return minNormalized(p, eff), nil
}

// minNormalized is MinNormalizedThroughput given every job's effective
// throughput (JobThroughputs).
func minNormalized(p *Problem, eff []float64) float64 {
	best := math.Inf(1)
	for i := range p.Jobs {
		j := &p.Jobs[i]
		prop := ProportionalThroughput(p, j)
		if prop <= 0 || !CanRun(p, j) {
			continue
		}
		best = math.Min(best, float64(jobScale(j))*eff[i]/(jobWeight(j)*prop))
	}
	if math.IsInf(best, 1) {
		return 0
	}
	return best
}

// FinishTimeFairness returns each job's Themis ρ under a, indexed like
// p.Jobs: (t_j + R_j/eff_j) / (C_j + R_j/IsolatedThroughput_j). A job that
// still has steps but gets no throughput has ρ = +Inf; a job whose isolated
// time is undefined (it cannot run on the cluster, or it is done and has no history) has
// ρ = NaN and is left out of MaxFinishTimeFairness.
func FinishTimeFairness(p *Problem, a *Allocation) ([]float64, error) {
	eff, err := JobThroughputs(p, a)
	if err != nil {
		return nil, err
	}
	rho := make([]float64, len(p.Jobs))
	shares := NewIsolatedShares(p)
	for i := range p.Jobs {
		j := &p.Jobs[i]
		if !CanRun(p, j) {
			rho[i] = math.NaN()
			continue
		}
		rho[i] = themisRho(j.TimeSinceStart, j.StepsRemaining, eff[i], j.IsolatedTime, shares.Throughput(j))
	}
	return rho, nil
}

// themisRho is ρ for one job given its effective and isolated throughputs.
func themisRho(sinceStart, remaining, eff, isolatedTime, isolated float64) float64 {
	var isoTime float64
	switch {
	case remaining <= 0:
		isoTime = isolatedTime
	case isolated <= 0:
		return math.NaN()
	default:
		isoTime = isolatedTime + remaining/isolated
	}
	if isoTime <= 0 {
		return math.NaN()
	}
	if remaining <= 0 {
		return sinceStart / isoTime
	}
	if eff <= 0 {
		return math.Inf(1)
	}
	return (sinceStart + remaining/eff) / isoTime
}

// MaxFinishTimeFairness is max_j ρ_j: the objective of the
// finish_time_fairness policies (0 when no job has a defined ρ).
func MaxFinishTimeFairness(p *Problem, a *Allocation) (float64, error) {
	rho, err := FinishTimeFairness(p, a)
	if err != nil {
		return 0, err
	}
	worst := 0.0
	for _, r := range rho {
		if !math.IsNaN(r) {
			worst = math.Max(worst, r)
		}
	}
	return worst, nil
}

// Makespan is max_j R_j / eff_j in seconds: when the last job would finish
// if the allocation held until then. +Inf when a job with steps left gets
// no throughput; 0 when no job has steps left. Jobs that cannot run on the
// cluster at all (see CanRun) are left out: no allocation can finish them.
func Makespan(p *Problem, a *Allocation) (float64, error) {
	eff, err := JobThroughputs(p, a)
	if err != nil {
		return 0, err
	}
	worst := 0.0
	for i := range p.Jobs {
		r := p.Jobs[i].StepsRemaining
		if r <= 0 || !CanRun(p, &p.Jobs[i]) {
			continue
		}
		if eff[i] <= 0 {
			return math.Inf(1), nil
		}
		worst = math.Max(worst, r/eff[i])
	}
	return worst, nil
}

// ErrNoCosts is returned by cost metrics and policies when the problem
// lacks a price for a GPU type they need.
var ErrNoCosts = errors.New("no cost given")

// HourlyCost is the allocation's spending rate in cost units per hour:
// Σ_rows Σ_t cost_t·sf·X (a pair row pays for its GPUs once).
func HourlyCost(p *Problem, a *Allocation) (float64, error) {
	scale := make(map[string]int, len(p.Jobs))
	for i := range p.Jobs {
		scale[p.Jobs[i].ID] = jobScale(&p.Jobs[i])
	}
	sum := 0.0
	for _, r := range a.Rows {
		if len(r.Jobs) == 0 {
			continue
		}
		sf, ok := scale[r.Jobs[0]]
		if !ok {
			return 0, fmt.Errorf("row %s: unknown job", r.Key())
		}
		for k, t := range a.Types {
			if r.Fractions[k] == 0 {
				continue
			}
			c, ok := p.Costs[t]
			if !ok {
				return 0, fmt.Errorf("GPU type %q: %w", t, ErrNoCosts)
			}
			sum += c * float64(sf) * r.Fractions[k]
		}
	}
	return sum, nil
}

// StepsPerCost is total throughput per spending: Σ_j eff_j·3600 / HourlyCost,
// i.e. training steps bought per cost unit (steps per dollar when costs are
// $/GPU-hour). The objective of the max_sum_throughput_normalized_by_cost
// policies; 0 for an allocation that spends nothing.
func StepsPerCost(p *Problem, a *Allocation) (float64, error) {
	cost, err := HourlyCost(p, a)
	if err != nil {
		return 0, err
	}
	if cost <= 0 {
		return 0, nil
	}
	tp, err := TotalThroughput(p, a)
	if err != nil {
		return 0, err
	}
	return tp * 3600 / cost, nil
}

// VerifyAllocation checks a against the constraints of the paper's §3.1
// with tolerance tol: 0 <= X <= 1, each job's time (its own row plus its
// pairs) sums to at most 1, Σ sf·X <= N_t per type, and no time on a type
// where the job (or a pair member) has zero throughput or that has fewer
// GPUs than the job's scale factor.
func VerifyAllocation(p *Problem, a *Allocation, tol float64) error {
	index := make(map[string]int, len(p.Jobs))
	for i := range p.Jobs {
		index[p.Jobs[i].ID] = i
	}
	pairs := newPairIndex(p)
	busy := make([]float64, len(p.Jobs))
	used := make(map[string]float64, len(a.Types))
	for _, r := range a.Rows {
		if len(r.Fractions) != len(a.Types) {
			return fmt.Errorf("row %s has %d fractions for %d types", r.Key(), len(r.Fractions), len(a.Types))
		}
		var pr *Pair
		swapped := false
		if len(r.Jobs) == 2 {
			if pr, swapped = pairs.find(p, r.Jobs[0], r.Jobs[1]); pr == nil {
				return fmt.Errorf("row %s: not a pair of the problem", r.Key())
			}
		}
		sf := 0
		for _, id := range r.Jobs {
			i, ok := index[id]
			if !ok {
				return fmt.Errorf("row %s: unknown job %q", r.Key(), id)
			}
			sf = jobScale(&p.Jobs[i])
		}
		for k, t := range a.Types {
			x := r.Fractions[k]
			if math.IsNaN(x) || x < -tol || x > 1+tol {
				return fmt.Errorf("row %s type %s: fraction %g outside [0, 1]", r.Key(), t, x)
			}
			if x <= tol {
				continue
			}
			for m, id := range r.Jobs {
				tp := p.Jobs[index[id]].Throughput(t)
				if pr != nil {
					pt := pr.Throughputs[t]
					if swapped {
						pt[0], pt[1] = pt[1], pt[0]
					}
					tp = pt[m]
				}
				if tp <= 0 {
					return fmt.Errorf("row %s type %s: time %g where job %s cannot run", r.Key(), t, x, id)
				}
				if p.GPUs[t] < sf {
					return fmt.Errorf("row %s type %s: time %g for job %s, which needs %d GPUs of the %d there", r.Key(), t, x, id, sf, p.GPUs[t])
				}
				busy[index[id]] += x
			}
			used[t] += float64(sf) * x
		}
	}
	for i, b := range busy {
		if b > 1+tol {
			return fmt.Errorf("job %s: time fractions sum to %g > 1", p.Jobs[i].ID, b)
		}
	}
	for t, u := range used {
		if u > float64(p.GPUs[t])+tol {
			return fmt.Errorf("type %s: %g GPUs used of %d", t, u, p.GPUs[t])
		}
	}
	return nil
}

// ShortestCompletion is min_j R_j / eff_j in seconds over the jobs with
// steps left and some throughput: when the first job would finish. 0 when
// no job makes progress.
func ShortestCompletion(p *Problem, a *Allocation) (float64, error) {
	eff, err := JobThroughputs(p, a)
	if err != nil {
		return 0, err
	}
	best := math.Inf(1)
	for i := range p.Jobs {
		if r := p.Jobs[i].StepsRemaining; r > 0 && eff[i] > 0 {
			best = math.Min(best, r/eff[i])
		}
	}
	if math.IsInf(best, 1) {
		return 0, nil
	}
	return best, nil
}
