package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/bridge/fake"
	"github.com/gavel-slurm/gavel-slurm/internal/api"
	"github.com/gavel-slurm/gavel-slurm/internal/sched"
	"github.com/gavel-slurm/gavel-slurm/internal/store"
	"github.com/gavel-slurm/gavel-slurm/internal/throughputs"
	"github.com/gavel-slurm/gavel-slurm/rounds"
)

var epoch = time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)

// fakeClock advances only when told to; After fires at once and moves the
// clock forward, so Run loops without sleeping.
type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time { return c.now }
func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.now = c.now.Add(d)
	ch := make(chan time.Time, 1)
	ch <- c.now
	return ch
}

type harness struct {
	t      *testing.T
	clock  *fakeClock
	slurm  *fake.Slurm
	store  *store.Store
	board  *api.Board
	reg    *prometheus.Registry
	d      *Daemon
	dryRun bool
	// set is the core's settings, settings() unless a test changes them
	// (newHarnessWith).
	set Settings
	// checker, when set, makes the daemon's Slurm a bridge.RequeueChecker
	// that answers with it (requeuegate_test.go); without it the fake
	// cannot check and is trusted.
	checker *fakeChecker
}

func settings() Settings {
	return Settings{
		Policy: "max_min_fairness_perf", Partitions: []string{"gpu"}, Round: 20 * time.Second,
		DefaultGrace: 5 * time.Second, GraceSignal: "USR1", DefaultPreempt: bridge.PreemptCheckpoint,
	}
}

// newHarness builds a daemon over a fake Slurm with the given GPU nodes
// ("name:type:count").
func newHarness(t *testing.T, dir string, nodes ...string) *harness {
	t.Helper()
	return newHarnessWith(t, settings(), dir, nodes...)
}

// newHarnessWith is newHarness with the core's settings given.
func newHarnessWith(t *testing.T, set Settings, dir string, nodes ...string) *harness {
	t.Helper()
	h := &harness{t: t, clock: &fakeClock{now: epoch}, set: set}
	h.slurm = fake.New(func() time.Time { return h.clock.now })
	for _, n := range nodes {
		parts := strings.Split(n, ":")
		count := map[string]int{"1": 1, "2": 2, "4": 4}[parts[2]]
		h.slurm.AddNode(bridge.Node{Name: parts[0], GPUType: parts[1], GPUs: count, Partitions: []string{"gpu"}})
	}
	var err error
	if h.store, err = store.Open(dir); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.store.Close() })
	h.restart()
	return h
}

// restart builds a fresh core and daemon over the same store and Slurm, as
// a daemon restart would.
func (h *harness) restart() {
	h.t.Helper()
	table, err := throughputs.Reference()
	if err != nil {
		h.t.Fatal(err)
	}
	core, err := NewCore(h.set, sched.TableEstimator{Table: table})
	if err != nil {
		h.t.Fatal(err)
	}
	h.board = &api.Board{}
	h.reg = prometheus.NewRegistry()
	var slurm bridge.Slurm = h.slurm
	if h.checker != nil {
		slurm = checkingSlurm{h.slurm, h.checker}
	}
	h.d, err = New(Deps{Core: core, Slurm: slurm, Store: h.store, Board: h.board,
		Metrics: api.NewMetrics(h.reg), Log: zerolog.New(io.Discard), Clock: h.clock, DryRun: h.dryRun})
	if err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) submit(comment string, gpus int) bridge.JobID {
	return h.slurm.Submit(bridge.Job{User: "ana", Partition: "gpu", GPUs: gpus, Comment: comment})
}

func (h *harness) job(id bridge.JobID) bridge.Job {
	h.t.Helper()
	snap, err := h.slurm.Snapshot(context.Background())
	if err != nil {
		h.t.Fatal(err)
	}
	j, ok := snap.Job(id)
	if !ok {
		h.t.Fatalf("job %d missing", id)
	}
	return j
}

// startChosen starts every released pending job on a free node of the type
// its typed request or its constraint names, as slurmctld would.
func (h *harness) startChosen() {
	h.t.Helper()
	snap, _ := h.slurm.Snapshot(context.Background())
	for _, j := range snap.Jobs {
		if j.State != bridge.JobPending || j.Held || (j.Constraints == "" && j.RequestedGPUType == "") {
			continue
		}
		s, _ := h.slurm.Snapshot(context.Background())
		isType := func(t string) bool {
			return slices.ContainsFunc(s.Nodes, func(n bridge.Node) bool { return n.GPUType == t })
		}
		for _, n := range s.Nodes {
			want := j.RequestedGPUType
			if want == "" {
				want = sched.ConstraintType(j.Constraints, isType)
			}
			if n.GPUType == want && n.GPUs-n.GPUsUsed >= j.GPUs {
				if err := h.slurm.Start(j.ID, n.Name); err != nil {
					h.t.Fatal(err)
				}
				break
			}
		}
	}
}

// preemptFirst submits two one-GPU jobs to a one-GPU cluster and runs
// two rounds: the first job starts, then is preempted for the second (its
// grace signal sent, the requeue still to come).
func (h *harness) preemptFirst() (first, second bridge.JobID) {
	h.t.Helper()
	first, second = h.submit(resnet, 1), h.submit(resnet, 1)
	h.d.RunRound(context.Background())
	h.startChosen()
	h.clock.now = h.clock.now.Add(20 * time.Second)
	h.d.RunRound(context.Background())
	if sig := h.slurm.Signals(first); len(sig) != 1 {
		h.t.Fatalf("signals %v, want the grace signal that preempts the first job", sig)
	}
	return first, second
}

func kinds(actions []bridge.Action, job bridge.JobID) []string {
	var out []string
	for _, a := range actions {
		if a.Job == job {
			out = append(out, string(a.Kind))
		}
	}
	return out
}

const resnet = "gavel: model=resnet50-bs64 steps=100k"

