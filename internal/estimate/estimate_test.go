package estimate

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/internal/throughputs"
)

var t0 = time.Unix(1e9, 0)

func newTestEstimator(t testing.TB) *Estimator {
	t.Helper()
	table, err := throughputs.Reference()
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(table, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// obs is a measurement past the warm-up, at t0 + after.
func obs(id, model string, scale int, typ string, rate float64, after time.Duration) Measurement {
	return Measurement{JobID: id, Model: model, Scale: scale, Type: typ, StepsPerSecond: rate, At: t0.Add(after), SinceStart: time.Hour}
}

func TestObserveRejectsBadMeasurements(t *testing.T) {
	e := newTestEstimator(t)
	good := obs("1", "m", 1, "v100", 3, 0)
	tests := []struct {
		name string
		edit func(*Measurement)
		want string
	}{
		{"no job", func(m *Measurement) { m.JobID = "" }, "no job id"},
		{"no type", func(m *Measurement) { m.Type = "" }, "no GPU type"},
		{"no GPUs", func(m *Measurement) { m.Scale = 0 }, "scale 0"},
		{"no time", func(m *Measurement) { m.At = time.Time{} }, "no time"},
		{"zero rate", func(m *Measurement) { m.StepsPerSecond = 0 }, "not a positive number"},
		{"negative rate", func(m *Measurement) { m.StepsPerSecond = -1 }, "not a positive number"},
		{"NaN rate", func(m *Measurement) { m.StepsPerSecond = math.NaN() }, "not a positive number"},
		{"infinite rate", func(m *Measurement) { m.StepsPerSecond = math.Inf(1) }, "not a positive number"},
		{"negative steps", func(m *Measurement) { m.Steps = -1 }, "negative steps"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := good
			tt.edit(&m)
			err := e.Observe(m)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
	if err := e.Observe(good); err != nil {
		t.Errorf("good measurement: %v", err)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	table, _ := throughputs.Reference()
	for _, o := range []Options{
		{Alpha: 1.5}, {OutlierFactor: 0.5}, {Rank: 9}, {Ridge: -1}, {PriorWeight: -1},
		{WarmUp: -time.Second}, {Neighbors: -1},
	} {
		if _, err := New(table, o); err == nil {
			t.Errorf("options %+v accepted", o)
		}
	}
	if _, err := New(nil, Options{}); err == nil {
		t.Error("nil table accepted")
	}
}

var refTypes = []string{"k80", "p100", "v100"}

// Each case feeds measurements, then asks for one job's rate on one type
// and checks the source, the detail and (when set) the rate.
func TestRatesSources(t *testing.T) {
	const rn50 = "ResNet-50 (batch size 64)" // x1: k80 0.619, p100 2.619, v100 4.395
	tests := []struct {
		name   string
		obs    []Measurement
		key    JobKey
		typ    string
		now    time.Duration
		source Source
		detail string
		rate   float64 // 0: not checked
	}{
		{
			name: "table entry by alias", key: JobKey{"1", "resnet50-bs64", 1}, typ: "v100",
			source: SourceTable, detail: "reference table: " + rn50 + " x1", rate: 4.394774823323071,
		},
		{
			name: "unknown model", key: JobKey{"1", "mystery", 1}, typ: "v100",
			source: SourceDefault, detail: "default: equal on every type (model not in the reference table)", rate: 1,
		},
		{
			name: "no tag", key: JobKey{"1", "", 1}, typ: "k80",
			source: SourceDefault, detail: "(no model in the tag)", rate: 1,
		},
		{
			name: "no entry at the scale", key: JobKey{"1", rn50, 3}, typ: "k80",
			source: SourceDefault, detail: "has no table entry for 3 GPUs", rate: 1,
		},
		{
			name: "cannot run there", key: JobKey{"1", "ResNet-50 (batch size 128)", 2}, typ: "k80",
			source: SourceTable, detail: "cannot run on k80", rate: 0,
		},
		{
			name: "fresh measurement wins",
			obs:  []Measurement{obs("1", rn50, 1, "v100", 5, 0), obs("1", rn50, 1, "v100", 7, time.Minute)},
			key:  JobKey{"1", rn50, 1}, typ: "v100", now: time.Hour,
			source: SourceMeasured, detail: "measured 6 steps/s over 2 intervals", rate: 6,
		},
		{
			name: "warm-up only is not a measurement",
			obs:  []Measurement{{JobID: "1", Model: rn50, Scale: 1, Type: "v100", StepsPerSecond: 50, At: t0, SinceStart: time.Second}},
			key:  JobKey{"1", rn50, 1}, typ: "v100",
			source: SourceTable, rate: 4.394774823323071,
		},
		{
			name: "tagged row scaled to the measurement",
			obs:  []Measurement{obs("1", rn50, 1, "v100", 2*4.394774823323071, 0)},
			key:  JobKey{"1", rn50, 1}, typ: "k80",
			source: SourceEstimated, detail: "estimated from reference table: " + rn50 + " x1 scaled to its measurements", rate: 2 * 0.6190282202246573,
		},
		{
			// A flat job tagged as ResNet-50 (which gains 7x from k80 to
			// v100): the tag is not trusted.
			name: "tag contradicted by measurements",
			obs:  []Measurement{obs("1", rn50, 1, "k80", 10, 0), obs("1", rn50, 1, "v100", 10, 0)},
			key:  JobKey{"1", rn50, 1}, typ: "p100",
			source: SourceEstimated, detail: "(its measurements do not match " + rn50 + " x1)",
		},
		{
			name: "fingerprint for an unknown model",
			obs:  []Measurement{obs("1", "mystery", 1, "k80", 1, 0), obs("1", "mystery", 1, "v100", 7, 0)},
			key:  JobKey{"1", "mystery", 1}, typ: "p100",
			source: SourceEstimated, detail: "estimated from fingerprint ",
		},
		{
			name: "completion from one type",
			obs:  []Measurement{obs("1", "mystery", 1, "v100", 7, 0)},
			key:  JobKey{"1", "mystery", 1}, typ: "k80",
			source: SourceEstimated, detail: "estimated from matrix completion over",
		},
		{
			name: "stale measurement decays to estimated",
			obs:  []Measurement{obs("1", rn50, 1, "v100", 5, 0), obs("1", rn50, 1, "k80", 0.7, 0)},
			key:  JobKey{"1", rn50, 1}, typ: "v100", now: 12 * time.Hour,
			source: SourceEstimated, detail: "(stale), weighted 50% against an estimate from reference table",
		},
		{
			name: "measurements at another scale ignored",
			obs:  []Measurement{obs("1", rn50, 2, "v100", 50, 0)},
			key:  JobKey{"1", rn50, 1}, typ: "v100",
			source: SourceTable, rate: 4.394774823323071,
		},
		{
			name: "type outside the table, no data",
			key:  JobKey{"1", rn50, 1}, typ: "h100",
			source: SourceTable, detail: "(h100 is not in the table: as slow as its slowest type)", rate: 0.6190282202246573,
		},
		{
			name: "type outside the table, measured elsewhere only",
			obs:  []Measurement{obs("1", "mystery", 1, "v100", 7, 0)},
			key:  JobKey{"1", "mystery", 1}, typ: "h100",
			source: SourceDefault, detail: "default: as fast as its slowest measured type", rate: 7,
		},
		{
			name: "type outside the table learned from other jobs",
			obs: []Measurement{
				obs("a", "", 1, "v100", 10, 0), obs("a", "", 1, "h100", 20, 0),
				obs("b", "", 1, "v100", 10, 0), obs("b", "", 1, "h100", 80, 0),
				obs("1", "mystery", 1, "v100", 3, 0),
			},
			key: JobKey{"1", "mystery", 1}, typ: "h100",
			source: SourceEstimated, detail: "estimated from h100 ≈ 4× v100 over 2 jobs", rate: 12,
		},
		{
			name: "type outside the table from the tagged row",
			obs: []Measurement{
				obs("a", "", 1, "v100", 10, 0), obs("a", "", 1, "h100", 30, 0),
			},
			key: JobKey{"1", rn50, 1}, typ: "h100",
			source: SourceEstimated, detail: "estimated from reference table: " + rn50 + " x1 and h100 ≈ 3× v100 over 1 job", rate: 3 * 4.394774823323071,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newTestEstimator(t)
			for _, m := range tt.obs {
				if err := e.Observe(m); err != nil {
					t.Fatal(err)
				}
			}
			types := append(append([]string(nil), refTypes...), "h100")
			got := e.Rates(tt.key, types, t0.Add(tt.now))[tt.typ]
			if got.Source != tt.source || !strings.Contains(got.Detail, tt.detail) {
				t.Errorf("got %s %q, want %s containing %q", got.Source, got.Detail, tt.source, tt.detail)
			}
			if tt.rate != 0 && math.Abs(got.StepsPerSecond-tt.rate) > 1e-9*tt.rate {
				t.Errorf("rate %v, want %v", got.StepsPerSecond, tt.rate)
			}
			if tt.rate == 0 && tt.source == SourceTable && got.StepsPerSecond != 0 {
				t.Errorf("rate %v, want 0", got.StepsPerSecond)
			}
		})
	}
}

func TestStaleWeightHalvesPerStaleLimit(t *testing.T) {
	e := newTestEstimator(t)
	const rn50 = "ResNet-50 (batch size 64)"
	// Measured twice the table on k80 and on v100; v100 then goes stale.
	for _, m := range []Measurement{obs("1", rn50, 1, "v100", 2*4.394774823323071, 0), obs("1", rn50, 1, "k80", 2*0.6190282202246573, 0)} {
		if err := e.Observe(m); err != nil {
			t.Fatal(err)
		}
	}
	key := JobKey{"1", rn50, 1}
	for _, tt := range []struct {
		age    time.Duration
		weight string
	}{{7 * time.Hour, "weighted 89%"}, {12 * time.Hour, "weighted 50%"}, {18 * time.Hour, "weighted 25%"}} {
		got := e.Rates(key, []string{"v100"}, t0.Add(tt.age))["v100"]
		if !strings.Contains(got.Detail, tt.weight) {
			t.Errorf("after %v: %q, want %q", tt.age, got.Detail, tt.weight)
		}
		// Both the stale value and the estimate agree on twice the table.
		if math.Abs(got.StepsPerSecond-2*4.394774823323071) > 1e-6 {
			t.Errorf("after %v: rate %v", tt.age, got.StepsPerSecond)
		}
	}
}

func TestForget(t *testing.T) {
	e := newTestEstimator(t)
	if err := e.Observe(obs("1", "mystery", 1, "v100", 7, 0)); err != nil {
		t.Fatal(err)
	}
	key := JobKey{"1", "mystery", 1}
	if got := e.Rates(key, []string{"v100"}, t0)["v100"]; got.Source != SourceMeasured {
		t.Fatalf("before Forget: %+v", got)
	}
	e.Forget("1")
	e.Forget("never seen")
	if got := e.Rates(key, []string{"v100"}, t0)["v100"]; got.Source != SourceDefault {
		t.Errorf("after Forget: %+v", got)
	}
}

func TestScaleChangeStartsAfresh(t *testing.T) {
	e := newTestEstimator(t)
	for _, m := range []Measurement{obs("1", "mystery", 1, "v100", 7, 0), obs("1", "mystery", 2, "p100", 5, time.Minute)} {
		if err := e.Observe(m); err != nil {
			t.Fatal(err)
		}
	}
	got := e.Rates(JobKey{"1", "mystery", 2}, []string{"v100", "p100"}, t0.Add(time.Minute))
	if got["p100"].Source != SourceMeasured || got["v100"].Source == SourceMeasured {
		t.Errorf("after the scale change: %+v", got)
	}
}

// Outliers and the warm-up show in the measured detail.
func TestMeasuredDetailCountsDrops(t *testing.T) {
	e := newTestEstimator(t)
	rates := []float64{10, 10, 10, 100}
	for i, r := range rates {
		if err := e.Observe(obs("1", "", 1, "v100", r, time.Duration(i)*time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	got := e.Rates(JobKey{"1", "", 1}, []string{"v100"}, t0.Add(time.Hour))["v100"]
	if want := "measured 10 steps/s over 3 intervals (1 outlier dropped)"; got.Detail != want {
		t.Errorf("detail %q, want %q", got.Detail, want)
	}
}

func TestRemainingSteps(t *testing.T) {
	e := newTestEstimator(t)
	if _, _, ok := e.RemainingSteps("1", 100); ok {
		t.Error("progress of an unknown job")
	}
	report := func(steps int64, after time.Duration, scale int) {
		m := obs("1", "", scale, "v100", 3, after)
		m.Steps = steps
		if err := e.Observe(m); err != nil {
			t.Fatal(err)
		}
	}
	report(0, 0, 1) // no progress reported
	if _, _, ok := e.RemainingSteps("1", 100); ok {
		t.Error("progress from a report without steps")
	}
	tests := []struct {
		steps int64
		after time.Duration
		scale int
		total int64
		want  int64
		at    time.Duration
	}{
		{30, time.Minute, 1, 100, 70, time.Minute},
		{20, 30 * time.Second, 1, 100, 70, time.Minute}, // older report ignored
		{60, 2 * time.Minute, 2, 100, 40, 2 * time.Minute},
		{150, 3 * time.Minute, 2, 100, 0, 3 * time.Minute},
	}
	for _, tt := range tests {
		report(tt.steps, tt.after, tt.scale)
		got, at, ok := e.RemainingSteps("1", tt.total)
		if !ok || got != tt.want || !at.Equal(t0.Add(tt.at)) {
			t.Errorf("after %d steps at %v: %d at %v (%v), want %d at %v", tt.steps, tt.after, got, at.Sub(t0), ok, tt.want, tt.at)
		}
	}
	e.Forget("1")
	if _, _, ok := e.RemainingSteps("1", 100); ok {
		t.Error("progress kept after Forget")
	}
}

// Observations and questions may come from different goroutines (run with
// -race).
func TestConcurrentUse(t *testing.T) {
	e := newTestEstimator(t)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 50 {
			if err := e.Observe(obs("1", "mystery", 1, refTypes[i%3], 1+float64(i%5), time.Duration(i)*time.Minute)); err != nil {
				t.Error(err)
			}
		}
	}()
	for range 50 {
		e.Rates(JobKey{"1", "mystery", 1}, refTypes, t0)
		Models{Estimator: e}.Estimate("mystery", 1, refTypes)
	}
	<-done
}
