package daemon

import (
	"context"
	"errors"
	"io"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/bridge/fake"
	"github.com/gavel-slurm/gavel-slurm/internal/api"
	"github.com/gavel-slurm/gavel-slurm/internal/reports"
	"github.com/gavel-slurm/gavel-slurm/internal/store"
	"github.com/rs/zerolog"
)

// lost reports whether a job the daemon preempted ended finished instead
// of pending or running again.
func lost(j bridge.Job) bool {
	return j.State != bridge.JobPending && j.State != bridge.JobRunning
}

// TestNoScriptLosesItsJobToPreemption preempts one job per kind of batch
// script and checks that each ends up pending again, requeued once, and
// runs again in a later round.
func TestNoScriptLosesItsJobToPreemption(t *testing.T) {
	tests := map[string]struct {
		response fake.SignalResponse
		// handledEarly: the daemon acts before the grace period ends
		// (the job is no longer running).
		handledEarly bool
		// wantEarly are the first job's actions at the first check
		// between rounds.
		wantEarly string
	}{
		"no trap: dies of the signal": {response: fake.SignalDies, handledEarly: true, wantEarly: "requeue-hold,hold,begin-now"},
		"trap and wait":               {response: fake.SignalTrapAndWait},
		"trap and exit 0":             {response: fake.SignalExitsOK, handledEarly: true, wantEarly: "requeue-hold,hold,begin-now"},
		"trap and exit 1":             {response: fake.SignalExitsFailed, handledEarly: true, wantEarly: "requeue-hold,hold,begin-now"},
		"requeues itself (Lightning)": {response: fake.SignalRequeuesItself, handledEarly: true, wantEarly: "hold"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, t.TempDir(), "a1:v100:1")
			first, second := h.submit(resnet, 1), h.submit(resnet, 1)
			h.slurm.OnSignal(first, tc.response)
			h.d.RunRound(context.Background())
			h.startChosen()
			h.clock.now = h.clock.now.Add(20 * time.Second)
			h.d.RunRound(context.Background())
			if sig := h.slurm.Signals(first); len(sig) != 1 {
				t.Fatalf("signals %v, want one grace signal", sig)
			}

			// The first check between rounds, well inside the grace period.
			h.clock.now = h.clock.now.Add(time.Second)
			n := len(h.slurm.Applied())
			h.d.RunGraces(context.Background())
			if got := strings.Join(kinds(h.slurm.Applied()[n:], first), ","); got != tc.wantEarly {
				t.Errorf("actions inside the grace period %q, want %q", got, tc.wantEarly)
			}
			// The grace period ends; later checks send nothing new for a
			// job handled already.
			h.clock.now = h.clock.now.Add(5 * time.Second)
			n = len(h.slurm.Applied())
			h.d.RunGraces(context.Background())
			h.d.RunGraces(context.Background())
			got := kinds(h.slurm.Applied()[n:], first)
			if tc.handledEarly && len(got) != 0 {
				t.Errorf("actions after the job was handled: %v", got)
			}
			if !tc.handledEarly && strings.Join(got, ",") != "requeue-hold,hold,begin-now" {
				t.Errorf("actions at the end of the grace period %v", got)
			}
			j := h.job(first)
			if j.State != bridge.JobPending || j.Restarts != 1 {
				t.Fatalf("preempted job is %s with %d restarts, want PENDING with 1", j.State, j.Restarts)
			}
			if requeues := strings.Count(strings.Join(kinds(h.slurm.Applied(), first), ","), "requeue"); requeues > 1 {
				t.Errorf("%d requeues sent", requeues)
			}

			// It competes again and runs in a later round.
			h.startChosen()
			for round := 0; round < 6 && h.job(first).State != bridge.JobRunning; round++ {
				h.clock.now = h.clock.now.Add(20 * time.Second)
				h.d.RunRound(context.Background())
				h.d.RunGraces(context.Background())
				h.clock.now = h.clock.now.Add(6 * time.Second)
				h.d.RunGraces(context.Background())
				h.startChosen()
				for _, id := range []bridge.JobID{first, second} {
					if lost(h.job(id)) {
						t.Fatalf("job %d ended %s", id, h.job(id).State)
					}
				}
			}
			if h.job(first).State != bridge.JobRunning {
				t.Errorf("the preempted job never ran again: %+v", h.job(first))
			}
		})
	}
}

