package sim

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/internal/throughputs"
	"github.com/gavel-slurm/gavel-slurm/internal/workload"
	"github.com/gavel-slurm/gavel-slurm/policy"
)

// equalShare is a hand-checkable policy: every job gets the same fraction
// of the cluster, spread over the types in proportion to their sizes (it
// is type-aware so the mechanism keeps a fixed type order).
type equalShare struct{}

func (equalShare) Name() string { return "equal_share" }

func (equalShare) Traits() policy.Traits {
	return policy.Traits{TypeAware: true, Objective: policy.ObjectiveMinNormalizedThroughput}
}

func (equalShare) Allocate(p *policy.Problem) (*policy.Allocation, error) {
	types := p.Types()
	total := 0
	for _, t := range types {
		total += p.GPUs[t]
	}
	share := math.Min(1, float64(total)/float64(len(p.Jobs)))
	a := &policy.Allocation{Policy: "equal_share", Types: types}
	for _, j := range p.Jobs {
		row := policy.Row{Jobs: []string{j.ID}, Fractions: make([]float64, len(types))}
		for i, t := range types {
			row.Fractions[i] = share * float64(p.GPUs[t]) / float64(total)
		}
		a.Rows = append(a.Rows, row)
	}
	return a, nil
}

// toyTable has model "one" at 1 step/s and "two" at 2 steps/s on v100, and
// "slow" at 0.5 steps/s on k80 only.
func toyTable(t *testing.T) *throughputs.Table {
	t.Helper()
	table, err := throughputs.Parse([]byte(`{
		"v100": {"('one', 1)": {"null": 1}, "('two', 1)": {"null": 2}, "('slow', 1)": {"null": 0}},
		"k80":  {"('one', 1)": {"null": 0.25}, "('two', 1)": {"null": 0.5}, "('slow', 1)": {"null": 0.5}}}`))
	if err != nil {
		t.Fatal(err)
	}
	return table
}

func toyConfig(t *testing.T, gpus map[string]int) Config {
	return Config{
		GPUs: gpus, Policy: equalShare{}, Table: toyTable(t),
		RoundSeconds: 360, MinResetInterval: 1920,
	}
}

func mkjob(model string, steps, arrival float64) workload.Job {
	return workload.Job{Model: model, ScaleFactor: 1, TotalSteps: steps, Priority: 1, Arrival: arrival}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func TestOneJobAlone(t *testing.T) {
	cases := []struct {
		name    string
		spec    workload.Job
		wantJCT float64
	}{
		// 1000 steps at 1 step/s: rounds of 360, 360, 280 steps back to back.
		{"whole rounds then a partial one", mkjob("one", 1000, 0), 1000},
		// 2 steps/s: int(2·360) = 720 steps per round; 1500 = 720+720+60.
		{"faster model", mkjob("two", 1500, 0), 750},
		// An idle cluster jumps to the arrival; the job starts at once.
		{"late arrival", mkjob("one", 100, 500), 100},
		// Fractional steps: the last round runs exactly what remains.
		{"fractional steps", mkjob("one", 360.5, 0), 360.5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := Run(toyConfig(t, map[string]int{"v100": 1}), Jobs{c.spec}.Source())
			if err != nil {
				t.Fatal(err)
			}
			rec := res.Jobs[0]
			if !near(rec.JCT(), c.wantJCT) || !near(res.AvgJCT, c.wantJCT) {
				t.Errorf("JCT = %v (avg %v), want %v", rec.JCT(), res.AvgJCT, c.wantJCT)
			}
			if rec.Start != c.spec.Arrival {
				t.Errorf("start = %v, want the arrival %v", rec.Start, c.spec.Arrival)
			}
			if !near(res.Makespan, c.spec.Arrival+c.wantJCT) {
				t.Errorf("makespan = %v, want %v", res.Makespan, c.spec.Arrival+c.wantJCT)
			}
			busy := c.wantJCT / res.Makespan
			if !near(res.Utilization["v100"], busy) {
				t.Errorf("v100 utilization = %v, want %v", res.Utilization["v100"], busy)
			}
			if res.JobsMeasured != 1 || res.Preemptions != 0 {
				t.Errorf("measured %d preemptions %d, want 1 and 0", res.JobsMeasured, res.Preemptions)
			}
		})
	}
}

