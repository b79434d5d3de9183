//go:build integration

package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/internal/slurmtest"
)

// untouched is what the daemon must never change on an unmanaged job.
type untouched struct {
	Priority    int64
	Hold        bool
	Features    string
	StateReason string
}

func untouchedOf(j slurmtest.Job) untouched {
	return untouched{Priority: j.Priority.Number, Hold: j.Hold, Features: j.Features, StateReason: j.StateReason}
}

// With more 4-GPU jobs than the partition's two 4-GPU nodes hold, short
// rounds time-share the GPUs: jobs are preempted (signal, requeue) and
// resumed, every job gets service, the service adds up to what the GPUs
// could give, and each job's share follows its allocation. Untagged and
// malformed jobs in the same partition are never touched.
func TestRoundsTimeShareGPUsAndLeaveUnmanagedJobsAlone(t *testing.T) {
	env := slurmtest.FromEnv(t)
	part := ownPartition(t, env, "v100-2", "k80-2")
	const gpusPerJob, gpus = 4, 8
	var managed []int
	for _, model := range []string{"resnet50-bs64", "transformer-bs64", "a3c", "lm-bs20"} {
		managed = append(managed, submitHeld(t, env, checkpointScript(env, "share", 1_000_000),
			"--partition="+part, "--gres=gpu:4", "--comment=gavel: model="+model))
	}
	plain := env.Submit(t, "#!/bin/bash\nsleep 600\n", "--partition="+part, "--gres=gpu:1", "--hold",
		"--constraint=k80", "--comment=plain job")
	malformed := submitHeld(t, env, "#!/bin/bash\nsleep 600\n", "--partition="+part, "--gres=gpu:1",
		"--comment=gavel: steps=many")
	before := map[int]untouched{plain: untouchedOf(env.Job(t, plain)), malformed: untouchedOf(env.Job(t, malformed))}

	set := Settings{Policy: "max_min_fairness_perf", AdoptAdminHolds: true, Partitions: []string{part}, Round: 8 * time.Second, DefaultPreempt: bridge.PreemptCheckpoint,
		DefaultGrace: time.Second, GraceSignal: "USR1"}
	p := newInProcess(t, restClient(t, env, env.URL, part), set)
	first := time.Now()
	p.run(t, 66*time.Second)

	st := p.board.Status()
	if st.Round.Skipped != "" {
		t.Fatalf("last round skipped: %s", st.Round.Skipped)
	}
	span := st.Round.Started.Sub(first).Seconds()
	alloc := p.board.Allocation().Rows
	received := map[int]float64{}
	allocated := map[int]float64{}
	var totalReceived, totalAllocated float64
	for _, id := range managed {
		js := findJob(t, st, id)
		received[id], allocated[id] = sum(js.Received), sum(alloc[js.JobID])
		totalReceived += received[id]
		totalAllocated += allocated[id]
		t.Logf("job %d: received %v, allocation %v", id, js.Received, alloc[js.JobID])
	}
	for _, id := range managed {
		if received[id] <= 0 {
			t.Errorf("job %d received no GPU time in %.0f s", id, span)
			continue
		}
		// Every switch costs a grace period and a restart, so compare
		// shares of the service given rather than absolute times. Eight
		// rounds of 8 s over four jobs leave a round's worth of slack.
		got, want := received[id]/totalReceived, allocated[id]/totalAllocated
		if got < want-0.15 || got > want+0.15 {
			t.Errorf("job %d got %.2f of the service, its allocation %.2f", id, got, want)
		}
	}
	capacity := float64(gpus) * span
	used := totalReceived * gpusPerJob
	t.Logf("GPU time used %.0f of %.0f GPU-seconds over %.0f s (%.0f%%)", used, capacity, span, 100*used/capacity)
	if used > capacity*1.02 {
		t.Errorf("jobs received %.0f GPU-seconds, more than the %.0f the GPUs had", used, capacity)
	}
	if used < capacity/2 {
		t.Errorf("jobs received %.0f GPU-seconds of %.0f: the GPUs sat idle", used, capacity)
	}
	resumed := 0
	for _, id := range managed {
		log, _ := os.ReadFile(filepath.Join(env.SharedDir, "share-"+itoa(id)+".log"))
		starts := strings.Count(string(log), "start ")
		if j := env.Job(t, id); j.RestartCount > 0 && starts > 1 {
			resumed++
		}
	}
	if resumed == 0 {
		t.Error("no job was requeued and resumed: the GPUs were not time-shared")
	}
	for id, was := range before {
		if now := untouchedOf(env.Job(t, id)); now != was {
			t.Errorf("unmanaged job %d changed: %+v -> %+v", id, was, now)
		}
	}
	for _, j := range st.Jobs {
		if j.JobID == itoa(malformed) && !strings.Contains(j.Reason, "steps") {
			t.Errorf("malformed tag reason %q does not name the key", j.Reason)
		}
	}
}