func TestJobThatEndsOutsideAGracePeriodStaysFinished(t *testing.T) {
	h := newHarness(t, t.TempDir(), "a1:v100:1")
	first := h.submit(resnet, 1)
	h.d.RunRound(context.Background())
	h.startChosen()
	if err := h.slurm.Finish(first, bridge.JobCompleted); err != nil {
		t.Fatal(err)
	}
	h.clock.now = h.clock.now.Add(20 * time.Second)
	n := len(h.slurm.Applied())
	h.d.RunRound(context.Background())
	h.d.RunGraces(context.Background())
	if got := kinds(h.slurm.Applied()[n:], first); len(got) != 0 {
		t.Errorf("a job that finished by itself got %v", got)
	}
	if j := h.job(first); j.State != bridge.JobCompleted || j.Restarts != 0 {
		t.Errorf("finished job: %s, %d restarts", j.State, j.Restarts)
	}
}

func TestJobCancelledByItsOwnerDuringGraceStaysCancelled(t *testing.T) {
	h := newHarness(t, t.TempDir(), "a1:v100:1")
	first, _ := h.preemptFirst()
	if err := h.slurm.Finish(first, bridge.JobCancelled); err != nil {
		t.Fatal(err)
	}
	h.clock.now = h.clock.now.Add(10 * time.Second)
	n := len(h.slurm.Applied())
	h.d.RunGraces(context.Background())
	h.clock.now = h.clock.now.Add(20 * time.Second)
	h.d.RunRound(context.Background())
	if got := kinds(h.slurm.Applied()[n:], first); len(got) != 0 {
		t.Errorf("a job its owner cancelled got %v", got)
	}
}

func TestPreemptModes(t *testing.T) {
	tests := map[string]struct {
		siteDefault bridge.PreemptMode
		tag         string
		// want is what the first job gets in the round that preempts it
		// and the checks after; "" when it is never stopped.
		want string
	}{
		"site default unset: never":    {tag: resnet},
		"site default never":           {siteDefault: bridge.PreemptNever, tag: resnet},
		"tag never beats site default": {siteDefault: bridge.PreemptCheckpoint, tag: resnet + " preempt=never"},
		"site default checkpoint":      {siteDefault: bridge.PreemptCheckpoint, tag: resnet, want: "signal,requeue-hold,hold,begin-now"},
		"tag requeue: no signal":       {tag: resnet + " preempt=requeue", want: "requeue-hold,hold,begin-now"},
		"tag checkpoint beats default": {siteDefault: bridge.PreemptNever, tag: resnet + " preempt=checkpoint", want: "signal,requeue-hold,hold,begin-now"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			set := settings()
			set.DefaultPreempt = tc.siteDefault
			h := newHarnessWith(t, set, t.TempDir(), "a1:v100:1")
			first := h.submit(tc.tag, 1)
			second := h.submit(resnet, 1)
			h.d.RunRound(context.Background())
			h.startChosen()
			n := len(h.slurm.Applied())
			for range 3 {
				h.clock.now = h.clock.now.Add(20 * time.Second)
				h.d.RunRound(context.Background())
				h.clock.now = h.clock.now.Add(6 * time.Second)
				h.d.RunGraces(context.Background())
			}
			got := kinds(h.slurm.Applied()[n:], first)
			if i := slices.Index(got, "set-constraints"); i >= 0 {
				got = got[:i] // what follows is its next start
			}
			if strings.Join(got, ",") != tc.want {
				t.Errorf("first job got %v, want %q", got, tc.want)
			}
			if tc.want == "" {
				if j := h.job(first); j.State != bridge.JobRunning || len(h.slurm.Signals(first)) != 0 {
					t.Errorf("job that cannot be preempted: %s, signals %v", j.State, h.slurm.Signals(first))
				}
				if j := h.job(second); j.State != bridge.JobPending || !j.Held {
					t.Errorf("second job %s (held %v), want waiting held: the GPU stays taken", j.State, j.Held)
				}
				for _, js := range h.board.Status().Jobs {
					if js.JobID == first.String() && !strings.Contains(js.Reason, "cannot be preempted") {
						t.Errorf("reason %q does not say it cannot be preempted", js.Reason)
					}
				}
			}
		})
	}
}

