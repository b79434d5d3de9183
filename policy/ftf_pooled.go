package policy

import (
	"math"
	"sort"
)

// The heterogeneity-agnostic finish_time_fairness gives every job the same
// rate on every type it can use. When every job with steps left can use
// every type of the cluster, the types are interchangeable and the
// λ-LP of minMaxFinishTimeFairness collapses to one pooled resource: a job
// given a share s_j of its time (summed over types) runs at r_j·s_j, and
// any shares with Σ_j scale_j·s_j <= C (all GPUs) can be spread over the
// types (each job's share split in proportion to the types' counts fills
// no type beyond its count). Then ρ_j <= ρ needs s_j >= c_j(ρ)/r_j, and
// the optimum is the smallest ρ >= lo (every job's best, s_j = 1) where
// G(ρ) = Σ_j scale_j·c_j(ρ)/r_j fits C. G falls as ρ grows, so the root
// is found by bisection without any LP.
//
// This is the common case of the agnostic policy at high load, where the
// LP is at its slowest: every job ties between types, which leaves the
// price decomposition without a direction and CLP with a degenerate LP.

// pooledJob is one active job of the pooled problem.
type pooledJob struct {
	ftfJob
	rate  float64 // r_j, the same on every type
	scale float64
}

// pooledFTF returns the pooled problem of active, or ok = false when some
// active job cannot use some type with GPUs or runs at different rates on
// two of them.
func pooledFTF(p *Problem, b *placementLP, active []ftfJob) (jobs []pooledJob, capacity []float64, ok bool) {
	capacity = make([]float64, len(b.types))
	for k, t := range b.types {
		capacity[k] = float64(p.GPUs[t])
	}
	jobs = make([]pooledJob, len(active))
	for n, fj := range active {
		u := b.units[fj.index]
		rate := -1.0
		for k, c := range u.cols {
			if capacity[k] == 0 {
				continue
			}
			if c < 0 {
				return nil, nil, false
			}
			coef := b.effCoefs[fj.index][indexOf(b.effCols[fj.index], c)]
			if rate >= 0 && coef != rate {
				return nil, nil, false
			}
			rate = coef
		}
		if rate <= 0 {
			return nil, nil, false
		}
		jobs[n] = pooledJob{ftfJob: fj, rate: rate, scale: float64(jobScale(&p.Jobs[fj.index]))}
	}
	return jobs, capacity, true
}

func indexOf(s []int, v int) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// solvePooledFTF returns the column values of an optimal allocation of the
// pooled problem (lo: a lower bound on the optimal max ρ, as computed by
// minMaxFinishTimeFairness, at which every job's own best is reachable).
// Once the optimal ρ is met, the GPUs left over are shared by raising
// every job's share by one factor (capped at all of its time), the way the
// λ-LP would raise them, so the allocation leaves no GPU idle that a job
// could use.
func solvePooledFTF(b *placementLP, jobs []pooledJob, capacity []float64, lo float64) []float64 {
	total := 0.0
	for _, c := range capacity {
		total += c
	}
	rho := lo
	if pooledDemand(jobs, lo, 1) > total {
		rho = pooledRoot(jobs, total, lo)
	}
	lambda := pooledRaise(jobs, rho, total)
	x := make([]float64, b.lp.NumColumns())
	for _, j := range jobs {
		share := math.Min(1, lambda*j.need(rho)/j.rate)
		for k, c := range b.units[j.index].cols {
			if c >= 0 && capacity[k] > 0 {
				x[c] = share * capacity[k] / total
			}
		}
	}
	return x
}

// pooledDemand is Σ scale_j·min(1, λ·c_j(ρ)/r_j): the GPUs the shares take.
func pooledDemand(jobs []pooledJob, rho, lambda float64) float64 {
	sum := 0.0
	for _, j := range jobs {
		sum += j.scale * math.Min(1, lambda*j.need(rho)/j.rate)
	}
	return sum
}

// pooledRoot returns the smallest ρ >= lo where the needs fit total GPUs,
// given that they do not fit at lo. Above lo no need is capped, so the
// demand is G(ρ) = Σ a_j / (ρ·D_j − t_j), convex and falling: Newton's
// steps from the left never pass the root and converge quadratically; a
// bisection on the last bracket guards against round-off.
func pooledRoot(jobs []pooledJob, total, lo float64) float64 {
	excess := func(rho float64) (f, slope float64) {
		for _, j := range jobs {
			a := j.scale * j.remaining / j.rate
			d := rho*j.isoTime - j.since
			f += a / d
			slope -= a * j.isoTime / (d * d)
		}
		return f - total, slope
	}
	left := lo
	for k := 0; k < 100; k++ {
		f, slope := excess(left)
		if f <= 0 {
			return left
		}
		next := left - f/slope
		if !(next > left) || next-left <= 1e-15*next {
			break
		}
		left = next
	}
	// left is (within round-off) the root from below: step up until the
	// needs fit, then bisect back to the smallest such ρ.
	right := left * (1 + 1e-12)
	for step := 1e-12; ; step *= 2 {
		if f, _ := excess(right); f <= 0 {
			break
		}
		right = left * (1 + step)
	}
	for k := 0; k < 60 && right-left > 1e-15*right; k++ {
		mid := (left + right) / 2
		if f, _ := excess(mid); f > 0 {
			left = mid
		} else {
			right = mid
		}
	}
	return right
}

// pooledRaise returns the largest λ >= 1 (+Inf when every job can have
// all its time) with pooledDemand(ρ, λ) <= total, given that λ = 1 fits.
// The demand is piecewise linear in λ with a kink where each job reaches
// all of its time, so it is solved exactly over the jobs sorted by where
// they reach it.
func pooledRaise(jobs []pooledJob, rho, total float64) float64 {
	type kink struct{ at, scale, slope float64 }
	kinks := make([]kink, len(jobs))
	slope := 0.0 // Σ scale_j·u_j over the jobs not yet at all their time
	for n, j := range jobs {
		u := j.need(rho) / j.rate
		kinks[n] = kink{at: 1 / u, scale: j.scale, slope: j.scale * u}
		slope += j.scale * u
	}
	sort.Slice(kinks, func(a, b int) bool { return kinks[a].at < kinks[b].at })
	capped := 0.0 // GPUs of the jobs at all their time
	for _, k := range kinks {
		// Between the previous kink and this one the demand is
		// capped + λ·slope.
		if capped+k.at*slope >= total {
			return math.Max(1, (total-capped)/slope)
		}
		capped += k.scale
		slope -= k.slope
	}
	return math.Inf(1)
}