func TestArrivalWaitsForRoundEnd(t *testing.T) {
	// Job 0 holds one of two GPUs in a round that ends at 360; job 1 arrives
	// at 100 and is admitted (and starts) only then.
	jobs := Jobs{mkjob("one", 10000, 0), mkjob("one", 200, 100)}
	res, err := Run(toyConfig(t, map[string]int{"v100": 2}), jobs.Source())
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Jobs[1].Start; got != 360 {
		t.Errorf("job 1 started at %v, want 360 (the round boundary)", got)
	}
	if got, want := res.Jobs[1].JCT(), 360-100+200.0; !near(got, want) {
		t.Errorf("job 1 JCT = %v, want %v", got, want)
	}
	if got := res.Jobs[0].JCT(); !near(got, 10000) {
		t.Errorf("job 0 JCT = %v, want 10000 (never displaced)", got)
	}
}

func TestTwoJobsShareOneGPU(t *testing.T) {
	// Equal shares on one GPU: the jobs alternate round by round
	// (A 0-360, B 360-720, A 720-1080, B 1080-1440), then A runs its last
	// 280 steps (done at 1720) and B its last 280 (done at 2000). With a
	// 10 s restart overhead every resumption after the first run loses
	// 10 s: A's rounds become 360, 10+350, 10+290 and B's follow.
	cases := []struct {
		overhead        float64
		wantA, wantB    float64
		wantPreemptions int
		wantHeldA       float64 // A's rounds: 360+360+280, or 360+360+300 with overhead
	}{
		{0, 1720, 2000, 4, 1000},
		{10, 1740, 2040, 4, 1020},
	}
	for _, c := range cases {
		cfg := toyConfig(t, map[string]int{"v100": 1})
		cfg.PreemptionOverhead = c.overhead
		res, err := Run(cfg, Jobs{mkjob("one", 1000, 0), mkjob("one", 1000, 0)}.Source())
		if err != nil {
			t.Fatal(err)
		}
		if a, b := res.Jobs[0].JCT(), res.Jobs[1].JCT(); !near(a, c.wantA) || !near(b, c.wantB) {
			t.Errorf("overhead %v: JCTs %v, %v; want %v, %v", c.overhead, a, b, c.wantA, c.wantB)
		}
		if res.Preemptions != c.wantPreemptions {
			t.Errorf("overhead %v: %d preemptions, want %d", c.overhead, res.Preemptions, c.wantPreemptions)
		}
		if !near(res.AvgJCT, (c.wantA+c.wantB)/2) || !near(res.Makespan, c.wantB) {
			t.Errorf("overhead %v: avg %v makespan %v", c.overhead, res.AvgJCT, res.Makespan)
		}
		if got := res.Jobs[0].TimePerType[0]; !near(got, c.wantHeldA) {
			t.Errorf("overhead %v: job A held the v100 %v s, want %v", c.overhead, got, c.wantHeldA)
		}
	}
}

func TestMinRunTimeHalvesPreemptions(t *testing.T) {
	// Two rounds before a job may be stopped: A 0-720, B 720-1440, A
	// 1440-1720 (its last 280 steps), B 1720-2000. The same JCTs as the
	// round-by-round alternation, with two preemptions instead of four.
	cfg := toyConfig(t, map[string]int{"v100": 1})
	cfg.MinRunTime = 720
	res, err := Run(cfg, Jobs{mkjob("one", 1000, 0), mkjob("one", 1000, 0)}.Source())
	if err != nil {
		t.Fatal(err)
	}
	if a, b := res.Jobs[0].JCT(), res.Jobs[1].JCT(); !near(a, 1720) || !near(b, 2000) {
		t.Errorf("JCTs %v, %v; want 1720, 2000", a, b)
	}
	if res.Preemptions != 2 {
		t.Errorf("%d preemptions, want 2", res.Preemptions)
	}
	if res.LeaseExtensions < 2 {
		t.Errorf("%d lease extensions: the pinned rounds should extend", res.LeaseExtensions)
	}
}