func TestMinimumRunTimeProtectsAdoptedJobs(t *testing.T) {
	set := settings()
	set.MinRunTime = 60 * time.Second
	h := newHarnessWith(t, set, t.TempDir(), "a1:v100:1", "b1:k80:1")
	// Two jobs Slurm started before the daemon ran, each on the type the
	// policy would not choose for it, and a third waiting.
	a, b := h.submit(resnet, 1), h.submit("gavel: model=a3c steps=100k", 1)
	if err := h.slurm.Start(a, "b1"); err != nil {
		t.Fatal(err)
	}
	if err := h.slurm.Start(b, "a1"); err != nil {
		t.Fatal(err)
	}
	h.clock.now = h.clock.now.Add(time.Hour)
	h.submit(resnet, 1)
	for range 2 {
		h.d.RunRound(context.Background())
		h.clock.now = h.clock.now.Add(20 * time.Second)
	}
	for _, id := range []bridge.JobID{a, b} {
		if sig := h.slurm.Signals(id); len(sig) != 0 {
			t.Errorf("job %d preempted within its minimum run time", id)
		}
	}
	// Past the minimum run time the mechanism may move them again.
	for range 4 {
		h.d.RunRound(context.Background())
		h.clock.now = h.clock.now.Add(20 * time.Second)
	}
	if len(h.slurm.Signals(a))+len(h.slurm.Signals(b)) == 0 {
		t.Error("no job was ever preempted after the minimum run time")
	}
}

// A job requeued and restarted before the next round must not carry the
// old preemption: the next preemption sends the signal again.
func TestRestartedJobIsSignalledAgainWhenPreemptedLater(t *testing.T) {
	h := newHarness(t, t.TempDir(), "a1:v100:1")
	first, second := h.preemptFirst()
	h.clock.now = h.clock.now.Add(6 * time.Second)
	h.d.RunGraces(context.Background())
	if j := h.job(first); j.State != bridge.JobPending {
		t.Fatalf("first job not requeued: %s", j.State)
	}
	// Slurm runs the first job again on its own (an admin release, say)
	// once the second finished, before the daemon's next round.
	if err := h.slurm.Finish(second, bridge.JobCompleted); err != nil {
		t.Fatal(err)
	}
	third := h.submit(resnet, 1)
	_ = third
	h.slurm.Apply(context.Background(), bridge.Action{Kind: bridge.ActRelease, Job: first}) //nolint:errcheck // test setup
	if err := h.slurm.Start(first, "a1"); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		h.clock.now = h.clock.now.Add(20 * time.Second)
		n := len(h.slurm.Applied())
		h.d.RunRound(context.Background())
		got := kinds(h.slurm.Applied()[n:], first)
		if slices.Contains(got, "requeue-hold") && !slices.Contains(got, "signal") && len(h.slurm.Signals(first)) < 2 {
			t.Fatalf("requeued without a new grace signal: %v", got)
		}
		h.clock.now = h.clock.now.Add(6 * time.Second)
		h.d.RunGraces(context.Background())
		h.startChosen()
	}
	if len(h.slurm.Signals(first)) < 2 {
		t.Errorf("signals %v: the later preemption sent none", h.slurm.Signals(first))
	}
}

// A crash during a grace period, and the job exits while the daemon is
// down: the restarted daemon requeues it instead of forgetting it.
func TestJobThatExitsWhileTheDaemonIsDownIsRequeued(t *testing.T) {
	dir := t.TempDir()
	h := newHarness(t, dir, "a1:v100:1")
	first, _ := h.preemptFirst()
	if err := h.slurm.Finish(first, bridge.JobCompleted); err != nil {
		t.Fatal(err)
	}
	h.restart()
	h.clock.now = h.clock.now.Add(20 * time.Second)
	h.d.RunRound(context.Background())
	h.d.RunGraces(context.Background())
	j := h.job(first)
	if j.State != bridge.JobPending || j.Restarts != 1 {
		t.Errorf("job after the restart: %s, %d restarts; want PENDING, 1", j.State, j.Restarts)
	}
	if sig := h.slurm.Signals(first); len(sig) != 1 {
		t.Errorf("signals %v, want the one before the crash", sig)
	}
}

// A crash after a round's holds were sent but before its records were
// saved: jobs that arrived that round have no record at all, and only the
// journal says their holds are the daemon's.
func TestHoldOfAJobWithoutARecordIsOwnedAfterACrash(t *testing.T) {
	h := newHarness(t, t.TempDir(), "a1:v100:1")
	first, second := h.submit(resnet, 1), h.submit(resnet, 1)
	h.d.RunRound(context.Background())
	if !h.job(second).Held {
		t.Fatal("round 1 should hold the second job")
	}
	if err := h.store.SaveRound(nil, []string{first.String(), second.String()}, nil); err != nil {
		t.Fatal(err)
	}
	h.restart()
	h.startChosen()
	n := len(h.slurm.Applied())
	for range 3 {
		h.clock.now = h.clock.now.Add(20 * time.Second)
		h.d.RunRound(context.Background())
		h.clock.now = h.clock.now.Add(6 * time.Second)
		h.d.RunGraces(context.Background())
		h.startChosen()
	}
	if got := kinds(h.slurm.Applied()[n:], second); !slices.Contains(got, "release") {
		t.Errorf("the daemon's own hold on a job it has no record of was never released: %v", got)
	}
}

