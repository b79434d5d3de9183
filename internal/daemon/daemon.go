package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/internal/api"
	"github.com/gavel-slurm/gavel-slurm/internal/sched"
	"github.com/gavel-slurm/gavel-slurm/internal/store"
	"github.com/gavel-slurm/gavel-slurm/policy"
)

// Clock is the daemon's time source; tests pass a fake one.
type Clock interface {
	Now() time.Time
	// After fires once d has passed.
	After(d time.Duration) <-chan time.Time
}

// SystemClock is the wall clock.
type SystemClock struct{}

// Now returns the current time.
func (SystemClock) Now() time.Time { return time.Now() }

// After is time.After.
func (SystemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Deps are what the daemon shell drives.
type Deps struct {
	Core  *Core
	Slurm bridge.Slurm
	// Store keeps the journal and the round's records. A simulator
	// passes none and a Journal instead: nothing is restored or
	// persisted.
	Store   *store.Store
	Journal Journal
	Board   *api.Board
	// Metrics may be nil.
	Metrics *api.Metrics
	Log     zerolog.Logger
	Clock   Clock
	// DryRun logs the actions instead of journaling and sending them.
	DryRun bool
	// Measured, when set, is the core's estimator: collector reports
	// (Receive) are fed to it at the start of each round.
	Measured *Measured
	// LeaseLength is how long each round's renewal of the lease lasts,
	// where Slurm is a bridge.Leaser that leases (lease.go); 0: none.
	LeaseLength time.Duration
}

// Daemon is the I/O shell around Core.
type Daemon struct {
	Deps
	// journal and out are where the daemon's writes go: the store and
	// Slurm, or their dry-run stand-ins (sender.go).
	journal Journal
	out     bridge.Actuator
	// sentLabel is the metrics label of an action handed to out.
	sentLabel string
	// queue holds collector reports until the next round.
	queue reportQueue
	// failedSnapshots counts consecutive rounds without a usable view.
	failedSnapshots int
	// strangers are the node names collectors reported as that Slurm
	// does not know, each warned about once (feed).
	strangers map[string]bool
	// gate allows preemptions only while requeues are known to work
	// (requeuegate.go).
	gate *requeueGate
	// lastSkipped is why the last round sent nothing, for /healthz.
	lastSkipped string
	// replay is what the journal's pending entries would do if they
	// landed: those left at start, or actions sent without an answer
	// (sched.Lost). It is committed once reconciliation tells what became
	// of each; until then no round steps. Looks between rounds wait for
	// the first round after a start; after unanswered actions they
	// reconcile themselves (replayUnanswered).
	replay           *sched.Proposal
	replayUnanswered bool
	// unanswered are the journal entries of this send's actions that got
	// no answer, for the proposal that takes them for landed.
	unanswered []sched.JournalEntry
	// lease is the lease as last renewed, leaseErr why the last renewal
	// failed (lease.go).
	lease    bridge.Lease
	leaseErr string
	// tokenWarned is when the log last warned about the JWT's expiry.
	tokenWarned time.Time
}

// journalRetention is how long finished journal entries are kept for
// inspection.
const journalRetention = 24 * time.Hour

// unhealthyAfter is how many rounds in a row may go without a usable
// snapshot before /healthz reports the daemon unhealthy.
const unhealthyAfter = 3

// New returns a daemon and restores the core from the store.
func New(deps Deps) (*Daemon, error) {
	if deps.Core == nil || deps.Slurm == nil || (deps.Store == nil) == (deps.Journal == nil) || deps.Board == nil || deps.Clock == nil {
		return nil, errors.New("daemon: core, slurm, a store or else a journal, board and clock are required")
	}
	var journal Journal = deps.Journal
	var replay *sched.Proposal
	if deps.Store != nil {
		var err error
		if replay, err = restore(deps); err != nil {
			return nil, err
		}
		journal = deps.Store
	}
	d := &Daemon{Deps: deps, journal: journal, out: deps.Slurm, sentLabel: "sent", gate: newRequeueGate(deps.Slurm), replay: replay}
	if deps.Store != nil {
		var saved savedGate
		if err := deps.Store.GetMeta(gateMetaKey, &saved); err == nil {
			d.gate.restore(saved)
		}
	}
	deps.Core.SetPreemptionOff(d.gate.offReason())
	if deps.DryRun {
		d.journal, d.out, d.sentLabel = dryJournal{}, dryActuator{log: deps.Log}, "dry_run"
	}
	return d, nil
}

// restore hands the core what the store kept: the job records, the
// round counter, the rounds' state and the journal; it returns the
// journal's pending entries as a proposal for reconciliation to commit.
func restore(deps Deps) (*sched.Proposal, error) {
	stored, corruptJobs, err := deps.Store.Jobs()
	if err != nil {
		return nil, fmt.Errorf("restore state: %w", err)
	}
	restored := make(map[string]sched.Record, len(stored))
	for id, data := range stored {
		var r sched.Record
		if err := json.Unmarshal(data, &r); err != nil {
			corruptJobs = append(corruptJobs, store.CorruptJob{JobID: id, Err: err})
			continue
		}
		restored[id] = r
	}
	for _, c := range corruptJobs {
		// One unreadable record must not keep the daemon from starting:
		// that job starts afresh (as a job first seen now), the others
		// keep their history.
		deps.Log.Error().Str("record", c.String()).Msg("job record cannot be read; the job starts afresh")
	}
	var round uint64
	if err := deps.Store.GetMeta("round", &round); err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("restore state: %w", err)
	}
	deps.Core.Restore(restored, round)
	var state State
	switch err := deps.Store.GetMeta("core", &state); {
	case err == nil:
		deps.Core.RestoreState(state)
	case !errors.Is(err, store.ErrNotFound):
		// The rounds' counters and the last allocation only: without them
		// the first round recomputes the allocation, and every job keeps
		// its own record.
		deps.Log.Error().Err(err).Msg("scheduler state cannot be read; the first round starts it afresh")
	}
	entries, corrupt, err := deps.Store.Recent(0)
	if err != nil {
		return nil, fmt.Errorf("restore state: %w", err)
	}
	for _, c := range corrupt {
		// One unreadable entry must not keep the daemon from starting:
		// it is skipped (and pruned once old), the rest replayed.
		deps.Log.Error().Str("entry", c.String()).Msg("journal entry cannot be read; skipped")
	}
	return deps.Core.RestoreJournal(journalEntries(entries), restored), nil
}

