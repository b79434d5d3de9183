//go:build integration

package daemon

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/internal/slurmtest"
)

// ownerUID is the unprivileged user the tests submit as where a job's
// owner acts on it: bob of the account tree (scripts/slurm/accounts.sh).
const ownerUID = "5002"

// slurmRoot is the local Slurm's root directory, as its command wrapper
// names it (each release has its own).
func slurmRoot(t *testing.T, env *slurmtest.Env) string {
	t.Helper()
	wrapper, err := os.ReadFile(filepath.Join(filepath.Dir(env.ScontrolPath), "in-slurm-root"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^root=(\S+)$`).FindSubmatch(wrapper)
	if m == nil {
		t.Fatal("the Slurm command wrapper does not name its root")
	}
	return string(m[1])
}

// asOwner runs a Slurm command as the unprivileged user, as a job's
// owner would, and returns its output and error.
func asOwner(t *testing.T, env *slurmtest.Env, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("chroot", append([]string{"--userspec=bob:bob", slurmRoot(t, env)}, args...)...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "SLURM_CONF=/etc/slurm/slurm.conf"}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Jobs Slurm cannot start (a dependency not met, a begin time their owner
// set) get no share: the jobs that can run do, no GPU stays idle for
// them, nothing is preempted for them, the begin time stays as set, and
// status says why they wait.
func TestJobsSlurmCannotStartLeaveNoGPUIdle(t *testing.T) {
	env := slurmtest.FromEnv(t)
	part := ownPartition(t, env, "v100-1")
	tag := "--comment=gavel: model=resnet50-bs64 steps=100000000 preempt=checkpoint"
	long := env.Submit(t, kindScript(env, scriptKinds["trap-wait"]), "--partition="+part, "--gres=gpu:2",
		"--output=/dev/null", tag)
	env.WaitState(t, long, "RUNNING", 30*time.Second)
	var blocked []int
	for range 2 {
		blocked = append(blocked, env.Submit(t, kindScript(env, scriptKinds["trap-wait"]), "--partition="+part,
			"--gres=gpu:1", "--output=/dev/null", "--dependency=afterok:"+itoa(long), tag))
	}
	later := env.Submit(t, kindScript(env, scriptKinds["trap-wait"]), "--partition="+part, "--gres=gpu:1",
		"--output=/dev/null", "--begin=now+2hours", tag)
	begin := env.Job(t, later).EligibleTime.Number
	var runnable []int
	for range 2 {
		runnable = append(runnable, submitHeld(t, env, kindScript(env, scriptKinds["trap-wait"]), "--partition="+part,
			"--gres=gpu:1", "--output=/dev/null", tag))
	}
	set := Settings{Policy: "max_min_fairness_perf", AdoptAdminHolds: true, Partitions: []string{part}, Round: 4 * time.Second,
		DefaultGrace: 2 * time.Second, GraceSignal: "USR1", DefaultPreempt: bridge.PreemptCheckpoint}
	p := newInProcess(t, restClient(t, env, env.URL, part), set)
	p.rounds(6, 4*time.Second)

	if sig := signalsSent(p); len(sig) > 0 {
		t.Errorf("grace signals sent %v: nothing should be preempted for jobs Slurm cannot start", sig)
	}
	for _, id := range append([]int{long}, runnable...) {
		if j := env.Job(t, id); !j.HasState("RUNNING") {
			t.Errorf("job %d, which Slurm can run, is %v (%s): GPUs idle for jobs that cannot start", id, j.State, j.StateReason)
		}
	}
	st := p.board.Status()
	for _, id := range append(blocked, later) {
		j := env.Job(t, id)
		if !j.HasState("PENDING") {
			t.Errorf("job %d is %v, want pending", id, j.State)
		}
		if js := findJob(t, st, id); !strings.Contains(js.Reason, "waits for Slurm") {
			t.Errorf("job %d: status reason %q, want it to say it waits for Slurm", id, js.Reason)
		}
	}
	if got := env.Job(t, later).EligibleTime.Number; got != begin {
		t.Errorf("the owner's begin time moved from %d to %d", begin, got)
	}
}

// What a job's owner changes after submission is read again: a GPU count
// raised on a pending job is what the daemon counts; a running job its
// owner made unrequeueable (scontrol update requeue=0) is never
// preempted; and the hold the daemon leaves on a preempted job is not
// its owner's to release.
func TestOwnersChangesAfterSubmission(t *testing.T) {
	env := slurmtest.FromEnv(t)
	part := ownPartition(t, env, "v100-2")
	tag := "--comment=gavel: model=resnet50-bs64 steps=100000000 preempt=checkpoint"
	set := Settings{Policy: "max_min_fairness_perf", AdoptAdminHolds: true, Partitions: []string{part}, Round: 4 * time.Second,
		DefaultGrace: 2 * time.Second, GraceSignal: "USR1", DefaultPreempt: bridge.PreemptCheckpoint}

	t.Run("GPU count", func(t *testing.T) {
		full := env.Submit(t, kindScript(env, scriptKinds["trap-wait"]), "--partition="+part, "--gres=gpu:4",
			"--output=/dev/null", "--comment=gavel: model=resnet50-bs64 steps=100000000 preempt=never")
		env.WaitState(t, full, "RUNNING", 30*time.Second)
		waiting := env.Submit(t, kindScript(env, scriptKinds["trap-wait"]), "--partition="+part, "--gres=gpu:1",
			"--output=/dev/null", tag)
		p := newInProcess(t, restClient(t, env, env.URL, part), set)
		p.d.RunRound(context.Background())
		env.Scontrol(t, "update", "jobid="+itoa(waiting), "TresPerNode=gres/gpu:2")
		p.d.RunRound(context.Background())
		if got := findJob(t, p.board.Status(), waiting).GPUs; got != 2 {
			t.Errorf("after TresPerNode=gres/gpu:2 status counts %d GPUs for job %d, want 2", got, waiting)
		}
		env.CancelAll(t)
	})

	t.Run("requeue=0 and the owner's release", func(t *testing.T) {
		first := env.Submit(t, kindScript(env, scriptKinds["trap-wait"]), "--partition="+part, "--gres=gpu:4",
			"--output=/dev/null", "--uid="+ownerUID, "--gid="+ownerUID, tag)
		env.WaitState(t, first, "RUNNING", 30*time.Second)
		env.Submit(t, kindScript(env, scriptKinds["trap-wait"]), "--partition="+part, "--gres=gpu:4",
			"--output=/dev/null", "--uid="+ownerUID, "--gid="+ownerUID, tag)
		p := newInProcess(t, restClient(t, env, env.URL, part), set)
		// Its owner turns requeue off: never preempted while it stays off.
		if out, err := asOwner(t, env, "scontrol", "update", "jobid="+itoa(first), "requeue=0"); err != nil {
			t.Fatalf("owner's requeue=0: %v: %s", err, out)
		}
		p.rounds(4, 4*time.Second)
		if sig := signalsSent(p); sig[first] > 0 {
			t.Fatalf("job %d, made unrequeueable by its owner, was signalled", first)
		}
		if pre := findJob(t, p.board.Status(), first).Preempt; pre != "never" {
			t.Errorf("job %d shows preempt=%s, want never", first, pre)
		}
		// Back on: preempted for the other job, requeued, held by the
		// daemon with a hold its owner cannot release.
		env.Scontrol(t, "update", "jobid="+itoa(first), "requeue=1")
		var victim int
		for range 10 {
			p.rounds(1, 4*time.Second)
			for id := range signalsSent(p) {
				victim = id
			}
			if victim != 0 {
				break
			}
		}
		if victim == 0 {
			t.Fatal("no job was preempted once requeue was on again")
		}
		j := env.WaitFor(t, victim, "requeued and held", 30*time.Second, func(j slurmtest.Job) bool {
			return j.RestartCount == 1 && j.HasState("PENDING") && j.Hold
		})
		out, err := asOwner(t, env, "scontrol", "release", itoa(victim))
		if err == nil {
			t.Errorf("the owner released the daemon's hold on job %d: %s", victim, out)
		}
		if j = env.Job(t, victim); !j.Hold {
			t.Errorf("job %d is no longer held after its owner's release (%s)", victim, j.StateReason)
		}
	})
}
