package hadar

import (
	"fmt"
	"slices"
	"sort"

	"github.com/gavel-slurm/gavel-slurm/rounds"
)

// FreeServer is one server and the GPUs on it that are idle this round.
type FreeServer struct {
	ID   string
	Type string
	// GPUs are the indices of the idle GPUs (0 ≤ index < the server's
	// size), in any order.
	GPUs []int
}

// Placement is where a job (or one forked copy of it) runs this round.
type Placement struct {
	Job   string
	Slots []rounds.Slot
	Parts []Part
	// Rate is the job's step rate on Parts (Job.Rate).
	Rate float64
	// Kept is set when the placement is the one the job held last round
	// (nothing to restart).
	Kept bool
}

// Options tune how placements are chosen.
type Options struct {
	// SpanFactor multiplies the rate of a job spread over more than one
	// server, in (0, 1].
	SpanFactor float64
	// SingleType restricts placements to one GPU type (Gavel's rule); the
	// fork pass uses it when mixed types are off.
	SingleType bool
}

func (o Options) check() error {
	if !(o.SpanFactor > 0 && o.SpanFactor <= 1) {
		return fmt.Errorf("span factor %v: need 0 < f <= 1", o.SpanFactor)
	}
	return nil
}

// Idle is the set of idle GPUs while a round is being filled. It knows the
// type of every server of the cluster, idle or not.
type Idle struct {
	servers []FreeServer
	index   map[string]int
}

// NewIdle copies the servers' idle GPUs. List every server of the cluster
// (with no GPUs where none is idle) so that placements held last round can
// be checked against it.
func NewIdle(servers []FreeServer) (*Idle, error) {
	id := &Idle{index: make(map[string]int, len(servers))}
	for _, s := range servers {
		if _, dup := id.index[s.ID]; dup {
			return nil, fmt.Errorf("server %s listed twice", s.ID)
		}
		gpus := slices.Clone(s.GPUs)
		slices.Sort(gpus)
		if len(slices.Compact(slices.Clone(gpus))) != len(gpus) {
			return nil, fmt.Errorf("server %s: a GPU listed twice as idle", s.ID)
		}
		id.index[s.ID] = len(id.servers)
		id.servers = append(id.servers, FreeServer{ID: s.ID, Type: s.Type, GPUs: gpus})
	}
	return id, nil
}

// Total counts the idle GPUs.
func (id *Idle) Total() int {
	n := 0
	for _, s := range id.servers {
		n += len(s.GPUs)
	}
	return n
}

// Servers returns a copy of the idle GPUs per server.
func (id *Idle) Servers() []FreeServer {
	out := make([]FreeServer, len(id.servers))
	for i, s := range id.servers {
		out[i] = FreeServer{ID: s.ID, Type: s.Type, GPUs: slices.Clone(s.GPUs)}
	}
	return out
}

// has reports whether every slot is idle.
func (id *Idle) has(slots []rounds.Slot) bool {
	seen := make(map[rounds.Slot]bool, len(slots))
	for _, sl := range slots {
		i, ok := id.index[sl.Server]
		if !ok || seen[sl] || !slices.Contains(id.servers[i].GPUs, sl.GPU) {
			return false // a GPU named twice is not two idle GPUs
		}
		seen[sl] = true
	}
	return true
}

// take marks the slots busy.
func (id *Idle) take(slots []rounds.Slot) {
	for _, sl := range slots {
		s := &id.servers[id.index[sl.Server]]
		s.GPUs = slices.DeleteFunc(s.GPUs, func(g int) bool { return g == sl.GPU })
	}
}

// partsOf groups slots by server into parts.
func (id *Idle) partsOf(slots []rounds.Slot) ([]Part, error) {
	var parts []Part
	for _, sl := range slots {
		i, ok := id.index[sl.Server]
		if !ok {
			return nil, fmt.Errorf("unknown server %s", sl.Server)
		}
		j := slices.IndexFunc(parts, func(p Part) bool { return p.Server == sl.Server })
		if j < 0 {
			parts = append(parts, Part{Server: sl.Server, Type: id.servers[i].Type})
			j = len(parts) - 1
		}
		parts[j].GPUs++
	}
	return parts, nil
}

// Best is the fastest placement of the job on the idle GPUs, skipping the
// servers in exclude; false when none has a positive rate.
//
// A placement's rate is set by its slowest type and by whether it leaves a
// server, so the search walks the job's usable types from fastest to
// slowest: for each, the candidates are the types at least that fast, and
// the job is packed onto as few of their servers as possible (largest idle
// counts first, the last server chosen as the tightest fit). Among
// placements of equal rate the one on fewer servers wins, then the one
// reached later in the walk, which leaves faster GPUs to others.
func Best(job Job, idle *Idle, exclude map[string]bool, opts Options) (Placement, bool, error) {
	if err := opts.check(); err != nil {
		return Placement{}, false, err
	}
	if job.Scale < 1 {
		return Placement{}, false, fmt.Errorf("job %s: scale %d, need at least 1", job.ID, job.Scale)
	}
	var types []string
	seen := map[string]bool{}
	for _, s := range idle.servers {
		if !seen[s.Type] && job.Rates[s.Type] > 0 {
			seen[s.Type] = true
			types = append(types, s.Type)
		}
	}
	sort.Slice(types, func(a, b int) bool {
		ra, rb := job.Rates[types[a]], job.Rates[types[b]]
		if ra != rb {
			return ra > rb
		}
		return types[a] < types[b]
	})
	var best Placement
	found := false
	for i := range types {
		allowed := types[:i+1]
		if opts.SingleType {
			allowed = types[i : i+1]
		}
		slots := pack(job.Scale, idle, allowed, job.Rates, exclude)
		if slots == nil {
			continue
		}
		parts, err := idle.partsOf(slots)
		if err != nil {
			return Placement{}, false, err
		}
		rate, err := job.Rate(parts, opts.SpanFactor)
		if err != nil {
			return Placement{}, false, err
		}
		if rate <= 0 {
			continue
		}
		if !found || rate > best.Rate || (rate == best.Rate && len(parts) <= len(best.Parts)) {
			best = Placement{Job: job.ID, Slots: slots, Parts: parts, Rate: rate}
			found = true
		}
	}
	return best, found, nil
}

