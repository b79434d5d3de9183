// Package stepsim replays a workload through the daemon's own scheduling
// step (internal/sched) against a simulated Slurm, on a virtual clock.
//
// The round mechanism simulator (internal/sim) runs the policy and the
// rounds as the paper does: a job stops and starts exactly at round
// boundaries. The daemon does more, and each part costs time on a real
// cluster: Slurm starts a newly submitted job wherever GPUs are free
// before any round has seen it; a preempted job gets a warning signal and
// a grace period during which its GPUs do no useful work; a requeued job
// waits for Slurm to start it again and loses a restart's worth of time;
// jobs that cannot be preempted stay where they are, and no job is
// stopped before its minimum run time. This package measures those costs
// by driving sched.Core exactly as the daemon does (a round every Round,
// the checks between rounds when a grace period ends) against
// bridge/fake's Slurm, with a small slurmctld that starts eligible jobs in
// priority order on nodes of the type their constraint names: a shard
// request on its node's shared GPU (gres/shard with one_sharing), where
// the two jobs of a pair progress at their rates beside each other, and
// a job array's tasks one at a time within the array's limit. Crashes of
// the daemon and refusals by Slurm can be injected at chosen actions.
package stepsim

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/bridge/fake"
	"github.com/gavel-slurm/gavel-slurm/internal/api"
	"github.com/gavel-slurm/gavel-slurm/internal/daemon"
	"github.com/gavel-slurm/gavel-slurm/internal/sched"
	"github.com/gavel-slurm/gavel-slurm/internal/sim"
	"github.com/gavel-slurm/gavel-slurm/internal/store"
	"github.com/gavel-slurm/gavel-slurm/internal/throughputs"
	"github.com/gavel-slurm/gavel-slurm/internal/workload"
	"github.com/gavel-slurm/gavel-slurm/rounds"
	"github.com/rs/zerolog"
)

// Config describes one run.
type Config struct {
	// GPUs per type, and GPUs per server of each type (default 4).
	GPUs          map[string]int
	GPUsPerServer map[string]int
	Policy        string
	Table         *throughputs.Table
	Seed          int64
	// Round and MinResetInterval as the daemon's configuration has them.
	Round, MinResetInterval time.Duration
	// Preempt is every job's preemption mode; Grace the grace period of
	// checkpoint jobs; Script what their scripts do with the signal
	// (fake.SignalTrapAndWait keeps the GPUs until the requeue,
	// fake.SignalExitsOK frees them at once).
	Preempt bridge.PreemptMode
	Grace   time.Duration
	Script  fake.SignalResponse
	// MinRunTime is the daemon's scheduler.min_run_time.
	MinRunTime time.Duration
	// Costs is the daemon's cluster.cost_per_gpu_hour (for the cost
	// policies).
	Costs map[string]float64
	// RefillPoll is the daemon's scheduler.refill_poll: after a job
	// completes between rounds, the daemon's next look (every RefillPoll
	// from the round) starts waiting jobs on the freed GPUs; 0 leaves them
	// idle until the next round.
	RefillPoll time.Duration
	// Mechanism is the daemon's scheduler.mechanism (empty: the paper's).
	Mechanism rounds.Variant
	// RestartOverhead is the time a job makes no progress after each
	// start that follows a preemption (loading its checkpoint).
	RestartOverhead time.Duration
	// RestartCosts draws each job's own restart cost, added to
	// RestartOverhead (sim.RestartCosts). Given, even as fixed:0s, or with
	// the restart mechanism, the jobs report their progress.
	RestartCosts sim.RestartCosts
	// DefaultRestart is the daemon's scheduler.default_restart_cost: what
	// the restart mechanism takes a job's restart to cost until it has
	// measured it. The simulated jobs report their progress as the
	// collectors would, so the step measures each job's cost at its
	// first restart, and counts its remaining steps down.
	DefaultRestart time.Duration
	// FirstMeasured and EndMeasured select the measured jobs by index, as
	// in sim.Config; the run lasts until they finish.
	FirstMeasured, EndMeasured int
	// MaxActive stops the run with sim.ErrSaturated beyond this many jobs
	// in the system (0: no limit).
	MaxActive int
	// MaxTime stops the run with an error once this much simulated time
	// has passed (0: ten years).
	MaxTime time.Duration
	// RefuseRate is the share of the daemon's actions the simulated
	// Slurm refuses (0: none), so that a run takes the paths the daemon
	// takes when sends fail: an action refused leaves its job as it was,
	// and the job's later actions in the same batch are not sent.
	RefuseRate float64
	// LostRate is the share of the daemon's actions whose answer the
	// simulated Slurm loses, as a timeout does (0: none): half of them
	// land, half do not, and the daemon cannot tell which until it reads
	// Slurm again.
	LostRate float64
	// CrashRate is the share of the daemon's sends (a round's or a
	// look's actions) at which the daemon stops after journaling the
	// actions and before sending any (0: none). The run then starts a
	// new daemon from the state store, as a restart after a crash does.
	// With CrashRate set the daemon keeps its state in a real store in
	// StateDir (a directory of its own), instead of in memory.
	CrashRate float64
	StateDir  string
	// RefuseAction makes the simulated Slurm refuse the actions it
	// returns true for, given the time since the run's start: refusals
	// of chosen kinds for a chosen while, where RefuseRate draws them.
	RefuseAction func(at time.Duration, a bridge.Action) bool
	// CrashAfter stops the daemon right after an action it returns true
	// for reached Slurm: the daemon journaled it and sent it, and saved
	// nothing of the round yet. The run then starts a new daemon from the
	// state store as the crash left it (StateDir is needed, as for
	// CrashRate).
	CrashAfter func(a bridge.Action) bool
	// Shards gives every GPU of the nodes of a type this many shards
	// (gres/shard with one_sharing, docs/space-sharing.md: every shard
	// job of a node runs on one GPU), so that a packing policy's pairs
	// share a GPU; a type not named offers none. A job sharing a GPU
	// makes progress at the rate the table gives it beside its partner.
	Shards map[string]int
	// Arrays submits workload job i as a job array of Arrays[i].Tasks
	// tasks, each of them the job.
	Arrays map[int]Array
	// TagKeys adds keys to workload job i's gavel: tag ("preempt=never",
	// "share=no"); a weight given there replaces the workload's.
	TagKeys map[int]string
}

