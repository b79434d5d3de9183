package sched

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/internal/siterules"
	"github.com/gavel-slurm/gavel-slurm/internal/throughputs"
)

// These tests drive Step and Graces directly on hand-built snapshots: no
// daemon, no store, no fake Slurm.

const tag = "gavel: model=resnet50-bs64 steps=100k"

func newCore(t *testing.T, set Settings) *Core {
	t.Helper()
	table, err := throughputs.Reference()
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewCore(set, TableEstimator{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func node(name, typ string, gpus, used int) bridge.Node {
	return bridge.Node{Name: name, GPUType: typ, GPUs: gpus, GPUsUsed: used, Partitions: []string{"gpu"}, State: []string{"IDLE"}}
}

func pending(id bridge.JobID, comment string) bridge.Job {
	return bridge.Job{ID: id, Partition: "gpu", State: bridge.JobPending, GPUs: 1}.WithComment(comment)
}

func running(id bridge.JobID, comment, nodeName, typ string, restarts int) bridge.Job {
	j := pending(id, comment)
	j.State, j.RunningNodes, j.RunningGPUType, j.Restarts = bridge.JobRunning, []string{nodeName}, typ, restarts
	j.Priority = RunPriority
	return j
}

func snapshot(t *testing.T, at time.Time, nodes []bridge.Node, jobs ...bridge.Job) *bridge.Snapshot {
	t.Helper()
	s, err := bridge.NewSnapshot(at, "", nodes, jobs)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// actionsOf renders the actions for job id as "kind[:detail]".
func actionsOf(actions []Action, id bridge.JobID) string {
	var out []string
	for _, a := range actions {
		if a.Job != id {
			continue
		}
		switch a.Kind {
		case bridge.ActSetConstraints:
			out = append(out, string(a.Kind)+":"+a.Constraints)
		case bridge.ActSignal:
			out = append(out, string(a.Kind)+":"+a.Signal)
		case bridge.ActSetArrayLimit:
			out = append(out, fmt.Sprintf("%s:%d", a.Kind, a.Tasks))
		case bridge.ActSetShare:
			out = append(out, fmt.Sprintf("%s:%d@%s:%s", a.Kind, a.Shards, a.Node, a.Constraints))
		default:
			out = append(out, string(a.Kind))
		}
	}
	return strings.Join(out, ",")
}

func TestAdmission(t *testing.T) {
	c := newCore(t, settings())
	c.addTypes("v100", "k80")
	tests := map[string]struct {
		job  bridge.Job
		want AdmitCode
	}{
		"tagged untyped":        {job: pending(1, tag), want: Admitted},
		"other partition":       {job: func() bridge.Job { j := pending(1, tag); j.Partition = "cpu"; return j }(), want: NotInPartition},
		"unreadable record":     {job: func() bridge.Job { j := pending(1, tag); j.Unreadable = errors.New("two types"); return j }(), want: UnreadableRecord},
		"no tag":                {job: pending(1, "just a comment"), want: NoTag},
		"bad tag":               {job: pending(1, "gavel: steps=many"), want: BadTag},
		"no GPUs":               {job: func() bridge.Job { j := pending(1, tag); j.GPUs = 0; return j }(), want: NoGPUs},
		"typed, scheduled type": {job: func() bridge.Job { j := pending(1, tag); j.RequestedGPUType = "k80"; return j }(), want: Admitted},
		"own features":          {job: func() bridge.Job { j := pending(1, tag); j.Constraints = "ib&v100"; return j }(), want: Admitted},
		"OR constraint":         {job: func() bridge.Job { j := pending(1, tag); j.Constraints = "ib|eth"; return j }(), want: ConstraintOperators},
		"het job component":     {job: func() bridge.Job { j := pending(1, tag); j.HetJobID, j.HetJobOffset = 1, 0; return j }(), want: HetJob},
		"untagged het job":      {job: func() bridge.Job { j := pending(1, "no tag"); j.HetJobID = 1; return j }(), want: NoTag},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := c.admit(tc.job)
			if got.Code != tc.want {
				t.Errorf("admission %d (%q), want %d", got.Code, got.Reason, tc.want)
			}
			if got.OK() != (got.Reason == "") {
				t.Errorf("admitted %v with reason %q", got.OK(), got.Reason)
			}
		})
	}
	typed := pending(1, tag)
	typed.RequestedGPUType = "a100"
	set := settings()
	set.GPUTypes = []string{"v100", "k80"}
	if got := newCore(t, set).admit(typed); got.Code != UnscheduledType {
		t.Errorf("typed request for an unscheduled type: %d", got.Code)
	}
}

// The first round over a one-GPU cluster: one job is steered to the v100
// and released with the run priority, the other held. Replaying the same
// snapshot changes nothing.
func TestStepChoosesAndHolds(t *testing.T) {
	c := newCore(t, settings())
	nodes := []bridge.Node{node("a1", "v100", 1, 0)}
	snap := snapshot(t, epoch, nodes, pending(1, tag), pending(2, tag))
	res := step(c, snap, epoch, c.Solve)
	if res.Skipped != "" {
		t.Fatal(res.Skipped)
	}
	if got := actionsOf(res.Actions, 1); got != "set-constraints:v100,set-priority" {
		t.Errorf("chosen job: %q", got)
	}
	if got := actionsOf(res.Actions, 2); got != "hold" {
		t.Errorf("waiting job: %q", got)
	}
	if len(res.Records) != 2 || res.View.Jobs[0].Preempt != "checkpoint" {
		t.Errorf("records %d, view %+v", len(res.Records), res.View.Jobs)
	}
	// Slurm now shows what the actions asked for.
	first, second := pending(1, tag), pending(2, tag)
	first.Constraints, first.Priority = "v100", RunPriority
	second.Held = true
	again := step(c, snapshot(t, epoch.Add(time.Second), nodes, first, second), epoch.Add(time.Second), c.Solve)
	if len(again.Actions) != 0 {
		t.Errorf("replayed round sent %v", again.Actions)
	}
}

// A user's hold is never the daemon's to release, and the job stays out
// of the allocation.
func TestStepLeavesUserHoldsAlone(t *testing.T) {
	c := newCore(t, settings())
	held := pending(1, tag)
	held.Held, held.Reason = true, "JobHeldUser"
	res := step(c, snapshot(t, epoch, []bridge.Node{node("a1", "v100", 1, 0)}, held), epoch, c.Solve)
	if len(res.Actions) != 0 {
		t.Errorf("actions for a user-held job: %v", res.Actions)
	}
	if v := res.View.Jobs[0]; v.Reason != "held by user" {
		t.Errorf("reason %q", v.Reason)
	}
}

// One preemption through its whole life: the signal at a round, nothing
// inside the grace period, the requeue when it ends, then done once Slurm
// shows the job pending again.
func TestStepGracePeriod(t *testing.T) {
	tests := map[string]struct {
		mode     string
		response func(j bridge.Job) bridge.Job // what Slurm shows 1 s after the round
		early    string                        // actions at the check 1 s after the round
		atEnd    string                        // actions when the grace period ends
	}{
		"trap and wait": {
			mode: "checkpoint", response: func(j bridge.Job) bridge.Job { return j },
			atEnd: "requeue-hold,hold,begin-now",
		},
		"dies of the signal": {
			mode: "checkpoint", response: func(j bridge.Job) bridge.Job {
				j.State, j.RunningNodes, j.RunningGPUType = bridge.JobFailed, nil, ""
				return j
			},
			early: "requeue-hold,hold,begin-now",
		},
		"requeues itself": {
			mode: "checkpoint", response: func(j bridge.Job) bridge.Job {
				j.State, j.RunningNodes, j.RunningGPUType, j.Reason = bridge.JobPending, nil, "", "BeginTime"
				j.Restarts++
				return j
			},
			early: "hold",
		},
		"cancelled by its owner": {
			mode: "checkpoint", response: func(j bridge.Job) bridge.Job {
				j.State, j.RunningNodes, j.RunningGPUType = bridge.JobCancelled, nil, ""
				return j
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := newCore(t, settings())
			nodes := []bridge.Node{node("a1", "v100", 1, 1)}
			comment := tag + " preempt=" + tc.mode
			// Job 1 ran a while; job 2 waits and is due.
			step(c, snapshot(t, epoch, nodes, running(1, comment, "a1", "v100", 0), pending(2, tag)), epoch, c.Solve)
			now := epoch.Add(time.Minute)
			res := step(c, snapshot(t, now, nodes, running(1, comment, "a1", "v100", 0), pending(2, tag)), now, c.Solve)
			if got := actionsOf(res.Actions, 1); got != "signal:USR1" {
				t.Fatalf("preempting round: %q", got)
			}
			after := tc.response(running(1, comment, "a1", "v100", 0))
			now = now.Add(time.Second)
			if got := actionsOf(look(c, snapshot(t, now, nodes, after, pending(2, tag)), now), 1); got != tc.early {
				t.Errorf("inside the grace period: %q, want %q", got, tc.early)
			}
			now = now.Add(5 * time.Second)
			if got := actionsOf(look(c, snapshot(t, now, nodes, after, pending(2, tag)), now), 1); got != tc.atEnd {
				t.Errorf("at the end of the grace period: %q, want %q", got, tc.atEnd)
			}
		})
	}
}

// Translation of preemption modes: checkpoint signals, requeue requeues
// at once, never pins the job where it runs.
func TestStepPreemptModes(t *testing.T) {
	for _, tc := range []struct{ mode, want string }{
		{"checkpoint", "signal:USR1"},
		{"requeue", "requeue-hold,hold,begin-now"},
		{"never", ""},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			c := newCore(t, settings())
			nodes := []bridge.Node{node("a1", "v100", 1, 1)}
			comment := fmt.Sprintf("%s preempt=%s", tag, tc.mode)
			step(c, snapshot(t, epoch, nodes, running(1, comment, "a1", "v100", 0), pending(2, tag)), epoch, c.Solve)
			now := epoch.Add(time.Minute)
			res := step(c, snapshot(t, now, nodes, running(1, comment, "a1", "v100", 0), pending(2, tag)), now, c.Solve)
			if got := actionsOf(res.Actions, 1); got != tc.want {
				t.Errorf("actions %q, want %q", got, tc.want)
			}
			if tc.mode == "never" && !strings.Contains(res.View.Jobs[0].Reason, "cannot be preempted") {
				t.Errorf("reason %q", res.View.Jobs[0].Reason)
			}
		})
	}
}