// Run runs rounds until ctx is done. Between rounds it wakes when a grace
// period ends to requeue the preempted job without waiting a whole round,
// and at the polls for trial-and-error jobs and for GPUs to refill
// (Core.NextGraceEnd).
//
// Stopping (ctx done) takes effect between rounds: a round that started
// finishes sending its actions, so a shutdown never leaves a job half
// moved (requeued but not released, say).
func (d *Daemon) Run(ctx context.Context) error {
	work := context.WithoutCancel(ctx)
	for {
		if ctx.Err() != nil {
			return nil
		}
		start := d.Clock.Now()
		d.RunRound(work)
		next := start.Add(d.Core.Settings().Round)
		var looked time.Time
		for {
			wake := next
			if g := d.Core.NextGraceEnd(d.Clock.Now()); !g.IsZero() && g.Before(wake) {
				wake = g
			}
			if !looked.IsZero() && !wake.After(looked) {
				// A deadline the last look should have met is still due:
				// that look could not act (Slurm did not answer, the job
				// was missing from its answer), and looking again at once
				// would spin.
				wake = looked.Add(MinLookInterval)
				if next.Before(wake) {
					wake = next
				}
			}
			select {
			case <-ctx.Done():
				return nil
			case <-d.Clock.After(max(wake.Sub(d.Clock.Now()), 0)):
			}
			if !d.Clock.Now().Before(next) {
				break
			}
			d.RunGraces(work)
			looked = d.Clock.Now()
		}
	}
}

// MinLookInterval is the least time between two looks between rounds.
const MinLookInterval = 5 * time.Second

// RoundReport is the figures of one round, as logged.
type RoundReport struct {
	Round         uint64
	Jobs, Managed int
	Actions       int
	Failed        int
	Reconciled    int
	// Snapshot is the time spent reading Slurm, Solve computing the
	// allocation, Step the core's whole work (solve, plan, translate),
	// Apply journaling and sending the actions, Persist saving the
	// round's state, Duration the whole round.
	Snapshot time.Duration
	Solve    time.Duration
	Step     time.Duration
	Apply    time.Duration
	Persist  time.Duration
	Duration time.Duration
	Skipped  string
	// SkipCause is Skipped's short label; Solved is set when the round
	// recomputed the allocation, and Fallback says why the allocation in
	// use is the stand-in's.
	SkipCause string
	Solved    bool
	Fallback  string
}