// Array describes a workload job submitted as a job array: Tasks tasks,
// and its user's own limit on the tasks running at once ("--array=0-7%2";
// 0: none).
type Array struct {
	Tasks, Limit int
}

// epoch is the virtual clock's zero.
var epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// minJobAge is how long Slurm keeps a finished job's record.
const minJobAge = 300 * time.Second

// requeueDelay is how long Slurm keeps a requeued job ineligible unless
// the daemon makes it eligible at once.
const requeueDelay = 120 * time.Second

// job is one workload job in the simulated Slurm.
type job struct {
	index    int
	spec     workload.Job
	id       bridge.JobID
	rates    map[string]float64
	measured bool
	// remaining is the steps left as of progressAt; saved is the steps
	// left at the last checkpoint.
	remaining, saved float64
	progressAt       time.Time
	// runType is the type it runs on, "" when it is not making progress;
	// busyUntil the end of its restart overhead.
	runType   string
	busyUntil time.Time
	// restarts counts the starts after the first; restartCost is what
	// each costs it (Config.RestartOverhead and its draw); runStart is
	// when its current run began.
	restarts      int
	restartCost   time.Duration
	runStart      time.Time
	everRan       bool
	requeuedAt    time.Time
	start, finish time.Time
	perType       map[string]float64
	// gpuSecs is the GPU time it held on each type, half a GPU's while it
	// shared one.
	gpuSecs map[string]float64
	// shared is the GPU whose shards it runs on while it makes progress
	// there (nil otherwise); the jobs progressing on one GPU share it.
	shared *gpuSlot
}

// gpuSlot is one GPU of a node.
type gpuSlot struct {
	node string
	gpu  int
}

// arrayRun is a job array in the simulated Slurm: its user's own limit
// on tasks running at once, and its tasks not started yet, in task
// order, started as the array's record starts them.
type arrayRun struct {
	own     int
	waiting []*job
}

type run struct {
	cfg   Config
	now   time.Time
	slurm *fake.Slurm
	core  *sched.Core
	// set and est build the core anew when the daemon restarts.
	set sched.Settings
	est sched.Estimator
	// daemon drives core against the simulated Slurm, as on a cluster.
	daemon *daemon.Daemon
	types  []string
	jobs   map[bridge.JobID]*job
	order  []*job
	active int
	res    *sim.Result
	// forget are finished jobs to remove from Slurm, with when.
	forget []forgetAt
	// signals counts the grace signals and requeues the daemon sent;
	// refused the actions the simulated Slurm refused (Config.RefuseRate),
	// lost those whose answer it lost (Config.LostRate), crashes the
	// daemon's simulated crashes (Config.CrashRate).
	signals, requeues, refused, lost, crashes int
	// state is the daemon's store when crashes are simulated; crashNext
	// says the next send stops the daemon, crashed that it has stopped
	// (the send's later actions go nowhere), crashCopy is the store as
	// the crash left it.
	state              *store.Store
	crashNext, crashed bool
	crashCopy          string
	crashErr           error
	// lookedAt is when the daemon last looked between rounds since the
	// last round (zero: not yet).
	lookedAt time.Time
	// pollAt is the daemon's next check after signals went out.
	pollAt time.Time
	// refillAt is the daemon's first look after a completion since the
	// round (Config.RefillPoll), lastRound when that round ran.
	refillAt, lastRound time.Time
	// dirty is set when something changed that may let slurmctld start
	// a job (an arrival, a completion, an action).
	dirty bool
	// arrays are the job arrays by their own record's id; sharing the
	// jobs progressing on each GPU they share.
	arrays  map[bridge.JobID]*arrayRun
	sharing map[gpuSlot][]*job
	// board is the daemon's status, as its API serves it.
	board *api.Board
	// afterApply is called after each action that took effect, afterRound
	// after each round and afterLook after each look between rounds, once
	// slurmctld started what it could: tests change the cluster and check
	// it there.
	afterApply            func(bridge.Action)
	afterRound, afterLook func()
}

type forgetAt struct {
	id bridge.JobID
	at time.Time
}

