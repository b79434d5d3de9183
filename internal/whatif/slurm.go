package whatif

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
)

// Schedule is where and when each job of a workload ran in one replay
// (indexed like Workload.Jobs), and the cluster's use over time.
type Schedule struct {
	Name   string `json:"name"`
	Policy string `json:"policy,omitempty"`
	Seed   int64  `json:"seed"`
	// Start and End are seconds from the window's start (-1: never);
	// Type is the type the job ran on (the one it ran longest on under a
	// policy that moves jobs).
	Start []float64 `json:"start"`
	End   []float64 `json:"end"`
	Type  []string  `json:"type"`
	// GPUSeconds is what each job received, by type.
	GPUSeconds []map[string]float64 `json:"gpu_s"`
	// Use is the busy GPUs of each type over time.
	Use []Use `json:"use"`
}

// Use is a span of time with the GPUs of each type in use (averaged over
// the span).
type Use struct {
	Start float64            `json:"start"`
	End   float64            `json:"end"`
	Busy  map[string]float64 `json:"busy"`
}

// BackfillDepth is how many waiting jobs one pass plans for, as Slurm's
// bf_max_job_test (default 500) bounds its backfill scheduler.
const BackfillDepth = 500

// ReplaySlurm runs the workload the way Slurm would have: jobs in
// priority order (the priority each record kept, then submission), the
// first that fits starts at once, and the others are planned with
// backfill: a job starts early only when it delays no reservation of a job
// ahead of it, judged by time limits (the job's own run time when it has
// none). A job that asked for a type runs on it; any other job runs on the
// type it really ran on when that fits, else on another one.
//
// Two simplifications, which the baseline's error against the real
// history measures: the recorded priority is the one a job had when it
// started, not as it changed while it waited; and reservations count GPUs
// per type, not per node (a job's start still needs room on whole nodes).
func ReplaySlurm(w *Workload) (*Schedule, error) {
	s := newSlurmSim(w)
	if err := s.run(); err != nil {
		return nil, err
	}
	return s.sched, nil
}

type node struct {
	typ  string
	free int
	size int
}

type running struct {
	job   int
	end   float64 // when it really ends in the replay
	limit float64 // when Slurm expects it to end
	typ   string
	taken []int // GPUs taken on each node of its type (index into nodes)
}

type slurmSim struct {
	w       *Workload
	nodes   map[string][]*node
	now     float64
	next    int   // next job to arrive
	pending []int // waiting jobs
	running []running
	sched   *Schedule
	busy    map[string]int
}

func newSlurmSim(w *Workload) *slurmSim {
	s := &slurmSim{w: w, nodes: map[string][]*node{}, busy: map[string]int{}}
	for _, t := range w.Types {
		per := w.Cluster.perServer(t)
		for i := 0; i < w.Cluster.GPUs[t]/per; i++ {
			s.nodes[t] = append(s.nodes[t], &node{typ: t, free: per, size: per})
		}
	}
	n := len(w.Jobs)
	s.sched = &Schedule{Name: "slurm replay", Start: make([]float64, n), End: make([]float64, n),
		Type: make([]string, n), GPUSeconds: make([]map[string]float64, n)}
	for i := range s.sched.Start {
		s.sched.Start[i], s.sched.End[i] = -1, -1
	}
	return s
}

// before orders waiting jobs as Slurm's queue does.
func (s *slurmSim) before(a, b int) int {
	ja, jb := &s.w.Jobs[a], &s.w.Jobs[b]
	return cmp.Or(-cmp.Compare(ja.Priority, jb.Priority), cmp.Compare(ja.Submit, jb.Submit),
		cmp.Compare(ja.JobID, jb.JobID), cmp.Compare(ja.ArrayTask, jb.ArrayTask), cmp.Compare(a, b))
}

