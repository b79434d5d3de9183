package batchsim

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"

	"github.com/gavel-slurm/gavel-slurm/internal/hadar"
	"github.com/gavel-slurm/gavel-slurm/internal/sched"
	"github.com/gavel-slurm/gavel-slurm/internal/throughputs"
	"github.com/gavel-slurm/gavel-slurm/policy"
	"github.com/gavel-slurm/gavel-slurm/rounds"
)

// Config describes one batch run.
type Config struct {
	// GPUs is the number of GPUs of each type.
	GPUs map[string]int
	// GPUsPerServer is the size of every server; each server holds one
	// type. Hadar's cluster is 15 servers of 4 GPUs.
	GPUsPerServer int
	// Policy names the registered policy that computes the allocation.
	Policy string
	// MixedTypes lets a job the per-type walk leaves waiting run on idle
	// GPUs of several types (package hadar).
	MixedTypes bool
	// ForkCopies is the most extra copies of a running job placed on GPUs
	// still idle after the walk and the mixed fill (HadarE); 0: none.
	ForkCopies int
	// ForkSync is the time (seconds per round) a forked job loses to
	// gathering and averaging its copies' parameters.
	ForkSync float64
	// SpanFactor multiplies the rate of a job spread over more than one
	// server, single-type or mixed, in (0, 1].
	SpanFactor float64
	// RoundSeconds is the round length.
	RoundSeconds float64
	// RestartOverhead is the time a job loses in a round where it starts
	// on GPUs other than those it held the round before (a
	// checkpoint-restart).
	RestartOverhead float64
	// MinResetInterval is the least time between allocation
	// recomputations (they happen when jobs finish).
	MinResetInterval float64
	// Seed feeds the policy and the mechanism's type shuffle.
	Seed int64
	// MaxTime stops a run that has not finished by then (seconds).
	MaxTime float64
	Table   *throughputs.Table
}

// Defaults are Hadar's evaluation settings: 20 V100, 20 P100, 20 K80 on
// servers of 4, max_min_fairness_perf, 6-minute rounds, a 10 s
// checkpoint-restart, and a span factor of 0.75 (the median ratio of the
// reference table's measured rates for multi-GPU jobs spread over servers
// to those on one server).
func Defaults() (Config, error) {
	table, err := throughputs.Reference()
	if err != nil {
		return Config{}, err
	}
	return Config{
		GPUs:             map[string]int{"v100": 20, "p100": 20, "k80": 20},
		GPUsPerServer:    4,
		Policy:           "max_min_fairness_perf",
		ForkSync:         10,
		SpanFactor:       0.75,
		RoundSeconds:     rounds.DefaultRoundSeconds,
		RestartOverhead:  10,
		MinResetInterval: rounds.DefaultMinResetInterval,
		MaxTime:          365 * 24 * 3600,
		Table:            table,
	}, nil
}

// Result is what a batch run measured.
type Result struct {
	// Makespan is the time the last job finished (s).
	Makespan float64 `json:"makespan_s"`
	// Utilization is the share of the cluster's GPU time, up to the
	// makespan, that jobs held GPUs (restarts and averaging included).
	Utilization float64 `json:"utilization"`
	// UtilizationByType is the same per GPU type.
	UtilizationByType map[string]float64 `json:"utilization_by_type"`
	// AverageJCT and MedianJCT are over all jobs (all arrive at 0) (s).
	AverageJCT float64 `json:"average_jct_s"`
	MedianJCT  float64 `json:"median_jct_s"`
	Rounds     int     `json:"rounds"`
	// MixedJobRounds counts rounds jobs ran on a mix of types;
	// MixedGPUShare is their share of the GPU time held.
	MixedJobRounds int     `json:"mixed_job_rounds"`
	MixedGPUShare  float64 `json:"mixed_gpu_share"`
	// ForkedCopyRounds counts extra copies run, one per copy and round.
	ForkedCopyRounds int `json:"forked_copy_rounds"`
	// Restarts counts job starts on new GPUs after the first.
	Restarts int `json:"restarts"`
	// FluidBound is the shortest makespan any schedule of the batch on
	// single types or mixes could reach (s): the makespan LP at time 0,
	// which lets every job split its time freely over types and charges
	// no restart and no span. Mixes cannot beat it (a mix runs at its
	// slowest type, which the LP can match by time-sharing the same GPUs
	// over single types); forked copies can. 0 when a job fits no single
	// type.
	FluidBound float64 `json:"fluid_bound_s"`
	// Allocations is the number of allocations the policy computed.
	Allocations int `json:"allocations"`
	Jobs        int `json:"jobs"`
}

