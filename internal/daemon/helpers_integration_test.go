//go:build integration

package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/bridge/rest"
	"github.com/gavel-slurm/gavel-slurm/internal/api"
	"github.com/gavel-slurm/gavel-slurm/internal/sched"
	"github.com/gavel-slurm/gavel-slurm/internal/slurmtest"
	"github.com/gavel-slurm/gavel-slurm/internal/store"
	"github.com/gavel-slurm/gavel-slurm/internal/throughputs"
)

// ownPartition creates a partition over the given nodes for one test, so
// that the daemon under test schedules only that test's jobs; other tests
// may still run jobs on the same nodes through the shared partition, which
// the daemon sees as GPUs in use. It is deleted when the test ends, after
// the test's jobs are cancelled.
func ownPartition(t testing.TB, env *slurmtest.Env, nodes ...string) string {
	t.Helper()
	name := fmt.Sprintf("gt%d%d", os.Getpid()%100000, time.Now().UnixNano()%1000)
	env.Scontrol(t, "create", "PartitionName="+name, "Nodes="+strings.Join(nodes, ","), "MaxTime=INFINITE", "State=UP")
	t.Cleanup(func() {
		env.CancelAll(t)
		// A daemon's lease job stays after it stops (the lease outlives a
		// restart); the test's goes with its partition.
		_, _ = runQuiet(env.ScancelPath, "--partition="+name, "--name="+rest.LeaseJobName)
		// The partition can only go once its jobs are gone.
		deadline := time.Now().Add(30 * time.Second)
		for {
			out, err := runQuiet(env.ScontrolPath, "delete", "PartitionName="+name)
			if err != nil && strings.Contains(out, "Invalid partition name") {
				return // already gone (slurmctld restarted)
			}
			if err == nil || time.Now().After(deadline) {
				if err != nil {
					t.Logf("partition %s left behind: %v: %s", name, err, out)
				}
				return
			}
			time.Sleep(500 * time.Millisecond)
		}
	})
	return name
}

