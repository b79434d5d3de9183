package sched

import (
	"strings"
	"testing"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

// A job running on a mix whose owner edits its comment (scontrol update)
// and drops mixed=ok keeps holding its GPUs: the round does not hand them
// to a waiting job.
func TestMixJobWithEditedTagKeepsItsGPUs(t *testing.T) {
	for name, comment := range map[string]string{"mixed=ok kept": tag + " mixed=ok", "mixed=ok dropped": tag} {
		t.Run(name, func(t *testing.T) {
			c := newCore(t, settings())
			run := fourGPUs(9, comment)
			run.State, run.RunningNodes, run.RunningGPUType, run.StartTime = bridge.JobRunning, []string{"k1", "v1"}, "", epoch
			run.Nodes, run.GPUsPerNode, run.Constraints = 2, 2, "[k80*1&v100*1]"
			waiting := pending(10, tag)
			waiting.GPUs = 2
			nodes := []bridge.Node{node("v1", "v100", 2, 2), node("k1", "k80", 2, 2)}
			res := step(c, snapshot(t, epoch, nodes, run, waiting), epoch, c.Solve)
			if got := shapeActions(res.Actions, 10); strings.Contains(got, "release") || strings.Contains(got, "set-priority") {
				t.Errorf("waiting job 10: %q, want it held: job 9 holds every GPU (reason %q)", got, c.jobs[keyOf(10)].reason)
			}
		})
	}
}
