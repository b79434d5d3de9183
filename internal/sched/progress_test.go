package sched

import (
	"strings"
	"testing"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/internal/throughputs"
	"github.com/gavel-slurm/gavel-slurm/policy"
)

// progressTable is the reference table plus the steps jobs reported.
type progressTable struct {
	TableEstimator
	done map[string]int64
}

var _ Progress = progressTable{}

func (p progressTable) StepsDone(id bridge.JobID) (int64, bool) {
	d, ok := p.done[id.String()]
	return d, ok
}

// The policies see what a job has left: its tag's total less the steps it
// reported, the whole total when it reported nothing, 1 when it ran past
// the total, and unknown (0) when the tag gives no total. Status shows the
// same figures.
func TestRemainingStepsComeFromReportedProgress(t *testing.T) {
	table, err := throughputs.Reference()
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		comment       string
		done          map[string]int64
		wantRemaining float64
		wantDone      int64
	}{
		"progress reported":      {"gavel: model=resnet50-bs64 steps=100k", map[string]int64{"1": 30_000}, 70_000, 30_000},
		"no progress yet":        {"gavel: model=resnet50-bs64 steps=100k", nil, 100_000, -1},
		"ran past its total":     {"gavel: model=resnet50-bs64 steps=100k", map[string]int64{"1": 120_000}, 1, 120_000},
		"no total in the tag":    {"gavel: model=resnet50-bs64", map[string]int64{"1": 5_000}, 0, 5_000},
		"another job's progress": {"gavel: model=resnet50-bs64 steps=100k", map[string]int64{"2": 30_000}, 100_000, -1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c, err := NewCore(settings(), progressTable{TableEstimator{Table: table}, tc.done})
			if err != nil {
				t.Fatal(err)
			}
			var seen *policy.Problem
			solve := func(p *policy.Problem) (*policy.Allocation, error) {
				seen = p
				return c.Solve(p)
			}
			snap := snapshot(t, epoch, []bridge.Node{node("a1", "v100", 1, 1)}, running(1, tc.comment, "a1", "v100", 0))
			res := step(c, snap, epoch, solve)
			if seen == nil || len(seen.Jobs) != 1 {
				t.Fatalf("policy problem %+v, want one job", seen)
			}
			if got := seen.Jobs[0].StepsRemaining; got != tc.wantRemaining {
				t.Errorf("policy sees %v steps remaining, want %v", got, tc.wantRemaining)
			}
			v := res.View.Jobs[0]
			wantTotal := int64(0)
			if strings.Contains(tc.comment, "steps=100k") {
				wantTotal = 100_000
			}
			if v.StepsTotal != wantTotal {
				t.Errorf("status: total %d, want the tag's %d", v.StepsTotal, wantTotal)
			}
			if v.StepsDone != tc.wantDone || float64(v.StepsRemaining) != tc.wantRemaining {
				t.Errorf("status: done %d remaining %d, want %d and %v", v.StepsDone, v.StepsRemaining, tc.wantDone, tc.wantRemaining)
			}
		})
	}
}