// Run replays src through the daemon's scheduling step.
func Run(cfg Config, src sim.Source) (*sim.Result, error) {
	r, err := newRun(cfg)
	if err != nil {
		return nil, err
	}
	defer r.close()
	if err := r.loop(src); err != nil {
		return r.result(), err
	}
	return r.result(), nil
}

func newRun(cfg Config) (*run, error) {
	if cfg.Table == nil || len(cfg.GPUs) == 0 || cfg.Round <= 0 {
		return nil, errors.New("stepsim: a throughput table, GPUs and a positive round are required")
	}
	if cfg.MaxTime <= 0 {
		cfg.MaxTime = 10 * 365 * 24 * time.Hour
	}
	r := &run{cfg: cfg, now: epoch, jobs: map[bridge.JobID]*job{}, res: &sim.Result{Policy: cfg.Policy},
		arrays: map[bridge.JobID]*arrayRun{}, sharing: map[gpuSlot][]*job{}}
	r.slurm = fake.New(func() time.Time { return r.now })
	r.slurm.StopLogging()
	for _, t := range slices.Sorted(maps.Keys(cfg.GPUs)) {
		per := cfg.GPUsPerServer[t]
		if per <= 0 {
			per = 4
		}
		for i, left := 0, cfg.GPUs[t]; left > 0; i++ {
			g := min(per, left)
			r.slurm.AddNode(bridge.Node{Name: fmt.Sprintf("%s-%03d", t, i), GPUType: t, GPUs: g, Shards: g * cfg.Shards[t],
				Partitions: []string{"gpu"}, Features: []string{t}})
			left -= g
		}
		r.types = append(r.types, t)
	}
	set := sched.Settings{Policy: cfg.Policy, Partitions: []string{"gpu"}, Round: cfg.Round, CostPerGPUHour: cfg.Costs,
		MinResetInterval: cfg.MinResetInterval, DefaultGrace: cfg.Grace, GraceSignal: "USR1",
		DefaultPreempt: cfg.Preempt, MinRunTime: cfg.MinRunTime, RefillPoll: cfg.RefillPoll, Seed: cfg.Seed, Mechanism: cfg.Mechanism,
		DefaultRestart: cfg.DefaultRestart}
	var est sched.Estimator = sched.TableEstimator{Table: cfg.Table}
	if cfg.Mechanism == rounds.VariantRestart || cfg.RestartCosts.String() != "" {
		// Per-job restart costs are measured from the jobs' progress;
		// runs compared with them report progress whatever the mechanism
		// (even with costs of 0, so that a free baseline gives the policy
		// the same remaining steps).
		est = progress{TableEstimator: sched.TableEstimator{Table: cfg.Table}, r: r}
	}
	r.set, r.est = set, est
	if cfg.CrashRate > 0 || cfg.CrashAfter != nil {
		if cfg.StateDir == "" {
			return nil, errors.New("stepsim: simulated crashes need a state directory")
		}
		var err error
		if r.state, err = store.Open(cfg.StateDir); err != nil {
			return nil, fmt.Errorf("stepsim: %w", err)
		}
		r.crashCopy = filepath.Join(cfg.StateDir, "crash-copy.db")
	}
	if err := r.startDaemon(); err != nil {
		return nil, err
	}
	r.res.Types = r.types
	return r, nil
}

// startDaemon starts the daemon with a fresh core, from the state store
// when there is one (as at a restart), else with an in-memory journal.
func (r *run) startDaemon() error {
	core, err := sched.NewCore(r.set, r.est)
	if err != nil {
		return err
	}
	r.board = &api.Board{}
	deps := daemon.Deps{Core: core, Slurm: &simSlurm{r: r}, Board: r.board, Clock: simClock{r}, Log: zerolog.Nop()}
	if r.state != nil {
		deps.Store = r.state
	} else {
		deps.Journal = store.NewMemJournal()
	}
	d, err := daemon.New(deps)
	if err != nil {
		return err
	}
	r.core, r.daemon = core, d
	return nil
}

// close releases the state store, if any.
func (r *run) close() {
	if r.state != nil {
		r.state.Close()
	}
}

// send runs one of the daemon's sends (a round or a look), stopping the
// daemon after it journaled the send's actions when Config.CrashRate
// draws a crash, and then starting a new one from the store as the crash
// left it.
func (r *run) send(daemonSend func()) error {
	r.crashNext = r.draw("crash", "send") < r.cfg.CrashRate
	daemonSend()
	r.crashNext = false
	if !r.crashed {
		return nil
	}
	r.crashed = false
	r.crashes++
	if r.crashErr != nil {
		return fmt.Errorf("stepsim: copy of the store at the crash: %w", r.crashErr)
	}
	path := r.state.Path()
	if err := r.state.Close(); err != nil {
		return fmt.Errorf("stepsim: %w", err)
	}
	if err := os.Rename(r.crashCopy, path); err != nil {
		return fmt.Errorf("stepsim: store as the crash left it: %w", err)
	}
	var err error
	if r.state, err = store.Open(filepath.Dir(path)); err != nil {
		return fmt.Errorf("stepsim: reopen the store after the crash: %w", err)
	}
	return r.startDaemon()
}