func TestFirstRoundChoosesTypesAndHoldsTheRest(t *testing.T) {
	h := newHarness(t, t.TempDir(), "a1:v100:2", "b1:k80:2")
	var managed []bridge.JobID
	for range 5 {
		managed = append(managed, h.submit(resnet, 1))
	}
	untagged := h.submit("plain job", 1)
	badTag := h.submit("gavel: weight=lots", 1)

	rep := h.d.RunRound(context.Background())
	if rep.Skipped != "" || rep.Managed != 5 || rep.Jobs != 7 {
		t.Fatalf("report %+v", rep)
	}
	applied := h.slurm.Applied()
	perType := map[string]int{}
	held := 0
	for _, id := range managed {
		j := h.job(id)
		switch {
		case j.Held:
			held++
			if got := kinds(applied, id); strings.Join(got, ",") != "hold" {
				t.Errorf("held job %d got %v", id, got)
			}
		default:
			perType[j.Constraints]++
			if j.Priority != RunPriority {
				t.Errorf("chosen job %d has priority %d", id, j.Priority)
			}
		}
	}
	if perType["v100"] != 2 || perType["k80"] != 2 || held != 1 {
		t.Errorf("chosen per type %v, held %d; want 2 v100, 2 k80, 1 held", perType, held)
	}
	for _, id := range []bridge.JobID{untagged, badTag} {
		if got := kinds(applied, id); len(got) != 0 {
			t.Errorf("unmanaged job %d was touched: %v", id, got)
		}
	}
	st := h.board.Status()
	reasons := map[string]string{}
	for _, j := range st.Jobs {
		reasons[j.JobID] = j.Reason
		if j.JobID == managed[0].String() && (j.Model != "ResNet-50 (batch size 64)" || !strings.HasPrefix(j.ThroughputSource, "reference table")) {
			t.Errorf("managed job status %+v", j)
		}
	}
	if !strings.Contains(reasons[untagged.String()], "no gavel: tag") {
		t.Errorf("untagged reason %q", reasons[untagged.String()])
	}
	if !strings.Contains(reasons[badTag.String()], "weight") {
		t.Errorf("bad tag reason %q does not name the key", reasons[badTag.String()])
	}
	if len(h.board.Allocation().Rows) != 5 {
		t.Errorf("allocation rows %v", h.board.Allocation().Rows)
	}

	// Nothing changed in Slurm: the next round has nothing to send.
	before := len(h.slurm.Applied())
	h.clock.now = h.clock.now.Add(20 * time.Second)
	if rep := h.d.RunRound(context.Background()); rep.Actions != 0 {
		t.Errorf("second round sent %d actions (%v) although Slurm already matched",
			rep.Actions, h.slurm.Applied()[before:])
	}
}

func TestPreemptionSignalsThenRequeuesAfterGrace(t *testing.T) {
	h := newHarness(t, t.TempDir(), "a1:v100:1")
	first := h.submit(resnet, 1)
	second := h.submit(resnet, 1)

	h.d.RunRound(context.Background())
	if h.job(first).Held || !h.job(second).Held {
		t.Fatalf("round 1 should run the first job and hold the second")
	}
	h.startChosen()
	if h.job(first).State != bridge.JobRunning {
		t.Fatal("first job did not start")
	}

	// After a round of service the waiting job has the higher priority.
	h.clock.now = h.clock.now.Add(20 * time.Second)
	n := len(h.slurm.Applied())
	h.d.RunRound(context.Background())
	round2 := h.slurm.Applied()[n:]
	if got := kinds(round2, first); strings.Join(got, ",") != "signal" {
		t.Fatalf("preempted job got %v, want only the grace signal", got)
	}
	if sig := h.slurm.Signals(first); len(sig) != 1 || sig[0] != "USR1" {
		t.Errorf("signals %v", sig)
	}
	if got := kinds(round2, second); strings.Join(got, ",") != "set-constraints,release,set-priority" {
		t.Errorf("chosen job got %v", got)
	}
	if want := h.clock.now.Add(5 * time.Second); !h.d.Core.NextGraceEnd(h.clock.now).Equal(want) {
		t.Errorf("grace ends %v, want %v", h.d.Core.NextGraceEnd(h.clock.now), want)
	}

	// Before the grace period ends nothing happens.
	h.clock.now = h.clock.now.Add(2 * time.Second)
	n = len(h.slurm.Applied())
	h.d.RunGraces(context.Background())
	if len(h.slurm.Applied()) != n {
		t.Fatalf("requeued before the grace period ended")
	}
	h.clock.now = h.clock.now.Add(3 * time.Second)
	h.d.RunGraces(context.Background())
	if got := kinds(h.slurm.Applied()[n:], first); strings.Join(got, ",") != "requeue-hold,hold,begin-now" {
		t.Errorf("after grace: %v", got)
	}
	j := h.job(first)
	if j.State != bridge.JobPending || !j.Held || j.Restarts != 1 {
		t.Errorf("preempted job after requeue: %+v", j)
	}
	// A second check does not requeue again.
	n = len(h.slurm.Applied())
	h.d.RunGraces(context.Background())
	if len(h.slurm.Applied()) != n {
		t.Error("requeue repeated")
	}
	h.startChosen()
	if h.job(second).State != bridge.JobRunning {
		t.Error("the chosen job could not start on the freed GPU")
	}
	st := h.board.Status()
	for _, js := range st.Jobs {
		if js.JobID == first.String() && !strings.HasPrefix(js.Reason, "preempted") {
			t.Errorf("preempted job reason %q", js.Reason)
		}
	}
	if js := st.Jobs[0]; js.Received["v100"] != 20 {
		t.Errorf("first job received %v, want 20 s on v100", js.Received)
	}
}

