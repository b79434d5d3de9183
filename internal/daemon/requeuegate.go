package daemon

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/internal/api"
)

// requeueGate decides whether the daemon may start preemptions. A
// preemption signals a job to checkpoint and exit, then requeues it; if
// the requeue cannot be sent (scontrol missing, no operator rights, munge
// not set up on the daemon's host, slurmrestd without the endpoint) the
// job ends for good. So no preemption starts until the requeue path has
// been proven, and none after a requeue failed until a requeue works
// again:
//
//   - unproven: at start, after a reload and at a standby's takeover (each
//     builds a new daemon). The path is checked every round until it is
//     proven.
//   - proven: the last check, or the last requeue, succeeded.
//   - failing: a check or a requeue failed. Jobs already signalled are
//     still requeued (retried each round while Slurm keeps their record);
//     the gate closes again when one of those requeues succeeds or, once
//     none waits, when a check succeeds.
//
// A bridge that cannot check (no bridge.RequeueChecker: the simulator's
// fake Slurm) is trusted.
type requeueGate struct {
	checker bridge.RequeueChecker
	proven  bool
	failing bool
	// reason says why preemption is off ("" while proven); lastFailure
	// is the last failed check's or requeue's, kept while failing.
	reason, lastFailure string
	checkedAt           time.Time
	// waiting are the signalled jobs whose last requeue failed.
	waiting map[bridge.JobID]api.RequeueWaiting
}

func newRequeueGate(slurm bridge.Slurm) *requeueGate {
	g := &requeueGate{waiting: map[bridge.JobID]api.RequeueWaiting{}}
	if c, ok := slurm.(bridge.RequeueChecker); ok {
		g.checker = c
		g.reason = "the requeue path (" + c.RequeuePath() + ") has not been checked yet"
	} else {
		g.proven = true
	}
	return g
}

// offReason is what the core is told: "" while preemption may start.
func (g *requeueGate) offReason() string {
	if g.proven {
		return ""
	}
	return g.reason
}

// check proves or disproves the path against snap when it is not proven,
// and returns whether the gate changed, for the log.
func (g *requeueGate) check(ctx context.Context, snap *bridge.Snapshot, now time.Time) (changed bool) {
	if g.checker == nil || g.proven {
		return false
	}
	g.dropSettled(snap)
	if len(g.waiting) > 0 {
		// Only a requeue of one of them closes the gate again: a check
		// could pass while the requeues themselves keep failing, and
		// each new preemption would then strand another job.
		return false
	}
	before := g.state()
	err := g.checker.CheckRequeue(ctx, snap)
	g.checkedAt = now
	path := g.checker.RequeuePath()
	switch {
	case err == nil:
		g.proven, g.failing, g.reason = true, false, ""
	case errors.Is(err, bridge.ErrNoRequeueProbe) && g.failing:
		// Inconclusive after a failure: nothing has worked since, so
		// the failure stands (and /healthz keeps saying so).
		g.reason = fmt.Sprintf("%s; not proven since: %v", g.lastFailure, err)
	case errors.Is(err, bridge.ErrNoRequeueProbe):
		// Nothing failed; the rights are simply not tested yet. The
		// first round's holds usually give the next check its job.
		g.reason = fmt.Sprintf("the requeue path (%s) is not proven yet: %v", path, err)
	default:
		g.failing = true
		g.reason = fmt.Sprintf("requeues cannot be sent (%s): %v", path, err)
		g.lastFailure = g.reason
	}
	return g.state() != before
}

// settled records the outcome of a requeue the daemon sent.
func (g *requeueGate) settled(job bridge.JobID, err error, now time.Time) (changed bool) {
	if g.checker == nil {
		return false
	}
	before := g.state()
	if err == nil {
		delete(g.waiting, job)
		g.proven, g.failing, g.reason, g.checkedAt = true, false, "", now
		return g.state() != before
	}
	w, ok := g.waiting[job]
	if !ok {
		w = api.RequeueWaiting{JobID: job.String(), Since: now}
	}
	w.Error = err.Error()
	g.waiting[job] = w
	g.proven, g.failing = false, true
	g.reason = fmt.Sprintf("a requeue failed (%s): job %s: %v", g.checker.RequeuePath(), job, err)
	g.lastFailure = g.reason
	return g.state() != before
}

// dropSettled forgets the waiting jobs that no longer need their
// requeue: gone from Slurm, no longer active, pending (requeued after
// all), or made unrequeueable by their owner (a job-specific failure).
func (g *requeueGate) dropSettled(snap *bridge.Snapshot) {
	for id := range g.waiting {
		j, ok := snap.Job(id)
		if !ok || j.State == bridge.JobPending || j.State == bridge.JobCancelled || j.NoRequeue {
			delete(g.waiting, id)
		}
	}
}

// state is a comparable summary for change detection.
func (g *requeueGate) state() string {
	return fmt.Sprintf("%t|%t|%s", g.proven, g.failing, g.reason)
}

// doc is the gate as status shows it.
func (g *requeueGate) doc() api.Preemption {
	p := api.Preemption{Enabled: g.proven, Reason: g.offReason(), Failing: g.failing, CheckedAt: g.checkedAt}
	if g.checker != nil {
		p.Path = g.checker.RequeuePath()
	}
	for _, id := range slices.Sorted(maps.Keys(g.waiting)) {
		p.Waiting = append(p.Waiting, g.waiting[id])
	}
	return p
}

// health is the gate's part of /healthz: an error while requeues fail.
func (g *requeueGate) health() error {
	if !g.failing {
		return nil
	}
	return errors.New(g.reason)
}

// isRequeue reports whether an action is one of the requeues a
// preemption ends with.
func isRequeue(k bridge.ActionKind) bool {
	return k == bridge.ActRequeue || k == bridge.ActRequeueHold
}

// gateMetaKey is where the store keeps the gate's failures.
const gateMetaKey = "requeue_gate"

// savedGate is the part of the gate that outlives a restart or a reload:
// a failure and the jobs waiting for their requeue. Forgetting them would
// let the first round after a restart prove the path with a check and
// send new grace signals before the retried requeues fail again.
type savedGate struct {
	Failing     bool                 `json:"failing"`
	Reason      string               `json:"reason,omitempty"`
	LastFailure string               `json:"last_failure,omitempty"`
	Waiting     []api.RequeueWaiting `json:"waiting,omitempty"`
}

func (g *requeueGate) saved() savedGate {
	s := savedGate{Failing: g.failing, Reason: g.reason, LastFailure: g.lastFailure}
	for _, id := range slices.Sorted(maps.Keys(g.waiting)) {
		s.Waiting = append(s.Waiting, g.waiting[id])
	}
	return s
}

// restore takes back a saved failure: preemption stays off until a retried
// requeue (or, once none waits, a check) succeeds.
func (g *requeueGate) restore(s savedGate) {
	if g.checker == nil || !s.Failing {
		return
	}
	g.proven, g.failing, g.reason, g.lastFailure = false, true, s.Reason, s.LastFailure
	for _, w := range s.Waiting {
		if id, err := bridge.ParseJobID(w.JobID); err == nil {
			g.waiting[id] = w
		}
	}
}
