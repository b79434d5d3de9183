package sched

import (
	"strings"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

// Whether Slurm could start a pending job once the daemon lets it.
//
// The allocation shares GPUs among the jobs that could use them. A job
// Slurm will not start however free the GPUs (a dependency not met, a
// begin time its owner set, a QOS or association limit, a reservation,
// licenses, a partition that is down) would get a share it cannot use:
// the round would choose it, hold the jobs that could run, leave GPUs idle
// and even preempt running jobs to make room for it. Such a job is kept
// out of the allocation, its status says why, and it competes again from
// the first round at which nothing but the daemon's hold, its priority or
// free GPUs stands in its way.
//
// The daemon's hold hides Slurm's reason (a held job shows only
// JobHeldUser), so a blocker the reason alone tells (a limit) is seen only
// once the job is released; the daemon then leaves it released, so that
// the reason stays visible, instead of holding it again. Dependencies and
// begin times show on held jobs too.

// requeueDelayWindow bounds the begin time Slurm gives a requeued job
// (about two minutes, its credential lifetime), which the daemon lifts
// with begin-now: a later begin time, or one on a job never requeued, is
// its owner's (--begin, scontrol update BeginTime) and is kept.
const requeueDelayWindow = 10 * time.Minute

// blockedBy says what keeps Slurm from starting pending job j other than
// a hold, its priority or free GPUs; "" when nothing does. Holds are the
// caller's to judge (the daemon's own, or its owner's).
func blockedBy(j bridge.Job, at time.Time) string {
	if dependencyWaits(j.Dependency) {
		return "dependency " + j.Dependency
	}
	if ownBeginTime(j, at) {
		return "begin time " + j.EligibleTime.Format(time.RFC3339) + " set by its owner"
	}
	if j.Reason == "JobArrayTaskLimit" && j.HoldsArrayTasks() {
		// The array's limit on tasks at once, which the daemon sets
		// itself each round and counts in its tasks' places (arrays.go).
		return ""
	}
	if j.Held || startableReason(j.Reason) || j.Reason == "BeginTime" || j.Reason == "Dependency" {
		// A hold's reason hides any other; BeginTime and Dependency were
		// judged above from the fields themselves (a begin time in the
		// past, or Slurm's requeue delay; a dependency now met).
		return ""
	}
	return j.Reason
}

// startableReason reports the pending reasons under which Slurm starts a
// job as soon as it has room and the job's turn comes.
func startableReason(reason string) bool {
	switch reason {
	case "", "None", "Priority", "Resources":
		return true
	}
	return false
}

// dependencyWaits reports a dependency list that still holds the job:
// Slurm marks each unmet dependency "(unfulfilled)", and one that can no
// longer be met "(failed)".
func dependencyWaits(dep string) bool {
	return strings.Contains(dep, "(unfulfilled)") || strings.Contains(dep, "(failed)")
}

// ownBeginTime reports a begin time in the future that is not Slurm's
// delay on a requeued job.
func ownBeginTime(j bridge.Job, at time.Time) bool {
	if !j.EligibleTime.After(at) {
		return false
	}
	return j.Restarts == 0 || j.EligibleTime.Sub(at) > requeueDelayWindow
}

// placedWhereItCannotStart reports a job that Slurm cannot start only
// because of the nodes the daemon's own constraint leaves it (the GPU
// type it chose has drained or gone down since): it stays scheduled, so
// that the round may place it on another type.
func (c *Core) placedWhereItCannotStart(j bridge.Job, why string) bool {
	nodeReason := strings.HasPrefix(why, "ReqNodeNotAvail") || strings.HasPrefix(why, "Nodes_required_for_job") ||
		why == "BadConstraints"
	return nodeReason && j.RequestedGPUType == "" && ConstraintType(j.Constraints, c.isGPUType) != ""
}