// loop runs events in time order until every measured job finished.
func (r *run) loop(src sim.Source) error {
	next, more := src.Next()
	index := 0
	nextRound := epoch
	for {
		if !more && r.active == 0 {
			return nil
		}
		if r.measuredDone(index, more) {
			return nil
		}
		t := nextRound
		if more {
			t = earliest(t, epoch.Add(seconds(next.Arrival)))
		}
		// The simulated Slurm changes only at events: between them a
		// check finds something new only at a deadline, or once after
		// signals (what the scripts did with them).
		t = earliest(t, r.nextLook())
		t = earliest(t, r.pollAt)
		t = earliest(t, r.refillAt)
		t = earliest(t, r.nextCompletion())
		if t.Before(r.now) {
			// A deadline a look could not meet (the actions pending
			// after a restart wait for the next round) is not met by
			// going back in time.
			t = r.now
		}
		if t.Sub(epoch) > r.cfg.MaxTime {
			return fmt.Errorf("stepsim: simulated time passed %v with %d jobs still active", r.cfg.MaxTime, r.active)
		}
		r.advance(t)
		for more && !epoch.Add(seconds(next.Arrival)).After(r.now) {
			r.submit(index, next)
			index++
			next, more = src.Next()
		}
		if r.cfg.MaxActive > 0 && r.active > r.cfg.MaxActive {
			return sim.ErrSaturated
		}
		rounded, looked := false, false
		if !r.now.Before(nextRound) {
			if err := r.round(); err != nil {
				return err
			}
			nextRound = r.now.Add(r.cfg.Round)
			r.lookedAt = time.Time{}
			rounded = true
		} else if due(r.nextLook(), r.now) || due(r.pollAt, r.now) || due(r.refillAt, r.now) {
			if err := r.graces(); err != nil {
				return err
			}
			r.lookedAt, looked = r.now, true
		}
		if !r.now.Before(r.pollAt) {
			r.pollAt = time.Time{}
		}
		if !r.now.Before(r.refillAt) {
			r.refillAt = time.Time{}
		}
		r.forgetFinished()
		if r.dirty {
			r.slurmctld()
			r.dirty = false
		}
		switch {
		case rounded && r.afterRound != nil:
			r.afterRound()
		case looked && r.afterLook != nil:
			r.afterLook()
		}
	}
}

func (r *run) measuredDone(submitted int, more bool) bool {
	if r.cfg.EndMeasured <= 0 || submitted < r.cfg.EndMeasured {
		return false
	}
	for _, j := range r.order {
		if j.measured && j.finish.IsZero() {
			return false
		}
	}
	return true
}

// nextLook is when the daemon looks between rounds for the core's
// deadlines: at the deadline, or, when the last look should have met it
// and could not act (the actions pending after a restart wait for the
// next round's reconciliation), no sooner than the daemon looks again.
func (r *run) nextLook() time.Time {
	next := r.core.NextDeadline()
	if !r.lookedAt.IsZero() && due(next, r.lookedAt) {
		return r.lookedAt.Add(daemon.MinLookInterval)
	}
	return next
}

// due reports whether deadline t (zero: none) has come at now.
func due(t, now time.Time) bool { return !t.IsZero() && !now.Before(t) }