func TestTypeFollowsThroughput(t *testing.T) {
	// "slow" cannot run on v100: it must go to the k80 even while the
	// v100 is free, and takes steps / 0.5 s.
	res, err := Run(toyConfig(t, map[string]int{"v100": 1, "k80": 1}), Jobs{mkjob("slow", 100, 0)}.Source())
	if err != nil {
		t.Fatal(err)
	}
	rec := res.Jobs[0]
	if !near(rec.JCT(), 200) || rec.TimePerType[0] != 200 || rec.TimePerType[1] != 0 {
		t.Errorf("JCT %v, time per type %v (k80, v100); want 200 on k80 only", rec.JCT(), rec.TimePerType)
	}
	if !near(res.Utilization["k80"], 1) || res.Utilization["v100"] != 0 || !near(res.Utilization["all"], 0.5) {
		t.Errorf("utilization %v", res.Utilization)
	}
}

func TestMeasurementWindow(t *testing.T) {
	var jobs Jobs
	for i := range 6 {
		jobs = append(jobs, mkjob("one", 100*float64(i+1), float64(i)*1000))
	}
	cfg := toyConfig(t, map[string]int{"v100": 1})
	cfg.FirstMeasured, cfg.EndMeasured = 1, 3
	res, err := Run(cfg, jobs.Source())
	if err != nil {
		t.Fatal(err)
	}
	// Jobs run alone. Job 1 (200 steps) arrives at 1000 on an idle
	// cluster; the reset at 0 does not start the reset interval, so it is
	// allocated at once: JCT 200. Job 2 (300 steps) arrives at 2000, only
	// 1000 s after the last reset: it has no allocation and is held until
	// the next event, job 3's arrival at 3000, when a reset is due again:
	// JCT 1000 + 300. The run stops when job 2 finishes (3300).
	if res.JobsMeasured != 2 || !near(res.AvgJCT, 750) || !near(res.P50JCT, 750) || !near(res.P95JCT, 1245) {
		t.Errorf("measured %d avg %v p50 %v p95 %v; want 2, 750, 750, 1245", res.JobsMeasured, res.AvgJCT, res.P50JCT, res.P95JCT)
	}
	if !near(res.Makespan, 3300) || res.JobsAdmitted != 4 {
		t.Errorf("stopped at %v with %d jobs admitted, want 3300 and 4", res.Makespan, res.JobsAdmitted)
	}
	if !res.Jobs[1].Measured || res.Jobs[0].Measured {
		t.Error("window flags wrong")
	}
}

func TestCostAndSLO(t *testing.T) {
	cfg := toyConfig(t, map[string]int{"v100": 1})
	cfg.Costs = map[string]float64{"v100": 3.6} // 0.001 per GPU-second
	a := mkjob("one", 1000, 0)
	a.SLO = 500 // missed
	b := mkjob("one", 100, 5000)
	b.SLO = 1000 // met
	res, err := Run(cfg, Jobs{a, b}.Source())
	if err != nil {
		t.Fatal(err)
	}
	if !near(res.Cost, 1.1) {
		t.Errorf("cost = %v, want 1.1 (1100 GPU-seconds at 0.001)", res.Cost)
	}
	if res.SLOJobs != 2 || res.SLOViolations != 1 {
		t.Errorf("SLO jobs %d violations %d, want 2 and 1", res.SLOJobs, res.SLOViolations)
	}
}

func TestFinishTimeFairness(t *testing.T) {
	// Two equal jobs on one GPU: the isolated share is half the GPU, so
	// each job's isolated time is 2000 s; A finishes at 1720, B at 2000.
	res, err := Run(toyConfig(t, map[string]int{"v100": 1}), Jobs{mkjob("one", 1000, 0), mkjob("one", 1000, 0)}.Source())
	if err != nil {
		t.Fatal(err)
	}
	// A: 720 steps at rate 0.5 (two jobs) before the reset at 1720 -> 1440 s,
	// then its last 280 steps are accrued at the same rate -> 560 s: 2000 s.
	// B: 720 steps at 0.5 -> 1440 s, then 280 steps alone at rate 1 -> 280 s.
	if got, want := res.Jobs[0].FTF, 1720.0/2000; !near(got, want) {
		t.Errorf("A's ρ = %v, want %v", got, want)
	}
	if got, want := res.Jobs[1].FTF, 2000.0/1720; !near(got, want) {
		t.Errorf("B's ρ = %v, want %v", got, want)
	}
	if res.FTF.AboveOne != 0.5 || !near(res.FTF.Max, 2000.0/1720) {
		t.Errorf("FTF summary %+v", res.FTF)
	}
}

