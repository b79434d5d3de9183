package sched

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/internal/hadar"
)

// Random clusters and mixed=ok jobs: every mix fits in the GPUs the plan
// leaves idle, per type, and is chosen only when no single type fits.
func TestPlaceMixesProperties(t *testing.T) {
	types := []string{"v100", "k80", "p100"}
	mixedRounds := 0
	defer func() { t.Logf("%d rounds with mixes", mixedRounds) }()
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 11))
		c := newCore(t, settings())
		var nodes []bridge.Node
		for i := range 2 + r.IntN(4) {
			typ := types[r.IntN(len(types))]
			size := []int{2, 4, 8}[r.IntN(3)]
			nodes = append(nodes, node(fmt.Sprintf("%s-%d", typ, i), typ, size, r.IntN(size+1)))
		}
		var jobs []bridge.Job
		for i := range 1 + r.IntN(4) {
			j := pending(bridge.JobID(10+i), tag+" mixed=ok")
			j.GPUs = []int{2, 3, 4, 6, 8}[r.IntN(5)]
			j.GPUsPerNode, j.Nodes = j.GPUs, 1
			jobs = append(jobs, j)
		}
		snap := snapshot(t, epoch, nodes, jobs...)
		step(c, snap, epoch, c.Solve)
		var mixes map[jobKey]mixChoice
		if c.plan != nil {
			mixes = c.placeMixes(snap, c.plan) // the mixes the round chose
		}
		if len(mixes) > 0 {
			mixedRounds++
		}
		if len(mixes) == 0 || c.plan == nil {
			continue
		}
		idle, err := hadar.NewIdle(c.idleAfter(c.plan))
		if err != nil {
			t.Fatal(err)
		}
		free := map[string]int{}
		for _, s := range idle.Servers() {
			free[s.Type] += len(s.GPUs)
		}
		used := map[string]int{}
		for id, m := range mixes {
			n := 0
			for typ, k := range m.counts {
				used[typ] += k
				n += k
			}
			if n != c.jobs[id].scale || len(m.counts) < 2 {
				t.Fatalf("seed %d: job %s scale %d mix %v", seed, id, c.jobs[id].scale, m.counts)
			}
		}
		for typ, k := range used {
			if k > free[typ] {
				t.Fatalf("seed %d: %d %s used by mixes, %d idle (%v)", seed, k, typ, free[typ], mixes)
			}
		}
	}
}