func earliest(a, b time.Time) time.Time {
	if b.IsZero() || (!a.IsZero() && a.Before(b)) {
		return a
	}
	return b
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// submit hands workload job i to Slurm with its tag: one job, or a job
// array of its tasks (Config.Arrays).
func (r *run) submit(i int, w workload.Job) {
	if a, ok := r.cfg.Arrays[i]; ok && a.Tasks > 0 {
		r.submitArray(i, w, a)
		return
	}
	r.submitJob(i, w, nil)
}

// submitJob hands workload job i to Slurm as one job, changed by edit
// when given (a node list, say), and returns it.
func (r *run) submitJob(i int, w workload.Job, edit func(*bridge.Job)) *job {
	sj := bridge.Job{User: "sim", Partition: "gpu", GPUs: w.ScaleFactor, Comment: r.comment(i, w)}
	if edit != nil {
		edit(&sj)
	}
	id := r.slurm.Submit(sj)
	r.slurm.OnSignal(id, r.cfg.Script)
	j := r.newJob(i, w)
	j.id = id
	r.jobs[id] = j
	return j
}

// submitArray hands workload job i to Slurm as a job array of a.Tasks
// tasks. The tasks have no job id until the array's record starts them.
func (r *run) submitArray(i int, w workload.Job, a Array) {
	id := r.slurm.Submit(bridge.Job{User: "sim", Partition: "gpu", GPUs: w.ScaleFactor, Comment: r.comment(i, w),
		ArrayTasks: fmt.Sprintf("0-%d", a.Tasks-1), ArrayLimit: a.Limit})
	ar := &arrayRun{own: a.Limit}
	for range a.Tasks {
		ar.waiting = append(ar.waiting, r.newJob(i, w))
	}
	r.arrays[id] = ar
}

// comment is workload job i's comment: its gavel: tag, with the keys
// Config.TagKeys adds (a weight there replaces the workload's).
func (r *run) comment(i int, w workload.Job) string {
	keys := r.cfg.TagKeys[i]
	c := fmt.Sprintf("gavel: model=%q steps=%d", w.Model, int64(math.Ceil(w.TotalSteps)))
	if !strings.Contains(" "+keys, " weight=") {
		c += fmt.Sprintf(" weight=%g", max(w.Priority, 1))
	}
	if keys != "" {
		c += " " + keys
	}
	return c
}

// newJob is workload job i (or one task of it) arrived now, counted in
// the run.
func (r *run) newJob(i int, w workload.Job) *job {
	rates := map[string]float64{}
	if all, ok := r.cfg.Table.IsolatedRates(w.Model, w.ScaleFactor); ok {
		for k, t := range r.cfg.Table.Types() {
			rates[t] = all[k]
		}
	}
	cost := r.cfg.RestartOverhead + seconds(r.cfg.RestartCosts.Draw(r.cfg.Seed, i, w.Model))
	j := &job{index: i, spec: w, rates: rates, remaining: w.TotalSteps, saved: w.TotalSteps,
		progressAt: r.now, perType: map[string]float64{}, gpuSecs: map[string]float64{}, restartCost: cost,
		measured: r.cfg.EndMeasured <= 0 || (i >= r.cfg.FirstMeasured && i < r.cfg.EndMeasured)}
	r.order = append(r.order, j)
	r.dirty = true
	r.active++
	r.res.JobsAdmitted++
	r.res.PeakActive = max(r.res.PeakActive, r.active)
	return j
}

// nextCompletion is when the first running job finishes its steps.
func (r *run) nextCompletion() time.Time {
	var next time.Time
	for _, j := range r.order {
		if j.runType == "" || !j.finish.IsZero() {
			continue
		}
		from := r.now
		if j.busyUntil.After(from) {
			from = j.busyUntil
		}
		rate := r.rate(j)
		if rate <= 0 {
			continue
		}
		next = earliest(next, from.Add(seconds(j.remaining/rate)+time.Millisecond))
	}
	return next
}

// advance moves the clock to t, crediting progress to running jobs and
// finishing those whose steps are done. Rates hold between events, so
// every job is credited at the rates before any of them finishes.
func (r *run) advance(t time.Time) {
	var done []*job
	for _, j := range r.order {
		if j.runType == "" || !j.finish.IsZero() {
			continue
		}
		from := j.progressAt
		if j.busyUntil.After(from) {
			from = j.busyUntil
		}
		secs := t.Sub(j.progressAt).Seconds()
		j.perType[j.runType] += secs
		j.gpuSecs[j.runType] += secs * r.gpusHeld(j)
		if t.After(from) {
			j.remaining -= r.rate(j) * t.Sub(from).Seconds()
		}
		j.progressAt = t
		if j.remaining <= 1e-9 {
			done = append(done, j)
		}
	}
	for _, j := range done {
		r.complete(j, t)
	}
	r.now = t
}

// rate is running job j's step rate now: the table's rate for it beside
// its partner while it shares a GPU with one that progresses too, else
// its rate alone.
func (r *run) rate(j *job) float64 {
	if p := r.partner(j); p != nil {
		if a, _, ok := r.cfg.Table.Pair(j.spec.Model, p.spec.Model, 1, j.runType); ok {
			return a
		}
		if _, b, ok := r.cfg.Table.Pair(p.spec.Model, j.spec.Model, 1, j.runType); ok {
			return b
		}
		// The table does not know them together: taking turns.
		return j.rates[j.runType] / 2
	}
	return j.rates[j.runType]
}

// partner is the other job progressing on the GPU j shares (nil when
// none).
func (r *run) partner(j *job) *job {
	if j.shared == nil {
		return nil
	}
	for _, o := range r.sharing[*j.shared] {
		if o != j {
			return o
		}
	}
	return nil
}

// gpusHeld is the GPUs job j counts as holding: half of one while it
// shares it.
func (r *run) gpusHeld(j *job) float64 {
	if r.partner(j) != nil {
		return 0.5
	}
	return float64(j.spec.ScaleFactor)
}

// stopsProgress takes job j off the GPU it shares, if any: its partner
// runs at its rate alone from now on.
func (r *run) stopsProgress(j *job) {
	if j.shared == nil {
		return
	}
	slot := *j.shared
	r.sharing[slot] = slices.DeleteFunc(r.sharing[slot], func(o *job) bool { return o == j })
	if len(r.sharing[slot]) == 0 {
		delete(r.sharing, slot)
	}
	j.shared = nil
}

func (r *run) complete(j *job, t time.Time) {
	if p := r.cfg.RefillPoll; p > 0 && !r.lastRound.IsZero() {
		// The daemon looks every p from the round: the first look after t.
		looks := math.Ceil(float64(t.Sub(r.lastRound)) / float64(p))
		r.refillAt = earliest(r.refillAt, r.lastRound.Add(time.Duration(looks)*p))
	}
	r.stopsProgress(j)
	j.remaining, j.finish, j.runType = 0, t, ""
	_ = r.slurm.Finish(j.id, bridge.JobCompleted)
	r.forget = append(r.forget, forgetAt{j.id, t.Add(minJobAge)})
	r.dirty = true
	r.active--
}

func (r *run) forgetFinished() {
	kept := r.forget[:0]
	for _, f := range r.forget {
		if r.now.Before(f.at) {
			kept = append(kept, f)
			continue
		}
		r.slurm.Remove(f.id)
	}
	r.forget = kept
}

// round is one daemon round, run by the daemon's own code: read Slurm
// (again when managed jobs vanished), reconcile, step, journal, send,
// commit.
func (r *run) round() error {
	var rep daemon.RoundReport
	if err := r.send(func() { rep = r.daemon.RunRound(context.Background()) }); err != nil {
		return err
	}
	r.lastRound, r.refillAt = r.now, time.Time{} // the round places what completions freed
	r.res.Rounds++
	if rep.Solved {
		r.res.Allocations++
	}
	if rep.Skipped != "" && rep.SkipCause != "no_nodes" && rep.SkipCause != "awaiting_reconciliation" {
		return fmt.Errorf("stepsim: round %d skipped: %s", rep.Round, rep.Skipped)
	}
	if rep.Fallback != "" {
		// The daemon goes on with the stand-in's shares; a simulation of
		// the policy must not report results it did not produce.
		return fmt.Errorf("stepsim: round %d: the policy failed: %s", rep.Round, rep.Fallback)
	}
	return nil
}

// graces is the daemon's check between rounds, run by the daemon.
func (r *run) graces() error {
	return r.send(func() { r.daemon.RunGraces(context.Background()) })
}

// simSlurm is the simulated Slurm as the daemon sees it: bridge/fake's,
// with each action also followed in the jobs' progress. The daemon sends
// several jobs' actions at once; the lock keeps the run's state whole.
type simSlurm struct {
	r  *run
	mu sync.Mutex
}

func (s *simSlurm) Snapshot(ctx context.Context) (*bridge.Snapshot, error) {
	return s.r.slurm.Snapshot(ctx)
}

func (s *simSlurm) Apply(_ context.Context, a bridge.Action) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.r
	r.dirty = true
	switch {
	case r.crashed:
		return fmt.Errorf("%s: not sent: the daemon stopped (simulated crash)", a)
	case r.crashNext:
		// The send's actions are journaled; the daemon stops before the
		// first of them goes out. What it writes from here on is lost
		// with it: the run restarts it from this copy of its store.
		r.crashNext, r.crashed = false, true
		r.crashErr = r.state.Backup(r.crashCopy)
		return fmt.Errorf("%s: not sent: the daemon stopped (simulated crash)", a)
	case r.refuses(a):
		r.refused++
		return fmt.Errorf("%s: refused (simulated)", a)
	case r.draw("lost", a.String()) < r.cfg.LostRate:
		r.lost++
		if r.draw("landed", a.String()) < 0.5 {
			if err := r.apply(a); err != nil {
				return err // refused: the answer is the refusal
			}
		}
		return bridge.NoReply(fmt.Errorf("%s: answer lost (simulated)", a))
	}
	if err := r.apply(a); err != nil {
		return err
	}
	if r.afterApply != nil {
		r.afterApply(a)
	}
	if r.cfg.CrashAfter != nil && r.cfg.CrashAfter(a) {
		// The action went out; the daemon stops before it hears back,
		// so the round is never saved.
		r.crashed = true
		r.crashErr = r.state.Backup(r.crashCopy)
		return fmt.Errorf("%s: no answer: the daemon stopped (simulated crash)", a)
	}
	return nil
}