func (c *Config) validate() ([]string, error) {
	if c.Table == nil {
		return nil, errors.New("no throughput table")
	}
	if len(c.GPUs) == 0 {
		return nil, errors.New("empty cluster")
	}
	if c.GPUsPerServer < 1 {
		return nil, fmt.Errorf("%d GPUs per server: need at least 1", c.GPUsPerServer)
	}
	types := make([]string, 0, len(c.GPUs))
	for t, n := range c.GPUs {
		if n < 1 || n%c.GPUsPerServer != 0 {
			return nil, fmt.Errorf("%d %s GPUs: need a positive multiple of %d (servers)", n, t, c.GPUsPerServer)
		}
		types = append(types, t)
	}
	sort.Strings(types)
	switch {
	case !(c.SpanFactor > 0 && c.SpanFactor <= 1):
		return nil, fmt.Errorf("span factor %v: need 0 < f <= 1", c.SpanFactor)
	case !(c.RoundSeconds > 0) || math.IsInf(c.RoundSeconds, 0):
		return nil, fmt.Errorf("round length %v s: must be positive", c.RoundSeconds)
	case c.RestartOverhead < 0 || c.ForkSync < 0 || c.RestartOverhead+c.ForkSync >= c.RoundSeconds:
		return nil, fmt.Errorf("restart overhead %v s and fork sync %v s: need >= 0 and together shorter than a round", c.RestartOverhead, c.ForkSync)
	case c.ForkCopies < 0:
		return nil, fmt.Errorf("fork copies %d: need >= 0", c.ForkCopies)
	case c.MinResetInterval < 0:
		return nil, fmt.Errorf("minimum reset interval %v s: need >= 0", c.MinResetInterval)
	case !(c.MaxTime > 0):
		return nil, fmt.Errorf("maximum time %v s: must be positive", c.MaxTime)
	}
	return types, nil
}

// job is a batch job's state during a run.
type job struct {
	spec      Job
	rates     map[string]float64
	remaining float64
	finish    float64
	done      bool
	// held are the GPUs (all copies) the job ran on last round, sorted.
	held []rounds.Slot
	// heldMixed is held when last round's placement came from the mixed
	// fill, so the fill may keep it.
	heldMixed []rounds.Slot
	started   bool
}

// Run schedules the batch to completion.
func Run(cfg Config, batch []Job) (*Result, error) {
	types, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	if len(batch) == 0 {
		return nil, errors.New("empty batch")
	}
	pol, err := policy.New(cfg.Policy, policy.Options{Seed: cfg.Seed})
	if err != nil {
		return nil, err
	}
	if pol.Traits().Packs {
		return nil, fmt.Errorf("policy %s packs jobs in pairs, which the batch simulator does not model", cfg.Policy)
	}
	cluster, servers := layout(cfg, types)
	shuffle := rand.New(rand.NewPCG(uint64(cfg.Seed)+5, 0x73687566))
	mech, err := rounds.New(cluster, rounds.ForTraits(pol.Traits(), shuffle))
	if err != nil {
		return nil, fmt.Errorf("round mechanism: %w", err)
	}
	jobs := make([]*job, len(batch))
	byID := make(map[string]*job, len(batch))
	for i, b := range batch {
		if _, dup := byID[b.ID]; dup {
			return nil, fmt.Errorf("job %s listed twice", b.ID)
		}
		j := &job{spec: b, remaining: b.Steps, rates: map[string]float64{}}
		for _, t := range types {
			j.rates[t] = cfg.Table.Isolated(b.Model, b.Scale, t)
		}
		if err := mech.AddJob(rounds.Job{ID: b.ID, ScaleFactor: b.Scale, Throughputs: j.rates}, 0); err != nil {
			return nil, fmt.Errorf("job %s: %w", b.ID, err)
		}
		jobs[i], byID[b.ID] = j, j
	}
	r := &runner{cfg: cfg, types: types, servers: servers, mech: mech, pol: pol, jobs: jobs, byID: byID,
		busyByType: map[string]float64{}}
	bound, err := r.fluidBound()
	if err != nil {
		return nil, err
	}
	res, err := r.run()
	if err != nil {
		return nil, err
	}
	res.FluidBound = bound
	return res, nil
}

