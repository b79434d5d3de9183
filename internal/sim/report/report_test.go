package report

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gavel-slurm/gavel-slurm/internal/sim"
)

// result is a run with every field set to a value whose formatting shows:
// repeating decimals, whole numbers, a model name CSV must quote.
func result(policy string, avgJCT float64) *sim.Result {
	return &sim.Result{
		Policy: policy, Types: []string{"k80", "v100"}, JobsMeasured: 7, AvgJCT: avgJCT, P50JCT: avgJCT * 0.9, P95JCT: avgJCT * 2.1,
		Makespan: 123456.789, Utilization: map[string]float64{"k80": 0.5, "v100": 0.75, "all": 2.0 / 3},
		FTF: sim.Summary{Mean: 1.0 / 3, P50: 0.25, P95: 1.5, Max: 2, AboveOne: 0.125}, FTFIsolated: avgJCT / 3600, Cost: 12.345, SLOJobs: 3, SLOViolations: 1,
		Preemptions: 11, LeaseExtensions: 5, Rounds: 99, Allocations: 13, LPs: 27, LargestLP: [2]int{40, 17},
		JobsAdmitted: 9, PeakActive: 8, WallSeconds: 0.123456, SolverSeconds: 0.0456,
		Jobs: []sim.JobRecord{
			{ID: 0, Model: "ResNet-50 (batch size 64)", ScaleFactor: 1, Priority: 1, Arrival: 0, Start: 0, Finish: 3600.5, TimePerType: []float64{100, 3500.5}, Measured: true, FTF: 0.8},
			{ID: 1, Model: `LM, "quoted"`, ScaleFactor: 4, Priority: 5, Arrival: 12.25, Start: -1, Finish: -1, TimePerType: []float64{0, 0}, Measured: false},
		},
	}
}

// sweep is a 2-policy, 2-rate, 2-seed grid with a saturated run, a
// failed one whose error CSV must quote, and a run without an isolated
// baseline.
func sweep() []sim.Outcome {
	noBaseline := result("agnostic", 22000)
	noBaseline.FTFIsolated = 0
	return []sim.Outcome{
		{Point: sim.Point{Policy: "aware", Rate: 0.4, Seed: 0}, Result: result("aware", 7200.1)},
		{Point: sim.Point{Policy: "aware", Rate: 0.4, Seed: 1}, Result: result("aware", 10800)},
		{Point: sim.Point{Policy: "aware", Rate: 1.2, Seed: 0}, Result: result("aware", 3600*3.3)},
		{Point: sim.Point{Policy: "aware", Rate: 1.2, Seed: 1}, Err: fmt.Errorf("simulation (aware) at t=5s: %w", sim.ErrSaturated)},
		{Point: sim.Point{Policy: "agnostic", Rate: 0.4, Seed: 0}, Result: result("agnostic", 9000)},
		{Point: sim.Point{Policy: "agnostic", Rate: 0.4, Seed: 1}, Err: errors.New(`bad, "quoted" failure`)},
		{Point: sim.Point{Policy: "agnostic", Rate: 1.2, Seed: 0}, Result: result("agnostic", 20000)},
		{Point: sim.Point{Policy: "agnostic", Rate: 1.2, Seed: 1}, Result: noBaseline},
	}
}

// checkGolden compares got with testdata/name.golden, which holds the
// output of the formats as first released: files written by earlier
// versions must keep reading the same, and scripts keep parsing them.
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	want, err := os.ReadFile(filepath.Join("testdata", name+".golden"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from testdata/%s.golden:\n got: %s\nwant: %s", name, name, got, want)
	}
}