func TestClockTimesTheRun(t *testing.T) {
	tick := time.Unix(0, 0)
	cfg := toyConfig(t, map[string]int{"v100": 1})
	cfg.Clock = func() time.Time { tick = tick.Add(time.Second); return tick }
	res, err := Run(cfg, Jobs{mkjob("one", 10, 0)}.Source())
	if err != nil {
		t.Fatal(err)
	}
	// One allocation: two clock reads around it (1 s), four reads in all.
	if res.SolverSeconds != 1 || res.WallSeconds != 3 || res.Allocations != 1 {
		t.Errorf("solver %v s wall %v s allocations %d, want 1, 3, 1", res.SolverSeconds, res.WallSeconds, res.Allocations)
	}
}

func TestRunErrors(t *testing.T) {
	base := func() Config { return toyConfig(t, map[string]int{"v100": 1}) }
	ok := Jobs{mkjob("one", 10, 0)}
	cases := map[string]struct {
		cfg     func() Config
		jobs    Jobs
		wantErr string
	}{
		"no table":       {func() Config { c := base(); c.Table = nil; return c }, ok, "no throughput table"},
		"empty cluster":  {func() Config { c := base(); c.GPUs = nil; return c }, ok, "empty cluster"},
		"zero GPUs":      {func() Config { c := base(); c.GPUs = map[string]int{"v100": 0}; return c }, ok, "need at least 1"},
		"bad round":      {func() Config { c := base(); c.RoundSeconds = 0; return c }, ok, "round length"},
		"huge overhead":  {func() Config { c := base(); c.PreemptionOverhead = 400; return c }, ok, "shorter than a round"},
		"empty window":   {func() Config { c := base(); c.FirstMeasured, c.EndMeasured = 3, 3; return c }, ok, "is empty"},
		"servers":        {func() Config { c := base(); c.GPUsPerServer = map[string]int{"v100": 2}; return c }, ok, "do not divide"},
		"unknown policy": {func() Config { c := base(); c.Policy = nil; c.PolicyName = "nope"; return c }, ok, "unknown policy"},
		"cannot run":     {base, Jobs{mkjob("slow", 10, 0)}, "cannot run on any GPU type"},
		"window too far": {func() Config { c := base(); c.FirstMeasured, c.EndMeasured = 0, 5; return c }, ok, "workload ended after 1 jobs"},
		"saturated":      {func() Config { c := base(); c.MaxActive = 1; return c }, Jobs{mkjob("one", 1000, 0), mkjob("one", 10, 1)}, "cluster saturated"},
		"bad max active": {func() Config { c := base(); c.MaxActive = -1; return c }, ok, "maximum active"},
		"unsorted":       {base, Jobs{mkjob("one", 10, 50), mkjob("one", 10, 10)}, "arrivals must not decrease"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Run(c.cfg(), c.jobs.Source())
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("error = %v, want one containing %q", err, c.wantErr)
			}
		})
	}
}

func TestPercentile(t *testing.T) {
	cases := []struct {
		xs   []float64
		p    float64
		want float64
	}{
		{nil, 50, 0},
		{[]float64{7}, 95, 7},
		{[]float64{4, 1, 3, 2}, 50, 2.5},
		{[]float64{1, 2, 3, 4, 5}, 95, 4.8},
		{[]float64{1, 2, 3, 4, 5}, 100, 5},
	}
	for _, c := range cases {
		if got := Percentile(c.xs, c.p); !near(got, c.want) {
			t.Errorf("Percentile(%v, %v) = %v, want %v", c.xs, c.p, got, c.want)
		}
	}
}

