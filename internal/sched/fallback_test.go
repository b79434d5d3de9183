package sched

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/internal/throughputs"
	"github.com/gavel-slurm/gavel-slurm/policy"
	"github.com/gavel-slurm/gavel-slurm/rounds"
)

// brokenPolicy stands for a policy that fails on the problem it is given:
// with an error, or by panicking.
type brokenPolicy struct {
	policy.Policy
	panics bool
	calls  int
}

func (b *brokenPolicy) Allocate(*policy.Problem) (*policy.Allocation, error) {
	b.calls++
	if b.panics {
		var rows []policy.Row
		_ = rows[3] // an index out of range, as a bug would have it
	}
	return nil, errors.New("solver stopped with status 10")
}

// A policy that fails must not stop the rounds: the stand-in's equal
// shares run the round (one job chosen, the other held, as any allocation
// would), status and the saved state say why, and the configured policy
// is asked again at the mechanism's next chance (the next round with the
// improved mechanism, the next reset with Gavel's) and its answer used
// once it succeeds.
func TestAFailingPolicyDoesNotStallTheRounds(t *testing.T) {
	tests := map[string]struct {
		panics    bool
		mechanism rounds.Variant
		retryAt   time.Duration // when the policy is asked again
	}{
		"error, improved": {mechanism: rounds.VariantImproved, retryAt: time.Minute},
		"panic, improved": {panics: true, mechanism: rounds.VariantImproved, retryAt: time.Minute},
		"error, gavel":    {mechanism: rounds.VariantGavel, retryAt: 33 * time.Minute},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			set := settings()
			set.Mechanism, set.MinResetInterval = tc.mechanism, 32*time.Minute
			c := newCore(t, set)
			panics := tc.panics
			broken := &brokenPolicy{Policy: c.pol, panics: panics}
			working := c.pol
			c.pol = broken
			nodes := []bridge.Node{node("a1", "v100", 1, 0)}
			snap := snapshot(t, epoch, nodes, pending(1, tag), pending(2, tag))
			res := step(c, snap, epoch, c.Solve)
			if res.Skipped != "" {
				t.Fatalf("round skipped: %s", res.Skipped)
			}
			if broken.calls != 1 || !res.Solved {
				t.Fatalf("policy called %d times, solved %v", broken.calls, res.Solved)
			}
			want := "status 10"
			if panics {
				// The panic's value and where it happened.
				want = "panic: runtime error: index out of range [3] with length 0 (at github.com/gavel-slurm/gavel-slurm/internal/sched.(*brokenPolicy).Allocate sched/fallback_test.go:"
			}
			if !strings.Contains(res.Fallback, want) || res.View.AllocationFallback != res.Fallback || res.State.AllocationFallback != res.Fallback {
				t.Errorf("fallback %q, view %q, state %q: want the failure (%q) in all three",
					res.Fallback, res.View.AllocationFallback, res.State.AllocationFallback, want)
			}
			if got := res.View.Allocation.Policy; got != StandInPolicy {
				t.Errorf("allocation in use from %q, want the stand-in %q", got, StandInPolicy)
			}
			chosen := actionsOf(res.Actions, 1) + "|" + actionsOf(res.Actions, 2)
			if chosen != "set-constraints:v100,set-priority|hold" && chosen != "hold|set-constraints:v100,set-priority" {
				t.Errorf("actions %q: want one job chosen for the v100 and the other held", chosen)
			}

			// Slurm shows the first round's actions; the policy works again.
			if panics && c.pol == broken {
				t.Error("the policy that panicked is still in use: it may keep state the panic broke")
			}
			c.pol = working
			at := epoch.Add(tc.retryAt)
			var jobs []bridge.Job
			for _, id := range []bridge.JobID{1, 2} {
				j := pending(id, tag)
				if strings.HasPrefix(actionsOf(res.Actions, id), "hold") {
					j.Held = true
				} else {
					j = running(id, tag, "a1", "v100", 0)
					j.StartTime = epoch
				}
				jobs = append(jobs, j)
			}
			again := step(c, snapshot(t, at, []bridge.Node{node("a1", "v100", 1, 1)}, jobs...), at, c.Solve)
			if again.Skipped != "" || !again.Solved {
				t.Fatalf("second round: skipped %q, solved %v: the policy was not asked again", again.Skipped, again.Solved)
			}
			if again.Fallback != "" || again.View.AllocationFallback != "" {
				t.Errorf("second round still on the stand-in: %q", again.Fallback)
			}
			if got := again.View.Allocation.Policy; got != settings().Policy {
				t.Errorf("allocation in use from %q, want %q", got, settings().Policy)
			}
		})
	}
}

// A Solver passed in from outside the core that panics is contained too.
func TestAPanickingSolverIsContained(t *testing.T) {
	c := newCore(t, settings())
	snap := snapshot(t, epoch, []bridge.Node{node("a1", "v100", 1, 0)}, pending(1, tag))
	res := step(c, snap, epoch, func(*policy.Problem) (*policy.Allocation, error) { panic("solver bug") })
	if res.Skipped != "" {
		t.Fatalf("round skipped: %s", res.Skipped)
	}
	if !strings.Contains(res.Fallback, "solver bug") {
		t.Errorf("fallback %q", res.Fallback)
	}
	if got := actionsOf(res.Actions, 1); got != "set-constraints:v100,set-priority" {
		t.Errorf("the only job: %q", got)
	}
}