// pack picks k idle GPUs of the allowed types on as few servers as
// possible, or nil when there are fewer than k. Largest idle counts go
// first (that minimizes the number of servers); among equal counts the
// slower type goes first, keeping fast GPUs for others; the last server
// is the smallest that covers what is left.
func pack(k int, idle *Idle, allowed []string, rates map[string]float64, exclude map[string]bool) []rounds.Slot {
	var cands []int
	total := 0
	for i, s := range idle.servers {
		if len(s.GPUs) == 0 || exclude[s.ID] || !slices.Contains(allowed, s.Type) {
			continue
		}
		cands = append(cands, i)
		total += len(s.GPUs)
	}
	if total < k {
		return nil
	}
	less := func(a, b int) bool {
		sa, sb := idle.servers[a], idle.servers[b]
		if len(sa.GPUs) != len(sb.GPUs) {
			return len(sa.GPUs) > len(sb.GPUs)
		}
		if ra, rb := rates[sa.Type], rates[sb.Type]; ra != rb {
			return ra < rb
		}
		return sa.ID < sb.ID
	}
	sort.Slice(cands, func(a, b int) bool { return less(cands[a], cands[b]) })
	var slots []rounds.Slot
	left := k
	for len(cands) > 0 && left > 0 {
		// The tightest single server that finishes the job, if any (the
		// first of equal ones: the slowest type).
		pick := -1
		for j, c := range cands {
			n := len(idle.servers[c].GPUs)
			if n >= left && (pick < 0 || n < len(idle.servers[cands[pick]].GPUs)) {
				pick = j
			}
		}
		if pick < 0 {
			pick = 0
		}
		s := idle.servers[cands[pick]]
		n := min(left, len(s.GPUs))
		for _, g := range s.GPUs[:n] {
			slots = append(slots, rounds.Slot{Server: s.ID, GPU: g})
		}
		left -= n
		cands = slices.Delete(cands, pick, pick+1)
	}
	return slots
}

// Request is a job offered the round's idle GPUs.
type Request struct {
	Job Job
	// Previous are the GPUs the job ran on last round, if any. They are
	// kept when all are still idle and as fast as the best placement, so
	// the job need not restart.
	Previous []rounds.Slot
}

// Fill places the requests, in the order given (the policy's: most owed
// first), each on its fastest placement among the GPUs still idle, and
// marks those GPUs busy. A request that finds no placement is skipped and
// later ones may still fit.
func Fill(reqs []Request, idle *Idle, opts Options) ([]Placement, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	var out []Placement
	left := idle.Total()
	for _, r := range reqs {
		if left == 0 {
			break
		}
		if r.Job.Scale > left {
			continue
		}
		p, ok, err := Best(r.Job, idle, nil, opts)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		if len(r.Previous) > 0 && idle.has(r.Previous) {
			parts, err := idle.partsOf(r.Previous)
			if err != nil {
				return nil, err
			}
			if rate, err := r.Job.Rate(parts, opts.SpanFactor); err == nil && rate >= p.Rate &&
				(!opts.SingleType || !Mixed(parts)) {
				p = Placement{Job: r.Job.ID, Slots: slices.Clone(r.Previous), Parts: parts, Rate: rate, Kept: true}
			}
		}
		idle.take(p.Slots)
		left -= len(p.Slots)
		out = append(out, p)
	}
	return out, nil
}

// ForkRequest is a running job that may run forked copies on idle GPUs
// (HadarE): each copy trains on its own servers and the copies' progress
// adds up, their parameters averaged between rounds.
type ForkRequest struct {
	Job Job
	// Busy are the servers the job already uses this round; copies go
	// elsewhere.
	Busy []string
	// Copies is the most extra copies the job may run.
	Copies int
}

// Fork hands idle GPUs to extra copies of the requests, one copy per job
// per pass in the order given, until no copy fits or every job has its
// copies. Each copy is placed like a job (Best) away from every server
// the job's other copies use.
func Fork(reqs []ForkRequest, idle *Idle, opts Options) ([]Placement, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	busy := make([]map[string]bool, len(reqs))
	made := make([]int, len(reqs))
	for i, r := range reqs {
		busy[i] = map[string]bool{}
		for _, s := range r.Busy {
			busy[i][s] = true
		}
	}
	var out []Placement
	for progress := true; progress && idle.Total() > 0; {
		progress = false
		for i, r := range reqs {
			if made[i] >= r.Copies {
				continue
			}
			p, ok, err := Best(r.Job, idle, busy[i], opts)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
			idle.take(p.Slots)
			for _, pt := range p.Parts {
				busy[i][pt.Server] = true
			}
			made[i]++
			out = append(out, p)
			progress = true
		}
	}
	return out, nil
}