// fluidBound solves the makespan LP for the whole batch at time 0; 0 when
// some job fits no single type (only mixes can run it, and the LP, which
// knows single types only, has no finite answer).
func (r *runner) fluidBound() (float64, error) {
	for _, j := range r.jobs {
		fits := false
		for _, t := range r.types {
			fits = fits || (j.rates[t] > 0 && j.spec.Scale <= r.cfg.GPUs[t])
		}
		if !fits {
			return 0, nil
		}
	}
	mk, err := policy.New("min_total_duration_perf", policy.Options{})
	if err != nil {
		return 0, err
	}
	alloc, err := mk.Allocate(r.problem())
	if err != nil {
		return 0, fmt.Errorf("makespan bound: %w", err)
	}
	return alloc.Objective, nil
}

// problem is the policy's input for the unfinished jobs now.
func (r *runner) problem() *policy.Problem {
	var inputs []sched.JobInput
	for _, j := range r.jobs {
		if j.done {
			continue
		}
		inputs = append(inputs, sched.JobInput{ID: j.spec.ID, Throughputs: j.rates, ScaleFactor: j.spec.Scale,
			Weight: 1, StepsRemaining: j.remaining})
	}
	return sched.BuildProblem(r.cfg.GPUs, nil, r.now, inputs)
}

// layout names the servers <type>-<n>, every one GPUsPerServer GPUs of
// one type.
func layout(cfg Config, types []string) (rounds.Cluster, map[string]string) {
	var cl rounds.Cluster
	typeOf := map[string]string{}
	for _, t := range types {
		for i := range cfg.GPUs[t] / cfg.GPUsPerServer {
			id := fmt.Sprintf("%s-%d", t, i)
			cl.Servers = append(cl.Servers, rounds.Server{ID: id, Type: t, GPUs: cfg.GPUsPerServer})
			typeOf[id] = t
		}
	}
	return cl, typeOf
}

type runner struct {
	cfg     Config
	types   []string
	servers map[string]string // server → type
	mech    *rounds.Mechanism
	pol     policy.Policy
	jobs    []*job
	byID    map[string]*job
	now     float64
	res     Result
	// busy GPU-seconds, all and per type, and on mixes
	busy, busyMixed float64
	busyByType      map[string]float64
}

// copyRun is one placement of a job for a round: the walk's, the mixed
// fill's or a forked copy.
type copyRun struct {
	slots []rounds.Slot
	parts []hadar.Part
	rate  float64
	mixed bool
}

func (r *runner) run() (*Result, error) {
	var running []rounds.Assignment
	left := len(r.jobs)
	for left > 0 {
		if r.now >= r.cfg.MaxTime {
			return nil, fmt.Errorf("batch not finished after %.0f s (%d jobs left)", r.cfg.MaxTime, left)
		}
		if r.mech.NeedsReset(r.now) {
			if err := r.allocate(); err != nil {
				return nil, err
			}
		}
		plan, err := r.mech.Plan(r.now, running)
		if err != nil {
			return nil, fmt.Errorf("round at %.0f s: %w", r.now, err)
		}
		runs, err := r.place(plan)
		if err != nil {
			return nil, fmt.Errorf("round at %.0f s: %w", r.now, err)
		}
		if len(runs) == 0 {
			return nil, fmt.Errorf("round at %.0f s: no job can run (%d left)", r.now, left)
		}
		finished, err := r.advance(runs)
		if err != nil {
			return nil, err
		}
		r.res.Rounds++
		r.now += r.cfg.RoundSeconds
		for _, id := range finished {
			if err := r.mech.RemoveJob(id, r.now); err != nil {
				return nil, err
			}
			left--
		}
		running = running[:0]
		for _, a := range plan.Assignments {
			if !r.byID[a.Key].done {
				running = append(running, a)
			}
		}
	}
	return r.finish(), nil
}

// allocate computes a new allocation for the unfinished jobs.
func (r *runner) allocate() error {
	alloc, err := r.pol.Allocate(r.problem())
	if err != nil {
		return fmt.Errorf("allocation at %.0f s: %w", r.now, err)
	}
	r.res.Allocations++
	if err := r.mech.SetAllocation(alloc, r.now); err != nil {
		return fmt.Errorf("allocation at %.0f s: %w", r.now, err)
	}
	return nil
}