// RunRound runs one round: snapshot, reconcile leftover intents, step the
// core, journal and apply its actions, persist and publish.
func (d *Daemon) RunRound(ctx context.Context) RoundReport {
	start := d.Clock.Now()
	var rep RoundReport
	snap, vanished, snapErr := d.read(ctx, &rep)
	if snapErr == nil {
		if taken, dropped := d.feed(snap); taken+dropped > 0 {
			d.Log.Info().Int("taken", taken).Int("dropped", dropped).Msg("collector measurements")
		}
		d.checkRequeuePath(ctx, snap)
	}
	var res Result
	var solve time.Duration
	if d.replay != nil {
		// Slurm (or the journal) could not be read, so the actions left
		// pending before the restart are not reconciled yet, or actions
		// resent by reconciliation got no answer either: a step now
		// would build on a state that misses them. The round sends
		// nothing and steps nothing; the next read reconciles them for
		// good (nothing is resent twice).
		res = Result{Round: d.Core.Round(), SkipCause: "snapshot_error",
			Skipped: fmt.Sprintf("snapshot failed: %v; %s wait for reconciliation", snapErr, d.replayWhat())}
		if snapErr == nil {
			res.SkipCause, res.Skipped = "awaiting_reconciliation", "actions resent without an answer wait for reconciliation at the next read"
		}
		res.View.Round, res.View.Skipped = res.Round, res.Skipped
		rep.Round = res.Round
	} else {
		var p *sched.Proposal
		p, solve = d.step(snap, vanished, snapErr, start, &rep)
		res = d.write(ctx, p, &rep)
	}
	if res.Skipped != "" {
		d.failedSnapshots++
		d.Log.Warn().Uint64("round", res.Round).Str("cause", res.SkipCause).Str("why", res.Skipped).Msg("round sends nothing")
	} else {
		d.failedSnapshots = 0
	}
	if res.Solved && res.Fallback != "" {
		d.Log.Error().Uint64("round", res.Round).Str("policy", d.Core.Settings().Policy).Str("why", res.Fallback).
			Msg("policy failed; the round runs on the stand-in's equal shares and the policy is tried again")
	}
	rep.Jobs, rep.Managed, rep.Skipped = res.Jobs, res.Managed, res.Skipped
	rep.SkipCause, rep.Solved, rep.Fallback = res.SkipCause, res.Solved, res.Fallback
	rep.Duration = d.Clock.Now().Sub(start)
	d.publish(res, rep, solve)
	d.Log.Info().Uint64("round", rep.Round).Int("jobs", rep.Jobs).Int("managed", rep.Managed).
		Int("actions", rep.Actions).Int("failed", rep.Failed).Int("reconciled", rep.Reconciled).
		Bool("solved", res.Solved).Float64("snapshot_ms", ms(rep.Snapshot)).Float64("solve_ms", ms(solve)).
		Float64("step_ms", ms(rep.Step)).Float64("apply_ms", ms(rep.Apply)).Float64("persist_ms", ms(rep.Persist)).Float64("round_ms", ms(rep.Duration)).
		Bool("dry_run", d.DryRun).Str("skipped", rep.Skipped).Msg("round")
	return rep
}

// read takes the round's view of Slurm: a snapshot, the journal's
// leftovers reconciled against it (and a fresh snapshot when that resent
// anything, so the step plans on what the resends changed), and a second
// read when many managed jobs vanished at once (returned with the jobs
// that vanished from the first).
func (d *Daemon) read(ctx context.Context, rep *RoundReport) (*bridge.Snapshot, []bridge.JobID, error) {
	start := d.Clock.Now()
	snap, err := d.Slurm.Snapshot(ctx)
	rep.Snapshot = d.Clock.Now().Sub(start)
	if err != nil {
		return nil, nil, err
	}
	var resent int
	rep.Reconciled, resent, err = d.reconcile(ctx, snap)
	if err != nil {
		return nil, nil, err
	}
	if resent > 0 {
		if snap, err = d.Slurm.Snapshot(ctx); err != nil {
			return nil, nil, err
		}
	}
	if trust := d.Core.Check(snap); len(trust.Vanished) > 0 {
		// The same jobs missing twice are taken as gone (Core.Check).
		d.Log.Warn().Msg("managed jobs vanished from Slurm's answer; reading again")
		snap, err := d.Slurm.Snapshot(ctx)
		return snap, trust.Vanished, err
	}
	return snap, nil, nil
}

// step works out the round on its view, timing the solver.
func (d *Daemon) step(snap *bridge.Snapshot, vanished []bridge.JobID, snapErr error, start time.Time, rep *RoundReport) (*sched.Proposal, time.Duration) {
	var solve time.Duration
	solver := func(p *policy.Problem) (*policy.Allocation, error) {
		t0 := d.Clock.Now()
		a, err := d.Core.Solve(p)
		solve = d.Clock.Now().Sub(t0)
		return a, err
	}
	if snapErr != nil {
		snap = nil
	}
	t0 := d.Clock.Now()
	p := d.Core.Step(sched.Input{Snap: snap, Now: start, Solve: solver, Vanished: vanished})
	rep.Step = d.Clock.Now().Sub(t0)
	if snapErr != nil {
		p.Skipped, p.SkipCause = "snapshot failed: "+snapErr.Error(), "snapshot_error"
	}
	rep.Round, rep.Solve = p.Round, solve
	return p, solve
}

