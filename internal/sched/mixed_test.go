package sched

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/internal/hadar"
)

// shapeActions renders the actions for job id, set-shape with its request.
func shapeActions(actions []Action, id bridge.JobID) string {
	var out []string
	for _, a := range actions {
		if a.Job != id {
			continue
		}
		switch a.Kind {
		case bridge.ActSetShape:
			out = append(out, fmt.Sprintf("set-shape:%d/%d/%d/%s", a.Nodes, a.GPUsPerNode, a.GPUs, a.Constraints))
		case bridge.ActSetConstraints:
			out = append(out, "set-constraints:"+a.Constraints)
		default:
			out = append(out, string(a.Kind))
		}
	}
	return strings.Join(out, ",")
}

// fourGPUs is a pending 4-GPU job asking for 4 GPUs on one node.
func fourGPUs(id bridge.JobID, comment string) bridge.Job {
	j := pending(id, comment)
	j.GPUs, j.GPUsPerNode, j.Nodes = 4, 4, 1
	return j
}

// A waiting mixed=ok job goes on a mix only when no single type has room
// for it; other jobs wait as before.
func TestMixedJobsStartAcrossTypes(t *testing.T) {
	const mixedOK = tag + " mixed=ok"
	tests := map[string]struct {
		comment     string
		constraints string
		v100Used    int // of 4 on v1; k1 has 2 of 4 in use
		k80Used     int
		// noNever: the site's rules do not allow preempt=never.
		noNever    bool
		want       string
		wantReason string
	}{
		"mixed=ok waits for no type: 2+2 on a counted constraint": {
			comment: mixedOK, v100Used: 2, k80Used: 2,
			want:       "set-shape:2/2/0/[k80*1&v100*1],set-priority",
			wantReason: "starting on a mix: 2 k80 + 2 v100 (no single type has 4 GPUs free)",
		},
		"an uneven mix asks for GPUs per job": {
			comment: mixedOK, v100Used: 1, k80Used: 3,
			want:       "set-shape:2/0/4/k80|v100,set-priority",
			wantReason: "starting on a mix: 1 k80 + 3 v100",
		},
		"without mixed=ok it waits": {
			comment: tag, v100Used: 2, k80Used: 2,
			want: "hold",
		},
		"mixed=no waits": {
			comment: tag + " mixed=no", v100Used: 2, k80Used: 2,
			want: "hold",
		},
		"one type has room: it runs there, as always": {
			comment: mixedOK, v100Used: 0, k80Used: 2,
			want: "set-constraints:v100,set-priority",
		},
		"its own features cannot join a counted constraint: it waits": {
			comment: mixedOK, constraints: "ib", v100Used: 2, k80Used: 2,
			want: "hold",
		},
		// A job on a mix is never preempted: where the site does not
		// allow that, mixed=ok is no way around it.
		"mixed=ok where preempt=never is not allowed: it waits": {
			comment: mixedOK, v100Used: 2, k80Used: 2, noNever: true,
			want: "hold", wantReason: "mixed=ok ignored",
		},
		"too few GPUs idle in all: it waits": {
			comment: mixedOK, v100Used: 3, k80Used: 2,
			want: "hold",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			set := settings()
			if tc.noNever {
				set.Rules.Limits.AllowedPreempt = []bridge.PreemptMode{bridge.PreemptCheckpoint, bridge.PreemptRequeue}
			}
			c := newCore(t, set)
			nodes := []bridge.Node{node("v1", "v100", 4, tc.v100Used), node("k1", "k80", 4, tc.k80Used)}
			for i := range nodes {
				nodes[i].Features = []string{nodes[i].GPUType, "ib"}
			}
			j := fourGPUs(9, tc.comment)
			j.Constraints = tc.constraints
			res := step(c, snapshot(t, epoch, nodes, j), epoch, c.Solve)
			if got := shapeActions(res.Actions, 9); got != tc.want {
				t.Errorf("actions %q, want %q", got, tc.want)
			}
			// The reason as status shows it: the decision, then the notes.
			if got := strings.Join(append([]string{c.jobs[keyOf(9)].reason}, c.jobs[keyOf(9)].notes...), "; "); !strings.Contains(got, tc.wantReason) {
				t.Errorf("reason %q, want it to say %q", got, tc.wantReason)
			}
		})
	}
}

