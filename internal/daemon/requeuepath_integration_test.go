//go:build integration

package daemon

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/bridge/rest"
	"github.com/gavel-slurm/gavel-slurm/internal/slurmtest"
)

// withoutRESTRequeue are the API versions whose slurmrestd cannot
// requeue: a client restricted to them requeues with scontrol, on any
// Slurm release.
var withoutRESTRequeue = []string{"v0.0.44", "v0.0.43", "v0.0.42"}

// requeueClient is the daemon's slurmrestd client with its requeue path
// set by the test: the scontrol it runs, and the API versions it may use.
func requeueClient(t testing.TB, env *slurmtest.Env, url, scontrol string, versions []string, partitions ...string) *rest.Client {
	t.Helper()
	c, err := rest.New(rest.Config{URL: url, UserName: env.UserName, TokenFile: os.Getenv("SLURM_JWT_FILE"),
		Partitions: partitions, Scontrol: scontrol, Versions: versions, HTTPClient: SlurmHTTPClient()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// servesRESTRequeue reports whether the local slurmrestd offers v0.0.45,
// the first API version with requeue (Slurm 26.05).
func servesRESTRequeue(t *testing.T, env *slurmtest.Env) bool {
	t.Helper()
	c := requeueClient(t, env, env.URL, env.ScontrolPath, nil)
	v, err := c.APIVersion(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return v == "v0.0.45"
}

// deniedScontrol writes a scontrol wrapper that answers every requeue as
// slurmctld answers a user without operator rights, and hands every other
// command to the real scontrol. While the file named by switchPath holds
// "ok", requeues go through as well.
func deniedScontrol(t *testing.T, env *slurmtest.Env) (path, switchPath string) {
	t.Helper()
	dir := t.TempDir()
	path, switchPath = filepath.Join(dir, "scontrol"), filepath.Join(dir, "requeue-allowed")
	script := fmt.Sprintf(`#!/bin/sh
case "$1" in
requeue|requeuehold)
  if [ "$(cat %[1]q 2>/dev/null)" != ok ]; then
    echo "Access/permission denied for job $2" >&2
    exit 1
  fi ;;
esac
exec %[2]q "$@"
`, switchPath, env.ScontrolPath)
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path, switchPath
}

// twoBigJobs submits two checkpointing jobs that each need the whole of a
// 4-GPU node, so that time-sharing the node means preempting one.
func twoBigJobs(t *testing.T, env *slurmtest.Env, part, prefix string) (first, second int) {
	t.Helper()
	submit := func() int {
		return submitHeld(t, env, checkpointScript(env, prefix, 1_000_000), "--partition="+part, "--gres=gpu:4",
			"--output=/dev/null", "--comment=gavel: model=resnet50-bs64 steps=100000000 preempt=checkpoint")
	}
	return submit(), submit()
}

// signalsSent counts the grace signals a daemon handed to Slurm.
func signalsSent(p *inProcess) map[int]int {
	p.slurm.mu.Lock()
	defer p.slurm.mu.Unlock()
	out := map[int]int{}
	for _, a := range p.slurm.sent {
		if a.Kind == bridge.ActSignal {
			out[int(a.Job)]++
		}
	}
	return out
}

// rounds runs n rounds of the daemon, period apart, with the looks
// between rounds a grace period needs.
func (p *inProcess) rounds(n int, period time.Duration) {
	for range n {
		p.d.RunRound(context.Background())
		for range int(period / time.Second) {
			time.Sleep(time.Second)
			p.d.RunGraces(context.Background())
		}
	}
}

// A daemon whose requeues cannot work signals no job: two jobs that would
// time-share a node are never preempted, none is lost, and status and
// /healthz say why.
func TestNoJobIsSignalledWhenRequeuesCannotWork(t *testing.T) {
	env := slurmtest.FromEnv(t)
	denied, _ := deniedScontrol(t, env)
	tests := map[string]struct {
		scontrol  string
		versions  []string
		filter404 bool // slurmrestd without the requeue endpoint
		only45    bool
		wantWords string
	}{
		"scontrol missing":         {scontrol: "/nonexistent/bin/scontrol", versions: withoutRESTRequeue, wantWords: "/nonexistent/bin/scontrol"},
		"scontrol access denied":   {scontrol: denied, versions: withoutRESTRequeue, wantWords: "denied"},
		"no REST requeue endpoint": {scontrol: "/nonexistent/bin/scontrol", filter404: true, only45: true, wantWords: "404"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if tc.only45 && !servesRESTRequeue(t, env) {
				t.Skip("this slurmrestd has no requeue endpoint to take away (Slurm before 26.05)")
			}
			part := ownPartition(t, env, "k80-1")
			first, second := twoBigJobs(t, env, part, "norequeue")
			server := env.URL
			if tc.filter404 {
				target, err := url.Parse(env.URL)
				if err != nil {
					t.Fatal(err)
				}
				proxy := httputil.NewSingleHostReverseProxy(target)
				filtered := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if strings.Contains(r.URL.Path, "/requeue") {
						http.Error(w, "Unable to find requested URL", http.StatusNotFound)
						return
					}
					proxy.ServeHTTP(w, r)
				}))
				defer filtered.Close()
				server = filtered.URL
			}
			set := Settings{Policy: "max_min_fairness_perf", AdoptAdminHolds: true, Partitions: []string{part}, Round: 3 * time.Second,
				DefaultGrace: 2 * time.Second, GraceSignal: "USR1", DefaultPreempt: bridge.PreemptCheckpoint}
			p := newInProcess(t, requeueClient(t, env, server, tc.scontrol, tc.versions, part), set)
			p.rounds(6, 3*time.Second)

			if sig := signalsSent(p); len(sig) > 0 {
				t.Errorf("grace signals sent although requeues cannot work: %v", sig)
			}
			running := 0
			for _, id := range []int{first, second} {
				j := env.Job(t, id)
				if !j.HasState("RUNNING") && !j.HasState("PENDING") {
					t.Errorf("job %d is %v: lost", id, j.State)
				}
				if j.RestartCount != 0 {
					t.Errorf("job %d was requeued %d times", id, j.RestartCount)
				}
				if j.HasState("RUNNING") {
					running++
				}
			}
			if running != 1 {
				t.Errorf("%d of the two jobs run; want one (pending jobs are still scheduled)", running)
			}
			pre := p.board.Status().Preemption
			if pre.Enabled || !pre.Failing || !strings.Contains(pre.Reason, tc.wantWords) {
				t.Errorf("status preemption %+v; want off and failing, saying %q", pre, tc.wantWords)
			}
			if err := p.board.Health(); err == nil || !strings.Contains(err.Error(), tc.wantWords) {
				t.Errorf("healthz error %v; want it to say %q", err, tc.wantWords)
			}
		})
	}
}

