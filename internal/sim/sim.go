package sim

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gavel-slurm/gavel-slurm/internal/sched"
	"github.com/gavel-slurm/gavel-slurm/internal/workload"
	"github.com/gavel-slurm/gavel-slurm/policy"
	"github.com/gavel-slurm/gavel-slurm/rounds"
)

// job is the simulator's record of one admitted job.
type job struct {
	id    int
	key   string
	spec  workload.Job
	rates []float64 // per cluster type (sorted), whole-job steps/s
	// tputs is the same as a map; built once, never modified.
	tputs map[string]float64
	// seen is what the policy and the mechanism are told: tputs itself,
	// or under estimation the estimator's latest rates (replaced, never
	// modified).
	seen map[string]float64
	// measuredOn says per type whether a measurement past the warm-up was
	// taken (estimation only).
	measuredOn []bool
	remaining  float64
	start      float64 // first time it ran; -1 before
	finish     float64
	perType    []float64 // seconds held per type
	everRan    bool
	runSince   float64 // when its current run (lease) started
	done       bool
	// failures counts the job's failed micro-tasks in a row and dropped
	// marks a job the reference would have given up on (Config.Faithful
	// only, see microTaskFails).
	failures int
	dropped  bool
	// Themis accounting: isoTime is the time the job would have needed so
	// far on its isolated 1/n share; isoRate is that share's throughput as
	// of the last reset and isoMark the remaining steps then.
	isoTime, isoRate, isoMark float64
	// seenIsoTime and seenIsoRate are the same as the policy sees them,
	// from the estimated rates or, for the reference's agnostic
	// finish_time_fairness, from the rates that policy sees (the policy's
	// input only where s.policyIso, while isoTime measures the outcome).
	seenIsoTime, seenIsoRate float64
	// restartCost is what the job loses at every restart (seconds).
	restartCost float64
}

// pair is a candidate co-location offered to packing policies.
type pair struct {
	a, b  *job
	key   string
	tputs map[string][2]float64
}

// task is one scheduled combination of the current round.
type task struct {
	assign int // index into the current plan's Assignments
	jobs   [2]*job
	steps  [2]float64
	finish float64
	typ    int
}

// simulator holds one run's state.
type simulator struct {
	cfg     Config
	types   []string
	typeIdx map[string]int
	pol     policy.Policy
	mech    *rounds.Mechanism
	packing bool
	// learn measures jobs and estimates their rates (nil: the policy sees
	// the true rates).
	learn *learner
	// agnosticIso: the policy sees every job at its reference rate on
	// every type it can use, and so does its isolated time (the reference's
	// finish_time_fairness, see agnosticIsolatedTime). policyIso: the
	// policy's isolated times are accrued apart from the outcome's
	// (seenIsoTime), from the rates isoView gives.
	agnosticIso, policyIso bool
	// runningOn is the type each running job runs on, refreshed at every
	// reset, when the policy is told (policy.Options.KeepRunning); nil
	// otherwise.
	runningOn map[string]string
	// restartRule says the mechanism weighs restarts and wants each
	// running job's remaining steps.
	restartRule bool

	src     Source
	peeked  *workload.Job
	srcDone bool

	all    []*job // by id
	active []*job // in arrival order
	byKey  map[string]*job
	pairs  []*pair
	// pairByKey finds a planned pair without scanning all pairs.
	pairByKey map[string]*pair

	plans    [2]rounds.Plan
	cur      int // index of the plan whose assignments run now
	tasks    []task
	now      float64
	roundAt  float64 // when the running round started
	measured int     // measured jobs completed

	res Result
}

