package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/bridge/fake"
	"github.com/gavel-slurm/gavel-slurm/internal/api"
)

// fakeChecker answers the daemon's checks of its requeue path.
type fakeChecker struct {
	err    error // what CheckRequeue answers
	checks int
}

// checkingSlurm is the fake Slurm with a requeue check: the fake's own
// requeues still succeed or fail as its FailActions hook says.
type checkingSlurm struct {
	*fake.Slurm
	c *fakeChecker
}

func (s checkingSlurm) CheckRequeue(context.Context, *bridge.Snapshot) error {
	s.c.checks++
	return s.c.err
}

func (s checkingSlurm) RequeuePath() string { return "scontrol (/usr/bin/scontrol)" }

func newCheckedHarness(t *testing.T, err error, nodes ...string) *harness {
	t.Helper()
	h := newHarness(t, t.TempDir(), nodes...)
	h.checker = &fakeChecker{err: err}
	h.restart()
	return h
}

// healthz is what GET /healthz answers.
func (h *harness) healthz() (int, string) {
	h.t.Helper()
	rec := httptest.NewRecorder()
	api.Handler(h.board, h.reg).ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
	return rec.Code, rec.Body.String()
}

// A daemon whose requeues cannot work (scontrol missing, no operator
// rights, slurmctld unreachable) schedules pending jobs but signals no
// running job, and says why in status, /healthz and the metrics. Once the
// path works, the next round preempts as usual.
func TestUnprovenRequeuePathSignalsNoJob(t *testing.T) {
	tests := map[string]struct {
		err         error
		wantFailing bool
		wantWords   string
	}{
		"scontrol missing": {
			err:         errors.New(`scontrol (/usr/bin/scontrol) cannot be run: exec: "/usr/bin/scontrol": stat /usr/bin/scontrol: no such file or directory`),
			wantFailing: true, wantWords: "no such file",
		},
		"access denied": {
			err:         errors.New("scontrol requeue 7: Access/permission denied for job 7"),
			wantFailing: true, wantWords: "Access/permission denied",
		},
		"nothing to test against": {
			err:       fmt.Errorf("requeue check: %w", bridge.ErrNoRequeueProbe),
			wantWords: "not proven yet",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := newCheckedHarness(t, tc.err, "a1:v100:1")
			first, second := h.submit(resnet, 1), h.submit(resnet, 1)
			for range 4 {
				h.d.RunRound(context.Background())
				h.startChosen()
				h.clock.now = h.clock.now.Add(20 * time.Second)
				h.d.RunGraces(context.Background())
			}
			if sig := h.slurm.Signals(first); len(sig) != 0 {
				t.Fatalf("job %d was signalled %v although requeues cannot be proven", first, sig)
			}
			if j := h.job(first); j.State != bridge.JobRunning || j.Restarts != 0 {
				t.Fatalf("job %d: %s, %d restarts; want running untouched", first, j.State, j.Restarts)
			}
			if j := h.job(second); j.State != bridge.JobPending {
				t.Fatalf("job %d: %s; want it waiting", second, j.State)
			}
			st := h.board.Status()
			p := st.Preemption
			if p.Enabled || p.Failing != tc.wantFailing || !strings.Contains(p.Reason, tc.wantWords) || p.Path == "" || p.CheckedAt.IsZero() {
				t.Errorf("status preemption %+v; want off, failing=%t, a reason saying %q, the path and the check's time", p, tc.wantFailing, tc.wantWords)
			}
			for _, j := range st.Jobs {
				if j.JobID == first.String() && j.Preempt != "never" {
					t.Errorf("status shows job %d as preempt=%s; want never while preemption is off", first, j.Preempt)
				}
			}
			code, body := h.healthz()
			if tc.wantFailing && (code != 503 || !strings.Contains(body, tc.wantWords)) {
				t.Errorf("healthz %d %q; want 503 with the reason", code, body)
			}
			if !tc.wantFailing && code != 200 {
				t.Errorf("healthz %d %q; nothing failed, want ok", code, body)
			}
			if got := gauge(t, h.reg, "gavel_slurm_preemption_enabled"); got != 0 {
				t.Errorf("gavel_slurm_preemption_enabled = %v, want 0", got)
			}

			// The admin fixes it: the next round checks again and preempts.
			h.checker.err = nil
			h.d.RunRound(context.Background())
			if sig := h.slurm.Signals(first); len(sig) != 1 {
				t.Errorf("after the path was fixed: signals %v, want the grace signal", sig)
			}
			if p := h.board.Status().Preemption; !p.Enabled || p.Reason != "" || p.Failing {
				t.Errorf("after the path was fixed: status preemption %+v, want on", p)
			}
			if code, body := h.healthz(); code != 200 {
				t.Errorf("after the path was fixed: healthz %d %q", code, body)
			}
		})
	}
}