// place turns the mechanism's plan into the round's runs, then hands the
// GPUs it leaves idle to waiting jobs on mixes and to forked copies.
func (r *runner) place(plan *rounds.Plan) (map[string][]copyRun, error) {
	runs := map[string][]copyRun{}
	used := map[rounds.Slot]bool{}
	for _, a := range plan.Assignments {
		j := r.byID[a.Key]
		parts := partsOf(a.Slots, r.servers)
		rate, err := r.hjob(j).Rate(parts, r.cfg.SpanFactor)
		if err != nil {
			return nil, err
		}
		runs[a.Key] = append(runs[a.Key], copyRun{slots: a.Slots, parts: parts, rate: rate})
		for _, s := range a.Slots {
			used[s] = true
		}
	}
	if !r.cfg.MixedTypes && r.cfg.ForkCopies == 0 {
		return runs, nil
	}
	idle, err := r.idle(used)
	if err != nil {
		return nil, err
	}
	opts := hadar.Options{SpanFactor: r.cfg.SpanFactor, SingleType: !r.cfg.MixedTypes}
	if r.cfg.MixedTypes && idle.Total() > 0 {
		reqs := r.waiting(plan)
		placed, err := hadar.Fill(reqs, idle, opts)
		if err != nil {
			return nil, err
		}
		for _, p := range placed {
			runs[p.Job] = append(runs[p.Job], copyRun{slots: p.Slots, parts: p.Parts, rate: p.Rate, mixed: hadar.Mixed(p.Parts)})
		}
	}
	if r.cfg.ForkCopies > 0 && idle.Total() > 0 {
		copies, err := hadar.Fork(r.forkable(runs), idle, opts)
		if err != nil {
			return nil, err
		}
		for _, p := range copies {
			runs[p.Job] = append(runs[p.Job], copyRun{slots: p.Slots, parts: p.Parts, rate: p.Rate, mixed: hadar.Mixed(p.Parts)})
			r.res.ForkedCopyRounds++
		}
	}
	return runs, nil
}

func (r *runner) hjob(j *job) hadar.Job {
	return hadar.Job{ID: j.spec.ID, Scale: j.spec.Scale, Rates: j.rates}
}

