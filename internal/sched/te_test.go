package sched

import (
	"strings"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

// A trial-and-error job that finds every GPU taken gets room between
// rounds: FitGpp chooses among the best-effort jobs that may be
// preempted, the victim gets its grace period, and the TE job is made
// eligible on the victim's node type at the run priority.
func TestTrialAndErrorJobsGetRoomBetweenRounds(t *testing.T) {
	const (
		beCheckpoint = "gavel: model=resnet50-bs64 steps=100k preempt=checkpoint"
		beRequeue    = "gavel: model=resnet50-bs64 steps=100k preempt=requeue"
		beNever      = "gavel: model=resnet50-bs64 steps=100k preempt=never"
		te           = "gavel: model=resnet18-bs64 steps=1k class=te"
	)
	twoGPUs := func(j bridge.Job) bridge.Job { j.GPUs = 2; return j }
	tests := map[string]struct {
		enabled bool
		maxPre  int
		minRun  time.Duration
		// off turns preemption off (the shell could not prove requeues).
		off     string
		running []bridge.Job
		want    map[bridge.JobID]string // actions by job between rounds
		wantWhy map[bridge.JobID]string // a word of the status reason
	}{
		"off: nothing happens": {
			enabled: false,
			running: []bridge.Job{twoGPUs(running(1, beCheckpoint, "a1", "v100", 0)), twoGPUs(running(2, beRequeue, "a1", "v100", 0))},
			want:    map[bridge.JobID]string{1: "", 2: "", 9: ""},
		},
		"the shorter grace period is preempted": {
			enabled: true,
			running: []bridge.Job{twoGPUs(running(1, beCheckpoint, "a1", "v100", 0)), twoGPUs(running(2, beRequeue, "a1", "v100", 0))},
			want:    map[bridge.JobID]string{1: "", 2: "requeue-hold,hold,begin-now", 9: "set-constraints:v100,set-priority"},
			wantWhy: map[bridge.JobID]string{2: "preempted for TE job 9"},
		},
		"a job at the preemption cap is spared": {
			enabled: true, maxPre: 1,
			running: []bridge.Job{twoGPUs(running(1, beCheckpoint, "a1", "v100", 0)), twoGPUs(running(2, beRequeue, "a1", "v100", 1))},
			want:    map[bridge.JobID]string{1: "signal:USR1", 2: "", 9: "set-constraints:v100,set-priority"},
			wantWhy: map[bridge.JobID]string{1: "preempted for TE job 9"},
		},
		"preempt=never jobs are never victims": {
			enabled: true,
			running: []bridge.Job{twoGPUs(running(1, beNever, "a1", "v100", 0)), twoGPUs(running(2, beNever, "a1", "v100", 0))},
			want:    map[bridge.JobID]string{1: "", 2: "", 9: ""},
		},
		"preemption off: no victim, the TE job waits": {
			enabled: true, off: "scontrol not found",
			running: []bridge.Job{twoGPUs(running(1, beCheckpoint, "a1", "v100", 0)), twoGPUs(running(2, beRequeue, "a1", "v100", 0))},
			want:    map[bridge.JobID]string{1: "", 2: "", 9: ""},
		},
		"jobs inside their minimum run time are spared": {
			enabled: true, minRun: time.Hour,
			running: []bridge.Job{twoGPUs(running(1, beCheckpoint, "a1", "v100", 0)), twoGPUs(running(2, beRequeue, "a1", "v100", 0))},
			want:    map[bridge.JobID]string{1: "", 2: "", 9: ""},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			set := settings()
			set.MinRunTime = tc.minRun
			set.TrialAndError = TESettings{Enabled: tc.enabled, Weight: 4, MaxPreemptions: tc.maxPre, Poll: 5 * time.Second}
			c := newCore(t, set)
			c.SetPreemptionOff(tc.off)
			nodes := []bridge.Node{node("a1", "v100", 4, 4)}
			step(c, snapshot(t, epoch, nodes, tc.running...), epoch, c.Solve)

			teJob := twoGPUs(pending(9, te))
			now := epoch.Add(10 * time.Second)
			actions := look(c, snapshot(t, now, nodes, append(tc.running, teJob)...), now)
			for id, want := range tc.want {
				if got := actionsOf(actions, id); got != want {
					t.Errorf("job %d: actions %q, want %q", id, got, want)
				}
			}
			for id, word := range tc.wantWhy {
				if got := c.jobs[keyOf(id)].reason; !strings.Contains(got, word) {
					t.Errorf("job %d: reason %q, want it to say %q", id, got, word)
				}
			}
			// The next look does not preempt again for the same job.
			later := now.Add(5 * time.Second)
			again := look(c, snapshot(t, later, nodes, append(tc.running, teJob)...), later)
			for _, a := range again {
				if a.Kind == bridge.ActSignal || (a.Kind == bridge.ActRequeueHold && tc.want[a.Job] == "") {
					t.Errorf("second look sent %s to job %d", a.Kind, a.Job)
				}
			}
			if tc.enabled && c.NextGraceEnd(later).IsZero() {
				t.Error("no next look between rounds while TE jobs are on")
			}
		})
	}
}