// ApplyBatch implements bridge.BatchActuator, as the REST bridge does, so
// that the daemon sends its actions as it does on a cluster: holds
// first, then each job's requests a step at a time. They are carried
// out one after the other, in the daemon's order, so that a run is
// repeatable; within a request of several updates (bridge.Requests) an
// action after a failed one is not carried out.
func (s *simSlurm) ApplyBatch(ctx context.Context, actions []bridge.Action) []error {
	return bridge.ApplyOneByOne(ctx, actions, s.Apply)
}

var _ bridge.BatchActuator = (*simSlurm)(nil)

// simClock is the run's virtual clock.
type simClock struct{ r *run }

func (c simClock) Now() time.Time { return c.r.now }

// After never fires: the run's loop, not the daemon's, decides when the
// next round and look come.
func (simClock) After(time.Duration) <-chan time.Time { return nil }

// refuses says whether the simulated Slurm refuses action a
// (Config.RefuseRate): a draw that depends only on the seed, the time and
// the action, so that a run is repeatable.
func (r *run) refuses(a bridge.Action) bool {
	if r.cfg.RefuseAction != nil && r.cfg.RefuseAction(r.now.Sub(epoch), a) {
		return true
	}
	if r.cfg.RefuseRate <= 0 {
		return false
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%d/%s", r.cfg.Seed, r.now.UnixNano(), a.String())
	return float64(h.Sum64()>>11)/float64(1<<53) < r.cfg.RefuseRate
}

// draw is a number in [0, 1) that depends only on the seed, the time,
// what is drawn and for what, so that a run is repeatable.
func (r *run) draw(what, of string) float64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/%d/%d/%s", what, r.cfg.Seed, r.now.UnixNano(), of)
	return float64(h.Sum64()>>11) / float64(1<<53)
}