// Run simulates src under cfg and returns the measurements.
func Run(cfg Config, src Source) (*Result, error) {
	types, err := cfg.validate()
	if err != nil {
		return nil, fmt.Errorf("simulation config: %w", err)
	}
	s := &simulator{cfg: cfg, types: types, src: src, byKey: map[string]*job{}, pairByKey: map[string]*pair{}, typeIdx: map[string]int{}}
	for i, t := range types {
		s.typeIdx[t] = i
	}
	var started time.Time
	if cfg.Clock != nil {
		started = cfg.Clock()
	}
	s.pol = cfg.Policy
	if s.pol == nil {
		if s.pol, err = policy.New(cfg.PolicyName, cfg.policyOptions()); err != nil {
			return nil, err
		}
	}
	name := s.pol.Name()
	traits := s.pol.Traits()
	// A packing policy needs candidate pairs in every problem.
	s.packing = traits.Packs
	if cfg.Estimate != nil {
		if s.packing {
			return nil, fmt.Errorf("simulation (%s): %w", name, errEstimatePairs)
		}
		if s.learn, err = newLearner(cfg, types); err != nil {
			return nil, fmt.Errorf("simulation: %w", err)
		}
	}
	s.agnosticIso = cfg.agnosticIsolatedTime(name)
	if cfg.keepRunning() {
		s.runningOn = map[string]string{}
	}
	s.policyIso = s.learn != nil || s.agnosticIso
	opts := rounds.ForTraits(traits, workload.NewRand(cfg.Seed+5))
	// The reference credits every job half a round of service at each reset.
	opts.Credit = cfg.RoundSeconds / 2
	opts.MinResetInterval = cfg.MinResetInterval
	opts.RestartHold, opts.RestartHoldMax, opts.RestartFinish = cfg.RestartHold, cfg.RestartHoldMax, cfg.RestartFinish
	opts.RestartHoldMin, opts.RoundSeconds = cfg.RestartHoldMin, cfg.RoundSeconds
	opts = cfg.Mechanism.Apply(opts)
	s.restartRule = opts.RestartHold > 0
	if s.mech, err = rounds.New(cfg.servers(types), opts); err != nil {
		return nil, fmt.Errorf("simulation: %w", err)
	}
	s.res = Result{Policy: name, Types: types, busy: make([]float64, len(types)), Estimated: s.learn != nil}
	if err := s.loop(); err != nil {
		return nil, fmt.Errorf("simulation (%s) at t=%.0fs: %w", name, s.now, err)
	}
	s.finishResult()
	if cfg.Clock != nil {
		s.res.WallSeconds = cfg.Clock().Sub(started).Seconds()
	}
	return &s.res, nil
}

// peek returns the next job of the source without admitting it.
func (s *simulator) peek() *workload.Job {
	if s.peeked == nil && !s.srcDone {
		j, ok := s.src.Next()
		if !ok {
			s.srcDone = true
			return nil
		}
		s.peeked = &j
	}
	return s.peeked
}

// measuring reports whether job id is in the measurement window.
func (s *simulator) measuring(id int) bool {
	if s.cfg.EndMeasured == 0 {
		return true
	}
	return id >= s.cfg.FirstMeasured && id < s.cfg.EndMeasured
}

// done reports whether the run can stop.
func (s *simulator) done() bool {
	if s.cfg.EndMeasured > 0 {
		return s.measured == s.cfg.EndMeasured-s.cfg.FirstMeasured
	}
	return len(s.active) == 0 && s.peek() == nil
}

// defaultMaxTime bounds a run's simulated time when Config.MaxTime is 0.
const defaultMaxTime = 10 * 365 * 24 * 3600.0

