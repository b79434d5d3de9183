//go:build integration

package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/bridge/rest"
	"github.com/gavel-slurm/gavel-slurm/internal/slurmtest"
)

// asSlurmUser is the daemon's slurmrestd client and scontrol as one Slurm
// user of the local account tree, as a site runs it (README step 3): a
// JWT minted for that user, and an scontrol run under that user's uid.
func asSlurmUser(t *testing.T, env *slurmtest.Env, user string, partitions ...string) *rest.Client {
	t.Helper()
	out := env.Scontrol(t, "token", "username="+user, "lifespan=1800")
	token := strings.TrimPrefix(strings.TrimSpace(out), "SLURM_JWT=")
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	scontrol := filepath.Join(dir, "scontrol")
	script := fmt.Sprintf("#!/bin/sh\nexec env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 SLURM_CONF=/etc/slurm/slurm.conf chroot --userspec=%s:%s %s scontrol \"$@\"\n",
		user, user, slurmRoot(t, env))
	if err := os.WriteFile(scontrol, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	c, err := rest.New(rest.Config{URL: env.URL, UserName: user, TokenFile: tokenFile,
		Partitions: partitions, Scontrol: scontrol, HTTPClient: SlurmHTTPClient()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The daemon runs as gavel-op, a Slurm operator (AdminLevel=Operator)
// and no one's SlurmUser or root: its requeue check passes, and it time-
// shares a partition with preemptions (signal, requeue) of root's jobs.
// As bob, who is not an operator, the check fails and preemption stays
// off with the reason given, and nothing is requeued.
func TestDaemonRunsAsAnOperator(t *testing.T) {
	env := slurmtest.FromEnv(t)
	env.RequireAccounting(t)
	part := ownPartition(t, env, "k80-2")
	var jobs []int
	for range 2 {
		jobs = append(jobs, submitHeld(t, env, checkpointScript(env, "op", 1_000_000),
			"--partition="+part, "--gres=gpu:4", "--comment=gavel: model=resnet50-bs64"))
	}
	set := Settings{Policy: "max_min_fairness_perf", AdoptAdminHolds: true, Partitions: []string{part}, Round: 8 * time.Second,
		DefaultPreempt: bridge.PreemptCheckpoint, DefaultGrace: time.Second, GraceSignal: "USR1"}

	p := newInProcess(t, asSlurmUser(t, env, "gavel-op", part), set)
	p.run(t, 30*time.Second)
	st := p.board.Status()
	t.Logf("as gavel-op: preemption %+v; round %d", st.Preemption, st.Round.Number)
	if !st.Preemption.Enabled {
		t.Fatalf("preemption off for an operator: %s", st.Preemption.Reason)
	}
	requeued := 0
	for _, id := range jobs {
		j := env.Job(t, id)
		requeued += j.RestartCount
	}
	if requeued == 0 {
		t.Errorf("no job was requeued in 30 s of 8 s rounds with two 4-GPU jobs on 4 GPUs")
	}
	// slurmdbd's records say the same: the requeues went through Slurm.
	accounted := 0
	for id, rec := range env.Sacct(t, jobs...) {
		t.Logf("sacct: job %d %s, %d restarts", id, rec.State, rec.Restarts)
		accounted += rec.Restarts
	}
	if accounted != requeued {
		t.Errorf("slurmdbd counts %d requeues, slurmctld %d", accounted, requeued)
	}

	q := newInProcess(t, asSlurmUser(t, env, "bob", part), set)
	q.run(t, 15*time.Second)
	st = q.board.Status()
	t.Logf("as bob: preemption %+v", st.Preemption)
	if st.Preemption.Enabled || st.Preemption.Reason == "" {
		t.Errorf("preemption for bob, not an operator: %+v", st.Preemption)
	}
}
