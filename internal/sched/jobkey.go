package sched

import (
	"strconv"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

// jobKey names a job the core tracks: a Slurm job, or a waiting task of
// a job array (a slot, arrays.go), which has no Slurm job id of its own.
type jobKey struct {
	// id is the job's id; for a slot, its array's.
	id bridge.JobID
	// task is a slot's task number within its array.
	task uint32
	slot bool
}

// keyOf is the key of Slurm job id.
func keyOf(id bridge.JobID) jobKey { return jobKey{id: id} }

// slotKey is the key of task t of array a while it waits in the array's
// record.
func slotKey(a bridge.JobID, t uint32) jobKey { return jobKey{id: a, task: t, slot: true} }

// String is the key as the rounds, the policy, the store and status know
// it: the job id in decimal, or Slurm's own name for an array's task,
// "ARRAY_TASK".
func (k jobKey) String() string {
	if k.slot {
		return k.id.String() + "_" + strconv.FormatUint(uint64(k.task), 10)
	}
	return k.id.String()
}

// Job is the Slurm job the key names; false for a slot, which is none.
func (k jobKey) Job() (bridge.JobID, bool) { return k.id, !k.slot }
