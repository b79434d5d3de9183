//go:build integration

package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/internal/slurmtest"
)

// Two 4-GPU jobs share one 4-GPU node, so each is preempted at least once
// before it finishes. Their scripts save a step counter on the grace signal
// and resume from it: every step from 1 to the total must run exactly once.
func TestPreemptedJobsResumeFromTheirCheckpoint(t *testing.T) {
	env := slurmtest.FromEnv(t)
	part := ownPartition(t, env, "p100-1")
	const steps = 50 // 10 s of work each, against 6 s rounds
	var jobs []int
	for _, model := range []string{"resnet50-bs64", "a3c"} {
		jobs = append(jobs, submitHeld(t, env, checkpointScript(env, "ckpt", steps),
			"--partition="+part, "--gres=gpu:4", "--comment=gavel: model="+model))
	}
	set := Settings{Policy: "max_min_fairness_perf", AdoptAdminHolds: true, Partitions: []string{part}, Round: 6 * time.Second, DefaultPreempt: bridge.PreemptCheckpoint,
		DefaultGrace: time.Second, GraceSignal: "USR1"}
	p := newInProcess(t, restClient(t, env, env.URL, part), set)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.d.Run(ctx) }()
	waitAllSettled(t, env, jobs, 180*time.Second, 15*time.Second)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	preempted := 0
	for _, id := range jobs {
		data, err := os.ReadFile(filepath.Join(env.SharedDir, fmt.Sprintf("ckpt-%d.log", id)))
		if err != nil {
			t.Fatal(err)
		}
		runs, err := checkSteps(string(data), steps)
		if err != nil {
			t.Errorf("job %d: %v\n%s", id, err, data)
		}
		if len(runs) > 1 {
			preempted++
		}
		// A signal that lands before the script has set its trap (Slurm
		// started the job just before the round preempted it) kills the
		// run before it logs anything, so Slurm may count more restarts
		// than there are logged runs. What must hold: the last logged run
		// is the one Slurm finished with, so no requeue came after it.
		if j := env.Job(t, id); len(runs) > 0 && j.RestartCount != runs[len(runs)-1] {
			t.Errorf("job %d: its last run saw %d restarts but Slurm counts %d\n%s", id, runs[len(runs)-1], j.RestartCount, data)
		}
	}
	if preempted == 0 {
		t.Error("no job was preempted: the test did not exercise the checkpoint")
	}
}

// waitAllSettled waits until every job is COMPLETED twice in a row, quiet
// apart (a round, the daemon's check between rounds and a grace period),
// with the same restart counts. Until then a job may show a state that
// would be final without the daemon: FAILED when the grace signal killed
// it before its script set the trap, or COMPLETED when it finished its
// last step just after the signal; both ended inside a grace period, so
// the daemon requeues them (docs/preemption.md) and they run again from
// their checkpoint.
func waitAllSettled(t *testing.T, env *slurmtest.Env, jobs []int, timeout, quiet time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	completed := func() (restarts string, ok bool) {
		for _, id := range jobs {
			j := env.Job(t, id)
			if !j.HasState("COMPLETED") {
				return "", false
			}
			restarts += fmt.Sprintf("%d:%d ", id, j.RestartCount)
		}
		return restarts, true
	}
	settled := ""
	for time.Now().Before(deadline) {
		restarts, ok := completed()
		switch {
		case !ok:
			settled = ""
			time.Sleep(500 * time.Millisecond)
			continue
		case restarts == settled:
			return
		}
		settled = restarts
		time.Sleep(quiet)
	}
	for _, id := range jobs {
		j := env.Job(t, id)
		t.Errorf("job %d: %v (reason %q), %d restarts", id, j.State, j.StateReason, j.RestartCount)
	}
	t.Fatalf("the jobs did not all stay completed within %v", timeout)
}

// checkSteps reads a checkpointScript log: every step from 1 to total once,
// each run starting from the count the previous one saved, and each run
// seeing more restarts than the one before. It returns the restart count
// each run saw.
func checkSteps(log string, total int) (runs []int, err error) {
	next, saved := 1, 0
	for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
		var n, restarts int
		switch {
		case scanStart(line, &n, &restarts):
			if n != saved {
				return runs, fmt.Errorf("run %d starts from step %d, the last save was %d", len(runs)+1, n, saved)
			}
			if len(runs) > 0 && restarts <= runs[len(runs)-1] {
				return runs, fmt.Errorf("run %d saw %d restarts after a run that saw %d", len(runs)+1, restarts, runs[len(runs)-1])
			}
			runs = append(runs, restarts)
		case scan(line, "step %d", &n):
			if n != next {
				return runs, fmt.Errorf("step %d after step %d: a step was lost or repeated", n, next-1)
			}
			next++
		case scan(line, "saved %d", &n), scan(line, "done %d", &n):
			if n != next-1 {
				return runs, fmt.Errorf("saved %d after step %d", n, next-1)
			}
			saved = n
		}
	}
	if next-1 != total {
		return runs, fmt.Errorf("ran %d of %d steps", next-1, total)
	}
	return runs, nil
}

func scanStart(line string, step, restarts *int) bool {
	_, err := fmt.Sscanf(line, "start %d restarts=%d", step, restarts)
	return err == nil
}

func scan(line, format string, n *int) bool {
	_, err := fmt.Sscanf(line, format, n)
	return err == nil
}
