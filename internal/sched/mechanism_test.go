package sched

import (
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/rounds"
)

// With allocations at most every 30 minutes, a job submitted one round
// after the first waits for the next recomputation under the paper's
// mechanism and has its share at once under the improved one.
func TestMechanismSettingReachesTheRounds(t *testing.T) {
	tests := map[string]struct {
		mechanism  rounds.Variant
		wantSolved bool
	}{
		"gavel":    {rounds.VariantGavel, false},
		"improved": {rounds.VariantImproved, true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			set := settings()
			set.MinResetInterval = 30 * time.Minute
			set.Mechanism = tc.mechanism
			c := newCore(t, set)
			nodes := []bridge.Node{node("a1", "v100", 1, 0), node("b1", "k80", 1, 0)}
			if res := step(c, snapshot(t, epoch, nodes, pending(1, tag)), epoch, c.Solve); res.Skipped != "" || !res.Solved {
				t.Fatalf("first round: skipped %q, solved %v", res.Skipped, res.Solved)
			}
			later := epoch.Add(set.Round)
			res := step(c, snapshot(t, later, nodes, pending(1, tag), pending(2, tag)), later, c.Solve)
			if res.Skipped != "" {
				t.Fatalf("second round skipped: %s", res.Skipped)
			}
			if res.Solved != tc.wantSolved {
				t.Errorf("allocation recomputed when job 2 arrived: %v, want %v", res.Solved, tc.wantSolved)
			}
			share := 0.0
			for _, typ := range []string{"v100", "k80"} {
				st, err := c.MechanismState("2", typ)
				if err != nil {
					t.Fatal(err)
				}
				share += st.Allocation
			}
			if (share > 0) != tc.wantSolved {
				t.Errorf("job 2's allocation right after it arrived: %v", share)
			}
		})
	}
}
