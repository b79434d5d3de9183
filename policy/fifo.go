package policy

import (
	"math/rand"
	"sort"
)

// The FIFO policies are combinatorial: each job runs whole on one GPU type
// (X = 1 there) in arrival order (Job.Arrival, ties by problem order);
// jobs that find no room get an empty row and wait.
//
//   - fifo (heterogeneity-agnostic) keeps a job on the type it was first
//     given until it leaves the problem. New jobs all go to the
//     alphabetically last GPU type that had a free GPU when the call
//     started, even beyond that type's capacity, so the allocation may
//     oversubscribe a type: the round mechanism then shares that type
//     among them by its priorities. This deliberately reproduces the
//     behaviour of Gavel's reference FIFO (its random type choice is drawn
//     but never used), because the paper's fifo results come from it; a
//     job that cannot run on that type at all goes to the last type with
//     free GPUs where it can.
//     Options.FIFOReplace first hands the types of jobs that left to the
//     head of the queue, and Options.FIFODropDraws changes the type as the
//     reference's list of types with room shrinks, both as the reference
//     does. NewRandomTypeFIFO gives the evidently intended variant, a
//     uniformly random type among those with room.
//   - fifo_perf recomputes the placement at every call: in arrival order
//     each job takes the type with free room where its throughput is
//     highest. Because earlier jobs choose first, a running job only moves
//     when a faster type frees up for it.
//   - fifo_packed is fifo_perf, after which each job left waiting may share
//     the GPUs of a running job of equal scale factor when their combined
//     normalized throughput (each member's co-located rate over its rate
//     alone on that type) exceeds fifoPackingThreshold; each running job
//     takes at most one partner, the best available.
//
// Allocation.Objective is TotalThroughput.

// fifoPackingThreshold is the combined normalized throughput above which
// fifo_packed co-locates a waiting job with a running one.
const fifoPackingThreshold = 1.5

func init() {
	register("fifo", func(o Options) Policy { return newFIFO("fifo", fifoQuirk, o) })
	register("fifo_perf", func(o Options) Policy { return newFIFO("fifo_perf", fifoFastest, o) })
	register("fifo_packed", func(o Options) Policy { return newFIFO("fifo_packed", fifoFastestPacked, o) })
}

type fifoMode int

const (
	fifoQuirk fifoMode = iota
	fifoRandom
	fifoFastest
	fifoFastestPacked
)

// fifoPolicy is not safe for concurrent use: it keeps placements between
// calls.
type fifoPolicy struct {
	name string
	mode fifoMode
	rng  *rand.Rand
	// placed holds the sticky type of each job (agnostic modes only).
	placed map[string]fifoPlacement
	// seq numbers placements, so that jobs of equal arrival keep the order
	// in which they were placed.
	seq uint64
	// blocking and zeroRates are Options.FIFOBlocking and
	// Options.FIFOZeroRates; replace and drops are Options.FIFOReplace and
	// Options.FIFODropDraws (the agnostic fifo only).
	blocking, zeroRates, replace bool
	drops                        Draws
}

// fifoPlacement is a job's sticky type, with what orders the placements
// as the reference walks them (by job id, that is by arrival).
type fifoPlacement struct {
	typ     string
	arrival float64
	seq     uint64
}

func newFIFO(name string, mode fifoMode, o Options) *fifoPolicy {
	f := &fifoPolicy{name: name, mode: mode, rng: rand.New(rand.NewSource(o.Seed)), placed: map[string]fifoPlacement{},
		blocking: o.FIFOBlocking, zeroRates: o.FIFOBlocking && o.FIFOZeroRates}
	if mode == fifoQuirk {
		f.replace, f.drops = o.FIFOReplace, o.FIFODropDraws
	}
	return f
}

// NewRandomTypeFIFO returns a heterogeneity-agnostic FIFO that gives each
// new job a uniformly random type among those with room for it (drawn from
// seed) and keeps it there until it leaves.
func NewRandomTypeFIFO(seed int64) Policy { return newFIFO("fifo", fifoRandom, Options{Seed: seed}) }

func (f *fifoPolicy) Name() string { return f.name }

func (f *fifoPolicy) Traits() Traits {
	perf := f.mode == fifoFastest || f.mode == fifoFastestPacked
	return Traits{TypeAware: perf, FIFO: true, Packs: f.mode == fifoFastestPacked, Objective: ObjectiveTotalThroughput}
}

