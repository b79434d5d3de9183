//go:build integration

package daemon

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/internal/slurmtest"
)

// takeoverBound is how long a standby may take to start rounds after the
// active daemon dies: it polls the lock every 50 ms, and its first round
// reads the local Slurm in well under a second.
const takeoverBound = 10 * time.Second

// Two daemons on one state directory, as on two controller hosts sharing
// it: the second waits as a standby (its /healthz answers 503). The active
// one is killed with SIGKILL right after it sent a grace signal, mid-round.
// The standby takes over within takeoverBound and carries the preemption
// through from the journal: the signal is not sent again, the job is
// requeued once (Slurm's restart count matches the journal), no action is
// journaled twice for the same run, and no job is lost.
func TestStandbyTakesOverAfterSIGKILLWithoutRepeating(t *testing.T) {
	env := slurmtest.FromEnv(t)
	bin := buildBinary(t)
	part := ownPartition(t, env, "v100-1")
	var jobs []int
	for _, model := range []string{"resnet50-bs64", "a3c"} {
		jobs = append(jobs, submitHeld(t, env, checkpointScript(env, "standby", 1_000_000), "--partition="+part,
			"--job-name=gavel-standby-takeover", "--gres=gpu:4", "--output=/dev/null",
			"--comment=gavel: model="+model+" preempt=checkpoint"))
	}
	stateDir := t.TempDir()
	config := filepath.Join(t.TempDir(), "gavel-slurm.toml")
	err := os.WriteFile(config, []byte(fmt.Sprintf(`[slurm]
rest_url = %q
token_file = %q
user = %q
scontrol = %q
[scheduler]
mechanism = "improved" # preempts at once: the restart mechanism would hold these jobs
default_grace = "3s"
min_run_time = "0s"
[daemon]
standby = true
`, env.URL, os.Getenv("SLURM_JWT_FILE"), env.UserName, env.ScontrolPath)), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	args := func(listen string) []string {
		return []string{"--config", config, "--partitions", part, "--round", "5", "--state-dir", stateDir, "--listen", listen, "--adopt-admin-holds"}
	}
	activeAddr, standbyAddr := freeAddr(t), freeAddr(t)

	active := startDaemon(t, bin, args(activeAddr)...)
	active.waitFor(t, 60*time.Second, "a first round", func(l logLine) bool { return l.Message == "round" })
	standby := startDaemon(t, bin, args(standbyAddr)...)
	standby.waitFor(t, 30*time.Second, "the standby's announcement", func(l logLine) bool {
		return strings.HasPrefix(l.Message, "standby: another daemon holds the state")
	})
	if code, body := healthz(t, "http://"+standbyAddr); code != http.StatusServiceUnavailable || !strings.HasPrefix(body, "standby: ") {
		t.Fatalf("standby /healthz = %d %q, want 503 standby", code, body)
	}
	if st := fetchStatusDoc(t, standbyAddr); !st.Round.Standby || len(st.Jobs) != 0 {
		t.Errorf("standby status: %+v", st.Round)
	}

	signalled := active.waitFor(t, 90*time.Second, "a grace signal", func(l logLine) bool {
		return l.Message == "action" && strings.HasPrefix(l.Action, "signal job ")
	})
	if err := active.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	_ = active.cmd.Wait()
	var victim int
	fmt.Sscanf(signalled.Action, "signal job %d", &victim)

	standby.waitFor(t, takeoverBound, "the takeover", func(l logLine) bool { return strings.HasPrefix(l.Message, "taking over") })
	took := standby.waitFor(t, takeoverBound, "a round after the takeover", func(l logLine) bool { return l.Message == "round" })
	t.Logf("standby ran round %d %v after the kill", took.Round, time.Since(killed).Round(time.Millisecond))
	if code, body := healthz(t, "http://"+standbyAddr); code != http.StatusOK {
		t.Errorf("/healthz after the takeover = %d %q", code, body)
	}

	// The victim's grace period (3 s from the journaled signal) ends under
	// the new daemon, which requeues it.
	j := env.WaitFor(t, victim, "requeued after the takeover", 30*time.Second, func(j slurmtest.Job) bool {
		return j.RestartCount >= 1 && (j.HasState("PENDING") || j.HasState("RUNNING"))
	})
	t.Logf("job %d after the takeover: %v, %d restarts", victim, j.State, j.RestartCount)
	standby.waitFor(t, 30*time.Second, "two more rounds", func(l logLine) bool { return l.Message == "round" && l.Round >= took.Round+2 })
	if err := standby.stop(t); err != nil {
		t.Errorf("the daemon that took over did not stop cleanly: %v", err)
	}

	preemptions, requeues := auditPreemptions(t, stateDir)
	victimSignals := 0
	for _, p := range preemptions {
		switch {
		case p.Kind == bridge.ActSignal && p.entry.Attempts != 1:
			t.Errorf("grace signal %s handed to Slurm %d times", p.Action.Action, p.entry.Attempts)
		case p.Kind == bridge.ActSignal && int(p.Job) == victim && p.Restarts == 0:
			victimSignals++
		}
	}
	if victimSignals != 1 {
		t.Errorf("job %d got %d grace signals for its first run, want 1", victim, victimSignals)
	}
	for _, id := range jobs {
		j := env.Job(t, id)
		if j.RestartCount != requeues[bridge.JobID(id)] {
			t.Errorf("job %d: Slurm counts %d restarts, the journal %d requeues", id, j.RestartCount, requeues[bridge.JobID(id)])
		}
		if !j.HasState("PENDING") && !j.HasState("RUNNING") {
			t.Errorf("job %d lost: %v", id, j.State)
		}
	}
}