// restClient is the daemon's slurmrestd client for the given partitions,
// at url (the local slurmrestd unless a test puts a proxy in between).
func restClient(t testing.TB, env *slurmtest.Env, url string, partitions ...string) *rest.Client {
	t.Helper()
	c, err := rest.New(rest.Config{URL: url, UserName: env.UserName, TokenFile: os.Getenv("SLURM_JWT_FILE"),
		Partitions: partitions, Scontrol: env.ScontrolPath, HTTPClient: SlurmHTTPClient()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// countingSlurm counts the actions handed to Slurm.
type countingSlurm struct {
	bridge.Slurm
	mu    sync.Mutex
	sent  []bridge.Action
	calls int
}

func (c *countingSlurm) Apply(ctx context.Context, a bridge.Action) error {
	c.mu.Lock()
	c.sent = append(c.sent, a)
	c.calls++
	c.mu.Unlock()
	return c.Slurm.Apply(ctx, a)
}

// ApplyBatch counts the batch's actions and hands them on as one batch when
// the wrapped Slurm takes batches, one by one otherwise.
func (c *countingSlurm) ApplyBatch(ctx context.Context, actions []bridge.Action) []error {
	c.mu.Lock()
	c.sent = append(c.sent, actions...)
	c.calls += len(actions)
	c.mu.Unlock()
	if b, ok := c.Slurm.(bridge.BatchActuator); ok {
		return b.ApplyBatch(ctx, actions)
	}
	errs := make([]error, len(actions))
	for i, a := range actions {
		errs[i] = c.Slurm.Apply(ctx, a)
	}
	return errs
}

// CheckRequeue and RequeuePath hand the daemon's checks of its requeue
// path to the wrapped Slurm: without them the daemon would take the
// wrapper for a bridge that cannot check, and trust it.
func (c *countingSlurm) CheckRequeue(ctx context.Context, snap *bridge.Snapshot) error {
	if rc, ok := c.Slurm.(bridge.RequeueChecker); ok {
		return rc.CheckRequeue(ctx, snap)
	}
	return nil
}

func (c *countingSlurm) RequeuePath() string {
	if rc, ok := c.Slurm.(bridge.RequeueChecker); ok {
		return rc.RequeuePath()
	}
	return "unchecked"
}

func (c *countingSlurm) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}

// inProcess is a daemon run inside the test.
type inProcess struct {
	d     *Daemon
	store *store.Store
	board *api.Board
	slurm *countingSlurm
}

func newInProcess(t testing.TB, slurm bridge.Slurm, set Settings) *inProcess {
	t.Helper()
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return newInProcessOn(t, slurm, set, st)
}

// newInProcessOn is a daemon over an existing store: a reload or a
// restart of the daemon that ran on it.
func newInProcessOn(t testing.TB, slurm bridge.Slurm, set Settings, st *store.Store) *inProcess {
	t.Helper()
	table, err := throughputs.Reference()
	if err != nil {
		t.Fatal(err)
	}
	core, err := NewCore(set, sched.TableEstimator{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	p := &inProcess{store: st, board: &api.Board{}, slurm: &countingSlurm{Slurm: slurm}}
	p.d, err = New(Deps{Core: core, Slurm: p.slurm, Store: st, Board: p.board, Log: zerolog.New(io.Discard), Clock: SystemClock{}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// submitHeld submits a job that Slurm must not start before the daemon's
// first round decides about it: held by an administrator (`scontrol
// hold`, as a daemon that lost its state would have left it), for a
// daemon run with Settings.AdoptAdminHolds (or --adopt-admin-holds) to
// take over in its first round. (A begin time in the future would stop
// Slurm too, but the daemon honours its owner's begin times.)
func submitHeld(t *testing.T, env *slurmtest.Env, script string, args ...string) int {
	t.Helper()
	id := env.Submit(t, script, append(args, "--hold")...)
	env.Scontrol(t, "hold", itoa(id))
	return id
}

// run runs the daemon's loop for d and waits for it to stop.
func (p *inProcess) run(t *testing.T, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if err := p.d.Run(ctx); err != nil {
		t.Fatal(err)
	}
}

// checkpointScript is a training job stand-in: it counts steps (one every
// 0.2 s, each logged), on the grace signal saves its count to the shared
// folder and waits for the requeue, and on every start resumes from the
// saved count. It ends after total steps.
func checkpointScript(env *slurmtest.Env, prefix string, total int) string {
	dir := env.SharedDirInJob
	return fmt.Sprintf(`#!/bin/bash
ckpt=%[1]s/%[2]s-$SLURM_JOB_ID.ckpt
log=%[1]s/%[2]s-$SLURM_JOB_ID.log
step=0
[ -f "$ckpt" ] && step=$(cat "$ckpt")
echo "start $step restarts=${SLURM_RESTART_COUNT:-0}" >>"$log"
stop=0
trap 'stop=1' USR1
while [ $stop -eq 0 ] && [ $step -lt %[3]d ]; do
  sleep 0.2
  step=$((step+1))
  echo "step $step" >>"$log"
done
echo $step >"$ckpt.tmp" && mv "$ckpt.tmp" "$ckpt"
if [ $step -ge %[3]d ]; then echo "done $step" >>"$log"; exit 0; fi
echo "saved $step" >>"$log"
while true; do sleep 1; done
`, dir, prefix, total)
}

func runQuiet(command string, args ...string) (string, error) {
	out, err := exec.Command(command, args...).CombinedOutput()
	return string(out), err
}

func itoa(id int) string { return fmt.Sprint(id) }

func sum(m map[string]float64) float64 {
	s := 0.0
	for _, v := range m {
		s += v
	}
	return s
}

func findJob(t *testing.T, st api.Status, id int) api.JobStatus {
	t.Helper()
	for _, j := range st.Jobs {
		if j.JobID == itoa(id) {
			return j
		}
	}
	t.Fatalf("job %d not in the daemon's status", id)
	return api.JobStatus{}
}

// postJSON POSTs body to slurmrestd and decodes the reply into out,
// failing on errors[] as well as on HTTP errors.
func postJSON(env *slurmtest.Env, path string, body, out any) error {
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequest(http.MethodPost, env.URL+path, bytes.NewReader(data))
	if err != nil {
		return err
	}
	req.Header = env.AuthHeader()
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("POST %s: %w", path, err)
	}
	defer resp.Body.Close()
	reply, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("POST %s: %w", path, err)
	}
	var envelope struct {
		Errors []slurmtest.RESTError `json:"errors"`
	}
	_ = json.Unmarshal(reply, &envelope)
	if resp.StatusCode/100 != 2 || len(envelope.Errors) > 0 {
		return fmt.Errorf("POST %s: HTTP %d: %.300s", path, resp.StatusCode, reply)
	}
	return json.Unmarshal(reply, out)
}

// idleWatch measures the longest stretch of looks in a row that saw GPUs
// idle while a job waited.
type idleWatch struct {
	since   time.Time
	longest time.Duration
}

// look records one look: idle says whether GPUs sat idle while a job
// waited.
func (w *idleWatch) look(idle bool) {
	if !idle {
		w.since = time.Time{}
		return
	}
	if w.since.IsZero() {
		w.since = time.Now()
	}
	w.longest = max(w.longest, time.Since(w.since))
}

// busyGPUs is the GPUs in use on snap's nodes.
func busyGPUs(snap *bridge.Snapshot) int {
	busy := 0
	for _, n := range snap.Nodes {
		busy += n.GPUsUsed
	}
	return busy
}