// write journals and sends the round's actions, commits the round with
// what became of them and persists the result; when the journal cannot be
// written nothing is sent, and the round is committed as sending nothing.
func (d *Daemon) write(ctx context.Context, p *sched.Proposal, rep *RoundReport) Result {
	if p.Skipped != "" {
		return d.Core.Commit(p, nil)
	}
	t0 := d.Clock.Now()
	d.renewLease(ctx)
	var outcomes []sched.Outcome
	rep.Actions, rep.Failed, outcomes = d.apply(ctx, p.Round, p.Actions)
	if outcomes == nil && len(p.Actions) > 0 {
		p.Skipped, p.SkipCause = "journal write failed: nothing sent this round", "journal_error"
	}
	res := d.commit(p, outcomes)
	t1 := d.Clock.Now()
	if res.Skipped == "" {
		if !d.DryRun {
			// A dry run keeps what it decided in memory only: its holds
			// and grace periods were never sent, and a real run restored
			// from the store must not take them for sent.
			d.persist(res)
		}
		if d.Measured != nil {
			for _, id := range res.Forget {
				d.Measured.Forget(id)
			}
		}
	}
	rep.Apply, rep.Persist = t1.Sub(t0), d.Clock.Now().Sub(t1)
	return res
}

// publish hands the round's status and allocation to the API, health and
// metrics.
func (d *Daemon) publish(res Result, rep RoundReport, solve time.Duration) {
	d.lastSkipped = res.Skipped
	d.publishHealth()
	status := statusDoc(res.View)
	status.Preemption = d.gate.doc()
	status.Lease = d.leaseDoc()
	status.Token = d.tokenDoc()
	status.Round.DurationSeconds = rep.Duration.Seconds()
	status.Round.SolveSeconds = solve.Seconds()
	status.Round.DryRun = d.DryRun
	status.Round.ActionsSent, status.Round.ActionsFailed = rep.Actions-rep.Failed, rep.Failed
	alloc := allocationDoc(res.View)
	if res.Skipped != "" {
		// Keep serving the last good allocation rather than an empty one.
		alloc = d.Board.Allocation()
	}
	d.Board.Publish(status, alloc)
	if d.Metrics == nil {
		return
	}
	if res.Skipped != "" {
		d.Metrics.CountSkip(res.SkipCause)
	} else {
		d.Metrics.ObserveRound(rep.Duration, solve)
	}
	for range res.Preemptions {
		d.Metrics.CountPreemption()
	}
	d.Metrics.ObserveStatus(status)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// RunGraces requeues the jobs whose grace period ended, against a fresh
// snapshot; nothing is sent when the snapshot fails, or while the
// journal's leftovers from before a restart are not reconciled yet.
func (d *Daemon) RunGraces(ctx context.Context) {
	if d.replay != nil && !d.replayUnanswered {
		return
	}
	// A look: the bridge may answer from every job's state alone when
	// nothing changed since its last read (bridge.AsLook). Actions sent
	// without an answer are first reconciled against a full read, which
	// shows every field an action changes.
	lookCtx := bridge.AsLook(ctx)
	if d.replay != nil {
		lookCtx = ctx
	}
	snap, err := d.Slurm.Snapshot(lookCtx)
	if err != nil {
		d.Log.Warn().Err(err).Msg("grace check: snapshot failed, requeue postponed")
		return
	}
	if d.replay != nil {
		settled, resent, err := d.reconcile(ctx, snap)
		if err != nil || d.replay != nil || resent > 0 {
			// What the resends changed shows at the next look.
			return
		}
		d.Log.Info().Int("reconciled", settled).Msg("between rounds: actions sent without an answer reconciled")
	}
	// The requeue path is checked at rounds only: the looks between
	// rounds come every few seconds, and a path not proven yet would cost
	// one scontrol run or REST call each. What a requeue sent since tells
	// the core at once (requeueSettled).
	p := d.Core.Look(snap, d.Clock.Now())
	if len(p.Actions) == 0 {
		d.Core.Commit(p, nil)
		return
	}
	sent, failed, outcomes := d.apply(ctx, p.Round, p.Actions)
	d.commit(p, outcomes)
	d.Log.Info().Uint64("round", p.Round).Int("actions", sent).Int("failed", failed).Msg("between rounds: actions sent")
	if outcomes != nil {
		d.republish(snap)
	}
}

// republish refreshes the published jobs after the checks between rounds
// acted, keeping the last round's own figures (its start, duration,
// actions) and allocation.
func (d *Daemon) republish(snap *bridge.Snapshot) {
	last := d.Board.Status()
	if last.Round.Number == 0 || last.Round.Standby {
		return // no round published yet
	}
	v, ok := d.Core.Refresh(snap, last.Round.Started)
	if !ok {
		return
	}
	st := statusDoc(v)
	st.Round = last.Round
	st.Preemption = d.gate.doc()
	d.Board.Publish(st, d.Board.Allocation())
	if d.Metrics != nil {
		d.Metrics.ObserveStatus(st)
	}
}

// SlurmHTTPClient is the HTTP client for slurmrestd: it keeps a connection
// open per apply worker, where Go's default keeps two and would open and
// close one per request for the others. It sets no overall timeout: the
// REST client gives each call its own deadline.
func SlurmHTTPClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = applyWorkers
	return &http.Client{Transport: tr}
}