// A TE job that already fits is only made eligible: no victim.
func TestTrialAndErrorJobThatFitsPreemptsNothing(t *testing.T) {
	set := settings()
	set.MinRunTime = 0
	set.TrialAndError = TESettings{Enabled: true, Weight: 4}
	c := newCore(t, set)
	nodes := []bridge.Node{node("a1", "v100", 4, 1), node("b1", "k80", 4, 4)}
	be := running(1, "gavel: model=resnet50-bs64 preempt=requeue", "a1", "v100", 0)
	step(c, snapshot(t, epoch, nodes, be), epoch, c.Solve)
	teJob := pending(9, "gavel: model=resnet18-bs64 class=te")
	actions := look(c, snapshot(t, epoch.Add(time.Second), nodes, be, teJob), epoch.Add(time.Second))
	if got := actionsOf(actions, 1); got != "" {
		t.Errorf("running job: %q, want nothing", got)
	}
	if got := actionsOf(actions, 9); got != "set-constraints:v100,set-priority" {
		t.Errorf("TE job: %q, want it made eligible on v100", got)
	}
	// Above the run priority a round gives best-effort jobs, so Slurm
	// starts the TE job first.
	for _, a := range actions {
		if a.Job == 9 && a.Kind == bridge.ActSetPriority && int64(a.Priority) <= c.runPriority() {
			t.Errorf("TE job priority %d, want above the run priority %d", a.Priority, c.runPriority())
		}
	}
}

// A round that comes while a TE job waits for the room made for it leaves
// the job alone: no hold, no other type, no lower priority; status keeps
// saying what it waits for.
func TestRoundLeavesAWaitingTrialAndErrorJobAlone(t *testing.T) {
	set := settings()
	set.MinRunTime = 0
	set.TrialAndError = TESettings{Enabled: true, Weight: 4, Poll: 5 * time.Second}
	c := newCore(t, set)
	nodes := []bridge.Node{node("a1", "v100", 2, 2), node("b1", "k80", 1, 0)}
	be := running(1, "gavel: model=resnet50-bs64 preempt=checkpoint grace=1m", "a1", "v100", 0)
	be.GPUs = 2
	step(c, snapshot(t, epoch, nodes, be), epoch, c.Solve)
	teJob := pending(9, "gavel: model=resnet18-bs64 class=te")
	teJob.GPUs = 2
	now := epoch.Add(10 * time.Second)
	if got := actionsOf(look(c, snapshot(t, now, nodes, be, teJob), now), 1); got != "signal:USR1" {
		t.Fatalf("victim: %q, want the grace signal", got)
	}
	later := now.Add(20 * time.Second)
	res := step(c, snapshot(t, later, nodes, be, teJob), later, c.Solve)
	if got := actionsOf(res.Actions, 9); got != "" {
		t.Errorf("round sent %q to the waiting TE job, want nothing", got)
	}
	if got := actionsOf(res.Actions, 1); strings.Contains(got, "signal") {
		t.Errorf("round sent the victim %q: the signal went out already", got)
	}
	for _, v := range res.View.Jobs {
		if v.Job.ID == 9 && !strings.Contains(v.Reason, "trial-and-error job: starts on a1") {
			t.Errorf("TE job's reason %q", v.Reason)
		}
	}
}

// teSetup is a core with trial-and-error jobs on, whose first round saw
// the running best-effort jobs.
func teSetup(t *testing.T, nodes []bridge.Node, running ...bridge.Job) *Core {
	t.Helper()
	c := teCore(t)
	step(c, snapshot(t, epoch, nodes, running...), epoch, c.Solve)
	return c
}

// teCore is a fresh core with trial-and-error jobs on, as at a start.
func teCore(t *testing.T) *Core {
	t.Helper()
	set := settings()
	set.MinRunTime = 0
	set.TrialAndError = TESettings{Enabled: true, Weight: 4, MaxPreemptions: 2, Poll: 5 * time.Second}
	return newCore(t, set)
}

func gpus(j bridge.Job, n int) bridge.Job { j.GPUs = n; return j }

func signalled(actions []Action) []bridge.JobID {
	var out []bridge.JobID
	for _, a := range actions {
		if a.Kind == bridge.ActSignal {
			out = append(out, a.Job)
		}
	}
	return out
}

// Two TE jobs that arrive together get a victim each: the room the first
// one claims is not promised to the second.
func TestTwoTrialAndErrorJobsClaimDifferentRooms(t *testing.T) {
	const be = "gavel: model=resnet50-bs64 preempt=checkpoint"
	nodes := []bridge.Node{node("a1", "v100", 4, 4)}
	jobs := []bridge.Job{gpus(running(1, be, "a1", "v100", 0), 2), gpus(running(2, be, "a1", "v100", 0), 2)}
	c := teSetup(t, nodes, jobs...)
	te := []bridge.Job{gpus(pending(9, "gavel: model=a3c class=te"), 2), gpus(pending(10, "gavel: model=a3c class=te"), 2)}
	now := epoch.Add(10 * time.Second)
	got := signalled(look(c, snapshot(t, now, nodes, append(jobs, te...)...), now))
	if len(got) != 2 || got[0] == got[1] {
		t.Errorf("signalled %v, want jobs 1 and 2 once each", got)
	}
}

