//go:build integration

package daemon

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/internal/api"
	"github.com/gavel-slurm/gavel-slurm/internal/slurmtest"
	"github.com/gavel-slurm/gavel-slurm/internal/store"
)

// buildBinary builds cmd/gavel-slurm into a temporary folder.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "gavel-slurm")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/gavel-slurm/gavel-slurm/cmd/gavel-slurm").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// logLine is the part of the daemon's zerolog lines the test follows.
type logLine struct {
	Message string `json:"message"`
	Round   uint64 `json:"round"`
	Action  string `json:"action"`
	raw     string
}

// daemonProcess is the real binary running as a subprocess; its log lines
// arrive on lines.
type daemonProcess struct {
	cmd   *exec.Cmd
	lines chan logLine
	addr  string
}

func startDaemon(t *testing.T, bin string, args ...string) *daemonProcess {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"daemon"}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &daemonProcess{cmd: cmd, lines: make(chan logLine, 1000)}
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var l logLine
			if json.Unmarshal(sc.Bytes(), &l) == nil {
				l.raw = sc.Text()
				p.lines <- l
			} else {
				t.Logf("daemon: %s", sc.Bytes())
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return p
}

// waitFor reads log lines until match accepts one.
func (p *daemonProcess) waitFor(t *testing.T, timeout time.Duration, what string, match func(logLine) bool) logLine {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				t.Fatalf("daemon exited while waiting for %s", what)
			}
			if match(l) {
				return l
			}
		case <-deadline:
			t.Fatalf("no %s after %v", what, timeout)
		}
	}
}

// stop sends SIGTERM and waits for the daemon to exit; the error is what
// its exit was (nil for a clean stop).
func (p *daemonProcess) stop(t *testing.T) error {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	return p.cmd.Wait()
}

// logUnread logs the lines the test has not read yet, for a failure's
// story.
func (p *daemonProcess) logUnread(t *testing.T) {
	t.Helper()
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				return
			}
			t.Logf("daemon: %s", l.raw)
		default:
			return
		}
	}
}

func fetchStatusDoc(t *testing.T, addr string) api.Status {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/v1/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var st api.Status
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatalf("status: %v: %s", err, body)
	}
	return st
}

// journaledPreemption is a grace signal or requeue the journal holds.
type journaledPreemption struct {
	Action
	entry store.Entry
}

