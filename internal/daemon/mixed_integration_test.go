//go:build integration

package daemon

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/internal/api"
	"github.com/gavel-slurm/gavel-slurm/internal/slurmtest"
)

// A mixed=ok 4-GPU job, with two GPUs taken on each node of its
// partition (one V100 node, one K80 node), starts on 2 V100 + 2 K80 when
// no single type has four free: the daemon shapes its request for the
// mix (two nodes, two GPUs each, one node of each type) and Slurm starts
// it. A job without mixed=ok, in the same place, keeps waiting.
func TestMixedJobStartsAcrossTypes(t *testing.T) {
	env := slurmtest.FromEnv(t)
	part := ownPartition(t, env, "v100-2", "k80-2")
	set := Settings{Policy: "max_min_fairness_perf", Partitions: []string{part}, Round: 4 * time.Second}
	p := newInProcess(t, restClient(t, env, env.URL, part), set)

	// Unmanaged jobs (no tag) hold two GPUs on each node.
	var occupiers []int
	for _, n := range []string{"v100-2", "k80-2"} {
		id := env.Submit(t, "#!/bin/sh\nsleep 300\n", "--partition="+part, "--nodelist="+n, "--gres=gpu:2",
			"--job-name=mixed-occupier", "--output=/dev/null")
		occupiers = append(occupiers, id)
	}
	for _, id := range occupiers {
		env.WaitState(t, id, "RUNNING", 60*time.Second)
	}
	single := env.Submit(t, "#!/bin/sh\nsleep 300\n", "--partition="+part, "--gres=gpu:4", "--job-name=mixed-single",
		"--output=/dev/null", "--comment=gavel: model=resnet50-bs64 steps=100k")
	mixed := env.Submit(t, "#!/bin/sh\nsleep 300\n", "--partition="+part, "--gres=gpu:4", "--job-name=mixed-ok",
		"--output=/dev/null", "--comment=gavel: model=resnet50-bs64 steps=100k mixed=ok")

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})

	j := env.WaitState(t, mixed, "RUNNING", 60*time.Second)
	t.Logf("mixed=ok job %d runs on %s (features %s, tres_per_node %s, gres %v)", mixed, j.Nodes, j.Features, j.TresPerNode, j.GresDetail)
	if j.Nodes != "k80-2,v100-2" {
		t.Errorf("nodes %q, want k80-2,v100-2", j.Nodes)
	}
	gres := strings.Join(j.GresDetail, " ")
	if !strings.Contains(gres, "gpu:k80:2") || !strings.Contains(gres, "gpu:v100:2") {
		t.Errorf("GPUs %q, want 2 K80 and 2 V100", gres)
	}
	if s := env.Job(t, single); s.HasState("RUNNING") {
		t.Errorf("job %d without mixed=ok started on %s", single, s.Nodes)
	}

	// The next round shows the job on its mix, and keeps it there.
	deadline := time.Now().Add(30 * time.Second)
	for {
		st := p.board.Status()
		if js := findOptional(st.Jobs, mixed); js != nil && strings.HasPrefix(js.Reason, "running on a mix: 2 k80 + 2 v100") {
			t.Logf("status: %s; received %v", js.Reason, js.Received)
			break
		}
		if time.Now().After(deadline) {
			js := findOptional(st.Jobs, mixed)
			t.Fatalf("status never said the job runs on a mix: %+v", js)
		}
		time.Sleep(time.Second)
	}
	if j := env.Job(t, mixed); !j.HasState("RUNNING") || j.RestartCount != 0 {
		t.Errorf("job on a mix: state %v, %d restarts; want running, never restarted", j.State, j.RestartCount)
	}
	// The shape went out once, in one update, and nothing after it.
	p.slurm.mu.Lock()
	defer p.slurm.mu.Unlock()
	var shapes []bridge.Action
	for _, a := range p.slurm.sent {
		if a.Job == bridge.JobID(mixed) && a.Kind == bridge.ActSetShape {
			shapes = append(shapes, a)
		}
		if a.Job == bridge.JobID(single) && a.Kind == bridge.ActSetShape {
			t.Errorf("job %d without mixed=ok was reshaped: %s", single, a)
		}
	}
	if len(shapes) != 1 || shapes[0].Nodes != 2 || shapes[0].GPUsPerNode != 2 || shapes[0].Constraints != "[k80*1&v100*1]" {
		t.Errorf("set-shape actions %v, want one: 2 nodes, 2 GPUs each, [k80*1&v100*1]", shapes)
	}
}

// findOptional is the job's line in the daemon's status, or nil.
func findOptional(jobs []api.JobStatus, id int) *api.JobStatus {
	for i := range jobs {
		if jobs[i].JobID == itoa(id) {
			return &jobs[i]
		}
	}
	return nil
}