func (s *simulator) loop() error {
	limit := s.cfg.MaxTime
	if limit == 0 {
		limit = defaultMaxTime
	}
	for !s.done() {
		if s.now > limit {
			return fmt.Errorf("simulated time passed %.0f s (%.1f years) with %d jobs still in the system: "+
				"a job is far longer than the cluster can run (check its steps), or set a larger limit",
				limit, limit/(365*24*3600), len(s.active))
		}
		switch {
		case len(s.tasks) > 0:
			if err := s.completeRound(); err != nil {
				return err
			}
		case s.peek() != nil:
			s.now = math.Max(s.now, s.peek().Arrival)
		default:
			if s.cfg.EndMeasured > 0 && len(s.active) == 0 {
				return fmt.Errorf("the workload ended after %d jobs, before the measurement window %d:%d completed",
					len(s.all), s.cfg.FirstMeasured, s.cfg.EndMeasured)
			}
		}
		if err := s.admit(); err != nil {
			return err
		}
		if err := s.scheduleRound(false); err != nil {
			return err
		}
		if len(s.tasks) == 0 && len(s.active) > 0 && s.peek() == nil {
			// Nothing runs, nothing will arrive: only a new allocation can
			// make progress (jobs held until the next reset).
			if err := s.scheduleRound(true); err != nil {
				return err
			}
			if len(s.tasks) == 0 {
				return fmt.Errorf("%d jobs wait but none can be scheduled (%s)", len(s.active), s.waitReasons(3))
			}
		}
	}
	return nil
}

// waitReasons renders the current plan's reasons for the first n jobs,
// so a stuck run says what kept them off the GPUs.
func (s *simulator) waitReasons(n int) string {
	var b strings.Builder
	ds := s.plans[s.cur].Decisions
	for i := range ds[:min(n, len(ds))] {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "job %s: %s", ds[i].Job, ds[i].Reason)
	}
	if len(ds) > n {
		fmt.Fprintf(&b, "; %d more", len(ds)-n)
	}
	return b.String()
}

// admit adds every job that has arrived by now.
func (s *simulator) admit() error {
	for j := s.peek(); j != nil && j.Arrival <= s.now; j = s.peek() {
		s.peeked = nil
		if err := s.add(*j); err != nil {
			return err
		}
	}
	return nil
}

func (s *simulator) add(spec workload.Job) error {
	id := len(s.all)
	if n := len(s.all); n > 0 && spec.Arrival < s.all[n-1].spec.Arrival {
		return fmt.Errorf("job %d arrives at %v, before job %d (%v): arrivals must not decrease", id, spec.Arrival, n-1, s.all[n-1].spec.Arrival)
	}
	if spec.Priority == 0 {
		spec.Priority = 1
	}
	j := &job{
		id: id, key: strconv.Itoa(id), spec: spec,
		rates:     make([]float64, len(s.types)),
		tputs:     make(map[string]float64, len(s.types)),
		remaining: spec.TotalSteps,
		start:     -1,
		perType:   make([]float64, len(s.types)),
		isoMark:   spec.TotalSteps,
	}
	runnable := false
	for i, t := range s.types {
		r := s.cfg.Table.Isolated(spec.Model, spec.ScaleFactor, t)
		j.rates[i] = r
		j.tputs[t] = r
		if r > 0 && spec.ScaleFactor <= s.cfg.GPUs[t] {
			runnable = true
		}
	}
	if !runnable {
		return fmt.Errorf("job %d (%s on %d GPUs) cannot run on any GPU type of the cluster", id, spec.Model, spec.ScaleFactor)
	}
	if !(spec.TotalSteps > 0) {
		return fmt.Errorf("job %d has %v steps, need a positive count", id, spec.TotalSteps)
	}
	j.seen = j.tputs
	if s.learn != nil {
		j.seen = placeholder(j, s.types)
		j.measuredOn = make([]bool, len(s.types))
	}
	j.restartCost = s.cfg.PreemptionOverhead + s.cfg.RestartCosts.Draw(s.cfg.Seed, id, spec.Model)
	if err := validRestartCost(j.restartCost, s.cfg.RoundSeconds); err != nil {
		return fmt.Errorf("job %d: %w", id, err)
	}
	err := s.mech.AddJob(rounds.Job{ID: j.key, ScaleFactor: spec.ScaleFactor, Throughputs: j.seen, RestartCost: j.restartCost}, s.now)
	if err == nil && s.restartRule {
		err = s.mech.SetRemainingSteps(j.key, j.remaining)
	}
	if err != nil {
		return err
	}
	s.all = append(s.all, j)
	s.active = append(s.active, j)
	s.res.PeakActive = max(s.res.PeakActive, len(s.active))
	if s.cfg.MaxActive > 0 && len(s.active) > s.cfg.MaxActive {
		return fmt.Errorf("%d jobs in the system, more than the limit of %d: %w", len(s.active), s.cfg.MaxActive, ErrSaturated)
	}
	s.byKey[j.key] = j
	if s.packing {
		for _, o := range s.active[:len(s.active)-1] {
			if err := s.addPair(o, j); err != nil {
				return err
			}
		}
	}
	return nil
}