func TestUntrustedViewsSendNothing(t *testing.T) {
	tests := map[string]struct {
		setup     func(h *harness, jobs []bridge.JobID)
		wantCause string
	}{
		"snapshot fails": {
			setup:     func(h *harness, _ []bridge.JobID) { h.slurm.FailSnapshot(errors.New("slurmrestd: 502")) },
			wantCause: "snapshot failed",
		},
		"no GPU nodes": {
			setup: func(h *harness, _ []bridge.JobID) {
				h.slurm.AddNode(bridge.Node{Name: "a1", GPUType: "v100", GPUs: 2, Partitions: []string{"gpu"}, State: []string{"DOWN"}})
				h.slurm.AddNode(bridge.Node{Name: "b1", GPUType: "k80", GPUs: 2, Partitions: []string{"gpu"}, State: []string{"DOWN"}})
			},
			wantCause: "no usable GPU node",
		},
		"answers that lose different managed jobs each time": {
			setup: func(h *harness, jobs []bridge.JobID) {
				h.slurm.HideJobs(func(read int) []bridge.JobID { return jobs[read%2 : read%2+4] })
			},
			wantCause: "4 of 5 managed jobs vanished",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, t.TempDir(), "a1:v100:2", "b1:k80:2")
			var jobs []bridge.JobID
			for range 5 {
				jobs = append(jobs, h.submit(resnet, 1))
			}
			h.d.RunRound(context.Background())
			tc.setup(h, jobs)
			n := len(h.slurm.Applied())
			for range unhealthyAfter {
				h.clock.now = h.clock.now.Add(20 * time.Second)
				rep := h.d.RunRound(context.Background())
				if !strings.Contains(rep.Skipped, tc.wantCause) {
					t.Fatalf("skipped = %q, want %q", rep.Skipped, tc.wantCause)
				}
			}
			if len(h.slurm.Applied()) != n {
				t.Errorf("actions sent on an untrusted view: %v", h.slurm.Applied()[n:])
			}
			if st := h.board.Status(); !strings.Contains(st.Round.Skipped, tc.wantCause) {
				t.Errorf("status does not say why: %q", st.Round.Skipped)
			}
			if h.board.Health() == nil {
				t.Error("healthy after three unusable rounds")
			}
		})
	}
}

// Jobs that really left Slurm (finished and forgotten after MinJobAge, or
// cancelled by their owner) are missing from every read: the daemon takes
// them as gone instead of skipping every later round.
func TestJobsThatReallyVanishDoNotStallTheDaemon(t *testing.T) {
	tests := map[string]func(h *harness, jobs []bridge.JobID){
		"forgotten by Slurm": func(h *harness, jobs []bridge.JobID) {
			for _, id := range jobs[:4] {
				h.slurm.Remove(id)
			}
		},
		// One broken answer, then good ones: the re-read is used.
		"one partial answer": func(h *harness, jobs []bridge.JobID) {
			h.slurm.HideJobs(func(read int) []bridge.JobID {
				if read == 0 {
					return jobs[:4]
				}
				return nil
			})
		},
	}
	for name, setup := range tests {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, t.TempDir(), "a1:v100:2", "b1:k80:2")
			var jobs []bridge.JobID
			for range 5 {
				jobs = append(jobs, h.submit(resnet, 1))
			}
			h.d.RunRound(context.Background())
			h.startChosen()
			setup(h, jobs)
			for round := range 3 {
				h.clock.now = h.clock.now.Add(20 * time.Second)
				if rep := h.d.RunRound(context.Background()); rep.Skipped != "" {
					t.Fatalf("round %d skipped: %s", round, rep.Skipped)
				}
			}
			if h.board.Health() != nil {
				t.Errorf("unhealthy: %v", h.board.Health())
			}
			// The restart must not bring the stall back.
			h.restart()
			h.clock.now = h.clock.now.Add(20 * time.Second)
			if rep := h.d.RunRound(context.Background()); rep.Skipped != "" {
				t.Errorf("round after a restart skipped: %s", rep.Skipped)
			}
		})
	}
}

func TestFailedActionStopsTheJobsLaterActions(t *testing.T) {
	t.Run("updates sharing the failed request", func(t *testing.T) {
		h := newHarness(t, t.TempDir(), "a1:v100:1")
		id := h.submit(resnet, 1)
		h.slurm.FailActions(fake.FailKind(bridge.ActSetConstraints, errors.New("invalid feature specification")))
		rep := h.d.RunRound(context.Background())
		// The constraint and the priority go to Slurm as one update: both
		// fail with it.
		if rep.Actions != 2 || rep.Failed != 2 {
			t.Fatalf("report %+v", rep)
		}
		if got := kinds(h.slurm.Applied(), id); len(got) != 0 {
			t.Errorf("actions after a failed constraint change: %v", got)
		}
		entries, _, _ := h.store.Recent(0)
		if len(entries) != 2 || entries[0].State != store.Failed || !strings.Contains(entries[0].Error, "invalid feature") ||
			entries[1].State != store.Failed || !strings.Contains(entries[1].Error, "invalid feature") {
			t.Errorf("journal %+v", entries)
		}
		// Healed: the next round retries from Slurm's state.
		h.slurm.FailActions(nil)
		h.clock.now = h.clock.now.Add(20 * time.Second)
		h.d.RunRound(context.Background())
		if h.job(id).Constraints != "v100" {
			t.Error("constraint not set after the failure healed")
		}
	})
	t.Run("later requests", func(t *testing.T) {
		h := newHarness(t, t.TempDir(), "a1:v100:1")
		first := h.submit(resnet, 1)
		second := h.submit(resnet, 1)
		h.d.RunRound(context.Background())
		h.startChosen()
		waiting := second
		if !h.job(second).Held {
			waiting = first
		}
		if !h.job(waiting).Held {
			t.Fatal("neither job held with one GPU for two")
		}
		for _, id := range []bridge.JobID{first, second} {
			if id != waiting {
				if err := h.slurm.Finish(id, bridge.JobCompleted); err != nil {
					t.Fatal(err)
				}
			}
		}
		before := len(h.slurm.Applied())
		h.slurm.FailActions(fake.FailKind(bridge.ActRelease, errors.New("access denied")))
		h.clock.now = h.clock.now.Add(20 * time.Second)
		h.d.RunRound(context.Background())
		if got := kinds(h.slurm.Applied()[before:], waiting); slices.Contains(got, string(bridge.ActSetPriority)) {
			t.Errorf("priority sent after a failed release: %v", got)
		}
		entries, _, _ := h.store.Recent(0)
		notSent := 0
		for _, e := range entries {
			if e.Kind == string(bridge.ActSetPriority) && e.State == store.Failed && strings.HasPrefix(e.Error, "not sent") {
				notSent++
			}
		}
		if notSent != 1 {
			t.Errorf("want the priority after the failed release marked not sent, journal %+v", entries)
		}
	})
}