// A job shaped for a mix is still managed; when a round places it on one
// type its request goes back to its own; while it runs on a mix it keeps
// its GPUs, its time is credited per type, and the rounds do not place
// other jobs on them.
func TestMixedJobLifecycle(t *testing.T) {
	const mixedOK = tag + " mixed=ok"
	c := newCore(t, settings())
	busy := []bridge.Node{node("v1", "v100", 4, 2), node("k1", "k80", 4, 2)}
	j := fourGPUs(9, mixedOK)
	res := step(c, snapshot(t, epoch, busy, j), epoch, c.Solve)
	var shape bridge.Action
	for _, a := range res.Actions {
		if a.Kind == bridge.ActSetShape {
			shape = a.Action
		}
	}
	if shape.Nodes != 2 {
		t.Fatalf("no mix chosen: %q", shapeActions(res.Actions, 9))
	}

	// Slurm took the shape but has not started the job; the V100 node is
	// free now: the round places it there and gives it its request back.
	shaped := j
	shaped.Nodes, shaped.GPUsPerNode, shaped.Constraints, shaped.Priority = shape.Nodes, shape.GPUsPerNode, shape.Constraints, RunPriority
	now := epoch.Add(20 * time.Second)
	free := []bridge.Node{node("v1", "v100", 4, 0), node("k1", "k80", 4, 2)}
	res = step(c, snapshot(t, now, free, shaped), now, c.Solve)
	if got, want := shapeActions(res.Actions, 9), "set-shape:1/4/0/v100"; got != want {
		t.Errorf("back on one type: actions %q, want %q", got, want)
	}
	if a := c.admit(shaped); !a.OK() {
		t.Errorf("a job shaped for a mix is not managed: %s", a.Reason)
	}

	// It started on the mix instead; a 2-GPU job arrives.
	run := shaped
	run.State, run.RunningNodes, run.RunningGPUType = bridge.JobRunning, []string{"k1", "v1"}, ""
	run.StartTime = now
	other := pending(10, tag)
	other.GPUs, other.GPUsPerNode = 2, 2
	full := []bridge.Node{node("v1", "v100", 4, 4), node("k1", "k80", 4, 4)}
	later := now.Add(20 * time.Second)
	res = step(c, snapshot(t, later, full, run, other), later, c.Solve)
	if got := shapeActions(res.Actions, 9); got != "" {
		t.Errorf("job on a mix: actions %q, want none", got)
	}
	if got, want := c.jobs[keyOf(9)].reason, "running on a mix: 2 k80 + 2 v100"; got != want {
		t.Errorf("reason %q, want %q", got, want)
	}
	if got := shapeActions(res.Actions, 10); got != "hold" {
		t.Errorf("job 10: actions %q, want a hold (the mix holds the GPUs)", got)
	}
	got := c.jobs[keyOf(9)].received
	if math.Abs(got["v100"]-10) > 1e-6 || math.Abs(got["k80"]-10) > 1e-6 {
		t.Errorf("received %v, want 10 s on each type (20 s on 2+2 GPUs of a 4-GPU job)", got)
	}
}

func TestIsMixConstraint(t *testing.T) {
	isType := func(s string) bool { return s == "v100" || s == "k80" }
	for c, want := range map[string]bool{
		"[v100*1&k80*1]": true, "[v100*2&k80*1]": true, "v100|k80": true,
		"[v100*1&ib*1]": false, "[v100*0&k80*1]": false, "[v100&k80]": false, "[]": false,
		"v100": false, "v100|ib": false, "ib&[v100*1&k80*1]": false, "[v100*1&k80*1": false, "": false,
	} {
		if got := isMixConstraint(c, isType); got != want {
			t.Errorf("isMixConstraint(%q) = %v, want %v", c, got, want)
		}
	}
}

func TestShapeFor(t *testing.T) {
	tests := map[string]struct {
		parts []hadar.Part
		want  bridge.Action
	}{
		"even": {[]hadar.Part{{Server: "v1", Type: "v100", GPUs: 2}, {Server: "k1", Type: "k80", GPUs: 2}},
			bridge.Action{Kind: bridge.ActSetShape, Job: 3, Nodes: 2, GPUsPerNode: 2, Constraints: "[k80*1&v100*1]"}},
		"even over three nodes": {[]hadar.Part{{Server: "v1", Type: "v100", GPUs: 1}, {Server: "v2", Type: "v100", GPUs: 1}, {Server: "k1", Type: "k80", GPUs: 1}},
			bridge.Action{Kind: bridge.ActSetShape, Job: 3, Nodes: 3, GPUsPerNode: 1, Constraints: "[k80*1&v100*2]"}},
		"uneven": {[]hadar.Part{{Server: "v1", Type: "v100", GPUs: 3}, {Server: "k1", Type: "k80", GPUs: 1}},
			bridge.Action{Kind: bridge.ActSetShape, Job: 3, Nodes: 2, GPUs: 4, Constraints: "k80|v100"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := shapeFor(3, tc.parts, 4); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			if err := tc.want.Validate(); err != nil {
				t.Error(err)
			}
		})
	}
}

// A job running on a mix is not the round's to place: free GPUs go to the
// jobs that wait, however high the mix job's priority.
func TestJobOnAMixDoesNotClaimFreeGPUs(t *testing.T) {
	const mixedOK = tag + " mixed=ok"
	c := newCore(t, settings())
	run := fourGPUs(9, mixedOK)
	run.State, run.RunningNodes, run.RunningGPUType, run.StartTime = bridge.JobRunning, []string{"k1", "v1"}, "", epoch
	run.Nodes, run.GPUsPerNode, run.Constraints = 2, 2, "[k80*1&v100*1]"
	waiting := fourGPUs(10, tag)
	nodes := []bridge.Node{node("v1", "v100", 4, 2), node("k1", "k80", 4, 2), node("v2", "v100", 4, 0)}
	res := step(c, snapshot(t, epoch, nodes, run, waiting), epoch, c.Solve)
	if got := shapeActions(res.Actions, 10); !strings.Contains(got, "set-constraints:v100") || strings.Contains(got, "hold") {
		t.Errorf("waiting job: actions %q, want it placed on the free v100 node", got)
	}
	if got := shapeActions(res.Actions, 9); got != "" {
		t.Errorf("job on a mix: actions %q, want none", got)
	}
}