// When the journal cannot be written nothing is sent, and the core must
// not believe otherwise: a grace period it recorded but never signalled
// would end in a requeue without the signal.
func TestUnjournaledRoundLeavesNoPreemptionBehind(t *testing.T) {
	dir := t.TempDir()
	h := newHarness(t, dir, "a1:v100:1")
	first, _ := h.submit(resnet, 1), h.submit(resnet, 1)
	h.d.RunRound(context.Background())
	h.startChosen()
	h.store.Close()
	h.clock.now = h.clock.now.Add(20 * time.Second)
	h.d.RunRound(context.Background())
	if sig := h.slurm.Signals(first); len(sig) != 0 {
		t.Fatalf("signal sent without a journal: %v", sig)
	}
	for _, js := range h.board.Status().Jobs {
		if js.JobID == first.String() && js.Grace != "" {
			t.Fatalf("the core kept a preemption it never sent: %q", js.Grace)
		}
	}
	reopened, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reopened.Close() })
	h.store, h.d.Store, h.d.journal = reopened, reopened, reopened
	h.clock.now = h.clock.now.Add(time.Second)
	n := len(h.slurm.Applied())
	h.d.RunRound(context.Background())
	h.clock.now = h.clock.now.Add(6 * time.Second)
	h.d.RunGraces(context.Background())
	got := kinds(h.slurm.Applied()[n:], first)
	if strings.Join(got, ",") != "signal,requeue-hold,hold,begin-now" {
		t.Errorf("preemption once the journal works again: %v, want signal then requeue", got)
	}
}

// Two daemons with their own state directories on the same jobs would
// undo each other's choices: once one sees jobs it marked carrying the
// other's run priority two rounds in a row, it sends nothing and says why.
func TestASecondDaemonIsNoticed(t *testing.T) {
	set := settings()
	set.Instance = 1
	h := newHarnessWith(t, set, t.TempDir(), "a1:v100:1", "b1:k80:1")
	for range 3 {
		h.submit(resnet, 1)
	}
	other := *h
	other.set.Instance = 2
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	other.store = st
	other.restart()
	skipped := ""
	for range 6 {
		h.clock.now = h.clock.now.Add(20 * time.Second)
		for _, d := range []*Daemon{h.d, other.d} {
			if rep := d.RunRound(context.Background()); rep.Skipped != "" {
				skipped = rep.Skipped
			}
		}
		h.startChosen()
	}
	if !strings.Contains(skipped, "another gavel-slurm daemon") {
		t.Errorf("two daemons on the same jobs went unnoticed (last skip %q)", skipped)
	}
}

// A daemon alone never takes itself for a second one, whatever priorities
// Slurm computed for the jobs it has not chosen.
func TestOneDaemonIsNotTakenForTwo(t *testing.T) {
	set := settings()
	set.Instance = 7
	h := newHarnessWith(t, set, t.TempDir(), "a1:v100:1")
	for i := range 3 {
		h.slurm.Submit(bridge.Job{User: "ana", Partition: "gpu", GPUs: 1, Comment: resnet, Priority: int64(RunPriority + 3 + i)})
	}
	for range 6 {
		h.clock.now = h.clock.now.Add(20 * time.Second)
		if rep := h.d.RunRound(context.Background()); rep.Skipped != "" {
			t.Fatalf("skipped: %s", rep.Skipped)
		}
		h.d.RunGraces(context.Background())
		h.startChosen()
	}
}

// measuredHarness is a harness whose daemon takes collector reports into
// a learning estimator, which it returns.
func measuredHarness(t *testing.T, nodes ...string) (*harness, *Measured) {
	t.Helper()
	measured, _ := referenceMeasured(t)
	h := newHarness(t, t.TempDir(), nodes...)
	core, err := NewCore(h.set, measured)
	if err != nil {
		t.Fatal(err)
	}
	h.d, err = New(Deps{Core: core, Slurm: h.slurm, Store: h.store, Board: h.board, Log: zerolog.New(io.Discard),
		Clock: h.clock, Measured: measured})
	if err != nil {
		t.Fatal(err)
	}
	return h, measured
}

