package daemon

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/bridge/fake"
)

// partitionSlurm is the fake Slurm read as the REST client reads it
// (bridge/rest buildSnapshot): only nodes and jobs of the configured
// partitions are in the snapshot.
type partitionSlurm struct {
	*fake.Slurm
	partitions []string
}

func (p partitionSlurm) Snapshot(ctx context.Context) (*bridge.Snapshot, error) {
	snap, err := p.Slurm.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	managed := func(names ...string) bool {
		for _, n := range names {
			if slices.Contains(p.partitions, n) {
				return true
			}
		}
		return false
	}
	var nodes []bridge.Node
	for _, n := range snap.Nodes {
		if managed(n.Partitions...) {
			nodes = append(nodes, n)
		}
	}
	var jobs []bridge.Job
	for _, j := range snap.Jobs {
		if managed(strings.Split(j.Partition, ",")...) {
			jobs = append(jobs, j)
		}
	}
	return bridge.NewSnapshot(snap.Taken, snap.APIVersion, nodes, jobs)
}

// A reload takes a partition out of slurm.partitions while the daemon
// holds jobs there. The REST client then no longer reads that partition's
// jobs; the daemon's holds on them must still be released, not forgotten
// (the jobs would stay held for ever, taken for their users' holds).
func TestHoldsInAPartitionRemovedByAReloadAreReleased(t *testing.T) {
	set := settings()
	set.Partitions = []string{"gpu", "gpu2"}
	h := newHarnessWith(t, set, t.TempDir())
	h.slurm.AddNode(bridge.Node{Name: "a1", GPUType: "v100", GPUs: 1, Partitions: []string{"gpu"}})
	h.slurm.AddNode(bridge.Node{Name: "b1", GPUType: "v100", GPUs: 1, Partitions: []string{"gpu2"}})
	var jobs []bridge.JobID
	for range 3 {
		jobs = append(jobs, h.slurm.Submit(bridge.Job{User: "ana", Partition: "gpu2", GPUs: 1, Comment: resnet}))
	}
	h.d.Slurm = partitionSlurm{h.slurm, set.Partitions}
	h.d.RunRound(context.Background())
	var held []bridge.JobID
	for _, id := range jobs {
		if h.job(id).Held {
			held = append(held, id)
		}
	}
	if len(held) == 0 {
		t.Fatal("no gpu2 job held by the first round")
	}
	// SIGHUP: gpu2 is no longer scheduled (serveDaemon rebuilds the
	// daemon over the same store, with a client for the new partitions).
	h.set.Partitions = []string{"gpu"}
	h.restart()
	h.d.Slurm = partitionSlurm{h.slurm, h.set.Partitions}
	h.d.out = h.d.Slurm
	for range 4 {
		h.clock.now = h.clock.now.Add(20 * time.Second)
		h.d.RunRound(context.Background())
	}
	for _, id := range held {
		if j := h.job(id); j.Held {
			rec, tracked := storedRecord(t, h.store, id.String())
			t.Errorf("job %d of the removed partition stays held (%s) by the daemon's hold; record kept: %v %+v", id, j.Reason, tracked, rec.HeldByDaemon)
		}
	}
}

// Consequence of a jobs reply read as an empty queue (bridge/rest: a 200
// reply without its "jobs" list): two such reads in a row forget every
// managed job, the daemon's holds with them; when the jobs show again
// their holds are taken for their users' and never released.
func TestJobsHeldByTheDaemonSurviveTwoEmptyAnswers(t *testing.T) {
	h := newHarness(t, t.TempDir(), "a1:v100:1")
	var jobs []bridge.JobID
	for range 4 {
		jobs = append(jobs, h.submit(resnet, 1))
	}
	h.d.RunRound(context.Background())
	h.startChosen()
	empty := 4 // two rounds, each reading twice
	h.slurm.HideJobs(func(int) []bridge.JobID {
		if empty > 0 {
			empty--
			return jobs
		}
		return nil
	})
	h.clock.now = h.clock.now.Add(20 * time.Second)
	h.d.RunRound(context.Background()) // both reads of this round are empty
	h.clock.now = h.clock.now.Add(20 * time.Second)
	h.d.RunRound(context.Background()) // and of the next
	for range 8 {
		h.clock.now = h.clock.now.Add(20 * time.Second)
		h.d.RunRound(context.Background())
		h.startChosen()
	}
	for _, id := range jobs {
		if r := findStatus(t, h.board.Status(), id).Reason; h.job(id).Held && strings.HasPrefix(r, "held by") {
			t.Errorf("job %d: %q after two rounds of empty answers: the daemon's own hold was forgotten and is never released", id, r)
		}
	}
}