func (s *slurmSim) run() error {
	for s.next < len(s.w.Jobs) || len(s.pending) > 0 || len(s.running) > 0 {
		// The next event: an arrival or an end, whichever comes first.
		t := math.Inf(1)
		if s.next < len(s.w.Jobs) {
			t = s.w.Jobs[s.next].Arrival
		}
		for _, r := range s.running {
			t = math.Min(t, r.end)
		}
		if math.IsInf(t, 1) {
			if len(s.pending) == 0 {
				return fmt.Errorf("a running job never ends (no rate on its type)")
			}
			return fmt.Errorf("%d jobs wait and nothing runs or arrives: job %s fits no node", len(s.pending), s.w.Jobs[s.pending[0]].ID)
		}
		s.advance(t)
		for s.next < len(s.w.Jobs) && s.w.Jobs[s.next].Arrival <= s.now {
			s.pending = append(s.pending, s.next)
			s.next++
		}
		s.schedule()
	}
	return nil
}

// advance moves the clock to t, ending the jobs that end by then.
func (s *slurmSim) advance(t float64) {
	if t > s.now {
		busy := map[string]float64{}
		for typ, n := range s.busy {
			busy[typ] = float64(n)
		}
		s.sched.Use = append(s.sched.Use, Use{Start: s.now, End: t, Busy: busy})
	}
	s.now = math.Max(s.now, t)
	kept := s.running[:0]
	for _, r := range s.running {
		if r.end > s.now {
			kept = append(kept, r)
			continue
		}
		for i, n := range r.taken {
			s.nodes[r.typ][i].free += n
		}
		s.busy[r.typ] -= s.w.Jobs[r.job].GPUs
		s.sched.End[r.job] = r.end
	}
	s.running = kept
}

// types lists where job i may run, its real type first.
func (s *slurmSim) types(i int) []string {
	j := &s.w.Jobs[i]
	if j.Pinned != "" {
		return []string{j.Pinned}
	}
	out := []string{j.Ran}
	for _, t := range s.w.Types {
		if t != j.Ran && j.Rates[t] > 0 {
			out = append(out, t)
		}
	}
	return out
}

// fit finds room for gpus GPUs of type t on whole nodes: on one node when
// the job fits one (the fullest that does, as Slurm's best fit), else on
// as many free nodes as it needs. nil when there is none.
func (s *slurmSim) fit(t string, gpus int) []int {
	nodes := s.nodes[t]
	if len(nodes) == 0 {
		return nil
	}
	taken := make([]int, len(nodes))
	if gpus <= nodes[0].size {
		best := -1
		for i, n := range nodes {
			if n.free >= gpus && (best < 0 || n.free < nodes[best].free) {
				best = i
			}
		}
		if best < 0 {
			return nil
		}
		taken[best] = gpus
		return taken
	}
	left := gpus
	for i, n := range nodes {
		if left > 0 && n.free == n.size {
			taken[i] = min(n.size, left)
			left -= taken[i]
		}
	}
	if left > 0 {
		return nil
	}
	return taken
}

// start runs job i on type t now.
func (s *slurmSim) start(i int, t string, taken []int) {
	j := &s.w.Jobs[i]
	for k, n := range taken {
		s.nodes[t][k].free -= n
	}
	s.busy[t] += j.GPUs
	d := j.Runtime(t)
	s.running = append(s.running, running{job: i, end: s.now + d, limit: s.now + s.planned(i, t), typ: t, taken: taken})
	s.sched.Start[i] = s.now
	s.sched.Type[i] = t
	s.sched.GPUSeconds[i] = map[string]float64{t: d * float64(j.GPUs)}
}

// planned is how long Slurm expects job i to run on t: its time limit,
// or its run time when it has none.
func (s *slurmSim) planned(i int, t string) float64 {
	if l := s.w.Jobs[i].Limit; l > 0 {
		return math.Max(l, 1)
	}
	return s.w.Jobs[i].Runtime(t)
}