// A requeue that starts failing in the middle of a run opens the gate: no
// new grace signal goes out, the job already signalled is retried every
// round and listed in status with the error, and when a retry succeeds
// preemption is on again.
func TestFailingRequeueStopsPreemptionUntilARequeueWorks(t *testing.T) {
	h := newCheckedHarness(t, nil, "a1:v100:1", "b1:k80:1")
	first := h.submit(resnet, 1)
	second := h.submit(resnet, 1)
	h.d.RunRound(context.Background())
	h.startChosen()
	if p := h.board.Status().Preemption; !p.Enabled {
		t.Fatalf("preemption %+v after a passing check; want on", p)
	}
	// Requeues stop working: the operator account was removed.
	denied := errors.New("Access/permission denied")
	h.slurm.FailActions(fake.FailKind(bridge.ActRequeueHold, denied))
	third := h.submit(resnet, 1)
	signalled := map[bridge.JobID]bool{}
	for range 6 {
		h.clock.now = h.clock.now.Add(20 * time.Second)
		h.d.RunRound(context.Background())
		h.startChosen()
		for _, id := range []bridge.JobID{first, second} {
			if len(h.slurm.Signals(id)) > 0 {
				signalled[id] = true
			}
		}
		if len(signalled) > 0 {
			break
		}
	}
	if len(signalled) == 0 {
		t.Fatal("no job was preempted for the third; the test needs one")
	}
	// The grace periods end; the requeues fail.
	h.clock.now = h.clock.now.Add(10 * time.Second)
	h.d.RunGraces(context.Background())
	p := h.board.Status().Preemption
	waiting := map[bridge.JobID]bool{}
	for _, w := range p.Waiting {
		id, _ := bridge.ParseJobID(w.JobID)
		waiting[id] = strings.Contains(w.Error, "denied")
	}
	if p.Enabled || !p.Failing || len(waiting) != len(signalled) {
		t.Fatalf("after failed requeues: preemption %+v; want off, failing, the signalled jobs %v waiting", p, signalled)
	}
	for id := range signalled {
		if !waiting[id] {
			t.Errorf("job %d is not listed as waiting with its requeue's error: %+v", id, p.Waiting)
		}
	}
	if code, _ := h.healthz(); code != 503 {
		t.Errorf("healthz %d while requeues fail; want 503", code)
	}
	// A new GPU and two more jobs: the rounds would now time-share it
	// between them, preempting whichever runs.
	checks := h.checker.checks
	h.slurm.AddNode(bridge.Node{Name: "c1", GPUType: "v100", GPUs: 1, Partitions: []string{"gpu"}})
	all := []bridge.JobID{first, second, third, h.submit(resnet, 1), h.submit(resnet, 1)}
	before := map[bridge.JobID]int{}
	for _, id := range all {
		before[id] = len(h.slurm.Signals(id))
	}
	for range 6 {
		h.clock.now = h.clock.now.Add(20 * time.Second)
		h.d.RunRound(context.Background())
		h.startChosen()
	}
	for _, id := range all {
		if n := len(h.slurm.Signals(id)); n != before[id] {
			t.Errorf("job %d got %d new signals while requeues fail; want none", id, n-before[id])
		}
	}
	if h.checker.checks != checks {
		t.Errorf("%d checks while a job waits for its requeue; only a requeue may close the gate", h.checker.checks-checks)
	}
	for id := range signalled {
		if j := h.job(id); !j.Active() {
			t.Fatalf("job %d ended (%s) while its requeue was retried", id, j.State)
		}
	}
	// Fixed: the next retries succeed and preemption is on again.
	h.slurm.FailActions(nil)
	h.clock.now = h.clock.now.Add(20 * time.Second)
	h.d.RunRound(context.Background())
	for id := range signalled {
		if j := h.job(id); j.Restarts != 1 {
			t.Errorf("job %d after the fix: %d restarts, want its requeue", id, j.Restarts)
		}
	}
	if p := h.board.Status().Preemption; !p.Enabled || p.Failing || len(p.Waiting) != 0 {
		t.Errorf("after the retried requeue worked: preemption %+v, want on with nothing waiting", p)
	}
}