// auditPreemptions reads the journal a stopped daemon left in stateDir and
// checks it: no entry left pending, no grace signal or requeue journaled
// twice for one run of a job. It returns those preemption actions, and the
// requeues Slurm carried out per job.
func auditPreemptions(t *testing.T, stateDir string) ([]journaledPreemption, map[bridge.JobID]int) {
	t.Helper()
	st, err := store.Open(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	entries, _, err := st.Recent(0)
	if err != nil {
		t.Fatal(err)
	}
	type run struct {
		job      bridge.JobID
		kind     bridge.ActionKind
		restarts int
	}
	seen := map[run]uint64{}
	requeues := map[bridge.JobID]int{}
	var out []journaledPreemption
	for _, e := range entries {
		if e.State == store.Pending {
			t.Errorf("journal entry left pending: %+v", e)
		}
		var a Action
		if err := json.Unmarshal(e.Payload, &a); err != nil {
			t.Fatalf("entry %d: %v", e.Seq, err)
		}
		if e.Attempts > 1 {
			t.Logf("entry %d (%s) was resent after the daemon stopped", e.Seq, a.Action)
		}
		if a.Kind != bridge.ActSignal && a.Kind != bridge.ActRequeueHold && a.Kind != bridge.ActRequeue {
			continue
		}
		key := run{a.Job, a.Kind, a.Restarts}
		if seq, dup := seen[key]; dup {
			t.Errorf("%s journaled twice for the same run (entries %d and %d)", a.Action, seq, e.Seq)
		}
		seen[key] = e.Seq
		if a.Kind != bridge.ActSignal && e.State == store.Done {
			requeues[a.Job]++
		}
		out = append(out, journaledPreemption{a, e})
	}
	return out, requeues
}

// Killing the daemon with SIGKILL while it sends a round's actions and
// starting it again loses no state (time received keeps growing from where
// it was) and repeats no action: every preemption (signal, requeue) is
// journaled once per run of a job, and Slurm's restart counts match the
// journaled requeues.
func TestSIGKILLMidRoundLosesNothingAndRepeatsNothing(t *testing.T) {
	env := slurmtest.FromEnv(t)
	bin := buildBinary(t)
	part := ownPartition(t, env, "k80-1")
	var jobs []int
	for _, model := range []string{"resnet50-bs64", "a3c"} {
		jobs = append(jobs, submitHeld(t, env, checkpointScript(env, "kill", 1_000_000),
			"--partition="+part, "--gres=gpu:4", "--comment=gavel: model="+model))
	}
	stateDir := t.TempDir()
	config := daemonConfig(t, env, `mechanism = "improved" # preempts at once: the restart mechanism would hold these jobs
default_grace = "1s"
default_preempt = "checkpoint"
min_run_time = "0s"`)
	addr := freeAddr(t)
	args := []string{"--config", config, "--partitions", part, "--round", "5s", "--state-dir", stateDir, "--listen", addr, "--adopt-admin-holds"}

	first := startDaemon(t, bin, args...)
	first.waitFor(t, 60*time.Second, "third round", func(l logLine) bool { return l.Message == "round" && l.Round >= 3 })
	before := fetchStatusDoc(t, addr)
	// Kill it while it is sending a round's or a grace period's actions.
	first.waitFor(t, 30*time.Second, "an action", func(l logLine) bool { return l.Message == "action" })
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.cmd.Wait()

	second := startDaemon(t, bin, args...)
	second.waitFor(t, 60*time.Second, "rounds after the restart", func(l logLine) bool { return l.Message == "round" && l.Round >= before.Round.Number+3 })
	after := fetchStatusDoc(t, addr)
	for _, id := range jobs {
		was, now := sum(findJob(t, before, id).Received), sum(findJob(t, after, id).Received)
		t.Logf("job %d: received %.1f s before the kill, %.1f s after the restart (%s: %s)", id, was, now,
			findJob(t, after, id).State, findJob(t, after, id).Reason)
		if now < was {
			t.Errorf("job %d: received time went back from %.1f to %.1f s", id, was, now)
		}
	}
	if after.Round.Number <= before.Round.Number {
		t.Errorf("round counter went back: %d -> %d", before.Round.Number, after.Round.Number)
	}
	if err := second.stop(t); err != nil {
		t.Errorf("daemon did not stop cleanly: %v", err)
	}

	_, requeues := auditPreemptions(t, stateDir)
	total := 0
	for _, id := range jobs {
		j := env.Job(t, id)
		total += j.RestartCount
		if j.RestartCount != requeues[bridge.JobID(id)] {
			t.Errorf("job %d: Slurm counts %d restarts, the journal %d requeues", id, j.RestartCount, requeues[bridge.JobID(id)])
		}
	}
	if total == 0 {
		t.Error("no job was requeued: the test did not exercise preemption across the restart")
	}
}

// The daemon is killed with SIGKILL right after it sent a grace signal;
// the job's script saves and exits while no daemon runs (COMPLETED in
// Slurm). The restarted daemon recognises the journaled signal, does not
// send it again, and requeues the job: it is pending or running again,
// not left finished.
func TestSIGKILLDuringAGracePeriodLosesNoJob(t *testing.T) {
	env := slurmtest.FromEnv(t)
	bin := buildBinary(t)
	part := ownPartition(t, env, "k80-2")
	for _, model := range []string{"resnet50-bs64", "a3c"} {
		submitHeld(t, env, kindScript(env, scriptKinds["trap-exit-0"]), "--partition="+part,
			"--gres=gpu:4", "--output=/dev/null", "--comment=gavel: model="+model+" preempt=checkpoint")
	}
	stateDir := t.TempDir()
	config := daemonConfig(t, env, `mechanism = "improved" # preempts at once: the restart mechanism would hold these jobs
default_grace = "30s"
min_run_time = "0s"`)
	args := []string{"--config", config, "--partitions", part, "--round", "5", "--state-dir", stateDir, "--listen", freeAddr(t), "--adopt-admin-holds"}

	first := startDaemon(t, bin, args...)
	signalled := first.waitFor(t, 90*time.Second, "a grace signal", func(l logLine) bool {
		return l.Message == "action" && strings.HasPrefix(l.Action, "signal job ")
	})
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.cmd.Wait()
	var victim int
	fmt.Sscanf(signalled.Action, "signal job %d", &victim)
	env.WaitFor(t, victim, "finished after its checkpoint", 20*time.Second, func(j slurmtest.Job) bool { return j.HasState("COMPLETED") })

	second := startDaemon(t, bin, args...)
	var j slurmtest.Job
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		j = env.Job(t, victim)
		if (j.HasState("PENDING") || j.HasState("RUNNING")) && j.RestartCount >= 1 {
			break
		}
		if time.Now().After(deadline) {
			second.logUnread(t)
			t.Fatalf("job %d not requeued after the restart: %v, %d restarts", victim, j.State, j.RestartCount)
		}
	}
	t.Logf("job %d after the restart: %v, %d restarts", victim, j.State, j.RestartCount)
	second.waitFor(t, 30*time.Second, "a round after the requeue", func(l logLine) bool { return l.Message == "round" })
	_ = second.stop(t)

	preemptions, _ := auditPreemptions(t, stateDir)
	signals := 0
	for _, p := range preemptions {
		if p.Kind == bridge.ActSignal && int(p.Job) == victim && p.Restarts == 0 {
			signals++
		}
	}
	if signals != 1 {
		t.Errorf("job %d got %d grace signals for its first run, want 1", victim, signals)
	}
	if j := env.Job(t, victim); j.HasState("COMPLETED") || j.HasState("FAILED") {
		t.Errorf("job %d ended %v", victim, j.State)
	}
}