// applyWorkers is how many jobs' actions are sent to Slurm at once. Each
// job's actions stay in order on one worker; different jobs do not depend
// on each other, and slurmctld handles concurrent updates.
const applyWorkers = 8

// apply journals the actions (one transaction for the round), sends them
// and records the outcomes (one more transaction), and returns what became
// of each for Commit (nil when the journal could not be written and
// nothing was sent). A crash in between leaves the entries pending for
// reconciliation. After a failure the job's
// remaining actions are not sent: releasing a job whose constraint change
// failed would start it on the wrong type. Jobs whose only action is a hold
// go to Slurm together when it can take a batch (see splitBatch).
func (d *Daemon) apply(ctx context.Context, round uint64, actions []Action) (sent, failed int, outcomes []sched.Outcome) {
	if len(actions) == 0 {
		return 0, 0, []sched.Outcome{}
	}
	specs := make([]store.IntentSpec, len(actions))
	for i, a := range actions {
		specs[i] = store.IntentSpec{JobID: a.Job.String(), Kind: string(a.Kind), Payload: a}
	}
	entries, err := d.journal.Intents(round, specs, d.Clock.Now())
	if err != nil {
		// Without journal entries a crash could lose or repeat the
		// actions: send none this round.
		d.Log.Error().Err(err).Msg("journal write failed, sending nothing this round")
		return 0, 0, nil
	}
	b := &batchSend{d: d, actions: actions, entries: entries, outcomes: make([]store.Outcome, len(actions)), lost: make([]bool, len(actions))}
	for i := range actions {
		b.outcomes[i].Seq = entries[i].Seq
	}
	order, byJob := groupByJob(actions)
	order, batch := d.splitBatch(actions, order, byJob)
	if len(batch) > 0 {
		// Holds go first: a job that must wait is stopped before the
		// chosen ones are released, so Slurm cannot start it on a GPU
		// the round gives to another. Sending them alongside the
		// releases was also slower: the starts that releases trigger
		// compete with the holds for slurmctld.
		b.sendBatch(ctx, batch)
	}
	if _, ok := d.out.(bridge.BatchActuator); ok {
		b.inSteps(ctx, order, byJob)
	} else {
		b.perJob(ctx, order, byJob)
	}
	outcomes = make([]sched.Outcome, len(actions))
	settled := make([]store.Outcome, 0, len(actions))
	for i, o := range b.outcomes {
		switch {
		case b.lost[i]:
			// Left pending in the journal: reconciliation settles it.
			outcomes[i] = sched.Lost
			d.awaitAnswer(entries[i], actions[i])
			continue
		case o.Err != "":
			outcomes[i] = sched.Refused
		}
		settled = append(settled, o)
	}
	d.settleRequeues(b.requeues)
	if err := d.journal.Settle(settled, d.Clock.Now()); err != nil {
		// The entries stay pending; the next round's reconciliation
		// finds their effects in Slurm and settles them.
		d.Log.Error().Err(err).Msg("journal update failed")
	}
	return b.sent, b.failed, outcomes
}

// groupByJob lists each job's actions, in order, by job in order of
// first appearance.
func groupByJob(actions []Action) ([]bridge.JobID, map[bridge.JobID][]int) {
	var order []bridge.JobID
	byJob := map[bridge.JobID][]int{}
	for i, a := range actions {
		if _, ok := byJob[a.Job]; !ok {
			order = append(order, a.Job)
		}
		byJob[a.Job] = append(byJob[a.Job], i)
	}
	return order, byJob
}

// batchSend is one apply call's journaled actions on their way to Slurm.
type batchSend struct {
	d        *Daemon
	actions  []Action
	entries  []store.Entry
	outcomes []store.Outcome
	// lost marks the actions sent without an answer (bridge.ErrNoReply).
	lost []bool

	mu           sync.Mutex
	sent, failed int
	// requeues are the outcomes of the requeues sent, for the gate.
	requeues []requeueOutcome
}

type requeueOutcome struct {
	job bridge.JobID
	err error
}

// perJob sends each job's actions in order, several jobs at once; after
// a failure the job's later actions are not sent.
func (b *batchSend) perJob(ctx context.Context, order []bridge.JobID, byJob map[bridge.JobID][]int) {
	var wg sync.WaitGroup
	jobs := make(chan bridge.JobID)
	for range min(applyWorkers, len(order)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for job := range jobs {
				broken := ""
				for _, i := range byJob[job] {
					if broken != "" {
						b.outcomes[i].Err = "not sent: an earlier action for the job failed: " + broken
						continue
					}
					broken = b.settle(i, b.d.out.Apply(ctx, b.actions[i].Action))
				}
			}
		}()
	}
	for _, job := range order {
		jobs <- job
	}
	close(jobs)
	wg.Wait()
}