// addPair offers the co-location of a (earlier) and b when the table has
// positive rates for both on some type at their common scale factor.
func (s *simulator) addPair(a, b *job) error {
	if a.spec.ScaleFactor != b.spec.ScaleFactor {
		return nil
	}
	var tputs map[string][2]float64
	for _, t := range s.types {
		ra, rb, ok := s.cfg.Table.Pair(a.spec.Model, b.spec.Model, a.spec.ScaleFactor, t)
		if !ok || ra <= 0 || rb <= 0 {
			continue
		}
		if tputs == nil {
			tputs = map[string][2]float64{}
		}
		tputs[t] = [2]float64{ra, rb}
	}
	if tputs == nil {
		return nil
	}
	p := &pair{a: a, b: b, key: rounds.PairKey(a.key, b.key), tputs: tputs}
	if err := s.mech.AddPair(rounds.Pair{Jobs: [2]string{a.key, b.key}, Throughputs: tputs}, s.now); err != nil {
		return err
	}
	s.pairs = append(s.pairs, p)
	s.pairByKey[p.key] = p
	return nil
}

// completeRound advances the clock to the end of the running round and
// accounts for every micro-task in it.
func (s *simulator) completeRound() error {
	end := s.roundAt
	for i := range s.tasks {
		end = math.Max(end, s.tasks[i].finish)
	}
	s.now = end
	usages := make([]rounds.Usage, 0, len(s.tasks))
	running := s.plans[s.cur].Assignments
	var span *Span
	if s.cfg.Timeline {
		s.res.Timeline = append(s.res.Timeline, Span{Start: s.roundAt, End: end, Busy: make([]float64, len(s.types))})
		span = &s.res.Timeline[len(s.res.Timeline)-1]
	}
	completed := false
	for i := range s.tasks {
		tk := &s.tasks[i]
		a := &running[tk.assign]
		exec := tk.finish - s.roundAt
		if s.microTaskFails(tk) {
			// Nothing counts: no steps, no time received, no GPU busy.
			completed = s.failMicroTask(tk.jobs[0], tk.finish) || completed
			continue
		}
		usages = append(usages, rounds.Usage{Key: a.Key, Type: a.Type, Seconds: exec})
		sf := float64(tk.jobs[0].spec.ScaleFactor)
		s.res.busy[tk.typ] += exec * sf
		if span != nil {
			span.Busy[tk.typ] += exec * sf
		}
		if price, ok := s.cfg.Costs[a.Type]; ok {
			s.res.Cost += exec * sf * price / 3600
		}
		for m, j := range tk.jobs {
			if j == nil {
				continue
			}
			j.failures = 0
			j.perType[tk.typ] += exec
			j.remaining -= tk.steps[m]
			if j.remaining <= 0 {
				j.remaining = 0
				j.finish = tk.finish
				s.complete(j)
				completed = true
				continue
			}
			if s.learn != nil {
				if err := s.learn.observe(j, tk.typ, a.Type, tk.finish); err != nil {
					return err
				}
			}
			if s.restartRule {
				if err := s.mech.SetRemainingSteps(j.key, j.remaining); err != nil {
					return err
				}
			}
		}
	}
	s.tasks = s.tasks[:0]
	if err := s.mech.Record(usages); err != nil {
		return err
	}
	if completed {
		s.dropFinished()
	}
	return nil
}

