package sched

import (
	"strings"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/internal/siterules"
	"github.com/gavel-slurm/gavel-slurm/internal/throughputs"
	"github.com/gavel-slurm/gavel-slurm/policy"
	"github.com/gavel-slurm/gavel-slurm/rounds"
)

// restartEstimator is the reference table plus reported progress: the
// steps done and when each run first progressed.
type restartEstimator struct {
	TableEstimator
	done  map[string]int64
	first map[string]time.Time // by job id, for any run that started before it
}

var (
	_ Progress      = restartEstimator{}
	_ FirstProgress = restartEstimator{}
)

func (e restartEstimator) StepsDone(id bridge.JobID) (int64, bool) {
	d, ok := e.done[id.String()]
	return d, ok
}

func (e restartEstimator) FirstProgress(id bridge.JobID, start time.Time) (time.Time, bool) {
	at, ok := e.first[id.String()]
	if !ok || at.Before(start) {
		return time.Time{}, false
	}
	return at, true
}

func restartCore(t *testing.T, set Settings, est restartEstimator) *Core {
	t.Helper()
	table, err := throughputs.Reference()
	if err != nil {
		t.Fatal(err)
	}
	est.TableEstimator = TableEstimator{Table: table}
	c, err := NewCore(set, est)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// signalRound runs rounds on one GPU held by job 1 (started at epoch)
// with job 2 waiting, and returns the first round (from 1) in which job 1
// is told to stop, or 0 when it never is in rounds rounds.
func signalRound(t *testing.T, c *Core, comment1 string, rounds int) int {
	t.Helper()
	nodes := []bridge.Node{node("a1", "v100", 1, 1)}
	for r := 1; r <= rounds; r++ {
		now := epoch.Add(time.Duration(r) * c.set.Round)
		one := running(1, comment1, "a1", "v100", 0)
		one.StartTime = epoch
		res := step(c, snapshot(t, now, nodes, one, pending(2, tag)), now, c.Solve)
		if res.Skipped != "" {
			t.Fatalf("round %d skipped: %s", r, res.Skipped)
		}
		if strings.Contains(actionsOf(res.Actions, 1), "signal") {
			return r
		}
	}
	return 0
}

// The step hands the restart mechanism each job's restart cost (the tag's
// within the site's limit, else the default), when its run began and its
// remaining steps: a job whose last restart is not paid for keeps its
// GPUs, one whose restart is free or whose run is long past its hold does
// not, and a job a step from its end finishes. The other mechanisms
// ignore the costs.
func TestRestartCostsReachTheMechanism(t *testing.T) {
	tests := map[string]struct {
		mechanism  rounds.Variant
		comment    string
		defaultC   time.Duration
		maxRestart time.Duration
		done       int64
		wantKept   bool
		holdMin    time.Duration
	}{
		"improved ignores the cost":        {rounds.VariantImproved, tag + " restart=3m", 0, 0, 0, false, 0},
		"tag's cost holds the job":         {rounds.VariantRestart, tag + " restart=3m", 0, 0, 0, true, 0},
		"default cost holds the job":       {rounds.VariantRestart, tag, 3 * time.Minute, 0, 0, true, 0},
		"free restart holds nothing":       {rounds.VariantRestart, tag, 0, 0, 0, false, 0},
		"site limit caps the tag's cost":   {rounds.VariantRestart, tag + " restart=3m", 0, time.Second, 0, false, 0},
		"a job near its end finishes":      {rounds.VariantRestart, tag + " restart=1s", 0, 0, 99_999, true, 0},
		"a job far from its end is moved":  {rounds.VariantRestart, tag + " restart=1s", 0, 0, 10, false, 0},
		"near its end without steps known": {rounds.VariantRestart, "gavel: model=resnet50-bs64 restart=1s", 0, 0, 99_999, false, 0},
		// The default floor, 12 rounds (4 minutes here), is past before
		// round 30; a site's floor of 15 minutes is not.
		"the site's floor holds a cheap restart": {rounds.VariantRestart, tag + " restart=1s", 0, 0, 10, true, 15 * time.Minute},
		"a free restart is never held":           {rounds.VariantRestart, tag, 0, 0, 0, false, 15 * time.Minute},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			set := settings()
			set.Mechanism, set.DefaultRestart, set.RestartHoldMin = tc.mechanism, tc.defaultC, tc.holdMin
			if tc.maxRestart > 0 {
				set.Rules = siterules.Rules{Limits: siterules.Limits{MaxRestart: tc.maxRestart}}
			}
			est := restartEstimator{}
			if tc.done > 0 {
				est.done = map[string]int64{"1": tc.done}
			}
			c := restartCore(t, set, est)
			// 30 rounds of 20 s: 10 minutes, past a 1-second cost's hold
			// (40 s) and within a 3-minute one's (2 h).
			got := signalRound(t, c, tc.comment, 30)
			if kept := got == 0; kept != tc.wantKept {
				t.Errorf("job 1 told to stop in round %d (0: never), want kept %v", got, tc.wantKept)
			}
		})
	}
}