func TestSweepKeepsOrderAndReportsProgress(t *testing.T) {
	var points []Point
	for i := range 7 {
		points = append(points, Point{Policy: "p", Rate: float64(i), Seed: int64(i % 2)})
	}
	var calls []int
	out := Sweep(points, 3, func(p Point) (*Result, error) {
		if p.Rate == 4 {
			return nil, ErrSaturated
		}
		return &Result{AvgJCT: p.Rate * 10}, nil
	}, func(done, total int) {
		if total != 7 {
			t.Errorf("progress total %d, want 7", total)
		}
		calls = append(calls, done)
	})
	if !slices.Equal(calls, []int{1, 2, 3, 4, 5, 6, 7}) {
		t.Errorf("progress calls %v", calls)
	}
	for i, o := range out {
		if o.Point != points[i] {
			t.Fatalf("outcome %d is for %+v, want %+v", i, o.Point, points[i])
		}
		if i == 4 {
			if !o.Saturated() || o.Result != nil {
				t.Errorf("point 4: saturated %v result %v", o.Saturated(), o.Result)
			}
			continue
		}
		if o.Err != nil || o.Result.AvgJCT != float64(i)*10 {
			t.Errorf("point %d: %+v", i, o)
		}
	}
}

func TestPackedPolicyRuns(t *testing.T) {
	// A packing policy gets candidate pairs; the run must complete every
	// job whether or not it co-locates them.
	cfg, err := Defaults()
	if err != nil {
		t.Fatal(err)
	}
	cfg.GPUs = map[string]int{"v100": 2, "p100": 2, "k80": 2}
	cfg.PolicyName = "max_min_fairness_packed"
	gen, err := workload.NewGenerator(cfg.Table, workload.GeneratorOptions{Jobs: 12, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(cfg, gen)
	if err != nil {
		t.Fatal(err)
	}
	if res.JobsMeasured != 12 {
		t.Errorf("%d jobs finished, want 12", res.JobsMeasured)
	}
	for _, j := range res.Jobs {
		if j.Finish < j.Start || j.Start < 0 {
			t.Errorf("job %d: start %v finish %v", j.ID, j.Start, j.Finish)
		}
	}
}

// A job of absurd length stops the run with an error instead of running
// forever.
func TestRunStopsAtMaxTime(t *testing.T) {
	cfg := toyConfig(t, map[string]int{"v100": 1})
	cfg.MaxTime = 3600
	_, err := Run(cfg, Jobs{mkjob("one", 9223372036854775807, 0)}.Source())
	if err == nil || !strings.Contains(err.Error(), "simulated time passed") {
		t.Errorf("err = %v", err)
	}
}

// The timeline's spans follow one another and add up to the busy time the
// utilization figures are made of.
func TestTimelineAddsUpToUtilization(t *testing.T) {
	cfg := toyConfig(t, map[string]int{"v100": 1, "k80": 1})
	cfg.Timeline = true
	jobs := Jobs{
		{Model: "one", ScaleFactor: 1, TotalSteps: 1000},
		{Model: "two", ScaleFactor: 1, TotalSteps: 3000, Arrival: 100},
		{Model: "slow", ScaleFactor: 1, TotalSteps: 200, Arrival: 500},
	}
	res, err := Run(cfg, jobs.Source())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Timeline) != res.Rounds {
		t.Fatalf("%d spans for %d rounds", len(res.Timeline), res.Rounds)
	}
	busy := make([]float64, len(res.Types))
	for i, sp := range res.Timeline {
		if sp.End < sp.Start || (i > 0 && sp.Start < res.Timeline[i-1].End) {
			t.Fatalf("span %d [%v, %v) overlaps or runs backwards", i, sp.Start, sp.End)
		}
		for k, b := range sp.Busy {
			if b > (sp.End-sp.Start)*float64(cfg.GPUs[res.Types[k]])+1e-9 {
				t.Fatalf("span %d: %v GPU-s of %s in %v s", i, b, res.Types[k], sp.End-sp.Start)
			}
			busy[k] += b
		}
	}
	for k, typ := range res.Types {
		want := res.Utilization[typ] * float64(cfg.GPUs[typ]) * res.Makespan
		if math.Abs(busy[k]-want) > 1e-6 || busy[k] == 0 {
			t.Errorf("%s: timeline %v GPU-s, utilization says %v", typ, busy[k], want)
		}
	}
}