// complete marks j finished and removes it from the mechanism.
func (s *simulator) complete(j *job) {
	j.done = true
	s.accrueIsolated(j, 0)
	if s.measuring(j.id) {
		s.measured++
	}
	delete(s.byKey, j.key)
	if s.learn != nil {
		// As the daemon does when a job leaves.
		s.learn.est.Forget(j.key)
	}
	// Errors cannot happen: the job was added and not yet removed.
	_ = s.mech.RemoveJob(j.key, s.now)
}

// dropFinished compacts the active and pair lists after completions.
func (s *simulator) dropFinished() {
	kept := s.active[:0]
	for _, j := range s.active {
		if !j.done {
			kept = append(kept, j)
		}
	}
	clear(s.active[len(kept):])
	s.active = kept
	if s.packing {
		pk := s.pairs[:0]
		for _, p := range s.pairs {
			if !p.a.done && !p.b.done {
				pk = append(pk, p)
			} else {
				delete(s.pairByKey, p.key)
			}
		}
		clear(s.pairs[len(pk):])
		s.pairs = pk
	}
}

// accrueIsolated adds to j's isolated time the steps done since the last
// mark at the isolated rate of that period; n is the number of jobs that
// sets the rate when none was known yet (0: the current active count).
func (s *simulator) accrueIsolated(j *job, n int) {
	done := j.isoMark - j.remaining
	if done <= 0 {
		return
	}
	if n == 0 {
		n = len(s.active)
	}
	j.isoTime += s.isolatedTime(j, j.tputs, j.isoRate, done, n)
	if s.policyIso {
		j.seenIsoTime += s.isolatedTime(j, s.isoView(j), j.seenIsoRate, done, n)
	}
	j.isoMark = j.remaining
}

// isolatedTime is how long j would have needed for done steps at rate, or
// when no rate is known yet at its rate on a 1/n share with tputs.
func (s *simulator) isolatedTime(j *job, tputs map[string]float64, rate, done float64, n int) float64 {
	if rate <= 0 {
		rate = s.isolatedRate(j, tputs, n)
	}
	if rate > 0 {
		return done / rate
	}
	return 0
}

// isolatedRate is j's throughput with tputs on its 1/n share of the
// cluster (policy.IsolatedThroughput with n jobs).
func (s *simulator) isolatedRate(j *job, tputs map[string]float64, n int) float64 {
	p := policy.Problem{GPUs: s.cfg.GPUs, Jobs: make([]policy.Job, max(n, 1))}
	pj := policy.Job{Throughputs: tputs, ScaleFactor: j.spec.ScaleFactor}
	return policy.IsolatedThroughput(&p, &pj)
}

// scheduleRound recomputes the allocation if due (or forced) and plans the
// next round at s.now.
func (s *simulator) scheduleRound(forceReset bool) error {
	if len(s.active) == 0 {
		return nil
	}
	s.noteFreshMeasurements()
	if forceReset || s.mech.NeedsReset(s.now) {
		if s.learn != nil {
			if err := s.refreshEstimates(); err != nil {
				return err
			}
		}
		if err := s.reset(); err != nil {
			return err
		}
	}
	next := 1 - s.cur
	s.pinYoungRuns()
	if err := s.mech.PlanInto(&s.plans[next], s.now, s.plans[s.cur].Assignments); err != nil {
		return err
	}
	s.cur = next
	s.roundAt = s.now
	plan := &s.plans[s.cur]
	s.res.Rounds++
	for i := range plan.Decisions {
		d := &plan.Decisions[i]
		switch d.Action {
		case rounds.Keep:
			s.res.LeaseExtensions++
		case rounds.Preempt:
			s.res.Preemptions++
		}
	}
	for i := range plan.Assignments {
		if err := s.startTask(plan, i); err != nil {
			return err
		}
	}
	return nil
}