// schedule is one pass of Slurm's schedulers: the queue in priority order,
// each job starting now when it fits without delaying a reservation made
// for a job ahead of it.
func (s *slurmSim) schedule() {
	if len(s.pending) == 0 {
		return
	}
	slices.SortFunc(s.pending, s.before)
	prof := s.profiles()
	kept := s.pending[:0]
	for k, i := range s.pending {
		if k >= BackfillDepth {
			kept = append(kept, i)
			continue
		}
		gpus := s.w.Jobs[i].GPUs
		bestT, bestAt := "", math.Inf(1)
		for _, t := range s.types(i) {
			if at := prof[t].earliest(s.now, s.planned(i, t), gpus); at < bestAt {
				bestT, bestAt = t, at
			}
		}
		if bestT == "" {
			kept = append(kept, i)
			continue
		}
		if bestAt <= s.now {
			if taken := s.fit(bestT, gpus); taken != nil {
				s.start(i, bestT, taken)
				prof[bestT].reserve(s.now, s.planned(i, bestT), gpus)
				continue
			}
			// Room in GPUs but not on whole nodes: it waits for the next
			// end on that type.
			bestAt = prof[bestT].nextChange(s.now)
		}
		prof[bestT].reserve(bestAt, s.planned(i, bestT), gpus)
		kept = append(kept, i)
	}
	s.pending = kept
}

// profile is a type's free GPUs over time, as steps.
type profile struct {
	at   []float64 // change times, ascending; at[0] = now
	free []int     // free GPUs from at[k] until at[k+1]
}

// profiles builds each type's free GPUs over time from the running jobs'
// expected ends.
func (s *slurmSim) profiles() map[string]*profile {
	out := map[string]*profile{}
	for _, t := range s.w.Types {
		free := s.w.Cluster.GPUs[t] - s.busy[t]
		p := &profile{at: []float64{s.now}, free: []int{free}}
		var ends []running
		for _, r := range s.running {
			if r.typ == t {
				ends = append(ends, r)
			}
		}
		sort.Slice(ends, func(a, b int) bool { return ends[a].limit < ends[b].limit })
		for _, r := range ends {
			// A job past its limit is planned to end a second from now
			// (Slurm is about to kill it), never now: its GPUs are still
			// taken, and a job ahead that waits for them must keep its
			// reservation.
			at := math.Max(r.limit, s.now+1)
			free += s.w.Jobs[r.job].GPUs
			if at == p.at[len(p.at)-1] {
				p.free[len(p.free)-1] = free
				continue
			}
			p.at = append(p.at, at)
			p.free = append(p.free, free)
		}
		out[t] = p
	}
	return out
}

// earliest is the first time from now at which gpus GPUs stay free for d
// seconds (+Inf when never).
func (p *profile) earliest(now, d float64, gpus int) float64 {
	for k := range p.at {
		start := math.Max(p.at[k], now)
		ok := true
		for m := k; m < len(p.at) && p.at[m] < start+d; m++ {
			if p.free[m] < gpus {
				ok = false
				break
			}
		}
		if ok {
			return start
		}
	}
	return math.Inf(1)
}

// nextChange is the first change of the profile after now (+Inf: none).
func (p *profile) nextChange(now float64) float64 {
	for _, at := range p.at {
		if at > now {
			return at
		}
	}
	return math.Inf(1)
}

// reserve takes gpus GPUs from start for d seconds.
func (p *profile) reserve(start, d float64, gpus int) {
	if math.IsInf(start, 1) {
		return
	}
	end := start + d
	p.split(start)
	p.split(end)
	for k := range p.at {
		if p.at[k] >= start && p.at[k] < end {
			p.free[k] -= gpus
		}
	}
}

// split makes t a change time of the profile.
func (p *profile) split(t float64) {
	k := sort.SearchFloat64s(p.at, t)
	if k < len(p.at) && p.at[k] == t {
		return
	}
	if k == 0 {
		return // before now: nothing to plan
	}
	p.at = slices.Insert(p.at, k, t)
	p.free = slices.Insert(p.free, k, p.free[k-1])
}
