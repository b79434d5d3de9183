package sim

import (
	"slices"
	"strings"
	"testing"

	"github.com/gavel-slurm/gavel-slurm/internal/workload"
)

// rec is a finished job record: arrival a, finish f.
func rec(id int, measured bool, a, f float64) JobRecord {
	return JobRecord{ID: id, Measured: measured, Arrival: a, Start: a, Finish: f}
}

func TestFTFAgainstIsolated(t *testing.T) {
	unfinished := JobRecord{ID: 3, Measured: true, Arrival: 5, Start: -1, Finish: -1}
	cases := []struct {
		name          string
		policy, iso   []JobRecord
		want          float64
		wantErrSubstr string
	}{
		{
			// Ratios 2 and 0.25: the mean of ratios, not the ratio of
			// mean JCTs (300 / 500 = 0.6).
			name:   "mean of per-job ratios",
			policy: []JobRecord{rec(0, true, 0, 200), rec(1, true, 10, 110)},
			iso:    []JobRecord{rec(0, true, 0, 100), rec(1, true, 10, 410)},
			want:   1.125,
		},
		{
			name:   "unmeasured jobs ignored on both sides",
			policy: []JobRecord{rec(0, false, 0, 1000), rec(1, true, 0, 30)},
			iso:    []JobRecord{rec(0, false, 0, 1), rec(1, true, 0, 10), rec(2, false, 0, 5)},
			want:   3,
		},
		{
			name:   "jobs matched by id, not by position",
			policy: []JobRecord{rec(7, true, 0, 40), rec(4, true, 0, 10)},
			iso:    []JobRecord{rec(4, true, 0, 20), rec(7, true, 0, 10)},
			want:   (4 + 0.5) / 2,
		},
		{
			name:   "unfinished job of the policy's run skipped",
			policy: []JobRecord{rec(0, true, 0, 50), unfinished},
			iso:    []JobRecord{rec(0, true, 0, 25), rec(3, true, 5, 10)},
			want:   2,
		},
		{
			name:          "measured job unfinished in the isolated run",
			policy:        []JobRecord{rec(0, true, 0, 50), rec(3, true, 5, 10)},
			iso:           []JobRecord{rec(0, true, 0, 25), unfinished},
			wantErrSubstr: "job 3 has no finished counterpart",
		},
		{
			name:          "no measured job",
			policy:        []JobRecord{rec(0, false, 0, 50)},
			iso:           []JobRecord{rec(0, false, 0, 25)},
			wantErrSubstr: "no measured job finished",
		},
		{
			name:          "zero isolated JCT",
			policy:        []JobRecord{rec(0, true, 0, 50)},
			iso:           []JobRecord{rec(0, true, 3, 3)},
			wantErrSubstr: "took 0 s",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := FTFAgainstIsolated(&Result{Policy: "p", Jobs: c.policy}, &Result{Policy: IsolatedPolicy, Jobs: c.iso})
			if c.wantErrSubstr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErrSubstr) {
					t.Fatalf("error %v, want one containing %q", err, c.wantErrSubstr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !near(got, c.want) {
				t.Errorf("FTF = %v, want %v", got, c.want)
			}
		})
	}
}

func TestIsolatedPoints(t *testing.T) {
	points := []Point{
		{"a", 0.8, 0}, {"a", 0.8, 1}, {"a", 1.6, 0},
		{"b", 0.8, 0}, {"b", 0.8, 1}, {"b", 1.6, 0},
		{IsolatedPolicy, 1.6, 0}, // asked for: not run twice
	}
	want := []Point{{IsolatedPolicy, 0.8, 0}, {IsolatedPolicy, 0.8, 1}}
	if got := IsolatedPoints(points); !slices.Equal(got, want) {
		t.Errorf("IsolatedPoints = %v, want %v", got, want)
	}
	if got := IsolatedPoints(nil); len(got) != 0 {
		t.Errorf("IsolatedPoints(nil) = %v, want none", got)
	}
}

