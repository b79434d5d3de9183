//go:build integration

package daemon

import (
	"context"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/internal/sched"
	"github.com/gavel-slurm/gavel-slurm/internal/slurmtest"
)

// A trial-and-error job submitted while best-effort jobs hold every GPU
// of the partition starts within one grace period plus a few seconds,
// between rounds (the rounds here are far apart); exactly one
// best-effort job is preempted for it, and that job runs again later.
func TestTrialAndErrorJobStartsWithinAGracePeriod(t *testing.T) {
	env := slurmtest.FromEnv(t)
	part := ownPartition(t, env, "k80-2")
	const grace = 5 * time.Second
	set := Settings{Policy: "max_min_fairness_perf", Partitions: []string{part}, Round: 30 * time.Second,
		DefaultGrace: grace, GraceSignal: "USR1", DefaultPreempt: bridge.PreemptCheckpoint,
		TrialAndError: sched.TESettings{Enabled: true, Weight: 4, MaxPreemptions: 2, Poll: 2 * time.Second}}
	p := newInProcess(t, restClient(t, env, env.URL, part), set)

	var be []int
	for range 2 {
		be = append(be, env.Submit(t, checkpointScript(env, "te-victim", 1_000_000), "--partition="+part,
			"--gres=gpu:2", "--output=/dev/null", "--comment=gavel: model=resnet50-bs64 steps=100k"))
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	for _, id := range be {
		env.WaitState(t, id, "RUNNING", 60*time.Second)
	}

	submitted := time.Now()
	te := env.Submit(t, "#!/bin/sh\nsleep 10\n", "--partition="+part, "--gres=gpu:2", "--output=/dev/null",
		"--comment=gavel: model=resnet18-bs64 steps=1k class=te")
	env.WaitState(t, te, "RUNNING", grace+30*time.Second)
	waited := time.Since(submitted)
	t.Logf("TE job %d started %.1f s after submission (grace %s)", te, waited.Seconds(), grace)
	if waited > grace+10*time.Second {
		t.Errorf("TE job waited %.1f s, want at most the grace period (%s) plus 10 s", waited.Seconds(), grace)
	}

	victims := 0
	victim := 0
	for _, id := range be {
		if j := env.Job(t, id); j.RestartCount > 0 || !j.HasState("RUNNING") {
			victims++
			victim = id
		}
	}
	if victims != 1 {
		t.Fatalf("%d best-effort jobs preempted for one 2-GPU TE job, want 1", victims)
	}
	// The victim runs again once the TE job is done and a round gives it
	// back its GPUs.
	j := env.WaitFor(t, victim, "running again", 90*time.Second, func(j slurmtest.Job) bool {
		return j.HasState("RUNNING") && j.RestartCount >= 1
	})
	t.Logf("victim %d running again on %s after %d restart(s)", victim, j.Nodes, j.RestartCount)
}