// apply carries out one action in the simulated Slurm and follows what
// it does to the job's progress.
func (r *run) apply(a bridge.Action) error {
	j := r.jobs[a.Job]
	if j == nil {
		// A job array's record, no task of which runs under its id.
		return r.slurm.Apply(context.Background(), a)
	}
	switch a.Kind {
	case bridge.ActSignal:
		r.signals++
		r.pollAt = r.now.Add(5 * time.Second)
		// The script saves a checkpoint now; whatever it does after
		// (waiting for the requeue, exiting) adds no progress.
		j.saved = j.remaining
		r.stopsProgress(j)
		j.runType = ""
	case bridge.ActRequeue, bridge.ActRequeueHold:
		r.requeues++
		if j.runType != "" && r.cfg.Preempt != bridge.PreemptCheckpoint {
			j.saved = j.spec.TotalSteps // restarts from scratch
		}
		r.stopsProgress(j)
		j.runType = ""
		j.requeuedAt = r.now
	}
	err := r.slurm.Apply(context.Background(), a)
	if err == nil && (a.Kind == bridge.ActRequeue || a.Kind == bridge.ActRequeueHold) {
		j.remaining = j.saved
	}
	return err
}

// slurmctld starts the eligible pending jobs, highest priority first, on
// the nodes of the type their constraint names (any type when it names
// none), filling the fullest node that fits first: a shard request on its
// --nodelist node, as Slurm places it there (bridge/fake), a job array's
// record its waiting tasks one at a time within the array's limit.
func (r *run) slurmctld() {
	snap, err := r.slurm.Snapshot(context.Background())
	if err != nil {
		return
	}
	isType := func(s string) bool { return slices.Contains(r.types, s) }
	free := map[string]int{}
	for _, n := range snap.Nodes {
		free[n.Name] = n.GPUs - n.GPUsUsed
	}
	var queue []bridge.Job
	for _, sj := range snap.Jobs {
		if sj.State != bridge.JobPending || sj.Held {
			continue
		}
		if sj.HoldsArrayTasks() {
			if r.arrays[sj.ID] != nil {
				queue = append(queue, sj)
			}
			continue
		}
		j := r.jobs[sj.ID]
		if j == nil || !j.finish.IsZero() {
			continue
		}
		if sj.Reason == "BeginTime" && r.now.Sub(j.requeuedAt) < requeueDelay {
			continue
		}
		queue = append(queue, sj)
	}
	sort.SliceStable(queue, func(a, b int) bool { return queue[a].Priority > queue[b].Priority })
	for _, sj := range queue {
		want := sched.ConstraintType(sj.Constraints, isType)
		switch {
		case sj.HoldsArrayTasks():
			r.startTasks(sj, snap.Nodes, free, want)
		case sj.Shards > 0:
			r.startShared(sj, snap.Nodes, free, want)
		default:
			nodes := place(snap.Nodes, free, want, sj.RequiredNodes, sj.GPUs)
			if nodes == nil {
				continue
			}
			if r.slurm.Start(sj.ID, nodes...) != nil {
				r.freeAgain(free, nodes)
				continue
			}
			r.started(r.jobs[sj.ID], snap.Nodes, nodes[0])
		}
	}
}

// startTasks starts the waiting tasks of array record rec that fit, in
// task order, until the array reaches its limit.
func (r *run) startTasks(rec bridge.Job, nodes []bridge.Node, free map[string]int, want string) {
	ar := r.arrays[rec.ID]
	for len(ar.waiting) > 0 {
		picked := place(nodes, free, want, rec.RequiredNodes, rec.GPUs)
		if picked == nil {
			return
		}
		id, err := r.slurm.StartArrayTask(rec.ID, picked...)
		if err != nil {
			r.freeAgain(free, picked) // at its limit
			return
		}
		j := ar.waiting[0]
		ar.waiting = ar.waiting[1:]
		j.id = id
		r.jobs[id] = j
		r.slurm.OnSignal(id, r.cfg.Script)
		r.started(j, nodes, picked[0])
		if id == rec.ID {
			return // the last task took over the record
		}
	}
}

// startShared starts shard request sj on its --nodelist node (or any
// node of its type offering shards), where Slurm finds room for it: the
// node's shared GPU, or a free one. A node of another type than its
// constraint names never runs it.
func (r *run) startShared(sj bridge.Job, nodes []bridge.Node, free map[string]int, want string) {
	for _, n := range nodes {
		if n.Shards == 0 || (want != "" && n.GPUType != want) || (sj.RequiredNodes != "" && n.Name != sj.RequiredNodes) {
			continue
		}
		if r.slurm.Start(sj.ID, n.Name) != nil {
			continue
		}
		r.freeAgain(free, []string{n.Name})
		r.started(r.jobs[sj.ID], nodes, n.Name)
		return
	}
}

// freeAgain reads the free GPUs of nodes from the simulated Slurm again,
// after a start that failed or that took what Slurm chose.
func (r *run) freeAgain(free map[string]int, nodes []string) {
	for _, name := range nodes {
		if n, ok := r.slurm.Node(name); ok {
			free[name] = n.GPUs - n.GPUsUsed
		}
	}
}

