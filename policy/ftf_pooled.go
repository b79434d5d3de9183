package policy

import "math"

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
	// demand is Σ scale_j·min(1, λ·c_j(ρ)/r_j): the GPUs the shares take.
	demand := func(rho, lambda float64) float64 {
		sum := 0.0
		for _, j := range jobs {
			sum += j.scale * math.Min(1, lambda*j.need(rho)/j.rate)
		}
		return sum
	}
	rho := lo
	if demand(lo, 1) > total {
		// The root of G(ρ) = C lies above lo: G(lo) > C and G falls to
		// 0 as ρ grows.
		left, right := lo, 2*lo
		for demand(right, 1) > total {
			left, right = right, 2*right
		}
		for k := 0; k < 200 && right-left > 1e-13*right; k++ {
			mid := (left + right) / 2
			if demand(mid, 1) > total {
				left = mid
			} else {
				right = mid
			}
		}
		rho = right
	}
	lambda := 1.0
	if full := demand(rho, math.Inf(1)); full <= total {
		lambda = math.Inf(1) // every job can have all of its time
	} else if demand(rho, 1) < total {
		left, right := 1.0, 2.0
		for demand(rho, right) < total {
			left, right = right, 2*right
		}
		for k := 0; k < 200 && right-left > 1e-13*right; k++ {
			mid := (left + right) / 2
			if demand(rho, mid) < total {
				left = mid
			} else {
				right = mid
			}
		}
		lambda = left
	}
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
