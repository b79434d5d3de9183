package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	bolt "go.etcd.io/bbolt"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/internal/api"
	"github.com/gavel-slurm/gavel-slurm/internal/sched"
	"github.com/gavel-slurm/gavel-slurm/internal/store"
	"github.com/gavel-slurm/gavel-slurm/internal/throughputs"
)

// status says why every job in the managed partitions is where it is. A
// preempted job that ended during its grace period (it saved and exited on
// the signal) waits for its requeue; when slurmctld refuses the requeue
// for a while and the daemon restarts meanwhile, the job is still shown
// managed, with its reason.
func TestJobEndedInGraceKeepsItsReasonAfterRestart(t *testing.T) {
	h := newHarness(t, t.TempDir(), "a1:v100:1")
	first, _ := h.preemptFirst()
	if err := h.slurm.Finish(first, bridge.JobCompleted); err != nil {
		t.Fatal(err)
	}
	h.slurm.FailActions(func(a bridge.Action) error {
		if a.Job == first && (a.Kind == bridge.ActRequeueHold || a.Kind == bridge.ActRequeue) {
			return errors.New("slurmctld busy")
		}
		return nil
	})
	check := func(when string) {
		t.Helper()
		for _, js := range h.board.Status().Jobs {
			if js.JobID == first.String() {
				if js.Reason == "" || !js.Managed {
					t.Errorf("%s: job %s (preempted, ended in its grace period, requeue pending) shown managed=%v reason=%q grace=%q state=%s",
						when, first, js.Managed, js.Reason, js.Grace, js.State)
				}
				return
			}
		}
		t.Errorf("%s: job %s not shown", when, first)
	}
	h.d.RunRound(context.Background())
	check("before restart")
	h.restart()
	h.d.RunRound(context.Background())
	check("after restart")
}

// One damaged job record does not keep the daemon from starting (or a
// standby from taking over): that job starts afresh.
func TestDaemonStartsDespiteOneDamagedJobRecord(t *testing.T) {
	dir := t.TempDir()
	h := newHarness(t, dir, "a1:v100:1")
	h.submit(resnet, 1)
	h.submit(resnet, 1)
	h.d.RunRound(context.Background())
	h.store.Close()
	db, err := bolt.Open(filepath.Join(dir, store.FileName), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("jobs")).Put([]byte("99"), []byte(`{"job_id":"99","first_`))
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if h.store, err = store.Open(dir); err != nil {
		t.Fatal(err)
	}
	table, _ := throughputs.Reference()
	core, err := NewCore(h.set, sched.TableEstimator{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(Deps{Core: core, Slurm: h.slurm, Store: h.store, Board: &api.Board{},
		Log: zerolog.New(io.Discard), Clock: h.clock}); err != nil {
		t.Errorf("daemon does not start: %v", err)
	}
}

// A status with no job (a round whose snapshot failed, an empty queue)
// lists no job as an empty list, not null.
func TestStatusListsAreNeverNull(t *testing.T) {
	data, err := json.Marshal(statusDoc(sched.View{Round: 3}))
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"jobs":[]`, `"types":[]`} {
		if !strings.Contains(string(data), key) {
			t.Errorf("status document %s: want %s", data, key)
		}
	}
}
