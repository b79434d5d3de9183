package policy

import (
	"slices"
	"sync"

	"github.com/gavel-slurm/gavel-slurm/policy/internal/clpmodel"
)

// ftfMemory carries the basis a finish-time-fairness search ended with
// into the next search. Successive rounds of a daemon or a simulation
// change the job set little (a few arrivals and completions, every job a
// little further along), so the old basis, mapped by job id, is close to
// the new optimum: the first probe then needs a few dozen pivots where a
// fresh one needs hundreds. It only changes how fast the search runs, not
// the optimal max ρ it finds.
type ftfMemory struct {
	mu       sync.Mutex
	types    []string
	lambda   byte
	capacity []byte // per type; noRow where the type had no capacity row
	jobs     map[string]ftfJobBasis
	// Where the search was decomposed instead (levelsolve.go): its last
	// prices and every job's placement, the start the next decomposed
	// search takes in place of a sample LP.
	levelTypes []string
	level      levelWarm
	levelPlace map[string]levelPlace
}

// ftfJobBasis is one job's part of a basis: its columns per type (noRow
// where it had none), its time row and its requirement row.
type ftfJobBasis struct {
	cols      []byte
	time, req byte
}

// noRow marks a column or row that did not exist.
const noRow byte = 0xff

// save remembers basis, the kept λ-LP's basis over b with the λ column and
// the requirement rows of the active jobs.
func (mem *ftfMemory) save(p *Problem, b *placementLP, active []ftfJob, lambda int, reqRows []int, basis []byte) {
	mem.mu.Lock()
	defer mem.mu.Unlock()
	nc := b.lp.NumColumns()
	row := func(r int) byte {
		if r < 0 {
			return noRow
		}
		return basis[nc+r]
	}
	mem.types = slices.Clone(b.types)
	mem.lambda = basis[lambda]
	mem.capacity = make([]byte, len(b.types))
	for k, r := range b.capRow {
		mem.capacity[k] = row(r)
	}
	mem.jobs = make(map[string]ftfJobBasis, len(active))
	for n, fj := range active {
		jb := ftfJobBasis{cols: make([]byte, len(b.types)), time: row(b.timeRow[fj.index]), req: row(reqRows[n])}
		for k, c := range b.units[fj.index].cols {
			jb.cols[k] = noRow
			if c >= 0 {
				jb.cols[k] = basis[c]
			}
		}
		mem.jobs[p.Jobs[fj.index].ID] = jb
	}
}

// restore is the starting basis for the λ-LP over b: the remembered status
// of every column and row whose job (or type) it knew, and the slack basis
// elsewhere (columns at their lower bound, rows basic). A job new to the
// search, or one that gained a type, makes the basis short of basic
// entries or leaves one too many; CLP's factorization repairs either.
func (mem *ftfMemory) restore(p *Problem, b *placementLP, active []ftfJob, lambda int, reqRows []int) []byte {
	nc, nr := b.lp.NumColumns(), b.lp.NumRows()
	basis := make([]byte, nc+nr)
	for c := 0; c < nc; c++ {
		basis[c] = clpmodel.AtLower
	}
	for r := 0; r < nr; r++ {
		basis[nc+r] = clpmodel.Basic
	}
	mem.mu.Lock()
	defer mem.mu.Unlock()
	if mem.jobs == nil || !slices.Equal(mem.types, b.types) {
		return basis
	}
	set := func(i int, s byte) {
		if i >= 0 && s != noRow {
			basis[i] = s
		}
	}
	set(lambda, mem.lambda)
	for k, r := range b.capRow {
		if r >= 0 {
			set(nc+r, mem.capacity[k])
		}
	}
	for n, fj := range active {
		jb, ok := mem.jobs[p.Jobs[fj.index].ID]
		if !ok {
			continue
		}
		for k, c := range b.units[fj.index].cols {
			set(c, jb.cols[k])
		}
		if r := b.timeRow[fj.index]; r >= 0 {
			set(nc+r, jb.time)
		}
		set(nc+reqRows[n], jb.req)
	}
	return basis
}

// restoreLevel gives the decomposed search f the remembered prices and
// placements when the GPU types are the same.
func (mem *ftfMemory) restoreLevel(p *Problem, f *ftfLevel) {
	mem.mu.Lock()
	defer mem.mu.Unlock()
	if mem.levelPlace == nil || !slices.Equal(mem.levelTypes, f.b.types) {
		return
	}
	f.warm = levelWarm{prices: slices.Clone(mem.level.prices), tau: mem.level.tau}
	f.place = make([]levelPlace, len(f.active))
	for n, fj := range f.active {
		pl, ok := mem.levelPlace[p.Jobs[fj.index].ID]
		if !ok {
			pl = placeLeftOut // no start: placed by the prices
		}
		f.place[n] = pl
	}
}

// saveLevel remembers the decomposed search f's last prices and placements.
func (mem *ftfMemory) saveLevel(p *Problem, f *ftfLevel) {
	if f.warm.prices == nil || len(f.place) != len(f.active) {
		return
	}
	mem.mu.Lock()
	defer mem.mu.Unlock()
	mem.levelTypes = slices.Clone(f.b.types)
	mem.level = levelWarm{prices: slices.Clone(f.warm.prices), tau: f.warm.tau}
	mem.levelPlace = make(map[string]levelPlace, len(f.active))
	for n, fj := range f.active {
		mem.levelPlace[p.Jobs[fj.index].ID] = f.place[n]
	}
}
