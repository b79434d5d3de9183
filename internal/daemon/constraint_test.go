package daemon

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

// A job's own features stay when the daemon adds and later changes the GPU
// type, and only types with a node that has them are used; a constraint
// the daemon cannot extend, or features no node has, leave the job to
// Slurm.
func TestOwnConstraintIsKept(t *testing.T) {
	h := newHarness(t, t.TempDir())
	h.slurm.AddNode(bridge.Node{Name: "a1", GPUType: "v100", GPUs: 1, Partitions: []string{"gpu"}, Features: []string{"v100"}})
	h.slurm.AddNode(bridge.Node{Name: "b1", GPUType: "k80", GPUs: 1, Partitions: []string{"gpu"}, Features: []string{"k80", "ib"}})
	submit := func(constraint string) bridge.JobID {
		return h.slurm.Submit(bridge.Job{User: "ana", Partition: "gpu", GPUs: 1, Constraints: constraint, Comment: resnet})
	}
	withFeature := submit("ib")
	alternatives := submit("ib|eth")
	nowhere := submit("gpfs")

	if rep := h.d.RunRound(context.Background()); rep.Managed != 1 {
		t.Fatalf("report %+v, want only the job with a feature some node has managed", rep)
	}
	// ResNet-50 runs fastest on a V100, but only the K80 node has ib.
	j := h.job(withFeature)
	if j.Constraints != "ib&k80" {
		t.Fatalf("constraint %q, want the user's feature and the only type with it, ib&k80", j.Constraints)
	}
	if row := h.board.Allocation().Rows[withFeature.String()]; row["v100"] > 0 {
		t.Errorf("allocation %v gives the job V100 time, where no node has ib", row)
	}
	for _, id := range []bridge.JobID{alternatives, nowhere} {
		if got := kinds(h.slurm.Applied(), id); len(got) != 0 {
			t.Errorf("unmanaged job %d was touched: %v", id, got)
		}
	}
	reasons := map[string]string{}
	for _, js := range h.board.Status().Jobs {
		reasons[js.JobID] = js.Reason
	}
	if !strings.Contains(reasons[alternatives.String()], "operators other than &") {
		t.Errorf("reason for ib|eth: %q", reasons[alternatives.String()])
	}
	if !strings.Contains(reasons[nowhere.String()], "no GPU node has all of its features gpfs") {
		t.Errorf("reason for gpfs: %q", reasons[nowhere.String()])
	}
}

// A job pinned to a type that has no free GPUs when it arrives (all held
// by others) or no nodes at all runs there once GPUs of the type appear.
func TestPinnedJobRunsWhenItsTypeAppears(t *testing.T) {
	set := settings()
	set.GPUTypes = []string{"v100", "k80", "p100"}
	h := newHarnessWith(t, set, t.TempDir(), "a1:v100:1", "b1:k80:1")
	other := h.submit("not scheduled here", 1)
	if err := h.slurm.Start(other, "b1"); err != nil {
		t.Fatal(err)
	}
	typed := func(typ string) bridge.JobID {
		return h.slurm.Submit(bridge.Job{User: "ana", Partition: "gpu", GPUs: 1, RequestedGPUType: typ, Comment: resnet})
	}
	onK80, onP100 := typed("k80"), typed("p100")
	round := func() {
		h.clock.now = h.clock.now.Add(20 * time.Second)
		if rep := h.d.RunRound(context.Background()); rep.Skipped != "" || rep.Failed != 0 {
			t.Fatalf("round: %+v", rep)
		}
	}
	round()
	if !h.job(onK80).Held || !h.job(onP100).Held {
		t.Fatalf("with no free K80 and no P100 both pinned jobs should wait held")
	}

	if err := h.slurm.Finish(other, bridge.JobCompleted); err != nil {
		t.Fatal(err)
	}
	h.slurm.AddNode(bridge.Node{Name: "c1", GPUType: "p100", GPUs: 1, Partitions: []string{"gpu"}})
	for range 3 {
		round()
		h.startChosen()
	}
	for id, typ := range map[bridge.JobID]string{onK80: "k80", onP100: "p100"} {
		if j := h.job(id); j.State != bridge.JobRunning || j.RunningGPUType != typ {
			t.Errorf("job pinned to %s: %s (%s) on %q, held %v", typ, j.State, j.Reason, j.RunningGPUType, j.Held)
		}
	}
}