// Collector reports teach the estimator: a job with a model no table
// knows gets its measured rate on the type it runs on, and estimates on
// the others; a report about a job that does not run there is dropped.
func TestCollectorReportsBecomeMeasuredThroughputs(t *testing.T) {
	h, _ := measuredHarness(t, "a1:v100:1", "b1:k80:1")
	id := h.submit("gavel: model=my-new-transformer steps=1M", 1)
	h.d.RunRound(context.Background())
	h.startChosen()
	j := h.job(id)
	if j.State != bridge.JobRunning {
		t.Fatalf("job not started: %+v", j)
	}
	rate := func(v float64) *float64 { return &v }
	for range 4 {
		h.clock.now = h.clock.now.Add(5 * time.Minute)
		h.d.Receive(reports.Report{Node: j.RunningNodes[0], Time: h.clock.now, IntervalS: 30, Jobs: []reports.Job{
			{JobID: id.String(), GPUType: j.RunningGPUType, GPUs: 1, StepsPerS: rate(42)},
			// Wrong type for where the job runs: dropped.
			{JobID: id.String(), GPUType: "p100", GPUs: 1, StepsPerS: rate(1e6)},
		}})
		h.d.RunRound(context.Background())
	}
	var got api.JobStatus
	for _, js := range h.board.Status().Jobs {
		if js.JobID == id.String() {
			got = js
		}
	}
	on := got.Throughputs[j.RunningGPUType]
	if on.Source != "measured" || math.Abs(on.StepsPerS-42) > 1 {
		t.Errorf("on %s: %+v, want measured 42 steps/s", j.RunningGPUType, on)
	}
	for typ, tp := range got.Throughputs {
		if typ != j.RunningGPUType && tp.Source == "measured" {
			t.Errorf("%s shows measured %+v without a measurement there", typ, tp)
		}
	}
}

// A crash after a grace period's requeue was journaled but before it was
// sent: after the restart, reconciliation resends it, and the round plans
// on what that changed (the job is pending now) instead of on the view
// from before, which would requeue it a second time.
func TestRoundAfterResendsPlansOnAFreshView(t *testing.T) {
	dir := t.TempDir()
	h := newHarness(t, dir, "a1:v100:1")
	first, _ := h.preemptFirst()
	h.clock.now = h.clock.now.Add(6 * time.Second)
	// The intents of the requeue, journaled, never sent.
	requeue := Action{Action: bridge.Action{Kind: bridge.ActRequeueHold, Job: first}, Why: "grace period over"}
	begin := Action{Action: bridge.Action{Kind: bridge.ActBeginNow, Job: first}, Why: "grace period over"}
	if _, err := h.store.Intents(h.d.Core.Round(), []store.IntentSpec{
		{JobID: first.String(), Kind: string(requeue.Kind), Payload: requeue},
		{JobID: first.String(), Kind: string(begin.Kind), Payload: begin},
	}, h.clock.now); err != nil {
		t.Fatal(err)
	}
	h.restart()
	h.clock.now = h.clock.now.Add(20 * time.Second)
	h.d.RunRound(context.Background())
	requeues := 0
	for _, a := range h.slurm.Applied() {
		if a.Job == first && a.Kind == bridge.ActRequeueHold {
			requeues++
		}
	}
	entries, _, err := h.store.Recent(0)
	if err != nil {
		t.Fatal(err)
	}
	journaled := 0
	for _, e := range entries {
		if e.JobID == first.String() && e.Kind == string(bridge.ActRequeueHold) {
			journaled++
		}
	}
	if j := h.job(first); requeues != 1 || journaled != 1 || j.Restarts != 1 {
		t.Errorf("requeues sent %d, journaled %d, Slurm restarts %d: want one of each", requeues, journaled, j.Restarts)
	}
}

// A preempted job that waits for a round is held by the daemon with an
// administrator's hold: its owner cannot release it (scontrol release)
// to start it again ahead of the rounds' choice, as they could release
// the hold a requeue-hold alone leaves.
func TestOwnerCannotReleaseTheDaemonsHoldAfterAPreemption(t *testing.T) {
	h := newHarness(t, t.TempDir(), "a1:v100:1")
	first, _ := h.preemptFirst()
	h.clock.now = h.clock.now.Add(time.Minute)
	h.d.RunGraces(context.Background())
	j := h.job(first)
	if j.State != bridge.JobPending || !j.Held || j.Restarts != 1 {
		t.Fatalf("job %d after its grace period: %s, held %t, %d restarts; want requeued and held", first, j.State, j.Held, j.Restarts)
	}
	if err := h.slurm.OwnerRelease(first); !errors.Is(err, fake.ErrAccessDenied) {
		t.Errorf("the owner's release of the daemon's hold: %v; want it refused", err)
	}
	if j := h.job(first); !j.Held {
		t.Errorf("job %d was released by its owner", first)
	}
}
