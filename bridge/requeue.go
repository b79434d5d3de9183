package bridge

import (
	"context"
	"errors"
)

// RequeueChecker is a Slurm bridge that can prove, without changing any
// job, that the requeues it would send work: the command or endpoint
// exists, reaches slurmctld, and has the rights to requeue other users'
// jobs. The daemon signals no job for preemption until this has
// succeeded, since a job told to checkpoint and exit that is then not
// requeued ends for good.
type RequeueChecker interface {
	// CheckRequeue asks Slurm to requeue one pending job of snap that the
	// bridge's own user does not own. slurmctld checks the caller's rights
	// before the job's state, so the answer "job is pending" (or "requeue
	// disabled" for a --no-requeue job) proves the whole path, and a
	// pending job is left as it was. It returns nil when the path is
	// proven, ErrNoRequeueProbe (wrapped) when snap has no job to ask
	// about, and otherwise an error that says why requeues would fail
	// (missing command, access denied, controller unreachable, endpoint
	// not served).
	CheckRequeue(ctx context.Context, snap *Snapshot) error
	// RequeuePath says how requeues are sent, for logs and status, such
	// as "slurmrestd v0.0.45" or "scontrol (/usr/bin/scontrol)". It does
	// not contact Slurm; before the API version is known it names the
	// path as configured.
	RequeuePath() string
}

// ErrNoRequeueProbe says that a requeue check found no pending job of
// another user to ask about: the path is neither proven nor disproven.
var ErrNoRequeueProbe = errors.New("no pending job of another user to test the requeue path against")
