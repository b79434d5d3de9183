package policy

// Class aggregation: identical jobs share one set of LP variables.
//
// Clusters have a handful of GPU types but may run thousands of jobs, most of
// them copies of a few dozen job types. An LP over per-job variables grows
// with the job count; an LP over per-class variables grows with the number of
// distinct jobs only.
//
// Why aggregation is exact. Take a policy LP (or a max-min problem, whose
// objective min_j f_j(x) is concave) that treats a set of jobs
// symmetrically: swapping two jobs of a class, together with their rows and
// columns, maps feasible points to feasible points with the same objective.
// Given any optimum x*, average it over all such swaps. The feasible region
// is convex, so the average is feasible; the objective is concave and
// invariant under the swaps, so the average is at least as good, hence also
// optimal. In the average every job of a class has the same row, so the LP
// over one row per class (capacity rows counting a class of n jobs of scale
// factor sf as n·sf·x) has the same optimum, and expanding its solution
// (every member gets its class's row) is an optimum of the per-job LP.
//
// With co-location pairs the swaps must also map pairs to pairs. The
// refinement below (colour refinement, as in "Dimension reduction via colour
// refinement", Grohe et al.) only needs a weaker property that is just as
// good for averaging: every job of a class belongs to the same number of
// pairs of every pair class, in the same role. Averaging the original
// constraints over a class then yields exactly the aggregated constraint,
// and the expanded aggregated solution satisfies every original constraint.
//
// Usage, for any policy in this package:
//
//	classes := groupBySignature(len(p.Jobs), func(i int, k classKey) classKey {
//		return k.float(weight[i]).int(sf[i]).floats(rates[i]) // nil excludes job i
//	})
//	// build one LP row/column set per classes.Members[c], with
//	// len(classes.Members[c]) as the multiplicity in shared rows, then
//	// give every job in classes.Members[c] the class's solution.
//
// Packed policies add refineByPairs, which splits classes until the pair
// structure is equitable and returns the pair classes.

import (
	"encoding/binary"
	"math"
	"slices"
)

// classKey is a job's class signature under construction: two jobs fall in
// the same class exactly when their signatures are equal byte for byte.
// Floats are compared by their bit patterns, so callers should feed values
// computed the same way for identical jobs (e.g. raw inputs, not sums in a
// job-dependent order).
type classKey []byte

// float appends v to the signature.
func (k classKey) float(v float64) classKey {
	return binary.LittleEndian.AppendUint64(k, math.Float64bits(v))
}

// floats appends all of vs to the signature.
func (k classKey) floats(vs []float64) classKey {
	for _, v := range vs {
		k = k.float(v)
	}
	return k
}

// int appends v to the signature.
func (k classKey) int(v int) classKey {
	return binary.LittleEndian.AppendUint64(k, uint64(v))
}

// bytes appends a length-prefixed byte string (so that concatenations of
// variable-length parts stay unambiguous).
func (k classKey) bytes(b []byte) classKey {
	k = k.int(len(b))
	return append(k, b...)
}

// jobClasses partitions jobs (by index into Problem.Jobs) into classes of
// interchangeable jobs.
type jobClasses struct {
	// Of is the class index of every job, or -1 for a job the signature
	// function excluded.
	Of []int
	// Members lists the job indices of every class in increasing order;
	// classes are numbered in order of their first member.
	Members [][]int
}

// Count is the number of classes.
func (c *jobClasses) Count() int { return len(c.Members) }

// Size is the number of jobs in class i.
func (c *jobClasses) Size(i int) int { return len(c.Members[i]) }

// groupBySignature puts jobs 0..n-1 with equal signatures into one class.
// signature appends job i's features to the key it is given and returns it,
// or returns nil to leave job i out of every class.
func groupBySignature(n int, signature func(i int, key classKey) classKey) *jobClasses {
	classes := &jobClasses{Of: make([]int, n)}
	index := make(map[string]int)
	var buf classKey
	for i := 0; i < n; i++ {
		key := signature(i, buf[:0])
		if key == nil {
			classes.Of[i] = -1
			continue
		}
		buf = key
		c, ok := index[string(key)]
		if !ok {
			c = len(classes.Members)
			index[string(key)] = c
			classes.Members = append(classes.Members, nil)
		}
		classes.Of[i] = c
		classes.Members[c] = append(classes.Members[c], i)
	}
	return classes
}

// groupByKey is groupBySignature for signatures that fit a comparable
// value: key returns job i's signature and whether it takes part. It saves
// building and hashing byte strings where a policy regroups the same jobs
// many times (water filling).
func groupByKey[K comparable](n int, key func(i int) (K, bool)) *jobClasses {
	classes := &jobClasses{Of: make([]int, n)}
	index := make(map[K]int, n)
	var sizes []int
	for i := 0; i < n; i++ {
		k, ok := key(i)
		if !ok {
			classes.Of[i] = -1
			continue
		}
		c, seen := index[k]
		if !seen {
			c = len(sizes)
			index[k] = c
			sizes = append(sizes, 0)
		}
		classes.Of[i] = c
		sizes[c]++
	}
	// One backing array for all the member lists.
	backing := make([]int, 0, n)
	classes.Members = make([][]int, len(sizes))
	for c, size := range sizes {
		classes.Members[c] = backing[len(backing) : len(backing) : len(backing)+size]
		backing = backing[:len(backing)+size]
	}
	for i, c := range classes.Of {
		if c >= 0 {
			classes.Members[c] = append(classes.Members[c], i)
		}
	}
	return classes
}

