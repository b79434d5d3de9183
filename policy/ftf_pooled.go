package policy

import (
	"fmt"
	"math"
	"math/bits"
	"sort"
)

// The heterogeneity-agnostic finish_time_fairness gives every job the same
// rate on every type it can use, so the types a job can use are
// interchangeable to it and the λ-LP of minMaxFinishTimeFairness collapses
// to pooled GPUs: a job given a share s_j of its time (summed over its
// types) runs at r_j·s_j. Shares can be spread over the types exactly
// when, for every set S of types, the jobs that can use only types of S
// take no more than S's GPUs (Σ_{j: U_j ⊆ S} scale_j·s_j <= GPUs of S,
// the supply-demand theorem for a bipartite flow; U_j is the job's usable
// types). ρ_j <= ρ needs s_j >= c_j(ρ)/r_j, so the optimum is the smallest
// ρ >= lo (every job's best, s_j = 1) that meets every set's condition:
// the largest of the roots of G_S(ρ) = Σ_{j: U_j ⊆ S} scale_j·c_j(ρ)/r_j
// = GPUs of S, each sum falling as ρ grows. With a few types there are
// few sets (at most 2^maxPooledTypes − 1), and no LP is solved but a
// tiny one for the split when jobs differ in their types.
//
// This is the common case of the agnostic policy at high load, where the
// LP is at its slowest: every job ties between types, which leaves the
// price decomposition without a direction and CLP with a degenerate LP.

// maxPooledTypes bounds the types of a pooled problem (its sets of types
// grow as 2^types).
const maxPooledTypes = 6

// pooledJob is one active job of the pooled problem.
type pooledJob struct {
	ftfJob
	rate  float64 // r_j, the same on every type it can use
	scale float64
	types uint // U_j: bit k set when the job can use type k
}

