package sim

import (
	"math"

	"github.com/gavel-slurm/gavel-slurm/internal/workload"
	"github.com/gavel-slurm/gavel-slurm/policy"
	"github.com/gavel-slurm/gavel-slurm/rounds"
)

// What the reference mechanism (rounds.VariantGavel) changes outside the
// package rounds, so that a reproduction of the paper behaves as Gavel's
// own simulator does on multi-GPU jobs:
//
//   - the FIFO policies keep their queue strictly in order: a job that no
//     type has room for stops the allocation, and the jobs behind it
//     wait (policy.Options.FIFOBlocking);
//   - the agnostic fifo hands the type of each job that left to the head
//     of its queue before the waiting jobs pile onto the last type with
//     room, as Gavel's FIFOPolicy replaces finished jobs
//     (policy.Options.FIFOReplace);
//   - the max-min and finish-time fairness LPs return the optimum an
//     interior-point solver returns, the analytic center of the optimal
//     face, not a vertex (policy.Options.InteriorOptimum);
//   - the agnostic finish_time_fairness is given isolated times accrued
//     at the rates it sees, each job's V100 rate on every type it can use
//     (agnosticIsolatedTime).
//
// Config.Faithful adds the reference's behaviours that the paper does not
// intend:
//
//   - fifo_perf allocates a job to a type it cannot run on when that is the
//     only type with room (policy.Options.FIFOZeroRates);
//   - the agnostic fifo drops, when the type its jobs pile onto is full, a
//     type drawn with the type choice it never uses from its list of types
//     with room, so the type the next jobs pile onto depends on the draw
//     (policy.Options.FIFODropDraws, from random.Random(seed) as Gavel's
//     FIFOPolicy(seed));
//   - max_min_fairness and finish_time_fairness count every type as
//     usable by every job, so jobs that cannot run on K80s are given K80
//     time, and finish_time_fairness accrues their isolated time at their
//     V100 rate there too (AgnosticUnusableTypes),
//     and max_min_fairness_perf's interior optimum gives them K80 time as
//     well, since Gavel's LP keeps those fractions as variables
//     (InteriorUnusableTypes);
//   - a multi-GPU job with fewer steps left than GPUs fails its round and
//     is dropped after five (microTaskFails).

// referenceMechanism reports whether the run uses the reference mechanism
// (the zero Variant means it, as Config.Mechanism says).
func (c *Config) referenceMechanism() bool {
	return c.Mechanism == "" || c.Mechanism == rounds.VariantGavel
}

// faithful reports whether the reference's unintended behaviours apply.
func (c *Config) faithful() bool { return c.Faithful && c.referenceMechanism() }

// policyOptions are the options the run's policy is built with.
func (c *Config) policyOptions() policy.Options {
	return policy.Options{
		Seed:            c.Seed,
		FIFOBlocking:    c.referenceMechanism(),
		FIFOReplace:     c.referenceMechanism(),
		FIFODropDraws:   c.fifoDropDraws(),
		FIFOZeroRates:   c.faithful(),
		InteriorOptimum: c.referenceMechanism(),
		KeepRunning:     c.keepRunning(),
		KeepRunningRoom: c.KeepRunningRoom,
		// Gavel's agnostic LAS counts every type as usable, and its aware
		// LAS keeps a fraction on every type as a variable.
		AgnosticUnusableTypes: c.faithful(),
		InteriorUnusableTypes: c.faithful(),
	}
}

// maxFailedMicroTasks is the reference's MAX_FAILED_ATTEMPTS: a job whose
// micro-tasks fail this many rounds in a row is dropped.
const maxFailedMicroTasks = 5

// microTaskFails reports whether the reference would count tk as a failed
// micro-task (Config.Faithful only). It splits a round's steps over the
// job's workers, each but the last getting floor(steps / scale factor),
// and a worker given no step fails the micro-task. That happens to a
// multi-GPU job whose last round has fewer steps left than it has GPUs:
// the steps stay undone, the job runs again, fails again, and is dropped
// after five rounds, its JCT left out of the average. The paper does not
// intend it (the job has only a few steps left); without Faithful the
// round simply completes the job.
func (s *simulator) microTaskFails(tk *task) bool {
	if !s.cfg.faithful() || tk.jobs[1] != nil {
		return false
	}
	sf := float64(tk.jobs[0].spec.ScaleFactor)
	return sf > 1 && math.Floor(tk.steps[0]/sf) <= 0
}

// failMicroTask records a failed micro-task of j that ended at finish and
// reports whether j was dropped. Like the reference, a failure asks for a
// new allocation.
func (s *simulator) failMicroTask(j *job, finish float64) bool {
	j.failures++
	if j.failures < maxFailedMicroTasks {
		s.mech.NoteEvent(rounds.EventOther)
		return false
	}
	j.dropped = true
	j.finish = finish
	s.complete(j)
	return true
}

// fifoDropDraws is the stream the reference's agnostic FIFO draws its
// unused type index from, random.Random(seed) (Config.Faithful only).
func (c *Config) fifoDropDraws() policy.Draws {
	if !c.faithful() {
		return nil
	}
	return workload.NewRand(c.Seed)
}

// agnosticIsolatedTime reports whether the policy's isolated times are
// accrued at the rates the heterogeneity-agnostic finish_time_fairness
// sees (the reference mechanism only). The reference's
// FinishTimeFairnessPolicy hands its perf policy every job's V100 rate on
// every type, and that policy accrues each job's isolated time
// (cumulative_isolated_time: the steps done since its last allocation
// over the isolated throughput it computed then) from those rates, not
// from the job's rates on the types of its isolated share.
func (c *Config) agnosticIsolatedTime(policyName string) bool {
	return c.referenceMechanism() && policyName == "finish_time_fairness"
}

// isoView is the throughputs the policy's isolated time of j is accrued
// at: what the policy sees of j, at its reference rate on every type it
// can use when s.agnosticIso (policy.AgnosticRates).
func (s *simulator) isoView(j *job) map[string]float64 {
	if !s.agnosticIso {
		return j.seen
	}
	return policy.AgnosticRates(s.cfg.GPUs, j.seen, s.cfg.faithful())
}

// keepRunning reports whether the policy is asked for the optimum that
// keeps running jobs where they run (policy.Options.KeepRunning): under
// the restart mechanism, when restarts cost anything. With free restarts
// that mechanism is the improved one, and so is its policy's input.
func (c *Config) keepRunning() bool {
	return c.Mechanism == rounds.VariantRestart && (c.PreemptionOverhead > 0 || c.RestartCosts.Max() > 0)
}