// Users do not set their own share: the site's limits clamp a tag's
// weight and grace, entities come from Slurm accounts, and status says
// what was changed.
func TestSiteRulesBoundWhatTagsSet(t *testing.T) {
	set := settings()
	set.Rules = siterules.Default()
	c := newCore(t, set)
	greedy := pending(1, tag+" weight=1000000 grace=520w entity=otherlab")
	greedy.Account, greedy.User = "mylab", "ana"
	plain := pending(2, tag)
	plain.Account, plain.User = "mylab", "bob"
	res := step(c, snapshot(t, epoch, []bridge.Node{node("a1", "v100", 1, 0)}, greedy, plain), epoch, c.Solve)
	js := c.jobs[keyOf(1)]
	if js.weight != siterules.DefaultMaxWeight || js.entity != "mylab" || c.graceOf(js) != siterules.DefaultMaxGrace {
		t.Errorf("weight %v, entity %q, grace %v; want the site's bounds and the account", js.weight, js.entity, c.graceOf(js))
	}
	reason := res.View.Jobs[0].Reason
	for _, want := range []string{"weight", "grace", "entity=otherlab ignored"} {
		if !strings.Contains(reason, want) {
			t.Errorf("reason %q does not say what happened to %s", reason, want)
		}
	}
	if p := c.problem(nil, epoch); p.Jobs[0].Weight != siterules.DefaultMaxWeight || p.Jobs[0].Entity != "mylab" {
		t.Errorf("the policy sees weight %v, entity %q", p.Jobs[0].Weight, p.Jobs[0].Entity)
	}
}