// After a restart in the middle of a TE preemption (from the saved
// records, or from the journal alone), the first round neither cancels
// the victim's preemption nor chooses a second victim, and leaves the TE
// job alone.
func TestTrialAndErrorPreemptionSurvivesARestart(t *testing.T) {
	const be = "gavel: model=resnet50-bs64 preempt=checkpoint grace=2m"
	nodes := []bridge.Node{node("a1", "v100", 2, 2), node("a2", "v100", 2, 2)}
	jobs := []bridge.Job{gpus(running(1, be, "a1", "v100", 0), 2), gpus(running(2, be, "a2", "v100", 0), 2)}
	teJob := gpus(pending(9, "gavel: model=a3c class=te"), 2)
	for _, from := range []string{"records", "journal"} {
		t.Run(from, func(t *testing.T) {
			c := teSetup(t, nodes, jobs...)
			// What the round saved; a look between rounds journals its
			// actions but saves no records.
			roundRecords := map[string]Record{}
			for _, r := range c.records(epoch) {
				roundRecords[r.JobID] = r
			}
			now := epoch.Add(10 * time.Second)
			actions := look(c, snapshot(t, now, nodes, append(jobs, teJob)...), now)
			first := signalled(actions)
			if len(first) != 1 {
				t.Fatalf("signalled %v, want one victim", first)
			}
			restarted := teCore(t)
			switch from {
			case "records":
				saved := map[string]Record{}
				for _, r := range c.records(now) {
					saved[r.JobID] = r
				}
				restarted.Restore(saved, c.Round())
			case "journal":
				var entries []JournalEntry
				for _, a := range actions {
					entries = append(entries, JournalEntry{Created: now, Action: a})
				}
				restarted.Restore(roundRecords, c.Round())
				restarted.RestoreJournal(entries, roundRecords)
			}
			later := now.Add(30 * time.Second)
			res := step(restarted, snapshot(t, later, nodes, append(jobs, teJob)...), later, restarted.Solve)
			if got := signalled(res.Actions); len(got) != 0 {
				t.Errorf("round after the restart signalled %v again", got)
			}
			if got := actionsOf(res.Actions, 9); got != "" {
				t.Errorf("round after the restart sent %q to the waiting TE job", got)
			}
			v := restarted.jobs[keyOf(first[0])]
			if v == nil || v.pre.phase != inGrace || v.pre.forTE != 9 {
				t.Errorf("victim's preemption after the restart: %+v, want still in grace for job 9", v)
			}
		})
	}
}

// A look between rounds whose actions could not be journaled changes
// nothing: the next look decides again, the same way.
func TestUnsentTrialAndErrorChoiceIsMadeAgain(t *testing.T) {
	const be = "gavel: model=resnet50-bs64 preempt=checkpoint"
	nodes := []bridge.Node{node("a1", "v100", 2, 2)}
	jobs := []bridge.Job{gpus(running(1, be, "a1", "v100", 0), 2)}
	c := teSetup(t, nodes, jobs...)
	teJob := gpus(pending(9, "gavel: model=a3c class=te"), 2)
	now := epoch.Add(10 * time.Second)
	snap := snapshot(t, now, nodes, append(jobs, teJob)...)
	p := c.Look(snap, now)
	first := actionsOf(p.Actions, 1)
	c.Commit(p, nil) // the journal write failed: nothing was sent
	again := actionsOf(look(c, snap, now.Add(time.Second)), 1)
	if first != "signal:USR1" || again != first {
		t.Errorf("victim's actions %q, then after a look that sent nothing %q; want the signal both times", first, again)
	}
}

// A TE job with features of its own gets room only on nodes that have
// them; after a round that sent nothing, no preemption starts between
// rounds.
func TestTrialAndErrorRoomRespectsFeaturesAndTrust(t *testing.T) {
	const be = "gavel: model=resnet50-bs64 preempt=checkpoint"
	plain, ib := node("a1", "v100", 2, 2), node("b1", "v100", 2, 2)
	ib.Features = []string{"v100", "ib"}
	nodes := []bridge.Node{plain, ib}
	jobs := []bridge.Job{gpus(running(1, be, "a1", "v100", 0), 2), gpus(running(2, be, "b1", "v100", 0), 2)}
	c := teSetup(t, nodes, jobs...)
	teJob := gpus(pending(9, "gavel: model=a3c class=te"), 2)
	teJob.Constraints = "ib"
	now := epoch.Add(10 * time.Second)
	if got := signalled(look(c, snapshot(t, now, nodes, append(jobs, teJob)...), now)); len(got) != 1 || got[0] != 2 {
		t.Errorf("signalled %v, want job 2, the one on the ib node", got)
	}

	c = teSetup(t, nodes, jobs...)
	c.lastSkip = "another daemon sets priorities on these jobs"
	if got := look(c, snapshot(t, now, nodes, append(jobs, teJob)...), now); len(got) != 0 {
		t.Errorf("after a skipped round the look between rounds sent %v", got)
	}
}
