package sched

import (
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/internal/throughputs"
)

func TestProbeRunningFive(t *testing.T) {
	table, _ := throughputs.Reference()
	set := packedSettings()
	set.Mechanism = "improved"
	c, _ := NewCore(set, flatRates{TableEstimator{Table: table}})
	n := sharedNode("v1", "v100", 4, 2)
	n.GPUsUsed = 4
	n.ShardUse = []bridge.GPUShards{{Total: 2}, {Total: 2}, {Total: 2}, {Total: 2}}
	jobs := []bridge.Job{running(1, a3cTag, "v1", "v100", 0), running(2, resnet18Tag, "v1", "v100", 0), running(3, a3cTag+" share=no", "v1", "v100", 0), running(4, resnet18Tag+" share=no", "v1", "v100", 0), pending(5, resnet50Tag+" share=no")}
	now := epoch
	for r := 0; r < 12; r++ {
		p := c.Step(Input{Snap: snapshot(t, now, []bridge.Node{n}, jobs...), Now: now, Solve: c.Solve})
		for _, d := range p.next.plan.Decisions {
			if d.Job == "1" || d.Job == "2" {
				t.Logf("round %d: %s %s type=%s partner=%q", r, d.Job, d.Action, d.Type, d.Partner)
			}
		}
		t.Logf("round %d actions %s", r, describeActions(p.Actions))
		c.Commit(p, accepted(p))
		now = now.Add(20 * time.Second)
	}
}