func (f *fifoPolicy) Allocate(p *Problem) (*Allocation, error) {
	types := p.Types()
	col := make(map[string]int, len(types))
	for k, t := range types {
		col[t] = k
	}
	order := arrivalOrder(p)
	free := make(map[string]int, len(types))
	for _, t := range types {
		free[t] = p.GPUs[t]
	}
	fits := func(j *Job, t string) bool { return j.Throughput(t) > 0 && p.GPUs[t] >= jobScale(j) }
	placement := make([]string, len(p.Jobs)) // "" = waiting

	switch f.mode {
	case fifoQuirk:
		f.pileUp(p, order, free, placement, fits)
	case fifoRandom:
		present := make(map[string]int, len(p.Jobs))
		for i := range p.Jobs {
			present[p.Jobs[i].ID] = i
		}
		for id, pl := range f.placed {
			i, ok := present[id]
			if !ok || !fits(&p.Jobs[i], pl.typ) {
				delete(f.placed, id)
				continue
			}
			placement[i] = pl.typ
			free[pl.typ] -= jobScale(&p.Jobs[i])
		}
		for _, i := range order {
			j := &p.Jobs[i]
			if placement[i] != "" {
				continue
			}
			if f.blocking && !roomFor(free, jobScale(j)) {
				break
			}
			var room []string
			for _, c := range types {
				if fits(j, c) && free[c] >= jobScale(j) {
					room = append(room, c)
				}
			}
			if len(room) == 0 {
				continue
			}
			t := room[f.rng.Intn(len(room))]
			placement[i] = t
			free[t] -= jobScale(j)
			f.place(j, t)
		}
	case fifoFastest, fifoFastestPacked:
		for _, i := range order {
			j := &p.Jobs[i]
			if f.blocking && !roomFor(free, jobScale(j)) {
				break
			}
			best := ""
			for _, t := range types {
				if fits(j, t) && free[t] >= jobScale(j) && (best == "" || j.Throughput(t) > j.Throughput(best)) {
					best = t
				}
			}
			if best == "" && f.zeroRates {
				// Gavel compares rates against -1, so a type the job
				// cannot use wins when it is the only one with room.
				for _, t := range types {
					if free[t] >= jobScale(j) {
						best = t
						break
					}
				}
			}
			if best != "" {
				placement[i] = best
				free[best] -= jobScale(j)
			}
		}
	}

	a := &Allocation{Policy: f.name, Types: types}
	for i := range p.Jobs {
		x := make([]float64, len(types))
		if t := placement[i]; t != "" {
			x[col[t]] = 1
		}
		a.Rows = append(a.Rows, Row{Jobs: []string{p.Jobs[i].ID}, Fractions: x})
	}
	if f.mode == fifoFastestPacked {
		f.pack(p, a, order, placement, col)
	}
	var err error
	a.Objective, err = TotalThroughput(p, a)
	return a, err
}

// place records t as j's sticky type.
func (f *fifoPolicy) place(j *Job, t string) {
	f.seq++
	f.placed[j.ID] = fifoPlacement{typ: t, arrival: j.Arrival, seq: f.seq}
}