// Requeues start failing in the middle of a run (the operator account is
// removed): the job already signalled is retried and listed in status,
// no new grace signal goes out, and a reload with the path fixed (a new
// daemon over the same state, as SIGHUP builds) requeues it.
func TestRequeueFailingMidRunStopsPreemptionAndAReloadRequeues(t *testing.T) {
	env := slurmtest.FromEnv(t)
	scontrol, allow := deniedScontrol(t, env)
	if err := os.WriteFile(allow, []byte("ok"), 0o644); err != nil {
		t.Fatal(err)
	}
	part := ownPartition(t, env, "k80-2")
	first, second := twoBigJobs(t, env, part, "midrun")
	set := Settings{Policy: "max_min_fairness_perf", AdoptAdminHolds: true, Partitions: []string{part}, Round: 3 * time.Second,
		DefaultGrace: 4 * time.Second, GraceSignal: "USR1", DefaultPreempt: bridge.PreemptCheckpoint}
	client := requeueClient(t, env, env.URL, scontrol, withoutRESTRequeue, part)
	p := newInProcess(t, client, set)

	// Rounds until one job is signalled; then requeues start failing,
	// before its grace period ends.
	var victim int
	for range 10 {
		p.d.RunRound(context.Background())
		for id := range signalsSent(p) {
			victim = id
		}
		if victim != 0 {
			break
		}
		time.Sleep(3 * time.Second)
	}
	if victim == 0 {
		t.Fatal("no job was preempted while requeues worked; the test needs one")
	}
	if err := os.WriteFile(allow, []byte("denied"), 0o644); err != nil {
		t.Fatal(err)
	}
	p.rounds(5, 3*time.Second)

	pre := p.board.Status().Preemption
	if pre.Enabled || !pre.Failing || len(pre.Waiting) != 1 || pre.Waiting[0].JobID != itoa(victim) ||
		!strings.Contains(pre.Waiting[0].Error, "denied") {
		t.Fatalf("after the requeue failed: preemption %+v; want off, failing, job %d waiting with the error", pre, victim)
	}
	if sig := signalsSent(p); len(sig) != 1 || sig[victim] != 1 {
		t.Errorf("signals %v after requeues started failing; want only the one grace signal to job %d", sig, victim)
	}
	if j := env.Job(t, victim); !j.HasState("RUNNING") || j.RestartCount != 0 {
		t.Fatalf("job %d while its requeue fails: %v, %d restarts; want still running (its script waits)", victim, j.State, j.RestartCount)
	}

	// The admin restores the operator account and reloads.
	if err := os.WriteFile(allow, []byte("ok"), 0o644); err != nil {
		t.Fatal(err)
	}
	reloaded := newInProcessOn(t, client, set, p.store)
	reloaded.rounds(2, 3*time.Second)
	env.WaitFor(t, victim, "requeued", 30*time.Second, func(j slurmtest.Job) bool { return j.RestartCount == 1 })
	if pre := reloaded.board.Status().Preemption; !pre.Enabled || pre.Failing {
		t.Errorf("after the reload fixed the path: preemption %+v; want on", pre)
	}
	for _, id := range []int{first, second} {
		if j := env.Job(t, id); !j.HasState("RUNNING") && !j.HasState("PENDING") {
			t.Errorf("job %d is %v: lost", id, j.State)
		}
	}
}