// pairLink is a candidate co-location as the class machinery sees it: two
// job indices and, for each side, the bytes that describe that side's part
// of the pair (its rates inside the pair, for instance). Sides are compared
// together with their job's class, so a pair (a, b) and the pair (b', a')
// with swapped roles fall in the same pair class.
type pairLink struct {
	Jobs [2]int
	Side [2][]byte
}

// pairClasses partitions pairs (by index into the pairLink slice) into
// classes of interchangeable pairs.
type pairClasses struct {
	// Of is the class of every pair, or -1 for a pair with an excluded job.
	Of []int
	// Members lists the pair indices of every class in increasing order.
	Members [][]int
	// Swapped tells for every pair whether its sides are stored in the
	// opposite order of its class's canonical order: side s of the class is
	// side s^1 of a swapped pair.
	Swapped []bool
	// SideClass is the job class of each canonical side of every class.
	SideClass [][2]int
}

// refineByPairs splits job classes until every job of a class takes part in
// the same number of pairs of each pair class in the same role, then returns
// the refined job classes and the pair classes. The input classes are left
// unchanged. Pairs with an excluded job (class -1) are left out.
//
// Its cost is linear in the pairs per refinement step (a packed problem of
// n jobs may list n²/2 pairs), so nothing in it builds a byte string or an
// allocation per pair: side descriptions become small ids once, and pairs
// and roles are compared as integers.
func refineByPairs(classes *jobClasses, pairs []pairLink) (*jobClasses, *pairClasses) {
	sides := internSides(pairs)
	current := classes
	for {
		pcs := classifyPairs(current, pairs, sides)
		refined := splitByPairRoles(current, pcs, pairs, sides)
		if refined.Count() == current.Count() {
			return current, pcs
		}
		current = refined
	}
}

// internSides numbers the distinct side descriptions of the pairs: two
// sides get one id exactly when their bytes are equal.
func internSides(pairs []pairLink) [][2]int {
	ids := make(map[string]int)
	out := make([][2]int, len(pairs))
	for i := range pairs {
		for s, b := range pairs[i].Side {
			id, ok := ids[string(b)]
			if !ok {
				id = len(ids)
				ids[string(b)] = id
			}
			out[i][s] = id
		}
	}
	return out
}

// pairSide is one side of a pair under the current classes: its job's
// class and its description's id. Sides are ordered by class, then id.
type pairSide struct{ class, side int }

func (a pairSide) less(b pairSide) bool {
	return a.class < b.class || (a.class == b.class && a.side < b.side)
}

// sidesOf returns pair i's two sides under classes.
func sidesOf(classes *jobClasses, link *pairLink, ids [2]int) (pairSide, pairSide) {
	return pairSide{classes.Of[link.Jobs[0]], ids[0]}, pairSide{classes.Of[link.Jobs[1]], ids[1]}
}

// classifyPairs groups pairs whose (class, side) sides match, in either
// order.
func classifyPairs(classes *jobClasses, pairs []pairLink, sides [][2]int) *pairClasses {
	pcs := &pairClasses{Of: make([]int, len(pairs)), Swapped: make([]bool, len(pairs))}
	index := make(map[[2]pairSide]int)
	for i := range pairs {
		link := &pairs[i]
		if classes.Of[link.Jobs[0]] < 0 || classes.Of[link.Jobs[1]] < 0 {
			pcs.Of[i] = -1
			continue
		}
		a, b := sidesOf(classes, link, sides[i])
		swapped := b.less(a)
		if swapped {
			a, b = b, a
		}
		c, ok := index[[2]pairSide{a, b}]
		if !ok {
			c = len(pcs.Members)
			index[[2]pairSide{a, b}] = c
			pcs.Members = append(pcs.Members, nil)
			pcs.SideClass = append(pcs.SideClass, [2]int{a.class, b.class})
		}
		pcs.Of[i] = c
		pcs.Swapped[i] = swapped
		pcs.Members[c] = append(pcs.Members[c], i)
	}
	return pcs
}

// splitByPairRoles refines classes by each job's multiset of (pair class,
// canonical side) memberships. A pair whose two canonical sides are
// identical gives both jobs the same role.
func splitByPairRoles(classes *jobClasses, pcs *pairClasses, pairs []pairLink, sides [][2]int) *jobClasses {
	// Every job's roles in one flat array: count, then fill.
	start := make([]int, len(classes.Of)+1)
	for i := range pairs {
		if pcs.Of[i] >= 0 {
			start[pairs[i].Jobs[0]+1]++
			start[pairs[i].Jobs[1]+1]++
		}
	}
	for j := range classes.Of {
		start[j+1] += start[j]
	}
	roles := make([]int, start[len(classes.Of)])
	next := append([]int(nil), start[:len(classes.Of)]...)
	for i := range pairs {
		c := pcs.Of[i]
		if c < 0 {
			continue
		}
		link := &pairs[i]
		a, b := sidesOf(classes, link, sides[i])
		symmetric := a == b
		for s := 0; s < 2; s++ {
			canonical := s
			if pcs.Swapped[i] {
				canonical = s ^ 1
			}
			if symmetric {
				canonical = 0
			}
			j := link.Jobs[s]
			roles[next[j]] = 2*c + canonical
			next[j]++
		}
	}
	return groupBySignature(len(classes.Of), func(j int, key classKey) classKey {
		if classes.Of[j] < 0 {
			return nil
		}
		r := roles[start[j]:start[j+1]]
		slices.Sort(r)
		// The multiset as (role, count) runs: as exact as the sorted
		// list, and short where a job has many pairs of few classes.
		key = key.int(classes.Of[j])
		for k := 0; k < len(r); {
			n := 1
			for k+n < len(r) && r[k+n] == r[k] {
				n++
			}
			key = key.int(r[k]).int(n)
			k += n
		}
		return key
	})
}