func TestGoldenOutputs(t *testing.T) {
	outcomes := sweep()
	cases := []struct {
		name  string
		write func(*bytes.Buffer) error
	}{
		{"sweep.csv", func(b *bytes.Buffer) error { return WriteSweep(b, outcomes) }},
		{"jobs.csv", func(b *bytes.Buffer) error { return WriteJobs(b, outcomes[0].Result) }},
		{"summary.txt", func(b *bytes.Buffer) error {
			WriteSummary(b, outcomes[0].Result)
			// Without prices, deadlines and an isolated run to compare
			// with, the cost, SLO and isolated FTF lines go.
			plain := *outcomes[0].Result
			plain.Cost, plain.SLOJobs, plain.FTFIsolated = 0, 0, 0
			WriteSummary(b, &plain)
			return nil
		}},
		{"avg_jct.svg", func(b *bytes.Buffer) error {
			setup := Setup{Cluster: map[string]int{"v100": 4, "k80": 2}, MultiGPU: true, Window: [2]int{10, 20}, Seeds: []int64{0, 1}}
			chart := AvgJCTChart(setup.Subtitle(), []string{"aware", "agnostic"}, []float64{1.2, 0.4}, outcomes)
			return chart.WriteSVG(b)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := c.write(&b); err != nil {
				t.Fatal(err)
			}
			checkGolden(t, c.name, b.Bytes())
		})
	}
}

func TestSweepReadsBackWhatItWrote(t *testing.T) {
	var b bytes.Buffer
	if err := WriteSweep(&b, sweep()); err != nil {
		t.Fatal(err)
	}
	got, err := ReadSweep(&b, "sweep.csv")
	if err != nil {
		t.Fatal(err)
	}
	want := sweep()
	if len(got) != len(want) {
		t.Fatalf("%d outcomes read back, want %d", len(got), len(want))
	}
	for i, o := range got {
		w := want[i]
		if o.Point != w.Point {
			t.Errorf("row %d: point %+v, want %+v", i, o.Point, w.Point)
		}
		switch {
		case w.Result != nil:
			if o.Result == nil || math.Abs(o.Result.AvgJCT-w.Result.AvgJCT) > 1e-9 || o.Result.Policy != w.Policy ||
				o.Result.FTFIsolated != w.Result.FTFIsolated {
				t.Errorf("row %d: result %+v, want average JCT %v and isolated FTF %v", i, o.Result, w.Result.AvgJCT, w.Result.FTFIsolated)
			}
		case w.Saturated():
			if !o.Saturated() || o.Result != nil {
				t.Errorf("row %d: %+v, want a saturated run", i, o)
			}
		default:
			if o.Err == nil || o.Err.Error() != w.Err.Error() || o.Saturated() {
				t.Errorf("row %d: error %v, want %v", i, o.Err, w.Err)
			}
		}
	}
}

func TestReadSweepErrors(t *testing.T) {
	cases := map[string]struct {
		text, wantErr string
	}{
		"empty":          {"", "sweep CSV in.csv: empty"},
		"missing column": {"policy,seed\np,0\n", `sweep CSV in.csv: no "rate_jobs_per_h" column`},
		"short row": {"policy,rate_jobs_per_h,seed,saturated,avg_jct_h,error\np,1,0,false\n",
			"wrong number of fields"},
		"bad rate": {"policy,rate_jobs_per_h,seed,saturated,avg_jct_h,error\np,fast,0,false,1,\n",
			"sweep CSV in.csv line 2: rate"},
		"bad seed": {"policy,rate_jobs_per_h,seed,saturated,avg_jct_h,error\np,1,x,false,1,\n",
			"sweep CSV in.csv line 2: seed"},
		"bad average": {"policy,rate_jobs_per_h,seed,saturated,avg_jct_h,error\np,1,0,false,long,\n",
			"sweep CSV in.csv line 2: average JCT"},
		"bad isolated FTF": {"policy,rate_jobs_per_h,seed,saturated,avg_jct_h,ftf_isolated,error\np,1,0,false,1,fair,\n",
			"sweep CSV in.csv line 2: ftf_isolated"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ReadSweep(strings.NewReader(c.text), "in.csv")
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("error %v, want one containing %q", err, c.wantErr)
			}
		})
	}
}