// With no configured types, a job pinned to a type no node had at its
// arrival runs there once such a node joins; a job whose feature moves to
// another type follows it.
func TestRatesFollowNewTypesAndFeatures(t *testing.T) {
	h := newHarness(t, t.TempDir())
	h.slurm.AddNode(bridge.Node{Name: "a1", GPUType: "v100", GPUs: 1, Partitions: []string{"gpu"}, Features: []string{"v100", "ib"}})
	h.slurm.AddNode(bridge.Node{Name: "b1", GPUType: "k80", GPUs: 1, Partitions: []string{"gpu"}, Features: []string{"k80"}})
	pinned := h.slurm.Submit(bridge.Job{User: "ana", Partition: "gpu", GPUs: 1, RequestedGPUType: "p100", Comment: resnet})
	round := func() {
		h.clock.now = h.clock.now.Add(20 * time.Second)
		if rep := h.d.RunRound(context.Background()); rep.Skipped != "" || rep.Failed != 0 {
			t.Fatalf("round: %+v", rep)
		}
		h.startChosen()
	}
	round()
	if !h.job(pinned).Held {
		t.Fatal("the job pinned to p100 should wait while there is no p100")
	}
	h.slurm.AddNode(bridge.Node{Name: "c1", GPUType: "p100", GPUs: 1, Partitions: []string{"gpu"}, Features: []string{"p100"}})
	round()
	round()
	if j := h.job(pinned); j.State != bridge.JobRunning || j.RunningGPUType != "p100" {
		t.Errorf("pinned job after a p100 joined: %s (%s) on %q", j.State, j.Reason, j.RunningGPUType)
	}
}

// A job the daemon held that stops being managed (here: no node has its
// feature any more) gets its hold released, not forgotten held.
func TestDaemonHoldIsReleasedWhenTheJobStopsBeingManaged(t *testing.T) {
	h := newHarness(t, t.TempDir())
	h.slurm.AddNode(bridge.Node{Name: "a1", GPUType: "v100", GPUs: 1, Partitions: []string{"gpu"}, Features: []string{"v100", "ib"}})
	// As the daemon would have left them in earlier rounds: their own
	// feature and a GPU type.
	first := h.slurm.Submit(bridge.Job{User: "ana", Partition: "gpu", GPUs: 1, Constraints: "ib&v100", Comment: resnet})
	second := h.slurm.Submit(bridge.Job{User: "ana", Partition: "gpu", GPUs: 1, Constraints: "ib&v100", Comment: resnet})
	h.d.RunRound(context.Background())
	held := first
	if !h.job(first).Held {
		held = second
	}
	if !h.job(held).Held {
		t.Fatal("one of two jobs for one GPU should be held")
	}
	// The ib node leaves the partition.
	h.slurm.AddNode(bridge.Node{Name: "a1", GPUType: "v100", GPUs: 1, Partitions: []string{"gpu"}, Features: []string{"v100"}})
	h.clock.now = h.clock.now.Add(20 * time.Second)
	h.d.RunRound(context.Background())
	if j := h.job(held); j.Held || j.Constraints != "ib" {
		t.Errorf("job %d no longer managed: held %v (%s), constraints %q; want released with its own ib only",
			held, j.Held, j.Reason, j.Constraints)
	}
	for _, js := range h.board.Status().Jobs {
		if js.JobID == held.String() && !strings.Contains(js.Reason, "no GPU node has all of its features ib") {
			t.Errorf("reason %q", js.Reason)
		}
	}
}
