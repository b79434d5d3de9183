package daemon

import (
	"encoding/json"
	"fmt"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/internal/sched"
	"github.com/gavel-slurm/gavel-slurm/internal/store"
)

// Verdict is what reconciliation does with one pending journal entry.
type Verdict string

const (
	// VerdictDone: Slurm shows the action's effect (or the job is gone,
	// which makes the action moot); the entry is marked done.
	VerdictDone Verdict = "done"
	// VerdictResend: the effect is not visible and the action was sent
	// only once; it is sent again.
	VerdictResend Verdict = "resend"
	// VerdictFail: the effect is not visible after a resend; the entry is
	// marked failed and the next round decides afresh.
	VerdictFail Verdict = "fail"
)

// Reconciliation is the decision for one pending entry.
type Reconciliation struct {
	Entry   store.Entry
	Action  Action
	Verdict Verdict
	Why     string
}

// maxAttempts is how many times an action is handed to Slurm in all: the
// original send and one resend after a crash.
const maxAttempts = 2

// Reconcile decides, for each action journaled as pending (sent, or about
// to be sent, when the daemon stopped), whether Slurm already shows its
// effect. It is pure: the caller marks the entries and resends.
func Reconcile(pending []store.Entry, snap *bridge.Snapshot) []Reconciliation {
	out := make([]Reconciliation, 0, len(pending))
	// resending holds the jobs with an action resent earlier in this
	// pass: their later actions are judged against a job the snapshot no
	// longer describes (a resent requeue makes a running job pending and
	// held), so they are resent after it, as they were first sent.
	resending := map[bridge.JobID]bool{}
	// previous is each job's action journaled just before, in this pass.
	previous := map[bridge.JobID]bridge.ActionKind{}
	for _, e := range pending {
		r := Reconciliation{Entry: e}
		if err := json.Unmarshal(e.Payload, &r.Action); err != nil || r.Action.Job == 0 {
			r.Verdict, r.Why = VerdictFail, fmt.Sprintf("unreadable journal entry: %v", err)
			out = append(out, r)
			continue
		}
		visible, why := effectVisible(r.Action, snap)
		if resending[r.Action.Job] && r.Action.Kind != bridge.ActSignal {
			visible, why = false, "follows an action of the job that is resent"
		}
		if r.Action.Kind == bridge.ActHold && previous[r.Action.Job] == bridge.ActRequeueHold && visible &&
			!heldByAdmin(r.Action.Job, snap) {
			// The requeue-hold leaves a hold of its own, which its owner
			// may release; unless Slurm shows an administrator's hold,
			// the daemon's is sent again (holding a held job is
			// harmless; after a requeue-hold Slurm may keep its reason,
			// "job_requeued_in_held_state", under the new hold).
			visible, why = false, "the hold after a requeue-hold cannot be told from the requeue-hold's own"
		}
		previous[r.Action.Job] = r.Action.Kind
		switch {
		case visible:
			r.Verdict, r.Why = VerdictDone, why
		case e.Attempts >= maxAttempts:
			r.Verdict, r.Why = VerdictFail, "still not visible after a resend: "+why
		default:
			r.Verdict, r.Why = VerdictResend, why
			resending[r.Action.Job] = true
		}
		out = append(out, r)
	}
	return out
}

// effectVisible reports whether snap shows a's effect, and says what it saw.
func effectVisible(a Action, snap *bridge.Snapshot) (bool, string) {
	j, ok := snap.Job(a.Job)
	if !ok {
		return true, "job no longer in Slurm"
	}
	if isRequeue(a.Kind) {
		// A job that ended during its grace period is requeued too: only
		// a pending job or a higher restart count shows the requeue.
		return j.Restarts > a.Restarts || j.State == bridge.JobPending || j.State == bridge.JobCancelled,
			fmt.Sprintf("state %s, %d restarts", j.State, j.Restarts)
	}
	if !j.Active() {
		return true, "job finished (" + string(j.State) + ")"
	}
	running := j.State == bridge.JobRunning || j.State == bridge.JobSuspended
	switch a.Kind {
	case bridge.ActSetPriority:
		return j.Priority == int64(a.Priority), fmt.Sprintf("priority %d", j.Priority)
	case bridge.ActHold:
		return j.Held || running, fmt.Sprintf("held=%v", j.Held)
	case bridge.ActRelease:
		return !j.Held, fmt.Sprintf("held=%v", j.Held)
	case bridge.ActResetPriority:
		// Slurm's own priorities stay below the daemon's run priorities
		// (README, slurm.conf).
		return (!j.Held && j.Priority < sched.RunPriority) || running, fmt.Sprintf("priority %d, held=%v", j.Priority, j.Held)
	case bridge.ActSetConstraints:
		return j.Constraints == a.Constraints || running, fmt.Sprintf("constraints %q", j.Constraints)
	case bridge.ActSetShape:
		// The request as Slurm shows it: node count, GPUs per node (or in
		// all, when none per node is set) and the constraint.
		gpus := a.GPUs
		if a.GPUsPerNode > 0 {
			gpus = a.Nodes * a.GPUsPerNode
		}
		same := j.Nodes == a.Nodes && j.GPUsPerNode == a.GPUsPerNode && j.GPUs == gpus && j.Constraints == a.Constraints
		return same || running, fmt.Sprintf("nodes %d, %d GPUs (%d per node), constraints %q", j.Nodes, j.GPUs, j.GPUsPerNode, j.Constraints)
	case bridge.ActBeginNow:
		return j.Reason != "BeginTime" || running, "reason " + j.Reason
	case bridge.ActSetArrayLimit:
		// Slurm shows the array's limit on every record of the array, the
		// array's own (where it is set) included, running or not.
		return j.ArrayLimit == a.Tasks, fmt.Sprintf("array limit %d", j.ArrayLimit)
	case bridge.ActSetShare:
		// A share asks for shards pinned to one node, an unshare for the
		// whole GPU on any node; either way under the action's
		// constraint. A job that started since is past both: a resend
		// would be refused and read as its owner's own request.
		same := j.Shards == a.Shards && j.RequiredNodes == a.Node && j.Constraints == a.Constraints
		if a.Shards == 0 {
			same = j.Shards == 0 && j.RequiredNodes == "" && j.Constraints == a.Constraints
		}
		return same || running, fmt.Sprintf("%d shards on %q, constraints %q", j.Shards, j.RequiredNodes, j.Constraints)
	case bridge.ActSignal:
		// A delivered signal leaves no trace in Slurm's job record, so a
		// crash right after sending one cannot tell whether it went out.
		// It is never sent twice (a script may checkpoint or exit on each
		// one): the grace period runs from the journaled time and the
		// job is requeued at its end either way.
		return true, "not resent: the grace period runs from the journaled signal"
	}
	return false, "unknown action kind " + string(a.Kind)
}

// heldByAdmin reports whether snap shows job held by an administrator.
func heldByAdmin(job bridge.JobID, snap *bridge.Snapshot) bool {
	j, ok := snap.Job(job)
	return ok && j.Held && j.Reason == "JobHeldAdmin"
}