func TestSetFTFIsolated(t *testing.T) {
	run := func(policy string, jct float64) *Result {
		return &Result{Policy: policy, Jobs: []JobRecord{rec(0, true, 0, jct)}}
	}
	outcomes := []Outcome{
		{Point: Point{"a", 1, 0}, Result: run("a", 30)},
		{Point: Point{"a", 1, 1}, Result: run("a", 30)},
		{Point: Point{"a", 2, 0}, Result: run("a", 30)}, // baseline saturated
		{Point: Point{"a", 3, 0}, Err: ErrSaturated},
		{Point: Point{IsolatedPolicy, 3, 0}, Result: run(IsolatedPolicy, 60)}, // asked for in the sweep
		{Point: Point{"b", 3, 0}, Result: run("b", 15)},
	}
	baselines := []Outcome{
		{Point: Point{IsolatedPolicy, 1, 0}, Result: run(IsolatedPolicy, 10)},
		{Point: Point{IsolatedPolicy, 1, 1}, Result: run(IsolatedPolicy, 20)},
		{Point: Point{IsolatedPolicy, 2, 0}, Err: ErrSaturated},
	}
	if err := SetFTFIsolated(outcomes, baselines); err != nil {
		t.Fatal(err)
	}
	want := []float64{3, 1.5, 0, -1, 1, 0.25}
	for i, o := range outcomes {
		if o.Result == nil {
			continue
		}
		if o.Result.FTFIsolated != want[i] {
			t.Errorf("outcome %d (%+v): FTFIsolated %v, want %v", i, o.Point, o.Result.FTFIsolated, want[i])
		}
	}
	if got := baselines[0].Result.FTFIsolated; got != 1 {
		t.Errorf("isolated run against itself: %v, want 1", got)
	}

	broken := []Outcome{{Point: Point{"a", 1, 0}, Result: &Result{Policy: "a", Jobs: []JobRecord{rec(5, true, 0, 1)}}}}
	if err := SetFTFIsolated(broken, baselines); err == nil || !strings.Contains(err.Error(), "a at 1 jobs/h, seed 0") {
		t.Errorf("error %v, want one naming the run whose jobs do not match", err)
	}
}

// On a real schedule: the FTF policy against the isolated policy on the
// same small continuous workload, both computed by Run. The isolated run
// compared with itself gives exactly 1, and the other policy's value is
// the mean of its per-job ratios.
func TestFTFIsolatedOfRealRuns(t *testing.T) {
	cfg, err := Defaults()
	if err != nil {
		t.Fatal(err)
	}
	cfg.GPUs = map[string]int{"v100": 2, "p100": 2, "k80": 2}
	cfg.FirstMeasured, cfg.EndMeasured = 10, 30
	results := map[string]*Result{}
	for _, p := range []string{IsolatedPolicy, "finish_time_fairness_perf"} {
		src, err := workload.NewGenerator(cfg.Table, workload.GeneratorOptions{Rate: 1.5, Jobs: 40, Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		c := cfg
		c.PolicyName = p
		if results[p], err = Run(c, src); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
	}
	iso, ftf := results[IsolatedPolicy], results["finish_time_fairness_perf"]
	if self, err := FTFAgainstIsolated(iso, iso); err != nil || self != 1 {
		t.Errorf("isolated against itself: %v, %v; want exactly 1", self, err)
	}
	got, err := FTFAgainstIsolated(ftf, iso)
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for i, j := range ftf.Jobs {
		if j.Measured {
			sum += j.JCT() / iso.Jobs[i].JCT()
		}
	}
	if want := sum / 20; !near(got, want) {
		t.Errorf("FTF against isolated %v, want %v", got, want)
	}
	if got == 1 {
		t.Errorf("FTF against isolated is exactly 1: the two runs did not differ")
	}
}