// pileUp is the agnostic fifo (fifoQuirk): placements of earlier calls
// stay, and waiting jobs, in arrival order, go to the last type of a list
// of the types with free GPUs, beyond its capacity if need be (see
// Options.FIFOReplace and Options.FIFODropDraws for the reference's
// finer points).
func (f *fifoPolicy) pileUp(p *Problem, order []int, free map[string]int, placement []string, fits func(*Job, string) bool) {
	present := make(map[string]int, len(p.Jobs))
	for i := range p.Jobs {
		present[p.Jobs[i].ID] = i
	}
	// The placements of earlier calls in arrival order: with FIFOReplace
	// a job that left hands its type to the head of the queue in this
	// order, against the GPUs counted free so far.
	kept := make([]string, 0, len(f.placed))
	for id, pl := range f.placed {
		if i, ok := present[id]; ok && !fits(&p.Jobs[i], pl.typ) {
			delete(f.placed, id) // it waits again
			continue
		}
		kept = append(kept, id)
	}
	sort.Slice(kept, func(a, b int) bool {
		x, y := f.placed[kept[a]], f.placed[kept[b]]
		if x.arrival != y.arrival {
			return x.arrival < y.arrival
		}
		return x.seq < y.seq
	})
	queue := make([]int, 0, len(order))
	for _, i := range order {
		if _, ok := f.placed[p.Jobs[i].ID]; !ok {
			queue = append(queue, i)
		}
	}
	for _, id := range kept {
		pl := f.placed[id]
		if i, ok := present[id]; ok {
			placement[i] = pl.typ
			free[pl.typ] -= jobScale(&p.Jobs[i])
			continue
		}
		delete(f.placed, id)
		if !f.replace || len(queue) == 0 {
			continue
		}
		if h := &p.Jobs[queue[0]]; jobScale(h) <= free[pl.typ] && fits(h, pl.typ) {
			placement[queue[0]] = pl.typ
			free[pl.typ] -= jobScale(h)
			f.place(h, pl.typ)
			queue = queue[1:]
		}
	}
	var room []string // types with free GPUs, sorted; the last takes the jobs
	for _, t := range p.Types() {
		if free[t] > 0 {
			room = append(room, t)
		}
	}
	var with []int // positions in room of the types with room for a job
	for _, i := range queue {
		j := &p.Jobs[i]
		if len(room) == 0 {
			if f.blocking {
				break
			}
			continue
		}
		with = with[:0]
		for k, t := range room {
			if free[t] >= jobScale(j) {
				with = append(with, k)
			}
		}
		if len(with) == 0 && f.blocking {
			break
		}
		drop := -1
		if f.drops != nil && len(with) > 0 {
			drop = with[f.drops.Below(len(with))]
		}
		// The last type of the list; a job that cannot run there takes
		// the last one where it can. (Every job of the reference's tables
		// runs on its last type, the v100, so this changes none of its
		// schedules; without it a job that runs on one type only, such as
		// a typed request, would wait for ever.)
		t := ""
		for k := len(room) - 1; k >= 0 && t == ""; k-- {
			if fits(j, room[k]) {
				t = room[k]
			}
		}
		if t == "" {
			continue
		}
		placement[i] = t
		free[t] -= jobScale(j)
		f.place(j, t)
		if drop >= 0 && free[t] == 0 {
			room = append(room[:drop], room[drop+1:]...)
		}
	}
}

// pack co-locates waiting jobs with running ones (see fifo_packed).
func (f *fifoPolicy) pack(p *Problem, a *Allocation, order []int, placement []string, col map[string]int) {
	partnered := make([]bool, len(p.Jobs))
	index := make(map[string]int, len(p.Jobs))
	for i := range p.Jobs {
		index[p.Jobs[i].ID] = i
	}
	// partners[i] lists the pairs job i may join, with the other member.
	partners := make([][]int, len(p.Jobs))
	for n := range p.Pairs {
		ia, okA := index[p.Pairs[n].Jobs[0]]
		ib, okB := index[p.Pairs[n].Jobs[1]]
		if okA && okB && ia != ib {
			partners[ia] = append(partners[ia], ib)
			partners[ib] = append(partners[ib], ia)
		}
	}
	for _, w := range order {
		if placement[w] != "" {
			continue
		}
		waiting := &p.Jobs[w]
		bestScore, bestMate := fifoPackingThreshold, -1
		for _, r := range partners[w] {
			t := placement[r]
			running := &p.Jobs[r]
			if t == "" || partnered[r] || jobScale(running) != jobScale(waiting) {
				continue
			}
			pr, swapped := findPair(p, running.ID, waiting.ID)
			tp := pr.Throughputs[t]
			if swapped {
				tp[0], tp[1] = tp[1], tp[0]
			}
			if tp[0] <= 0 || tp[1] <= 0 || waiting.Throughput(t) <= 0 {
				continue
			}
			score := tp[0]/running.Throughput(t) + tp[1]/waiting.Throughput(t)
			if score > bestScore {
				bestScore, bestMate = score, r
			}
		}
		if bestMate < 0 {
			continue
		}
		t := placement[bestMate]
		partnered[bestMate], partnered[w] = true, true
		a.Rows[bestMate].Fractions[col[t]] = 0
		x := make([]float64, len(a.Types))
		x[col[t]] = 1
		a.Rows = append(a.Rows, Row{Jobs: []string{p.Jobs[bestMate].ID, waiting.ID}, Fractions: x})
	}
}

// roomFor reports whether some type has n GPUs free.
func roomFor(free map[string]int, n int) bool {
	for _, f := range free {
		if f >= n {
			return true
		}
	}
	return false
}

// arrivalOrder returns job indices by arrival, ties by problem order.
func arrivalOrder(p *Problem) []int {
	order := make([]int, len(p.Jobs))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(x, y int) bool { return p.Jobs[order[x]].Arrival < p.Jobs[order[y]].Arrival })
	return order
}