// With Gavel's mechanism the allocation changes only at a reset of the
// time received, so the policy is asked again at the next reset, not in
// the rounds between; and the failure is forgotten once no job is left.
func TestAFailedPolicyIsRetriedAtTheNextResetWithGavelsMechanism(t *testing.T) {
	set := settings()
	set.Mechanism, set.MinResetInterval = rounds.VariantGavel, 32*time.Minute
	c := newCore(t, set)
	working := c.pol
	c.pol = &brokenPolicy{Policy: working}
	nodes := []bridge.Node{node("a1", "v100", 1, 0)}
	one := pending(1, tag)
	if res := step(c, snapshot(t, epoch, nodes, one), epoch, c.Solve); res.Fallback == "" {
		t.Fatalf("the first round did not fall back: %+v", res)
	}
	c.pol = working
	one = running(1, tag, "a1", "v100", 0)
	one.StartTime = epoch
	busy := []bridge.Node{node("a1", "v100", 1, 1)}
	at := epoch.Add(time.Minute)
	if res := step(c, snapshot(t, at, busy, one), at, c.Solve); res.Solved || res.Fallback == "" {
		t.Errorf("a minute later: solved %v, fallback %q; want the stand-in kept until the reset", res.Solved, res.Fallback)
	}
	at = epoch.Add(33 * time.Minute)
	if res := step(c, snapshot(t, at, busy, one), at, c.Solve); !res.Solved || res.Fallback != "" {
		t.Errorf("after the reset interval: solved %v, fallback %q; want the policy's allocation", res.Solved, res.Fallback)
	}
	// Fails again, then the job ends: nothing is left to stand in for.
	c.pol = &brokenPolicy{Policy: working}
	at = at.Add(33 * time.Minute)
	two := pending(2, tag)
	if res := step(c, snapshot(t, at, busy, one, two), at, c.Solve); res.Fallback == "" {
		t.Fatalf("a new job and a failing policy: no fallback")
	}
	at = at.Add(time.Minute)
	if res := step(c, snapshot(t, at, nodes, done(one), done(two)), at, c.Solve); res.Fallback != "" || res.View.AllocationFallback != "" {
		t.Errorf("no job left: fallback %q still reported", res.Fallback)
	}
}

// A cost policy without prices would fail on every problem: the core
// refuses it at start instead of running every round on the stand-in.
func TestACostPolicyNeedsPrices(t *testing.T) {
	set := settings()
	set.Policy = "max_sum_throughput_normalized_by_cost_perf"
	table, err := throughputs.Reference()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewCore(set, TableEstimator{Table: table}); err == nil || !strings.Contains(err.Error(), "cost_per_gpu_hour") {
		t.Errorf("NewCore without prices: %v", err)
	}
	set.CostPerGPUHour = map[string]float64{"v100": 2.48}
	if _, err := NewCore(set, TableEstimator{Table: table}); err != nil {
		t.Errorf("NewCore with prices: %v", err)
	}
}

// Prices a cost policy cannot work with are refused at start too: a
// configured type without one, a price that is not positive.
func TestACostPolicyNeedsPositivePricesForEveryType(t *testing.T) {
	table, err := throughputs.Reference()
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		types []string
		costs map[string]float64
		ok    bool
	}{
		"every type priced": {types: []string{"v100", "k80"}, costs: map[string]float64{"v100": 2.48, "k80": 0.45}, ok: true},
		"a type unpriced":   {types: []string{"v100", "k80"}, costs: map[string]float64{"v100": 2.48}},
		"a zero price":      {costs: map[string]float64{"v100": 0}},
	} {
		set := settings()
		set.Policy, set.GPUTypes, set.CostPerGPUHour = "max_sum_throughput_normalized_by_cost_perf", tc.types, tc.costs
		if _, err := NewCore(set, TableEstimator{Table: table}); (err == nil) != tc.ok {
			t.Errorf("%s: NewCore error %v, want ok %v", name, err, tc.ok)
		}
	}
}

// A policy that keeps failing is asked again after one round, then after
// twice as long each time (up to maxRetryDelay), not every round: one that
// fails slowly would cost its time at every round.
func TestAFailingPolicyIsAskedAgainLessAndLessOften(t *testing.T) {
	set := settings()
	set.Mechanism = rounds.VariantImproved
	c := newCore(t, set)
	broken := &brokenPolicy{Policy: c.pol}
	c.pol = broken
	nodes := []bridge.Node{node("a1", "v100", 1, 0)}
	step(c, snapshot(t, epoch, nodes, pending(1, tag)), epoch, c.Solve)
	one := running(1, tag, "a1", "v100", 0)
	one.StartTime = epoch
	busy := []bridge.Node{node("a1", "v100", 1, 1)}
	var askedAt []time.Duration
	for r := 1; r <= 8; r++ {
		at := epoch.Add(time.Duration(r) * set.Round)
		before := broken.calls
		step(c, snapshot(t, at, busy, one), at, c.Solve)
		if broken.calls > before {
			askedAt = append(askedAt, at.Sub(epoch))
		}
	}
	// Failures at 0 s (first), then 20 s (+1 round), 60 s (+2), 140 s (+4).
	want := []time.Duration{20 * time.Second, 60 * time.Second, 140 * time.Second}
	if !slices.Equal(askedAt, want) {
		t.Errorf("asked again at %v, want %v", askedAt, want)
	}
	if got := retryDelay(set.Round, 20); got != maxRetryDelay {
		t.Errorf("retry delay after 20 failures %v, want the cap %v", got, maxRetryDelay)
	}
}