// pooledFTF returns the pooled problem of active, or ok = false when some
// active job runs at different rates on two types, or the cluster has
// more than maxPooledTypes types with GPUs.
func pooledFTF(p *Problem, b *placementLP, active []ftfJob) (jobs []pooledJob, capacity []float64, ok bool) {
	capacity = make([]float64, len(b.types))
	withGPUs := 0
	for k, t := range b.types {
		capacity[k] = float64(p.GPUs[t])
		if capacity[k] > 0 {
			withGPUs++
		}
	}
	if withGPUs > maxPooledTypes || len(b.types) > bits.UintSize {
		return nil, nil, false
	}
	jobs = make([]pooledJob, len(active))
	for n, fj := range active {
		u := b.units[fj.index]
		rate := -1.0
		var types uint
		for k, c := range u.cols {
			if capacity[k] == 0 || c < 0 {
				continue
			}
			coef := b.effCoefs[fj.index][indexOf(b.effCols[fj.index], c)]
			if rate >= 0 && coef != rate {
				return nil, nil, false
			}
			rate = coef
			types |= 1 << k
		}
		if rate <= 0 {
			return nil, nil, false
		}
		jobs[n] = pooledJob{ftfJob: fj, rate: rate, scale: float64(jobScale(&p.Jobs[fj.index])), types: types}
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
// every job's share by one factor (capped at all of its time), as far as
// every set's condition allows, the way the λ-LP would raise them. Each
// job's time is then split over its types in proportion to their counts
// where that fits, as an interior-point solver splits it, and else as
// close to that as the GPUs allow (pooledSplit).
func solvePooledFTF(b *placementLP, jobs []pooledJob, capacity []float64, lo float64) ([]float64, error) {
	sets := pooledSets(jobs, capacity)
	rho := lo
	for _, set := range sets {
		if members := set.of(jobs); pooledDemand(members, lo, 1) > set.gpus {
			rho = math.Max(rho, pooledRoot(members, set.gpus, lo))
		}
	}
	return pooledSplit(b, jobs, pooledShares(jobs, sets, rho), capacity)
}

// pooledShares raises the shares the needs at rho call for by progressive
// filling: every job's share by one factor until some set of types is
// full, then the jobs outside the full sets further, and so on, each
// share capped at all of the job's time. With one set (every job can use
// every type) that is one factor for all; with several, the GPUs a
// restricted set leaves over still go to the jobs that can use them.
func pooledShares(jobs []pooledJob, sets []pooledSet, rho float64) []float64 {
	share := make([]float64, len(jobs))
	frozen := make([]bool, len(jobs))
	left := len(jobs)
	raise := make([]float64, len(sets))
	for level := 1.0; left > 0; {
		lambda := math.Inf(1)
		for s, set := range sets {
			raise[s] = math.Inf(1)
			var free []pooledJob
			used := 0.0
			for _, n := range set.members {
				if frozen[n] {
					used += jobs[n].scale * share[n]
				} else {
					free = append(free, jobs[n])
				}
			}
			if len(free) > 0 {
				raise[s] = math.Max(level, pooledRaise(free, rho, set.gpus-used))
				lambda = math.Min(lambda, raise[s])
			}
		}
		for s, set := range sets {
			if !math.IsInf(lambda, 1) && raise[s] > lambda {
				continue // room left: its jobs rise further
			}
			for _, n := range set.members {
				if !frozen[n] {
					share[n] = math.Min(1, lambda*jobs[n].need(rho)/jobs[n].rate)
					frozen[n] = true
					left--
				}
			}
		}
		level = lambda
	}
	return share
}

// pooledSet is one set S of types with the jobs that can use only types
// of S.
type pooledSet struct {
	types   uint
	gpus    float64
	members []int // the jobs' indices in the pooled problem
}

// of returns the set's jobs among jobs.
func (set pooledSet) of(jobs []pooledJob) []pooledJob {
	out := make([]pooledJob, len(set.members))
	for i, n := range set.members {
		out[i] = jobs[n]
	}
	return out
}

// pooledSets lists the sets of types whose condition can bind: those that
// hold some job's types.
func pooledSets(jobs []pooledJob, capacity []float64) []pooledSet {
	var all uint
	for k, c := range capacity {
		if c > 0 {
			all |= 1 << k
		}
	}
	var sets []pooledSet
	// Every subset of all, by the standard submask walk.
	for s := all; s > 0; s = (s - 1) & all {
		set := pooledSet{types: s}
		for k, c := range capacity {
			if s&(1<<k) != 0 {
				set.gpus += c
			}
		}
		for n, j := range jobs {
			if j.types&^s == 0 {
				set.members = append(set.members, n)
			}
		}
		if len(set.members) > 0 {
			sets = append(sets, set)
		}
	}
	return sets
}

// pooledSplit spreads each job's share over its types: jobs with the same
// types form a group, each group's GPUs (Σ scale_j·s_j) are split in
// proportion to the counts of its types when every group can use every
// type, and otherwise by the flow closest to that proportional split in
// total absolute difference (a small LP over groups and types); a job
// gets its group's split in proportion to its share.
func pooledSplit(b *placementLP, jobs []pooledJob, share, capacity []float64) ([]float64, error) {
	groupOf := map[uint]int{}
	var groupTypes []uint
	var demand []float64
	for n, j := range jobs {
		g, ok := groupOf[j.types]
		if !ok {
			g = len(groupTypes)
			groupOf[j.types] = g
			groupTypes = append(groupTypes, j.types)
			demand = append(demand, 0)
		}
		demand[g] += j.scale * share[n]
	}
	// split[g][k]: GPUs of type k given to group g, first in proportion.
	split := make([][]float64, len(groupTypes))
	sameTypes := true
	for g, types := range groupTypes {
		split[g] = make([]float64, len(capacity))
		gpus := 0.0
		for k, c := range capacity {
			if types&(1<<k) != 0 {
				gpus += c
			}
		}
		for k, c := range capacity {
			if types&(1<<k) != 0 {
				split[g][k] = demand[g] * c / gpus
			}
		}
		sameTypes = sameTypes && types == groupTypes[0]
	}
	if !sameTypes {
		if err := closestFlow(split, demand, groupTypes, capacity); err != nil {
			return nil, err
		}
	}
	x := make([]float64, b.lp.NumColumns())
	for n, j := range jobs {
		g := groupOf[j.types]
		if demand[g] <= 0 {
			continue
		}
		for k, c := range b.units[j.index].cols {
			if c >= 0 && j.types&(1<<k) != 0 {
				x[c] = share[n] * split[g][k] / demand[g]
			}
		}
	}
	return x, nil
}

// closestFlow replaces the proportional split (its targets) by the flow
// that gives every group its demand on its own types, fills no type
// beyond its count, and differs least from the targets in total:
// minimize Σ t_gk with t_gk >= |y_gk − target_gk|.
func closestFlow(split [][]float64, demand []float64, groupTypes []uint, capacity []float64) error {
	lp := newLinearProgram(0)
	cols := make([][]int, len(split))
	perType := make([][]int, len(capacity))
	for g := range split {
		cols[g] = make([]int, len(capacity))
		var row []int
		for k := range capacity {
			cols[g][k] = -1
			if groupTypes[g]&(1<<k) == 0 {
				continue
			}
			y := lp.AddColumn(0, Inf, 0)
			dev := lp.AddColumn(0, Inf, 1)
			cols[g][k] = y
			target := split[g][k]
			lp.AddRow([]int{dev, y}, []float64{1, -1}, -target, Inf) // t >= y − target
			lp.AddRow([]int{dev, y}, []float64{1, 1}, target, Inf)   // t >= target − y
			row = append(row, y)
			perType[k] = append(perType[k], y)
		}
		lp.AddRow(row, ones(len(row)), demand[g], demand[g])
	}
	for k, ys := range perType {
		if len(ys) > 0 {
			lp.AddRow(ys, ones(len(ys)), -Inf, capacity[k])
		}
	}
	res, err := lp.Solve()
	if err != nil {
		return fmt.Errorf("pooled split: %w", err)
	}
	for g := range split {
		for k, c := range cols[g] {
			if c >= 0 {
				split[g][k] = math.Max(0, res.X[c])
			}
		}
	}
	return nil
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
