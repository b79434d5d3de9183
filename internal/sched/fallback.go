package sched

import (
	"errors"
	"fmt"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/policy"
)

// allocationState is the allocation in force and how the policy fares.
type allocationState struct {
	allocation         *policy.Allocation
	allocationComputed time.Time
	// fallback is why the allocation in use is the stand-in policy's
	// ("" when it is the configured policy's own).
	fallback string
	// failures counts the policy's failures in a row; retryAt is when the
	// policy is asked again without an event of its own.
	failures int
	retryAt  time.Time
}

// StandInPolicy computes the allocation of a round whose configured policy
// failed: every job an equal slice of each GPU type it can run on (Themis'
// isolated share). It solves no LP and reads nothing but the GPU counts
// and which types each job can use, so no job's numbers can make it fail,
// and it is fair in the plainest sense while the real policy is out.
const StandInPolicy = "isolated"

// reallocate computes the allocation for this round and hands it to the
// mechanism.
//
// A policy can fail on a problem: a numerical breakdown in the LP solver
// at the edge of the input ranges, an infeasibility a job's numbers cause,
// a bug. Skipping the round then would skip every later one too, since the
// same jobs give the same problem: held jobs would stay held and freed GPUs
// idle until those jobs left, so one job could stall the cluster. Instead
// the stand-in's allocation is used for the round, the failure is kept for
// status, and the configured policy is asked again at the next round (or
// reset, with Gavel's mechanism), then at longer intervals while it keeps
// failing (retryDelay), and at once when jobs arrive or finish; it takes
// over as soon as it succeeds. Only when the stand-in fails too is the
// error returned and the round skipped.
func (c *Core) reallocate(snap *bridge.Snapshot, now time.Time, solve Solver) error {
	nowS := seconds(now)
	problem := c.problem(snap, now)
	alloc, err := guardedSolve(solve, problem)
	if err == nil {
		if err = c.mech.SetAllocation(alloc, nowS); err == nil {
			c.allocation, c.allocationComputed, c.fallback, c.failures = alloc, now, "", 0
			return nil
		}
	}
	failed := err
	var crashed *panicError
	if errors.As(failed, &crashed) {
		// A policy that keeps state between rounds (finish-time fairness
		// keeps its LP's basis) may have been left half-way by the panic:
		// the next attempt starts from a fresh one.
		if fresh, err := policy.New(c.set.Policy, policyOptions(c.set)); err == nil {
			c.pol = fresh
		}
	}
	// Policies do not change their problem, so the stand-in takes the
	// same one.
	alloc, err = guardedSolve(func(p *policy.Problem) (*policy.Allocation, error) { return allocateWith(c.standIn, p) }, problem)
	if err == nil {
		err = c.mech.SetAllocation(alloc, nowS)
	}
	if err != nil {
		return fmt.Errorf("%w (and the stand-in %s: %v)", failed, StandInPolicy, err)
	}
	c.failures++
	c.retryAt = now.Add(retryDelay(c.set.Round, c.failures))
	c.allocation, c.allocationComputed, c.fallback = alloc, now, failed.Error()
	return nil
}

// maxRetryDelay bounds the wait between two attempts of a failing policy.
const maxRetryDelay = 30 * time.Minute

// retryDelay is how long after its n-th failure in a row the policy is
// asked again when nothing else asks for an allocation: the next round
// after the first failure, then twice as long after each one, up to
// maxRetryDelay, so that a policy that fails slowly (a search that gives
// up after hundreds of LPs) does not cost its time every round. Arrivals
// and completions still ask it at once: the problem changed.
func retryDelay(round time.Duration, n int) time.Duration {
	d := round
	for i := 1; i < n && d < maxRetryDelay; i++ {
		d *= 2
	}
	return min(d, maxRetryDelay)
}

// guardedSolve calls solve, turning a panic into an error: a policy that
// breaks on some problem must cost the daemon that allocation, not its
// life (a daemon restarted on the same jobs would only break again).
// reallocate calls every solver, the configured policy's and the
// stand-in's, through it.
func guardedSolve(solve Solver, p *policy.Problem) (a *policy.Allocation, err error) {
	defer func() {
		if r := recover(); r != nil {
			a, err = nil, &panicError{what: fmt.Sprintf("panic: %v", r), site: panicSite()}
		}
	}()
	a, err = solve(p)
	if err == nil && a == nil {
		err = fmt.Errorf("no allocation")
	}
	return a, err
}