// inSteps sends the jobs' actions as batches, one step at a time: the
// first request of every job, then the second of those whose first went
// through, and so on. A request is one action, or a run of updates Slurm
// takes in one request (bridge.Requests: a constraint, priority and
// begin time together cost slurmctld one RPC instead of three). Each
// job's actions stay in order and after a failure its later actions are
// not sent, as in perJob, while a round that signals or requeues
// thousands of jobs costs a few bulk calls to Slurm instead of one
// request per action.
func (b *batchSend) inSteps(ctx context.Context, order []bridge.JobID, byJob map[bridge.JobID][]int) {
	broken := map[bridge.JobID]string{}
	next := map[bridge.JobID]int{}
	for {
		var batch []int
		for _, job := range order {
			own := byJob[job][next[job]:]
			if len(own) == 0 {
				continue
			}
			if why, ok := broken[job]; ok {
				for _, i := range own {
					b.outcomes[i].Err = "not sent: an earlier action for the job failed: " + why
				}
				next[job] += len(own)
				continue
			}
			rest := make([]bridge.Action, len(own))
			for k, i := range own {
				rest[k] = b.actions[i].Action
			}
			first := len(bridge.Requests(rest)[0])
			batch = append(batch, own[:first]...)
			next[job] += first
		}
		if len(batch) == 0 {
			return
		}
		for i, why := range b.sendBatch(ctx, batch) {
			broken[b.actions[i].Job] = why
		}
	}
}

// sendBatch sends the actions batch names in one ApplyBatch call and
// settles each; it returns the failed ones' errors by index. The signals
// delivered are recorded durably together, in one journal write, before
// anything else is sent (see settle).
func (b *batchSend) sendBatch(ctx context.Context, batch []int) map[int]string {
	batched := make([]bridge.Action, len(batch))
	for k, i := range batch {
		batched[k] = b.actions[i].Action
	}
	errs := b.d.out.(bridge.BatchActuator).ApplyBatch(ctx, batched)
	failed := map[int]string{}
	var signalled []store.Outcome
	for k, i := range batch {
		if why := b.record(i, errs[k]); why != "" {
			failed[i] = why
		} else if b.actions[i].Kind == bridge.ActSignal {
			signalled = append(signalled, store.Outcome{Seq: b.entries[i].Seq})
		}
	}
	if len(signalled) > 0 {
		if err := b.d.journal.Settle(signalled, b.d.Clock.Now()); err != nil {
			b.d.Log.Error().Err(err).Msg("journal update failed")
		}
	}
	return failed
}

// settle records what became of action i; it returns the error's text
// for the job's later actions ("" when it went through).
func (b *batchSend) settle(i int, err error) string {
	why := b.record(i, err)
	if why == "" && b.actions[i].Kind == bridge.ActSignal {
		// A delivered signal leaves no trace in Slurm for reconciliation
		// to find: record it durably now, or a crash before the round's
		// outcomes are written would leave its fate unknown.
		if err := b.d.journal.MarkDone(b.entries[i].Seq, b.d.Clock.Now()); err != nil {
			b.d.Log.Error().Err(err).Msg("journal update failed")
		}
	}
	return why
}

// record counts, logs and keeps what became of action i, as settle, but
// leaves a signal's durable record to the caller.
func (b *batchSend) record(i int, err error) string {
	d, a := b.d, b.actions[i]
	unknown := bridge.OutcomeUnknown(err)
	b.mu.Lock()
	b.sent++
	if err != nil {
		b.failed++
	}
	if isRequeue(a.Kind) && !unknown {
		// A requeue without an answer proves nothing about the path
		// either way.
		b.requeues = append(b.requeues, requeueOutcome{a.Job, err})
	}
	b.mu.Unlock()
	if unknown {
		b.lost[i] = true
		b.outcomes[i].Err = err.Error()
		d.count(a, "unanswered")
		d.Log.Warn().Err(err).Str("action", a.Action.String()).Msg("action sent without an answer; checked against Slurm at the next read")
		return b.outcomes[i].Err
	}
	if err != nil {
		b.outcomes[i].Err = err.Error()
		d.count(a, "failed")
		d.Log.Warn().Err(err).Str("action", a.Action.String()).Msg("action failed")
		return b.outcomes[i].Err
	}
	d.count(a, d.sentLabel)
	d.Log.Info().Str("action", a.Action.String()).Str("why", a.Why).Bool("dry_run", d.DryRun).Msg("action")
	return ""
}

// splitBatch takes out of order the jobs whose only action this round is a
// hold, when Slurm can carry out many actions in one call: most of a large
// queue waits, and holding each job with its own request would dominate
// the round. It returns the remaining jobs and the batched actions'
// indices.
func (d *Daemon) splitBatch(actions []Action, order []bridge.JobID, byJob map[bridge.JobID][]int) ([]bridge.JobID, []int) {
	if _, ok := d.out.(bridge.BatchActuator); !ok {
		return order, nil
	}
	var rest []bridge.JobID
	var batch []int
	for _, job := range order {
		if own := byJob[job]; len(own) == 1 && actions[own[0]].Kind == bridge.ActHold {
			batch = append(batch, own[0])
			continue
		}
		rest = append(rest, job)
	}
	return rest, batch
}

