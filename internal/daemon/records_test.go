package daemon

import (
	"encoding/json"
	"testing"

	"github.com/gavel-slurm/gavel-slurm/internal/sched"
	"github.com/gavel-slurm/gavel-slurm/internal/store"
)

// storedRecord reads job id's record from the store as the daemon saved
// it; ok is false when there is none.
func storedRecord(t *testing.T, st *store.Store, id string) (sched.Record, bool) {
	t.Helper()
	raw, _, err := st.Jobs()
	if err != nil {
		t.Fatalf("read jobs: %v", err)
	}
	data, ok := raw[id]
	if !ok {
		return sched.Record{}, false
	}
	var r sched.Record
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("record %s: %v", id, err)
	}
	return r, true
}

// storeRecords writes records as a round would, for tests that set up
// what a crash left behind.
func storeRecords(t *testing.T, st *store.Store, recs ...sched.Record) {
	t.Helper()
	jobs := make([]store.Job, len(recs))
	for i, r := range recs {
		jobs[i] = store.Job{ID: r.JobID, Value: r}
	}
	if err := st.SaveRound(jobs, nil, nil); err != nil {
		t.Fatalf("save records: %v", err)
	}
}