// pinYoungRuns pins the running assignments whose jobs started their
// current run less than MinRunTime ago, as the daemon does.
func (s *simulator) pinYoungRuns() {
	if s.cfg.MinRunTime <= 0 {
		return
	}
	running := s.plans[s.cur].Assignments
	for i := range running {
		a := &running[i]
		a.Pin = rounds.NotPinned
		for _, key := range a.Jobs {
			if j := s.byKey[key]; j != nil && s.now-j.runSince < s.cfg.MinRunTime {
				a.Pin = rounds.PinMinRunTime
			}
		}
	}
}

// startTask turns assignment i of plan into a micro-task: each member runs
// min(int(rate·round), remaining) steps (less the restart overhead).
func (s *simulator) startTask(plan *rounds.Plan, i int) error {
	a := &plan.Assignments[i]
	typ, ok := s.typeIdx[a.Type]
	if !ok {
		return fmt.Errorf("plan puts %s on unknown type %q", a.Key, a.Type)
	}
	tk := task{assign: i, typ: typ, finish: s.now}
	var p *pair
	if len(a.Jobs) == 2 {
		p = s.findPair(a.Key)
		if p == nil {
			return fmt.Errorf("plan runs unknown pair %q", a.Key)
		}
	}
	for m, key := range a.Jobs {
		j := s.byKey[key]
		if j == nil {
			return fmt.Errorf("plan runs unknown job %q", key)
		}
		rate := j.rates[typ]
		if p != nil {
			rate = p.tputs[a.Type][m]
		}
		if rate <= 0 {
			return fmt.Errorf("plan runs %s on %s where its rate is 0", key, a.Type)
		}
		overhead := 0.0
		if !a.Extended && j.everRan {
			overhead = j.restartCost
			s.res.Restarts++
			s.res.RestartLost += overhead
			s.res.RestartLostGPU += overhead * float64(j.spec.ScaleFactor)
		}
		steps := math.Trunc(rate * (s.cfg.RoundSeconds - overhead))
		if steps <= 0 {
			// A rate below one step per round would never progress.
			steps = rate * (s.cfg.RoundSeconds - overhead)
		}
		steps = math.Min(steps, j.remaining)
		if !j.everRan {
			j.everRan = true
			j.start = s.now
		}
		if !a.Extended {
			j.runSince = s.now
		}
		tk.jobs[m] = j
		tk.steps[m] = steps
		tk.finish = math.Max(tk.finish, s.now+overhead+steps/rate)
	}
	s.tasks = append(s.tasks, tk)
	return nil
}

func (s *simulator) findPair(key string) *pair { return s.pairByKey[key] }