func (d *Daemon) count(a Action, result string) {
	if d.Metrics != nil {
		d.Metrics.CountAction(string(a.Kind), result)
	}
}

// reconcile settles the intents a crash left pending, against snap, and
// commits what the journal's replay at start proposed with what became of
// each entry. An error means the journal could not be read while that
// replay waits: the round must not step on a state that misses it.
func (d *Daemon) reconcile(ctx context.Context, snap *bridge.Snapshot) (settled, resent int, err error) {
	pending, corrupt, err := d.journal.Pending()
	for _, c := range corrupt {
		d.Log.Error().Str("entry", c.String()).Msg("journal entry cannot be read; its action is not reconciled")
	}
	if err != nil {
		d.Log.Error().Err(err).Msg("read journal")
		if d.replay != nil {
			return 0, 0, fmt.Errorf("journal cannot be read to reconcile the actions pending at start: %w", err)
		}
		return 0, 0, nil
	}
	// Once one of a job's actions fails, its later ones are not resent,
	// as apply does.
	broken := map[bridge.JobID]bool{}
	verdicts := map[uint64]sched.Outcome{}
	defer d.commitReplay(verdicts)
	for _, r := range Reconcile(pending, snap) {
		now := d.Clock.Now()
		if r.Verdict == VerdictResend && broken[r.Action.Job] {
			r.Verdict, r.Why = VerdictFail, "not resent: an earlier action for the job failed"
		}
		log := d.Log.Info().Uint64("seq", r.Entry.Seq).Str("action", r.Action.Action.String()).Str("verdict", string(r.Verdict)).Str("why", r.Why)
		switch r.Verdict {
		case VerdictDone:
			verdicts[r.Entry.Seq] = sched.Accepted
			err = d.journal.MarkDone(r.Entry.Seq, now)
		case VerdictFail:
			broken[r.Action.Job] = true
			verdicts[r.Entry.Seq] = sched.Refused
			err = d.journal.MarkFailed(r.Entry.Seq, r.Why, now)
		case VerdictResend:
			if err = d.journal.MarkResent(r.Entry.Seq, now); err != nil {
				break
			}
			resent++
			sendErr := d.out.Apply(ctx, r.Action.Action)
			if bridge.OutcomeUnknown(sendErr) {
				// Still pending: the next read judges it again, and a
				// second resend is not made (maxAttempts).
				broken[r.Action.Job] = true
				verdicts[r.Entry.Seq] = sched.Lost
				d.count(r.Action, "unanswered")
				d.awaitAnswer(r.Entry, r.Action)
				break
			}
			if isRequeue(r.Action.Kind) {
				d.requeueSettled(r.Action.Job, sendErr)
			}
			if sendErr != nil {
				broken[r.Action.Job] = true
				verdicts[r.Entry.Seq] = sched.Refused
				d.count(r.Action, "failed")
				err = d.journal.MarkFailed(r.Entry.Seq, sendErr.Error(), now)
			} else {
				verdicts[r.Entry.Seq] = sched.Accepted
				d.count(r.Action, d.sentLabel)
				err = d.journal.MarkDone(r.Entry.Seq, now)
			}
		}
		if err != nil {
			d.Log.Error().Err(err).Msg("journal update failed")
		}
		log.Msg("reconcile")
	}
	return len(pending), resent, nil
}

// commit commits p with what became of its actions; the actions that got
// no answer are then proposed as landed, for reconciliation against
// Slurm's next read to settle (Core.Unanswered).
func (d *Daemon) commit(p *sched.Proposal, outcomes []sched.Outcome) Result {
	res := d.Core.Commit(p, outcomes)
	if len(d.unanswered) > 0 {
		d.Log.Warn().Int("actions", len(d.unanswered)).Msg("actions sent without an answer: checked against Slurm at the next read")
		d.replay, d.replayUnanswered = d.Core.Unanswered(d.unanswered), true
		d.unanswered = nil
	}
	return res
}

// awaitAnswer keeps the journal entry e of action a, sent without an
// answer, for the proposal that takes it for landed (commit).
func (d *Daemon) awaitAnswer(e store.Entry, a Action) {
	d.unanswered = append(d.unanswered, sched.JournalEntry{Created: e.Created, Pending: true, Seq: e.Seq, Action: a})
}

// replayWhat says which actions the pending replay holds, for the round
// that cannot reconcile them.
func (d *Daemon) replayWhat() string {
	if d.replayUnanswered {
		return "the actions sent without an answer"
	}
	return "the actions pending from before the restart"
}