func TestDryRunSendsAndJournalsNothing(t *testing.T) {
	h := newHarness(t, t.TempDir(), "a1:v100:1")
	h.dryRun = true
	h.restart()
	h.submit(resnet, 1)
	h.submit(resnet, 1)
	rep := h.d.RunRound(context.Background())
	if rep.Actions == 0 {
		t.Fatal("dry run decided nothing")
	}
	if len(h.slurm.Applied()) != 0 {
		t.Errorf("dry run applied %v", h.slurm.Applied())
	}
	if entries, _, _ := h.store.Recent(0); len(entries) != 0 {
		t.Errorf("dry run journaled %v", entries)
	}
	if !h.board.Status().Round.DryRun {
		t.Error("status does not say dry run")
	}
}

func TestRestartReconcilesPendingIntents(t *testing.T) {
	dir := t.TempDir()
	h := newHarness(t, dir, "a1:v100:2")
	held := h.submit(resnet, 1)
	notHeld := h.submit(resnet, 1)
	h.slurm.Apply(context.Background(), bridge.Action{Kind: bridge.ActHold, Job: held})

	// A crash left three intents: one whose effect Slurm shows, one that
	// never reached Slurm, and one already resent once.
	intent := func(a bridge.Action, attempts int) uint64 {
		e, err := h.store.Intent(4, a.Job.String(), string(a.Kind), Action{Action: a}, epoch)
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; i < attempts; i++ {
			h.store.MarkResent(e.Seq, epoch)
		}
		return e.Seq
	}
	visible := intent(bridge.Action{Kind: bridge.ActHold, Job: held}, 1)
	lost := intent(bridge.Action{Kind: bridge.ActSetConstraints, Job: notHeld, Constraints: "k80"}, 1)
	tried := intent(bridge.Action{Kind: bridge.ActSetConstraints, Job: held, Constraints: "k80"}, 2)

	h.restart()
	before := len(h.slurm.Applied())
	rep := h.d.RunRound(context.Background())
	if rep.Reconciled != 3 {
		t.Errorf("reconciled %d entries, want 3", rep.Reconciled)
	}
	entries, _, _ := h.store.Recent(0)
	state := map[uint64]store.Entry{}
	for _, e := range entries {
		state[e.Seq] = e
	}
	if state[visible].State != store.Done || state[visible].Attempts != 1 {
		t.Errorf("visible intent: %+v", state[visible])
	}
	if state[lost].State != store.Done || state[lost].Attempts != 2 {
		t.Errorf("lost intent not resent once: %+v", state[lost])
	}
	if state[tried].State != store.Failed {
		t.Errorf("intent resent before is not failed: %+v", state[tried])
	}
	resent := 0
	for _, a := range h.slurm.Applied()[before:] {
		if a.Kind == bridge.ActSetConstraints && a.Constraints == "k80" {
			resent++
		}
	}
	if resent != 1 {
		t.Errorf("k80 constraint sent %d times during reconciliation, want 1", resent)
	}
	if p, _, _ := h.store.Pending(); len(p) != 0 {
		t.Errorf("still pending: %+v", p)
	}
}

func TestReceivedTimeSurvivesRestart(t *testing.T) {
	h := newHarness(t, t.TempDir(), "a1:v100:1")
	id := h.submit(resnet, 1)
	h.d.RunRound(context.Background())
	h.startChosen()
	for range 3 {
		h.clock.now = h.clock.now.Add(20 * time.Second)
		h.d.RunRound(context.Background())
	}
	h.restart()
	h.clock.now = h.clock.now.Add(20 * time.Second)
	h.d.RunRound(context.Background())
	// The job ran throughout: 3 rounds before the restart and the 20 s
	// across it (within the two-round cap on unobserved service).
	st := h.board.Status()
	if len(st.Jobs) != 1 || st.Jobs[0].Received["v100"] != 80 {
		t.Fatalf("after restart: %+v", st.Jobs)
	}
	if st.Round.Number != 5 {
		t.Errorf("round counter %d after restart, want 5", st.Round.Number)
	}
	// A job that finishes is forgotten.
	h.slurm.Finish(id, bridge.JobCompleted)
	h.clock.now = h.clock.now.Add(20 * time.Second)
	h.d.RunRound(context.Background())
	if recs, _, _ := h.store.Jobs(); len(recs) != 0 {
		t.Errorf("finished job still stored: %v", recs)
	}
}