// reset builds the policy problem from the jobs in the system, solves it
// and installs the allocation.
func (s *simulator) reset() error {
	n := len(s.active)
	if s.runningOn != nil {
		clear(s.runningOn)
		for _, a := range s.plans[s.cur].Assignments {
			s.runningOn[a.Key] = a.Type
		}
	}
	inputs := make([]sched.JobInput, n)
	for i, j := range s.active {
		s.accrueIsolated(j, n)
		inputs[i] = sched.JobInput{ID: j.key, Throughputs: j.seen, ScaleFactor: j.spec.ScaleFactor,
			Weight: j.spec.Priority, Arrival: j.spec.Arrival, StepsRemaining: j.remaining, IsolatedTime: j.isoTime,
			RunningOn: s.runningOn[j.key]}
		if s.policyIso {
			inputs[i].IsolatedTime = j.seenIsoTime
		}
		if j.spec.SLO > 0 {
			inputs[i].Deadline = j.spec.Arrival + j.spec.SLO
		}
	}
	// The daemon's problem builder, so both give the policies the same
	// input for the same jobs.
	prob := sched.BuildProblem(s.cfg.GPUs, s.cfg.Costs, s.now, inputs)
	shares := policy.NewIsolatedShares(prob)
	for i, j := range s.active {
		if !s.policyIso {
			j.isoRate = shares.Throughput(&prob.Jobs[i])
			continue
		}
		// The policy's view, and the truth for the outcome's fairness.
		seen := prob.Jobs[i]
		seen.Throughputs = s.isoView(j)
		j.seenIsoRate = shares.Throughput(&seen)
		truth := prob.Jobs[i]
		truth.Throughputs = j.tputs
		j.isoRate = shares.Throughput(&truth)
	}
	if s.packing {
		prob.Pairs = make([]policy.Pair, len(s.pairs))
		for i, p := range s.pairs {
			prob.Pairs[i] = policy.Pair{Jobs: [2]string{p.a.key, p.b.key}, Throughputs: p.tputs}
		}
	}
	var t0 time.Time
	if s.cfg.Clock != nil {
		t0 = s.cfg.Clock()
	}
	alloc, err := s.pol.Allocate(prob)
	if s.cfg.Clock != nil {
		s.res.SolverSeconds += s.cfg.Clock().Sub(t0).Seconds()
	}
	if err != nil {
		return fmt.Errorf("allocation for %d jobs: %w", n, err)
	}
	if alloc == nil {
		return errors.New("policy returned no allocation")
	}
	s.res.Allocations++
	s.res.LPs += alloc.Stats.LPs
	if alloc.Stats.Rows*alloc.Stats.Columns > s.res.LargestLP[0]*s.res.LargestLP[1] {
		s.res.LargestLP = [2]int{alloc.Stats.Rows, alloc.Stats.Columns}
	}
	if alloc, err = s.matchRows(alloc); err != nil {
		return fmt.Errorf("allocation of %s: %w", s.pol.Name(), err)
	}
	return s.mech.SetAllocation(alloc, s.now)
}

// matchRows checks alloc against the problem just solved and returns it
// in the form the mechanism needs: every row names a job or an offered
// pair, spelled as the simulator registered it; every job has a row; every
// offered pair has one (zero when the policy left it out).
//
// Spelling: a pair row's fractions do not depend on the order of its
// members, but the mechanism finds rows by key and would drop a row naming
// "b+a" for the pair "a+b", leaving both members without allocation
// (gandiva draws its pairs in random order).
//
// Missing pair rows: policies list only the pairs they use, while the
// mechanism treats a combination without a row as arrived after the
// reset: when it wins GPUs at priority 0 it holds them idle for the round
// and keeps its members off them. The reference's allocation covers every
// combination, so the simulator adds the zero rows.
//
// The allocation is copied before it is changed: policies may keep theirs.
func (s *simulator) matchRows(alloc *policy.Allocation) (*policy.Allocation, error) {
	out := *alloc
	out.Rows = slices.Clone(alloc.Rows)
	seen := make(map[string]bool, len(alloc.Rows))
	for i, row := range out.Rows {
		switch len(row.Jobs) {
		case 1:
			if s.byKey[row.Jobs[0]] == nil {
				return nil, fmt.Errorf("row %d names job %q, which is not in the system", i, row.Jobs[0])
			}
		case 2:
			if s.pairByKey[row.Key()] != nil {
				break
			}
			if s.pairByKey[rounds.PairKey(row.Jobs[1], row.Jobs[0])] == nil {
				return nil, fmt.Errorf("row %d names pair %q, which was not offered", i, row.Key())
			}
			out.Rows[i].Jobs = []string{row.Jobs[1], row.Jobs[0]}
		default:
			return nil, fmt.Errorf("row %d names %d jobs, want 1 or 2", i, len(row.Jobs))
		}
		key := out.Rows[i].Key()
		if seen[key] {
			return nil, fmt.Errorf("two rows for %q", key)
		}
		seen[key] = true
	}
	for _, j := range s.active {
		if !seen[j.key] {
			return nil, fmt.Errorf("no row for job %q", j.key)
		}
	}
	for _, p := range s.pairs {
		if !seen[p.key] {
			out.Rows = append(out.Rows, policy.Row{Jobs: []string{p.a.key, p.b.key}, Fractions: make([]float64, len(out.Types))})
		}
	}
	return &out, nil
}