// A CSV written before the isolated FTF existed (the committed
// docs/img/*.csv) reads with the metric unset.
func TestReadSweepWithoutIsolatedFTF(t *testing.T) {
	text := "policy,rate_jobs_per_h,seed,saturated,avg_jct_h,ftf_rho_mean,error\np,0.8,0,false,17.5,0.9,\n"
	got, err := ReadSweep(strings.NewReader(text), "old.csv")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Result == nil || got[0].Result.AvgJCT != 17.5*3600 || got[0].Result.FTFIsolated != 0 {
		t.Errorf("read %+v, want one run of 17.5 h without an isolated FTF", got)
	}
}

func TestMeansOverSeeds(t *testing.T) {
	got := MeansOverSeeds([]string{"aware", "agnostic", "absent"}, []float64{1.2, 0.4}, sweep())
	nan := math.NaN()
	want := []Mean{
		{Policy: "aware", Rate: 0.4, AvgJCTHours: (7200.1 + 10800) / 2 / 3600},
		{Policy: "aware", Rate: 1.2, AvgJCTHours: nan, Saturated: true}, // a seed saturated
		{Policy: "agnostic", Rate: 0.4, AvgJCTHours: nan},               // a seed failed
		{Policy: "agnostic", Rate: 1.2, AvgJCTHours: 21000.0 / 3600},
		{Policy: "absent", Rate: 0.4, AvgJCTHours: nan}, // no runs
		{Policy: "absent", Rate: 1.2, AvgJCTHours: nan},
	}
	same := func(a, b Mean) bool {
		close := a.AvgJCTHours == b.AvgJCTHours || math.Abs(a.AvgJCTHours-b.AvgJCTHours) < 1e-12 ||
			math.IsNaN(a.AvgJCTHours) && math.IsNaN(b.AvgJCTHours)
		return a.Policy == b.Policy && a.Rate == b.Rate && a.Saturated == b.Saturated && close
	}
	if !slices.EqualFunc(got, want, same) {
		t.Errorf("means\n got %+v\nwant %+v", got, want)
	}
}

func TestAvgJCTChartMarksSaturation(t *testing.T) {
	chart := AvgJCTChart("setup", []string{"aware", "agnostic"}, []float64{1.2, 0.4}, sweep())
	if len(chart.Series) != 2 || chart.Series[0].Name != "aware" || chart.Series[1].Name != "agnostic" {
		t.Fatalf("series %+v, want aware then agnostic", chart.Series)
	}
	aware := chart.Series[0]
	if !slices.Equal(aware.X, []float64{0.4, 1.2}) || !math.IsNaN(aware.Y[1]) || !slices.Equal(aware.Saturated, []float64{1.2}) {
		t.Errorf("aware: %+v, want rates ascending with a saturated gap at 1.2", aware)
	}
	if agnostic := chart.Series[1]; !math.IsNaN(agnostic.Y[0]) || len(agnostic.Saturated) != 0 {
		t.Errorf("agnostic: %+v, want an unmarked gap at 0.4 (a failure, not saturation)", agnostic)
	}
}

func TestAxes(t *testing.T) {
	outcomes := append(sweep(), sim.Outcome{Point: sim.Point{Policy: "late", Rate: 0.8, Seed: -3}})
	policies, rates, seeds := Axes(outcomes)
	if !slices.Equal(policies, []string{"aware", "agnostic", "late"}) || !slices.Equal(rates, []float64{0.4, 1.2, 0.8}) ||
		!slices.Equal(seeds, []int64{-3, 0, 1}) {
		t.Errorf("Axes = %v, %v, %v", policies, rates, seeds)
	}
}

func TestSubtitle(t *testing.T) {
	cases := []struct {
		setup Setup
		want  string
	}{
		{Setup{Cluster: map[string]int{"v100": 36, "k80": 36, "p100": 36}, Window: [2]int{0, 8}, Seeds: []int64{0, 1}},
			"36 k80, 36 p100, 36 v100; single-GPU; jobs 0-7; mean over seeds 0,1"},
		{Setup{Cluster: map[string]int{"v100": 4}, MultiGPU: true, Seeds: []int64{5}},
			"4 v100; multi-GPU; all jobs; mean over seeds 5"},
	}
	for _, c := range cases {
		if got := c.setup.Subtitle(); got != c.want {
			t.Errorf("Subtitle() = %q, want %q", got, c.want)
		}
	}
}