func TestRunLoopsUntilCancelled(t *testing.T) {
	h := newHarness(t, t.TempDir(), "a1:v100:1")
	h.submit(resnet, 1)
	ctx, cancel := context.WithCancel(context.Background())
	rounds := 0
	h.slurm.FailActions(func(bridge.Action) error { return nil })
	done := make(chan error)
	go func() { done <- h.d.Run(ctx) }()
	deadline := time.After(5 * time.Second)
	for rounds < 3 {
		select {
		case <-deadline:
			t.Fatal("Run made no progress")
		default:
		}
		rounds = int(h.board.Status().Round.Number)
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestReconcileVerdicts(t *testing.T) {
	jobs := []bridge.Job{
		{ID: 1, State: bridge.JobPending, Held: true, Priority: 0},
		{ID: 2, State: bridge.JobPending, Priority: RunPriority, Constraints: "v100"},
		{ID: 3, State: bridge.JobRunning, Restarts: 1},
		{ID: 4, State: bridge.JobPending, Restarts: 2, Reason: "BeginTime"},
		{ID: 5, State: bridge.JobCompleted},
		{ID: 6, State: bridge.JobPending, Nodes: 2, GPUs: 4, GPUsPerNode: 2, Constraints: "[k80*1&v100*1]"},
		{ID: 7, State: bridge.JobPending, ArrayJobID: 7, ArrayTasks: "2-7", ArrayLimit: 3},
	}
	snap, err := bridge.NewSnapshot(epoch, "", nil, jobs)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		action   bridge.Action
		restarts int
		attempts int
		want     Verdict
	}{
		{"hold shown", bridge.Action{Kind: bridge.ActHold, Job: 1}, 0, 1, VerdictDone},
		{"release not shown", bridge.Action{Kind: bridge.ActRelease, Job: 1}, 0, 1, VerdictResend},
		{"release not shown after resend", bridge.Action{Kind: bridge.ActRelease, Job: 1}, 0, 2, VerdictFail},
		{"priority shown", bridge.Action{Kind: bridge.ActSetPriority, Job: 2, Priority: RunPriority}, 0, 1, VerdictDone},
		{"constraints differ", bridge.Action{Kind: bridge.ActSetConstraints, Job: 2, Constraints: "k80"}, 0, 1, VerdictResend},
		// A signal may have been delivered before the crash: never twice.
		{"signal to running job", bridge.Action{Kind: bridge.ActSignal, Job: 3, Signal: "USR1"}, 1, 1, VerdictDone},
		{"requeue not landed", bridge.Action{Kind: bridge.ActRequeueHold, Job: 3}, 1, 1, VerdictResend},
		{"requeue landed", bridge.Action{Kind: bridge.ActRequeueHold, Job: 4}, 1, 1, VerdictDone},
		// A job that ended during its grace period is requeued too.
		{"requeue of a finished job not landed", bridge.Action{Kind: bridge.ActRequeueHold, Job: 5}, 0, 1, VerdictResend},
		{"begin-now not landed", bridge.Action{Kind: bridge.ActBeginNow, Job: 4}, 2, 1, VerdictResend},
		{"job finished", bridge.Action{Kind: bridge.ActRelease, Job: 5}, 0, 1, VerdictDone},
		{"job gone", bridge.Action{Kind: bridge.ActHold, Job: 99}, 0, 1, VerdictDone},
		// A mixed-type shape: shown when node count, GPUs and constraint match.
		{"shape shown", bridge.Action{Kind: bridge.ActSetShape, Job: 6, Nodes: 2, GPUsPerNode: 2, Constraints: "[k80*1&v100*1]"}, 0, 1, VerdictDone},
		{"shape not shown", bridge.Action{Kind: bridge.ActSetShape, Job: 6, Nodes: 1, GPUs: 4, Constraints: "v100"}, 0, 1, VerdictResend},
		{"shape of a running job", bridge.Action{Kind: bridge.ActSetShape, Job: 3, Nodes: 2, GPUsPerNode: 2, Constraints: "[k80*1&v100*1]"}, 1, 1, VerdictDone},
		// A job array's limit: shown when Slurm shows the same number.
		{"array limit shown", bridge.Action{Kind: bridge.ActSetArrayLimit, Job: 7, Tasks: 3}, 0, 1, VerdictDone},
		{"array limit not shown", bridge.Action{Kind: bridge.ActSetArrayLimit, Job: 7, Tasks: 5}, 0, 1, VerdictResend},
		{"array limit lifted, not shown", bridge.Action{Kind: bridge.ActSetArrayLimit, Job: 7, Tasks: 0}, 0, 1, VerdictResend},
	}
	// Each entry alone: entries of one job judge each other
	// (TestReconcileResendsWhatFollowsAResend).
	for i, tc := range tests {
		e := store.Entry{Seq: uint64(i + 1), Attempts: tc.attempts, State: store.Pending}
		e.Payload = mustJSON(t, Action{Action: tc.action, Restarts: tc.restarts})
		if got := Reconcile([]store.Entry{e}, snap); got[0].Verdict != tc.want {
			t.Errorf("%s: verdict %s (%s), want %s", tc.name, got[0].Verdict, got[0].Why, tc.want)
		}
	}
	if got := Reconcile([]store.Entry{{Seq: 100, Payload: []byte(`{"kind":`)}}, snap); got[0].Verdict != VerdictFail {
		t.Errorf("unreadable entry: %s", got[0].Verdict)
	}
}

// TestReconcileResendsWhatFollowsAResend: a crash before a requeue chain
// went out leaves a running job whose snapshot says nothing of what the
// resent requeue will make of it; the chain's later actions are resent
// after it, not judged "shown" because a running job is not held.
func TestReconcileResendsWhatFollowsAResend(t *testing.T) {
	snap, err := bridge.NewSnapshot(epoch, "", nil, []bridge.Job{
		{ID: 3, State: bridge.JobRunning, Restarts: 1, Priority: RunPriority},
		{ID: 4, State: bridge.JobRunning, Restarts: 2},
	})
	if err != nil {
		t.Fatal(err)
	}
	chain := []Action{
		{Action: bridge.Action{Kind: bridge.ActRequeueHold, Job: 3}, Restarts: 1},
		{Action: bridge.Action{Kind: bridge.ActRelease, Job: 3}, Restarts: 2},
		{Action: bridge.Action{Kind: bridge.ActSetPriority, Job: 3, Priority: RunPriority}, Restarts: 2},
		{Action: bridge.Action{Kind: bridge.ActBeginNow, Job: 3}, Restarts: 2},
		{Action: bridge.Action{Kind: bridge.ActSignal, Job: 3, Signal: "USR1"}, Restarts: 2},
		// Another job's release stays judged on what Slurm shows.
		{Action: bridge.Action{Kind: bridge.ActRelease, Job: 4}, Restarts: 2},
	}
	want := []Verdict{VerdictResend, VerdictResend, VerdictResend, VerdictResend, VerdictDone, VerdictDone}
	var pending []store.Entry
	for i, a := range chain {
		pending = append(pending, store.Entry{Seq: uint64(i + 1), Attempts: 1, State: store.Pending, Payload: mustJSON(t, a)})
	}
	for i, r := range Reconcile(pending, snap) {
		if r.Verdict != want[i] {
			t.Errorf("%s: verdict %s (%s), want %s", chain[i].Action.String(), r.Verdict, r.Why, want[i])
		}
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestHoldsOfUsersAndAdminsAreLeftAlone(t *testing.T) {
	h := newHarness(t, t.TempDir(), "a1:v100:2")
	userHeld := h.slurm.Submit(bridge.Job{User: "ana", Partition: "gpu", GPUs: 1, Comment: resnet, Held: true, Reason: "JobHeldUser"})
	adminHeld := h.slurm.Submit(bridge.Job{User: "ana", Partition: "gpu", GPUs: 1, Comment: resnet, Held: true, Reason: "JobHeldAdmin"})
	free := h.submit(resnet, 1)

	// Round 1: GPUs are free, yet the held jobs are neither released nor
	// given a type; only the free job is scheduled.
	h.d.RunRound(context.Background())
	applied := h.slurm.Applied()
	for _, id := range []bridge.JobID{userHeld, adminHeld} {
		if got := kinds(applied, id); len(got) != 0 {
			t.Errorf("held job %d got %v", id, got)
		}
		if j := h.job(id); !j.Held || j.Constraints != "" {
			t.Errorf("held job %d changed: %+v", id, j)
		}
	}
	if rows := h.board.Allocation().Rows; len(rows) != 1 || rows[free.String()] == nil {
		t.Errorf("allocation rows %v, want only the free job", rows)
	}
	want := map[string]string{userHeld.String(): "held by user", adminHeld.String(): "held by admin"}
	for _, js := range h.board.Status().Jobs {
		if w, ok := want[js.JobID]; ok && (js.Reason != w || !js.Managed) {
			t.Errorf("job %s: reason %q managed=%v, want %q", js.JobID, js.Reason, js.Managed, w)
		}
	}

	// Once the user releases it, the job is scheduled like any other.
	if err := h.slurm.Apply(context.Background(), bridge.Action{Kind: bridge.ActRelease, Job: userHeld}); err != nil {
		t.Fatal(err)
	}
	h.clock.now = h.clock.now.Add(20 * time.Second)
	h.d.RunRound(context.Background())
	if j := h.job(userHeld); j.Constraints != "v100" || j.Priority != RunPriority {
		t.Errorf("released job not scheduled: %+v", j)
	}
	if got := kinds(h.slurm.Applied(), adminHeld); len(got) != 0 {
		t.Errorf("admin-held job got %v", got)
	}
}

func TestDaemonHoldsAreReleasedEvenAfterACrashBeforePersisting(t *testing.T) {
	h := newHarness(t, t.TempDir(), "a1:v100:1")
	first := h.submit(resnet, 1)
	second := h.submit(resnet, 1)
	h.d.RunRound(context.Background())
	if !h.job(second).Held {
		t.Fatal("round 1 should hold the second job")
	}
	// The crash came after the hold was journaled and sent but before the
	// round's records were saved: the record does not know the hold.
	rec, ok := storedRecord(t, h.store, second.String())
	if !ok {
		t.Fatalf("no record of job %d", second)
	}
	rec.HeldByDaemon, rec.UpdatedAt = false, epoch.Add(-time.Minute)
	storeRecords(t, h.store, rec)
	h.restart()
	h.startChosen()
	// After a round of service for the first job, the second one is due;
	// the daemon must release its own hold.
	n := len(h.slurm.Applied())
	for range 3 {
		h.clock.now = h.clock.now.Add(20 * time.Second)
		h.d.RunRound(context.Background())
		for _, js := range h.board.Status().Jobs {
			if js.JobID == second.String() && strings.HasPrefix(js.Reason, "held by") {
				t.Fatalf("the daemon's own hold is taken for a user's: %q", js.Reason)
			}
		}
		h.startChosen()
	}
	if got := kinds(h.slurm.Applied()[n:], second); !strings.Contains(strings.Join(got, ","), "release") {
		t.Errorf("the daemon's own hold was not released: %v", got)
	}
	if got := kinds(h.slurm.Applied()[n:], first); !strings.Contains(strings.Join(got, ","), "signal") {
		t.Errorf("the first job was not preempted: %v", got)
	}
}

func TestGPUsHeldOutsideTheSnapshotAreNotPlanned(t *testing.T) {
	h := newHarness(t, t.TempDir(), "a1:v100:2")
	// A job of another partition holds one of a1's GPUs: the node counts
	// it in use although the snapshot does not list the job.
	h.slurm.AddNode(bridge.Node{Name: "a1", GPUType: "v100", GPUs: 2, GPUsUsed: 1, Partitions: []string{"gpu"}})
	var jobs []bridge.JobID
	for range 2 {
		jobs = append(jobs, h.submit(resnet, 1))
	}
	h.d.RunRound(context.Background())
	chosen := 0
	for _, id := range jobs {
		if j := h.job(id); !j.Held && j.Constraints == "v100" {
			chosen++
		}
	}
	if chosen != 1 {
		t.Errorf("%d jobs chosen for the one free GPU, want 1", chosen)
	}
}

func TestRoundMechanismStateSurvivesRestart(t *testing.T) {
	h := newHarness(t, t.TempDir(), "a1:v100:1", "b1:k80:1")
	var ids []string
	for range 3 {
		ids = append(ids, h.submit(resnet, 1).String())
	}
	for range 3 {
		h.d.RunRound(context.Background())
		h.startChosen()
		h.clock.now = h.clock.now.Add(20 * time.Second)
	}
	h.d.RunRound(context.Background())
	computed := h.board.Status().Round.AllocationComputed
	before := map[string]rounds.State{}
	for _, id := range ids {
		for _, typ := range []string{"v100", "k80"} {
			st, err := h.d.Core.MechanismState(id, typ)
			if err != nil {
				t.Fatal(err)
			}
			before[id+"/"+typ] = st
		}
	}

	// Restarted at the same instant: nothing to account, nothing changed
	// in Slurm, so the state must come back as it was, without a new
	// allocation.
	h.restart()
	h.d.RunRound(context.Background())
	for key, want := range before {
		id, typ, _ := strings.Cut(key, "/")
		got, err := h.d.Core.MechanismState(id, typ)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s on %s after restart: %+v, want %+v", id, typ, got, want)
		}
	}
	if st := h.board.Status(); !st.Round.AllocationComputed.Equal(computed) {
		t.Errorf("allocation recomputed at restart (%v, was %v)", st.Round.AllocationComputed, computed)
	}
	if len(h.board.Allocation().Rows) != 3 {
		t.Errorf("allocation not restored: %+v", h.board.Allocation())
	}
}

func TestGraceSignalIsNotRepeatedAfterACrashBeforePersisting(t *testing.T) {
	h := newHarness(t, t.TempDir(), "a1:v100:1")
	first, _ := h.preemptFirst()
	// The crash came after the signal was journaled and sent but before
	// the round's records were saved: the record knows no grace period.
	rec, _ := storedRecord(t, h.store, first.String())
	rec.GraceStart, rec.UpdatedAt = time.Time{}, h.clock.now.Add(-20*time.Second)
	storeRecords(t, h.store, rec)
	h.restart()
	h.clock.now = h.clock.now.Add(2 * time.Second)
	h.d.RunRound(context.Background())
	if sig := h.slurm.Signals(first); len(sig) != 1 {
		t.Errorf("signals %v after the restart, want the one sent before", sig)
	}
	// The grace period still ends 5 s after the journaled signal.
	h.clock.now = h.clock.now.Add(3 * time.Second)
	n := len(h.slurm.Applied())
	h.d.RunGraces(context.Background())
	if got := kinds(h.slurm.Applied()[n:], first); len(got) == 0 || got[0] != "requeue-hold" {
		t.Errorf("after the grace period: %v, want the requeue", got)
	}
}

func TestWaitingJobsAreHeldInOneBatch(t *testing.T) {
	h := newHarness(t, t.TempDir(), "a1:v100:1")
	var ids []bridge.JobID
	for range 4 {
		ids = append(ids, h.submit(resnet, 1))
	}
	// One waiting job's hold is refused: only that job's entry fails.
	var refused bridge.JobID
	h.slurm.FailActions(func(a bridge.Action) error {
		if a.Kind == bridge.ActHold && (refused == 0 || refused == a.Job) {
			refused = a.Job
			return errors.New("job is no longer pending execution")
		}
		return nil
	})
	rep := h.d.RunRound(context.Background())
	if rep.Failed != 1 || rep.Actions < 4 {
		t.Fatalf("report %+v, want one failed action of at least 4", rep)
	}
	if got := h.slurm.Batches(); len(got) == 0 || got[0] != 3 {
		t.Errorf("batches %v, want the 3 waiting jobs' holds in one", got)
	}
	// Waiting jobs are stopped before the chosen one is made startable.
	lastHold, firstOther := -1, -1
	for i, a := range h.slurm.Applied() {
		if a.Kind == bridge.ActHold {
			lastHold = i
		} else if firstOther < 0 {
			firstOther = i
		}
	}
	if firstOther < 0 || lastHold > firstOther {
		t.Errorf("actions in order %v, want the holds first", h.slurm.Applied())
	}
	entries, _, err := h.store.Recent(0)
	if err != nil {
		t.Fatal(err)
	}
	holds := 0
	for _, e := range entries {
		if e.Kind != string(bridge.ActHold) {
			if e.State != store.Done {
				t.Errorf("%s of job %s: %s %q, want done", e.Kind, e.JobID, e.State, e.Error)
			}
			continue
		}
		holds++
		want := store.Done
		if e.JobID == refused.String() {
			want = store.Failed
		}
		if e.State != want || (want == store.Failed) != strings.Contains(e.Error, "no longer pending") {
			t.Errorf("hold of job %s: %s %q, want %s", e.JobID, e.State, e.Error, want)
		}
	}
	if holds != 3 {
		t.Errorf("%d holds journaled, want 3", holds)
	}
	held := 0
	for _, id := range ids {
		if h.job(id).Held {
			held++
		}
	}
	if held != 2 {
		t.Errorf("%d jobs held in Slurm, want the 2 whose hold was accepted", held)
	}
}

// A tagged job with a typed request (--gres=gpu:k80:1) is scheduled on its
// type only and its request is left as the user wrote it; a typed request
// for a type the daemon does not schedule leaves the job to Slurm.
func TestTypedRequestIsPinnedToItsType(t *testing.T) {
	set := settings()
	set.GPUTypes = []string{"v100", "k80", "p100"}
	h := newHarnessWith(t, set, t.TempDir(), "a1:v100:1", "b1:k80:1", "c1:a100:1")
	submitTyped := func(typ string) bridge.JobID {
		return h.slurm.Submit(bridge.Job{User: "ana", Partition: "gpu", GPUs: 1, RequestedGPUType: typ, Comment: resnet})
	}
	pinned := submitTyped("k80")
	other := submitTyped("a100")
	absent := submitTyped("p100") // scheduled type, but no p100 node now
	free := h.submit(resnet, 1)

	rep := h.d.RunRound(context.Background())
	if rep.Skipped != "" || rep.Managed != 3 {
		t.Fatalf("report %+v, want the pinned, the absent-type and the untyped job managed", rep)
	}
	if got := kinds(h.slurm.Applied(), absent); len(got) != 1 || got[0] != string(bridge.ActHold) {
		t.Errorf("job typed for a type with no GPUs now got %v, want a hold", got)
	}
	for _, k := range kinds(h.slurm.Applied(), pinned) {
		if k == string(bridge.ActSetConstraints) {
			t.Errorf("the typed job's constraints were set: %v", kinds(h.slurm.Applied(), pinned))
		}
	}
	if got := kinds(h.slurm.Applied(), other); len(got) != 0 {
		t.Errorf("job typed for an unscheduled type was touched: %v", got)
	}
	row := h.board.Allocation().Rows[pinned.String()]
	for typ, x := range row {
		if typ != "k80" && x > 0 {
			t.Errorf("pinned job allocated %v of %s", x, typ)
		}
	}
	if row["k80"] <= 0 {
		t.Errorf("pinned job has no share of its own type: %v", row)
	}
	if j := h.job(free); j.Constraints != "v100" {
		t.Errorf("untyped job constrained to %q, want v100 (k80 is the pinned job's)", j.Constraints)
	}
	for _, j := range h.board.Status().Jobs {
		if j.JobID == pinned.String() && !strings.Contains(j.ThroughputSource, "pinned to k80") {
			t.Errorf("status does not say the job is pinned: %q", j.ThroughputSource)
		}
		if j.JobID == absent.String() && !strings.Contains(j.Reason, "no GPU type of the cluster can run it") {
			t.Errorf("reason for the job typed for an absent type: %q", j.Reason)
		}
		if j.JobID == other.String() && !strings.Contains(j.Reason, "gpu:a100") {
			t.Errorf("reason for the a100 job: %q", j.Reason)
		}
	}
}

// After the state directory was lost, --adopt-admin-holds lets the first
// round take admin holds of managed jobs for the daemon's own; user holds,
// and admin holds that appear later, stay untouched.
func TestAdoptAdminHoldsOnlyInTheFirstRound(t *testing.T) {
	for _, adopt := range []bool{false, true} {
		set := settings()
		set.AdoptAdminHolds = adopt
		h := newHarnessWith(t, set, t.TempDir(), "a1:v100:2")
		adminHeld := h.slurm.Submit(bridge.Job{User: "ana", Partition: "gpu", GPUs: 1, Comment: resnet, Held: true, Reason: "JobHeldAdmin"})
		userHeld := h.slurm.Submit(bridge.Job{User: "ana", Partition: "gpu", GPUs: 1, Comment: resnet, Held: true, Reason: "JobHeldUser"})
		h.d.RunRound(context.Background())
		if j := h.job(adminHeld); j.Held == adopt {
			t.Errorf("adopt=%v: admin-held job held=%v after the first round", adopt, j.Held)
		}
		if got := kinds(h.slurm.Applied(), userHeld); len(got) != 0 {
			t.Errorf("adopt=%v: user-held job got %v", adopt, got)
		}
		later := h.slurm.Submit(bridge.Job{User: "ana", Partition: "gpu", GPUs: 1, Comment: resnet, Held: true, Reason: "JobHeldAdmin"})
		h.clock.now = h.clock.now.Add(20 * time.Second)
		h.d.RunRound(context.Background())
		if got := kinds(h.slurm.Applied(), later); len(got) != 0 {
			t.Errorf("adopt=%v: admin hold placed after the first round was touched: %v", adopt, got)
		}
	}
}

// A job preempted in one round and chosen again before its grace period
// ends is not left running: its script may have stopped training to wait
// for the requeue the signal announced. It is requeued when the grace
// period is over and restarted at once on the type the round keeps it on.
func TestAJobChosenAgainInItsGracePeriodRestartsAtOnce(t *testing.T) {
	set := settings()
	set.DefaultGrace = 30 * time.Second
	h := newHarnessWith(t, set, t.TempDir(), "a1:v100:1")
	first, second := h.preemptFirst()
	// The job that was to take over leaves before the grace period ends.
	if err := h.slurm.Finish(second, bridge.JobCancelled); err != nil {
		t.Fatal(err)
	}
	h.clock.now = h.clock.now.Add(20 * time.Second)
	h.d.RunRound(context.Background())
	h.clock.now = h.clock.now.Add(15 * time.Second) // past the grace end
	n := len(h.slurm.Applied())
	h.d.RunGraces(context.Background())
	if got := kinds(h.slurm.Applied()[n:], first); !slices.Equal(got, []string{"requeue-hold", "release", "set-priority", "begin-now"}) {
		t.Errorf("job chosen again in its grace period: %v, want its requeue and its restart at once", got)
	}
	h.startChosen()
	if j := h.job(first); j.State != bridge.JobRunning || j.Restarts != 1 {
		t.Errorf("first job %s after %d restarts, want running again after one", j.State, j.Restarts)
	}
}

// freedGPU is a one-GPU cluster after a round that ran one job and held
// the other, 40 s later, when the running one has just finished: its GPU
// is free for the check between rounds to refill.
func freedGPU(t *testing.T) (h *harness, waiting bridge.JobID) {
	t.Helper()
	set := settings()
	set.Round, set.RefillPoll, set.DefaultPreempt = 10*time.Minute, 30*time.Second, bridge.PreemptNever
	h = newHarnessWith(t, set, t.TempDir(), "a1:v100:1")
	first, second := h.submit(resnet, 1), h.submit(resnet, 1)
	h.d.RunRound(context.Background())
	h.startChosen()
	running, waiting := first, second
	if h.job(first).Held {
		running, waiting = second, first
	}
	if !h.job(waiting).Held {
		t.Fatalf("the round held neither job")
	}
	h.clock.now = h.clock.now.Add(40 * time.Second)
	if err := h.slurm.Finish(running, bridge.JobCompleted); err != nil {
		t.Fatal(err)
	}
	return h, waiting
}

// A job that ends mid-round frees its GPU; the check between rounds starts
// the held job there, and status shows it at once, not a round later.
func TestRefillBetweenRoundsIsShownInStatus(t *testing.T) {
	h, waiting := freedGPU(t)
	h.d.RunGraces(context.Background())
	if h.job(waiting).Held {
		t.Fatalf("the waiting job is still held after its GPU was freed")
	}
	st := h.board.Status()
	js := findStatus(t, st, waiting)
	if js.Decision != "run" || !strings.Contains(js.Reason, "GPUs freed between rounds") {
		t.Errorf("status of the refilled job: decision %q, reason %q", js.Decision, js.Reason)
	}
	if st.Round.Number != 1 || st.Round.Started != epoch {
		t.Errorf("status round %d started %v: the round's own figures changed", st.Round.Number, st.Round.Started)
	}
}

func findStatus(t *testing.T, st api.Status, id bridge.JobID) api.JobStatus {
	t.Helper()
	for _, j := range st.Jobs {
		if j.JobID == id.String() {
			return j
		}
	}
	t.Fatalf("job %v not in status", id)
	return api.JobStatus{}
}

// A release Slurm refuses leaves the hold the daemon's: the next look
// releases the job again once Slurm takes it, instead of taking the hold
// for an admin's and leaving the job held for good.
func TestAFailedReleaseIsSentAgain(t *testing.T) {
	h, waiting := freedGPU(t)
	h.slurm.FailActions(fake.FailKind(bridge.ActRelease, errors.New("slurmctld busy")))
	h.d.RunGraces(context.Background())
	if !h.job(waiting).Held {
		t.Fatal("the release went through although Slurm refused it")
	}
	h.slurm.FailActions(nil)
	h.clock.now = h.clock.now.Add(30 * time.Second)
	h.d.RunGraces(context.Background())
	if h.job(waiting).Held {
		t.Errorf("the waiting job is still held after Slurm took releases again")
	}
}
