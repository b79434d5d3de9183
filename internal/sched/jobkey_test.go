package sched

import (
	"testing"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

// A key's name is the one the rounds, the store and status know; only a
// job's key names a Slurm job.
func TestJobKeyNamesAndJobs(t *testing.T) {
	tests := []struct {
		key    jobKey
		name   string
		job    bridge.JobID
		isSlot bool
	}{
		{keyOf(130), "130", 130, false},
		{slotKey(130, 2), "130_2", 0, true},
		{slotKey(7, 0), "7_0", 0, true},
	}
	for _, tc := range tests {
		if got := tc.key.String(); got != tc.name {
			t.Errorf("%#v named %q, want %q", tc.key, got, tc.name)
		}
		id, ok := tc.key.Job()
		if ok == tc.isSlot || (ok && id != tc.job) {
			t.Errorf("%s: job %d %t, want %d %t", tc.name, id, ok, tc.job, !tc.isSlot)
		}
	}
	if keyOf(130) == slotKey(130, 0) {
		t.Error("job 130 and task 0 of array 130 share a key")
	}
}