// A dry run sends nothing, so its requeues prove nothing: a path that
// failed its check stays off.
func TestDryRunRequeueProvesNothing(t *testing.T) {
	h := newHarness(t, t.TempDir(), "a1:v100:1")
	h.dryRun, h.checker = true, &fakeChecker{err: errors.New("denied")}
	h.restart()
	h.d.RunRound(context.Background())
	h.d.requeueSettled(3, nil)
	if p := h.d.gate.doc(); p.Enabled || !p.Failing {
		t.Errorf("after a dry run's requeue: preemption %+v; want still off and failing", p)
	}
}

// gauge is the value of an unlabelled gauge in reg.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no gauge %s", name)
	return 0
}

// Within one send, a failed requeue wins over the others' successes,
// whichever came first: preemption goes off and the job waits.
func TestAFailedRequeueWinsItsBatch(t *testing.T) {
	for name, order := range map[string][]requeueOutcome{
		"failure first": {{job: 1, err: errors.New("Access/permission denied")}, {job: 2}},
		"failure last":  {{job: 2}, {job: 1, err: errors.New("Access/permission denied")}},
	} {
		t.Run(name, func(t *testing.T) {
			h := newCheckedHarness(t, nil, "a1:v100:1")
			h.d.RunRound(context.Background())
			if !h.d.gate.proven {
				t.Fatal("the check did not pass")
			}
			h.d.settleRequeues(order)
			if h.d.gate.proven || !h.d.gate.failing {
				t.Errorf("gate after a batch with a failed requeue: proven %v failing %v; want off and failing", h.d.gate.proven, h.d.gate.failing)
			}
			if _, ok := h.d.gate.waiting[1]; !ok {
				t.Error("the job whose requeue failed is not waiting for its retry")
			}
		})
	}
}

// A failed requeue outlives a restart: the restarted daemon keeps
// preemption off and the job waiting for its retry, rather than proving
// the path with a check and signalling new jobs first.
func TestRequeueFailureSurvivesARestart(t *testing.T) {
	h := newCheckedHarness(t, nil, "a1:v100:1")
	job := h.submit(resnet, 1)
	h.d.RunRound(context.Background())
	h.startChosen()
	if j := h.job(job); j.State != bridge.JobRunning {
		t.Fatalf("job %d is %s, want running", job, j.State)
	}
	h.d.settleRequeues([]requeueOutcome{{job: job, err: errors.New("Access/permission denied")}})
	if h.d.gate.proven {
		t.Fatal("the gate stayed open after a failed requeue")
	}
	h.restart()
	p := h.board.Status().Preemption
	if h.d.gate.proven || !h.d.gate.failing || h.d.gate.offReason() == "" {
		t.Errorf("after the restart: proven %v failing %v reason %q; want the failure kept", h.d.gate.proven, h.d.gate.failing, h.d.gate.offReason())
	}
	if _, ok := h.d.gate.waiting[job]; !ok {
		t.Errorf("after the restart job %d no longer waits for its requeue (%+v)", job, p)
	}
	checks := h.checker.checks
	h.d.RunRound(context.Background())
	if h.d.gate.proven {
		t.Errorf("the first round after the restart opened the gate (%d checks) while a requeue waits", h.checker.checks-checks)
	}
}