// idle lists every server with the GPUs the plan leaves unused.
func (r *runner) idle(used map[rounds.Slot]bool) (*hadar.Idle, error) {
	ids := make([]string, 0, len(r.servers))
	for id := range r.servers {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	free := make([]hadar.FreeServer, 0, len(ids))
	for _, id := range ids {
		fs := hadar.FreeServer{ID: id, Type: r.servers[id]}
		for g := range r.cfg.GPUsPerServer {
			if !used[rounds.Slot{Server: id, GPU: g}] {
				fs.GPUs = append(fs.GPUs, g)
			}
		}
		free = append(free, fs)
	}
	return hadar.NewIdle(free)
}

// waiting lists the jobs the plan leaves waiting, most owed first: by
// their best priority on any type (the mechanism's measure of how far a
// job is behind its allocation), then in arrival order.
func (r *runner) waiting(plan *rounds.Plan) []hadar.Request {
	type cand struct {
		req  hadar.Request
		prio float64
		seq  int
	}
	var cands []cand
	for i, d := range plan.Decisions {
		if d.Action != rounds.Wait {
			continue
		}
		j := r.byID[d.Job]
		best := 0.0
		for _, t := range r.types {
			if st, err := r.mech.State(d.Job, t); err == nil {
				best = math.Max(best, st.Priority)
			}
		}
		cands = append(cands, cand{req: hadar.Request{Job: r.hjob(j), Previous: j.heldMixed}, prio: best, seq: i})
	}
	slices.SortStableFunc(cands, func(a, b cand) int {
		if c := cmp.Compare(b.prio, a.prio); c != 0 {
			return c
		}
		return cmp.Compare(a.seq, b.seq)
	})
	out := make([]hadar.Request, len(cands))
	for i, c := range cands {
		out[i] = c.req
	}
	return out
}

// forkable lists the running jobs, longest remaining time first: copies
// shorten the batch most where they shorten its longest jobs.
func (r *runner) forkable(runs map[string][]copyRun) []hadar.ForkRequest {
	type cand struct {
		req  hadar.ForkRequest
		left float64
	}
	var cands []cand
	for id, cs := range runs {
		j := r.byID[id]
		var busy []string
		rate := 0.0
		for _, c := range cs {
			rate += c.rate
			for _, p := range c.parts {
				busy = append(busy, p.Server)
			}
		}
		if rate <= 0 {
			continue
		}
		cands = append(cands, cand{hadar.ForkRequest{Job: r.hjob(j), Busy: busy, Copies: r.cfg.ForkCopies}, j.remaining / rate})
	}
	slices.SortFunc(cands, func(a, b cand) int {
		if c := cmp.Compare(b.left, a.left); c != 0 {
			return c
		}
		return cmp.Compare(a.req.Job.ID, b.req.Job.ID)
	})
	out := make([]hadar.ForkRequest, len(cands))
	for i, c := range cands {
		out[i] = c.req
	}
	return out
}

// advance runs one round: every placed job progresses at the sum of its
// copies' rates, less a restart when it moved and the averaging time when
// it ran forked; the mechanism is told the time each job received on each
// type (GPU time over its scale, so a mix counts partly on each type).
func (r *runner) advance(runs map[string][]copyRun) ([]string, error) {
	ids := make([]string, 0, len(runs))
	for id := range runs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var usages []rounds.Usage
	var finished []string
	for _, id := range ids {
		j := r.byID[id]
		cs := runs[id]
		var slots []rounds.Slot
		rate := 0.0
		for _, c := range cs {
			slots = append(slots, c.slots...)
			rate += c.rate
		}
		slices.SortFunc(slots, func(a, b rounds.Slot) int {
			if c := cmp.Compare(a.Server, b.Server); c != 0 {
				return c
			}
			return cmp.Compare(a.GPU, b.GPU)
		})
		lost := 0.0
		if !slices.Equal(slots, j.held) {
			lost += r.cfg.RestartOverhead
			if j.started {
				r.res.Restarts++
			}
		}
		if len(cs) > 1 {
			lost += r.cfg.ForkSync
		}
		span := r.cfg.RoundSeconds
		if work := rate * (r.cfg.RoundSeconds - lost); rate > 0 && work >= j.remaining {
			span = lost + j.remaining/rate
			j.remaining = 0
			j.done = true
			j.finish = r.now + span
			finished = append(finished, id)
		} else {
			j.remaining -= work
		}
		j.started = true
		j.held = slots
		j.heldMixed = nil
		for _, c := range cs {
			gpus := float64(len(c.slots))
			r.busy += gpus * span
			if c.mixed {
				r.busyMixed += gpus * span
				r.res.MixedJobRounds++
			}
			for _, p := range c.parts {
				r.busyByType[p.Type] += float64(p.GPUs) * span
				usages = append(usages, rounds.Usage{Key: id, Type: p.Type,
					Seconds: span * float64(p.GPUs) / float64(j.spec.Scale)})
			}
		}
		if len(cs) == 1 && cs[0].mixed {
			j.heldMixed = cs[0].slots
		}
	}
	if err := r.mech.Record(usages); err != nil {
		return nil, err
	}
	return finished, nil
}

func (r *runner) finish() *Result {
	res := r.res
	res.Jobs = len(r.jobs)
	jcts := make([]float64, len(r.jobs))
	sum := 0.0
	for i, j := range r.jobs {
		jcts[i] = j.finish
		sum += j.finish
		res.Makespan = math.Max(res.Makespan, j.finish)
	}
	sort.Float64s(jcts)
	res.AverageJCT = sum / float64(len(jcts))
	if n := len(jcts); n%2 == 1 {
		res.MedianJCT = jcts[n/2]
	} else {
		res.MedianJCT = (jcts[n/2-1] + jcts[n/2]) / 2
	}
	total := 0
	res.UtilizationByType = map[string]float64{}
	for _, t := range r.types {
		total += r.cfg.GPUs[t]
		if res.Makespan > 0 {
			res.UtilizationByType[t] = r.busyByType[t] / (float64(r.cfg.GPUs[t]) * res.Makespan)
		}
	}
	if res.Makespan > 0 {
		res.Utilization = r.busy / (float64(total) * res.Makespan)
	}
	if r.busy > 0 {
		res.MixedGPUShare = r.busyMixed / r.busy
	}
	return &res
}

// partsOf groups slots by server.
func partsOf(slots []rounds.Slot, typeOf map[string]string) []hadar.Part {
	var parts []hadar.Part
	for _, s := range slots {
		i := slices.IndexFunc(parts, func(p hadar.Part) bool { return p.Server == s.Server })
		if i < 0 {
			parts = append(parts, hadar.Part{Server: s.Server, Type: typeOf[s.Server]})
			i = len(parts) - 1
		}
		parts[i].GPUs++
	}
	return parts
}