// A job's restart cost is chosen from its measurement, else its tag's,
// else the site's default, and never exceeds the site's limit.
func TestRestartCostChoice(t *testing.T) {
	tests := map[string]struct {
		measured, tagged, max, def time.Duration
		want                       time.Duration
	}{
		"default":              {0, 0, 10 * time.Minute, time.Minute, time.Minute},
		"tag over default":     {0, 2 * time.Minute, 10 * time.Minute, time.Minute, 2 * time.Minute},
		"measured over tag":    {40 * time.Second, 2 * time.Minute, 10 * time.Minute, time.Minute, 40 * time.Second},
		"default within limit": {0, 0, 30 * time.Second, time.Minute, 30 * time.Second},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := &Core{set: Settings{DefaultRestart: tc.def}}
			js := &jobState{restartMeasured: tc.measured, restartTag: tc.tagged, restartMax: tc.max}
			if got := c.restartCost(js); got != tc.want {
				t.Errorf("restart cost %s, want %s", got, tc.want)
			}
		})
	}
}

// A job's restart cost is measured from a requeue the daemon sent: the
// part of the grace period it used, then from its next start (or from
// the requeue, when it was moved to start at once) to its first progress.
// It is kept in the job's record, also across a daemon restart; a job
// that has not progressed since it started again is not measured yet.
func TestRestartCostIsMeasuredFromProgressAfterARestart(t *testing.T) {
	tests := map[string]struct {
		firstAfterStart time.Duration // -1: no progress yet
		want            time.Duration
	}{
		"progress 40 s after the start": {40 * time.Second, 5*time.Second + 40*time.Second},
		"no progress yet":               {-1, 0},
		"above the site's limit":        {time.Hour, siterules.DefaultMaxRestart},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			set := settings()
			est := restartEstimator{first: map[string]time.Time{}}
			c := restartCore(t, set, est)
			signalled := signalRound(t, c, tag, 30)
			if signalled == 0 {
				t.Fatal("job 1 was never told to stop")
			}
			nodes := []bridge.Node{node("a1", "v100", 1, 1)}
			graceStart := epoch.Add(time.Duration(signalled) * set.Round)
			// The grace period (5 s) ends; the next look requeues it.
			end := graceStart.Add(set.DefaultGrace)
			one := running(1, tag, "a1", "v100", 0)
			one.StartTime = epoch
			acts := look(c, snapshot(t, end, nodes, one, pending(2, tag)), end)
			if !strings.Contains(actionsOf(acts, 1), string(bridge.ActRequeueHold)) {
				t.Fatalf("job 1 not requeued at the end of its grace period: %q", actionsOf(acts, 1))
			}
			// It waits, then starts again an hour later.
			start := end.Add(time.Hour)
			if tc.firstAfterStart >= 0 {
				est.first["1"] = start.Add(tc.firstAfterStart)
			}
			again := running(1, tag, "a1", "v100", 1)
			again.StartTime = start
			now := start.Add(2 * time.Minute)
			res := step(c, snapshot(t, now, nodes, again, pending(2, tag)), now, c.Solve)
			var got time.Duration
			for _, r := range res.Records {
				if r.JobID == "1" {
					got = time.Duration(r.RestartCostS * float64(time.Second))
				}
			}
			if got != tc.want {
				t.Errorf("record keeps a restart cost of %s, want %s", got, tc.want)
			}
			// A daemon restarted from the records keeps the measurement.
			records := map[string]Record{}
			for _, r := range res.Records {
				records[r.JobID] = r
			}
			fresh := restartCore(t, set, restartEstimator{})
			fresh.Restore(records, res.Round)
			later := now.Add(set.Round)
			res = step(fresh, snapshot(t, later, nodes, again, pending(2, tag)), later, fresh.Solve)
			for _, r := range res.Records {
				if r.JobID == "1" && time.Duration(r.RestartCostS*float64(time.Second)) != tc.want {
					t.Errorf("after a restart the record keeps %gs, want %s", r.RestartCostS, tc.want)
				}
			}
		})
	}
}

// Under the restart mechanism the policy is told where each job runs and
// asked for the optimum that keeps running jobs there
// (policy.Options.KeepRunning); the other mechanisms tell it nothing.
func TestRestartMechanismTellsThePolicyWhereJobsRun(t *testing.T) {
	for _, tc := range []struct {
		mechanism rounds.Variant
		want      string
	}{
		{rounds.VariantRestart, "v100"},
		{rounds.VariantImproved, ""},
	} {
		t.Run(string(tc.mechanism), func(t *testing.T) {
			set := settings()
			set.Mechanism, set.Policy = tc.mechanism, "finish_time_fairness_perf"
			if got := policyOptions(set).KeepRunning; got != (tc.want != "") {
				t.Errorf("KeepRunning %v", got)
			}
			c := restartCore(t, set, restartEstimator{})
			var seen *policy.Problem
			capture := func(p *policy.Problem) (*policy.Allocation, error) {
				seen = p
				return c.Solve(p)
			}
			nodes := []bridge.Node{node("a1", "v100", 1, 1)}
			now := epoch.Add(c.set.Round)
			one := running(1, tag, "a1", "v100", 0)
			one.StartTime = epoch
			if res := step(c, snapshot(t, now, nodes, one, pending(2, tag)), now, capture); res.Skipped != "" {
				t.Fatalf("round skipped: %s", res.Skipped)
			}
			if seen == nil {
				t.Fatal("the policy was not asked")
			}
			on := map[string]string{}
			for _, j := range seen.Jobs {
				on[j.ID] = j.RunningOn
			}
			if len(on) != 2 || on["1"] != tc.want || on["2"] != "" {
				t.Errorf("running types handed to the policy: %v, want job 1 on %q and job 2 nowhere", on, tc.want)
			}
		})
	}
}