// One job's unreachable SLO under an _SLOs policy does not stall the
// round: the allocation is made without it and the job's reason says so.
func TestUnreachableSLODegradesInsteadOfStalling(t *testing.T) {
	set := settings()
	set.Policy = "max_sum_throughput_normalized_by_cost_perf_SLOs"
	set.CostPerGPUHour = map[string]float64{"v100": 3, "k80": 1}
	c := newCore(t, set)
	nodes := []bridge.Node{node("a1", "v100", 1, 0), node("b1", "k80", 1, 0)}
	feasible := pending(1, tag+" slo=30d")
	// 100M steps in one minute: no GPU of the cluster can do it.
	hopeless := pending(2, "gavel: model=resnet50-bs64 steps=100M slo=1m")
	res := step(c, snapshot(t, epoch, nodes, feasible, hopeless), epoch, c.Solve)
	if res.Skipped != "" {
		t.Fatalf("round skipped: %s", res.Skipped)
	}
	var reason string
	for _, jv := range res.View.Jobs {
		if jv.Job.ID == 2 {
			reason = jv.Reason
		}
	}
	if !strings.Contains(reason, "SLO") {
		t.Errorf("the job whose SLO was dropped says %q", reason)
	}
}

// A job Slurm may not requeue (sbatch --no-requeue) is never preempted,
// whatever its tag asks: the requeue would fail and end the job for good.
func TestJobsThatCannotBeRequeuedAreNeverPreempted(t *testing.T) {
	c := newCore(t, settings())
	nodes := []bridge.Node{node("a1", "v100", 1, 1)}
	job := func() bridge.Job {
		j := running(1, tag+" preempt=checkpoint", "a1", "v100", 0)
		j.NoRequeue = true
		return j
	}
	step(c, snapshot(t, epoch, nodes, job(), pending(2, tag)), epoch, c.Solve)
	now := epoch.Add(time.Minute)
	res := step(c, snapshot(t, now, nodes, job(), pending(2, tag)), now, c.Solve)
	if got := actionsOf(res.Actions, 1); got != "" {
		t.Errorf("a job that cannot be requeued got %q", got)
	}
	jv := res.View.Jobs[0]
	if jv.Preempt != "never" || !strings.Contains(jv.Reason, "--no-requeue") {
		t.Errorf("mode %q, reason %q", jv.Preempt, jv.Reason)
	}
}
