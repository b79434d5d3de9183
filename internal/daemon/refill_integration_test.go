//go:build integration

package daemon

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/internal/slurmtest"
)

// A job that ends in the middle of a round frees its GPUs; the daemon's
// look between rounds starts the job it held on them, long before the
// next round (the rounds here are a minute apart).
func TestFreedGPUsAreRefilledBetweenRounds(t *testing.T) {
	env := slurmtest.FromEnv(t)
	part := ownPartition(t, env, "k80-2")
	// The short job takes every GPU of the partition before the daemon
	// starts, as a job Slurm started on its own would; the long one waits.
	short := env.Submit(t, "#!/bin/sh\nsleep 12\n", "--partition="+part, "--gres=gpu:4", "--output=/dev/null",
		"--comment=gavel: model=resnet18-bs64 steps=1k")
	env.WaitState(t, short, "RUNNING", 60*time.Second)
	long := env.Submit(t, "#!/bin/sh\nsleep 600\n", "--partition="+part, "--gres=gpu:4", "--output=/dev/null",
		"--comment=gavel: model=resnet50-bs64 steps=100k")

	set := Settings{Policy: "max_min_fairness_perf", Partitions: []string{part}, Round: 60 * time.Second,
		DefaultGrace: time.Second, GraceSignal: "USR1", RefillPoll: 2 * time.Second}
	p := newInProcess(t, restClient(t, env, env.URL, part), set)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	started := time.Now()
	go func() { done <- p.d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	env.WaitFor(t, long, "held by the first round", 20*time.Second, func(j slurmtest.Job) bool { return j.Hold })

	env.WaitFor(t, short, "finished", 60*time.Second, func(j slurmtest.Job) bool { return j.HasState("COMPLETED") })
	ended := time.Now()
	env.WaitState(t, long, "RUNNING", 30*time.Second)
	waited := time.Since(ended)
	t.Logf("freed GPUs taken %.1f s after the short job ended, %.1f s after the first round", waited.Seconds(), time.Since(started).Seconds())
	if time.Since(started) >= set.Round {
		t.Fatalf("the long job started %.0f s after the first round: a round, not the look between rounds, started it",
			time.Since(started).Seconds())
	}
	if waited > 15*time.Second {
		t.Errorf("the freed GPUs stayed idle %.1f s; the daemon looks every %s", waited.Seconds(), set.RefillPoll)
	}
	// The release was journaled with why, like every action.
	entries, _, err := p.store.Recent(0)
	if err != nil {
		t.Fatal(err)
	}
	why := ""
	for _, e := range entries {
		if e.JobID == itoa(long) && e.Kind == "release" {
			why = string(e.Payload)
		}
	}
	if !strings.Contains(why, "GPUs freed between rounds") {
		t.Errorf("the long job's release says %q, not why it was sent", why)
	}
}
