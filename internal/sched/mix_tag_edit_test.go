package sched

import (
	"strings"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

// A mixed=ok job running on a mix of types whose owner then edits the tag
// out of its comment becomes unmanaged, its GPUs out of the rounds'
// cluster: the round does not give them away. (It would never be
// preempted anyway, so it escapes nothing.)
func TestEditedMixJobKeepsItsGPUs(t *testing.T) {
	for _, edit := range []bool{false, true} {
		name := map[bool]string{false: "tag kept", true: "tag edited away"}[edit]
		t.Run(name, func(t *testing.T) {
			const mixedOK = tag + " mixed=ok"
			c := newCore(t, settings())
			run := fourGPUs(9, mixedOK)
			run.State, run.RunningNodes, run.RunningGPUType, run.StartTime = bridge.JobRunning, []string{"k1", "v1"}, "", epoch
			run.Nodes, run.GPUsPerNode, run.Constraints = 2, 2, "[k80*1&v100*1]"
			nodes := []bridge.Node{node("v1", "v100", 4, 2), node("k1", "k80", 4, 2), node("v2", "v100", 4, 0)}
			step(c, snapshot(t, epoch, nodes, run), epoch, c.Solve)
			if edit {
				run = run.WithComment("my job, leave it alone")
			}
			now := epoch.Add(20 * time.Second)
			a, b := fourGPUs(10, tag), fourGPUs(11, tag)
			res := step(c, snapshot(t, now, nodes, run, a, b), now, c.Solve)
			placed := 0
			for _, id := range []bridge.JobID{10, 11} {
				if got := shapeActions(res.Actions, id); strings.Contains(got, "set-constraints") || strings.Contains(got, "set-priority") {
					placed++
				}
			}
			if placed != 1 {
				t.Errorf("%d of jobs 10, 11 (4 GPUs each) released with only v2's 4 GPUs free: 10 %q, 11 %q",
					placed, shapeActions(res.Actions, 10), shapeActions(res.Actions, 11))
			}
		})
	}
}