// commitReplay commits the journal's replay at start with the verdicts
// reconciliation gave its entries. An entry reconciliation did not judge
// (it was no longer pending) is taken for landed, as the replay took it.
func (d *Daemon) commitReplay(verdicts map[uint64]sched.Outcome) {
	if d.replay == nil {
		// The core already knows what became of the entries reconciled
		// (they stayed pending because the journal could not be
		// updated), resent ones included.
		d.unanswered = nil
		return
	}
	outcomes := make([]sched.Outcome, len(d.replay.Journal))
	for i, seq := range d.replay.Journal {
		if v, ok := verdicts[seq]; ok {
			outcomes[i] = v
		}
	}
	p := d.replay
	d.replay, d.replayUnanswered = nil, false
	d.commit(p, outcomes)
}

// persist saves the round's job records and counters.
func (d *Daemon) persist(res Result) {
	meta := map[string]any{"round": res.Round, "core": res.State}
	if d.Store == nil {
		return
	}
	jobs := make([]store.Job, len(res.Records))
	for i, r := range res.Records {
		jobs[i] = store.Job{ID: r.JobID, Value: r}
	}
	if err := d.Store.SaveRound(jobs, res.Forget, meta); err != nil {
		d.Log.Error().Err(err).Msg("persist round")
	}
	// Pruning reads the whole journal: once every pruneEvery rounds is
	// enough for a retention measured in hours.
	if res.Round%pruneEvery == 0 {
		if _, err := d.Store.PruneJournal(d.Clock.Now().Add(-journalRetention)); err != nil {
			d.Log.Error().Err(err).Msg("prune journal")
		}
	}
}

// pruneEvery is how many rounds pass between journal prunings.
const pruneEvery = 10

// checkRequeuePath checks the requeue path against snap while it is not
// proven, and tells the core whether preemptions may start. A dry run
// checks too (the check changes no job), so that an admin trying the
// daemon out sees a broken path before going live.
func (d *Daemon) checkRequeuePath(ctx context.Context, snap *bridge.Snapshot) {
	if d.gate.check(ctx, snap, d.Clock.Now()) {
		d.logGate()
		d.saveGate()
	}
	d.Core.SetPreemptionOff(d.gate.offReason())
}

// saveGate keeps the gate's failures in the store (savedGate).
func (d *Daemon) saveGate() {
	if d.Store == nil || d.DryRun {
		return
	}
	if err := d.Store.PutMeta(gateMetaKey, d.gate.saved()); err != nil {
		d.Log.Error().Err(err).Msg("requeue gate not saved: a restart would forget its failures")
	}
}

// settleRequeues hands the gate a send's requeue outcomes, failures last:
// within one send a failure wins over any success, whatever order the
// requeues went out in (a success would otherwise reopen the gate while
// another job waits for its requeue).
func (d *Daemon) settleRequeues(outcomes []requeueOutcome) {
	for _, failed := range []bool{false, true} {
		for _, r := range outcomes {
			if (r.err != nil) == failed {
				d.requeueSettled(r.job, r.err)
			}
		}
	}
}

// requeueSettled hands the gate the outcome of a requeue that was sent.
// A dry run sends nothing, so its "successes" prove nothing.
func (d *Daemon) requeueSettled(job bridge.JobID, err error) {
	if d.DryRun {
		return
	}
	if d.gate.settled(job, err, d.Clock.Now()) {
		d.logGate()
		d.saveGate()
	} else if err != nil {
		d.saveGate() // another job waits
	}
	d.Core.SetPreemptionOff(d.gate.offReason())
}

// logGate says that the gate changed, in the log and /healthz: at error level when requeues fail,
// since jobs may be stranded and no preemption happens until fixed.
func (d *Daemon) logGate() {
	d.publishHealth()
	p := d.gate.doc()
	switch {
	case p.Enabled:
		d.Log.Info().Str("requeue_path", p.Path).Msg("requeue path proven: preemption is on")
	case p.Failing:
		d.Log.Error().Str("requeue_path", p.Path).Int("waiting_jobs", len(p.Waiting)).Str("why", p.Reason).
			Msg("preemption is off: no job is signalled until a requeue works again")
	default:
		d.Log.Warn().Str("requeue_path", p.Path).Str("why", p.Reason).Msg("preemption is off until the requeue path is proven")
	}
}

// publishHealth sets /healthz: not ok after unhealthyAfter rounds in a
// row without a usable view of Slurm, or while requeues fail.
func (d *Daemon) publishHealth() {
	var problems []error
	if d.failedSnapshots >= unhealthyAfter {
		problems = append(problems, fmt.Errorf("%d rounds in a row without a usable Slurm view: %s", d.failedSnapshots, d.lastSkipped))
	}
	if err := d.gate.health(); err != nil {
		problems = append(problems, err)
	}
	d.Board.SetHealth(errors.Join(problems...))
}