// started follows job j, just started on nodes (first among them), in
// the run: its progress from now, and the GPU it shares, if any.
func (r *run) started(j *job, nodes []bridge.Node, first string) {
	for _, n := range nodes {
		if n.Name == first {
			j.runType = n.GPUType
		}
	}
	if on, ok := r.slurm.Job(j.id); ok && on.Shards > 0 && len(on.SharedGPUs) == 1 {
		slot := gpuSlot{first, on.SharedGPUs[0]}
		j.shared = &slot
		r.sharing[slot] = append(r.sharing[slot], j)
	}
	j.progressAt = r.now
	j.busyUntil = r.now
	j.runStart = r.now
	if j.everRan {
		j.restarts++
		j.busyUntil = r.now.Add(j.restartCost)
		r.res.Restarts++
		r.res.RestartLost += j.restartCost.Seconds()
		r.res.RestartLostGPU += j.restartCost.Seconds() * float64(j.spec.ScaleFactor)
	} else {
		j.everRan, j.start = true, r.now
	}
}

// progress is the step's estimator when the jobs report progress, as
// the collectors' progress files do: the steps each job has done, and
// when it first progressed in its current run (the end of its restart).
type progress struct {
	sched.TableEstimator
	r *run
}

var (
	_ sched.Progress      = progress{}
	_ sched.FirstProgress = progress{}
)

// StepsDone implements sched.Progress.
func (p progress) StepsDone(id bridge.JobID) (int64, bool) {
	j := p.r.jobs[id]
	if j == nil || !j.everRan {
		return 0, false
	}
	return int64(j.spec.TotalSteps - j.remaining), true
}

// FirstProgress implements sched.FirstProgress.
func (p progress) FirstProgress(id bridge.JobID, start time.Time) (time.Time, bool) {
	j := p.r.jobs[id]
	if j == nil || !j.runStart.Equal(start) || j.runType == "" || p.r.now.Before(j.busyUntil) {
		return time.Time{}, false
	}
	return j.busyUntil, true
}

// place picks nodes of type want ("" any) for a job of gpus GPUs: one node
// with room, the fullest first; else several, each giving the same share.
// A job with a --nodelist (only) runs on that node.
func place(nodes []bridge.Node, free map[string]int, want, only string, gpus int) []string {
	var fits []bridge.Node
	for _, n := range nodes {
		if (want == "" || n.GPUType == want) && (only == "" || n.Name == only) && free[n.Name] > 0 {
			fits = append(fits, n)
		}
	}
	sort.SliceStable(fits, func(a, b int) bool { return free[fits[a].Name] < free[fits[b].Name] })
	for _, n := range fits {
		if free[n.Name] >= gpus {
			free[n.Name] -= gpus
			return []string{n.Name}
		}
	}
	// Spread over nodes of one type, an equal share on each.
	for _, per := range []int{4, 2, 1} {
		if gpus%per != 0 || per >= gpus {
			continue
		}
		byType := map[string][]string{}
		for _, n := range fits {
			if free[n.Name] >= per {
				byType[n.GPUType] = append(byType[n.GPUType], n.Name)
			}
		}
		for _, t := range slices.Sorted(maps.Keys(byType)) {
			if names := byType[t]; len(names) >= gpus/per {
				names = names[:gpus/per]
				for _, name := range names {
					free[name] -= per
				}
				return names
			}
		}
	}
	return nil
}

// result fills the measurements of the run.
func (r *run) result() *sim.Result {
	res := r.res
	res.Makespan = r.now.Sub(epoch).Seconds()
	res.Preemptions = r.signals
	if r.cfg.Preempt != bridge.PreemptCheckpoint {
		res.Preemptions = r.requeues
	}
	var jcts []float64
	busy := map[string]float64{}
	for _, j := range r.order {
		for t, secs := range j.gpuSecs {
			busy[t] += secs
		}
		rec := sim.JobRecord{ID: j.index, Model: j.spec.Model, ScaleFactor: j.spec.ScaleFactor, Priority: j.spec.Priority,
			Arrival: j.spec.Arrival, Start: -1, Finish: -1, Measured: j.measured}
		if j.everRan {
			rec.Start = j.start.Sub(epoch).Seconds()
		}
		for _, t := range r.types {
			rec.TimePerType = append(rec.TimePerType, j.perType[t])
		}
		if !j.finish.IsZero() {
			rec.Finish = j.finish.Sub(epoch).Seconds()
			if j.measured {
				jcts = append(jcts, rec.Finish-rec.Arrival)
			}
		}
		res.Jobs = append(res.Jobs, rec)
	}
	res.Utilization = map[string]float64{}
	total, all := 0.0, 0.0
	for _, t := range r.types {
		if capacity := float64(r.cfg.GPUs[t]) * res.Makespan; capacity > 0 {
			res.Utilization[t] = busy[t] / capacity
			total += capacity
			all += busy[t]
		}
	}
	if total > 0 {
		res.Utilization["all"] = all / total
	}
	res.JobsMeasured = len(jcts)
	if len(jcts) > 0 {
		sort.Float64s(jcts)
		sum := 0.0
		for _, v := range jcts {
			sum += v
		}
		res.AvgJCT = sum / float64(len(jcts))
		res.P50JCT, res.P95JCT = sim.Percentile(jcts, 50), sim.Percentile(jcts, 95)
	}
	return res
}
