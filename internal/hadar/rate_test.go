package hadar

import (
	"errors"
	"math"
	"testing"
)

func TestRate(t *testing.T) {
	// Whole-job rates of a 4-GPU job on 4 GPUs of each type.
	job := Job{ID: "j", Scale: 4, Rates: map[string]float64{"v100": 40, "p100": 20, "k80": 8}}
	tests := []struct {
		name    string
		parts   []Part
		span    float64
		want    float64
		wantErr error
	}{
		{"one type, one server: the table's rate",
			[]Part{{"v0", "v100", 4}}, 0.5, 40, nil},
		{"one type over two servers pays the span factor",
			[]Part{{"v0", "v100", 2}, {"v1", "v100", 2}}, 0.5, 20, nil},
		{"a mix runs at its slowest type",
			[]Part{{"v0", "v100", 3}, {"k0", "k80", 1}}, 1, 8, nil},
		{"a mix over two servers pays the span factor once",
			[]Part{{"v0", "v100", 2}, {"p0", "p100", 1}, {"p1", "p100", 1}}, 0.75, 15, nil},
		{"one worker on a type the job cannot use stalls it",
			[]Part{{"v0", "v100", 3}, {"t0", "t4", 1}}, 1, 0, nil},
		{"too few GPUs",
			[]Part{{"v0", "v100", 3}}, 1, 0, ErrBadParts},
		{"too many GPUs",
			[]Part{{"v0", "v100", 4}, {"k0", "k80", 1}}, 1, 0, ErrBadParts},
		{"an empty part",
			[]Part{{"v0", "v100", 4}, {"k0", "k80", 0}}, 1, 0, ErrBadParts},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := job.Rate(tt.parts, tt.span)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("error %v, want %v", err, tt.wantErr)
			}
			if math.Abs(got-tt.want) > 1e-12 {
				t.Errorf("rate %v, want %v", got, tt.want)
			}
		})
	}
}

func TestRateRefusesBadInputs(t *testing.T) {
	parts := []Part{{"v0", "v100", 1}}
	tests := []struct {
		name string
		job  Job
		span float64
	}{
		{"scale 0", Job{ID: "a", Scale: 0, Rates: map[string]float64{"v100": 1}}, 1},
		{"span factor 0", Job{ID: "a", Scale: 1, Rates: map[string]float64{"v100": 1}}, 0},
		{"span factor above 1", Job{ID: "a", Scale: 1, Rates: map[string]float64{"v100": 1}}, 1.5},
		{"span factor NaN", Job{ID: "a", Scale: 1, Rates: map[string]float64{"v100": 1}}, math.NaN()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := tt.job.Rate(parts, tt.span); err == nil {
				t.Error("accepted")
			}
		})
	}
}

// A mix is never faster than the same job on its slowest used type alone,
// and never slower than spanFactor times that: the model charges exactly
// the bottleneck and the span.
func TestRateBoundedBySlowestType(t *testing.T) {
	job := Job{ID: "j", Scale: 8, Rates: map[string]float64{"v100": 50, "p100": 30, "k80": 10}}
	mixes := [][]Part{
		{{"v0", "v100", 4}, {"p0", "p100", 4}},
		{{"v0", "v100", 4}, {"v1", "v100", 3}, {"k0", "k80", 1}},
		{{"p0", "p100", 1}, {"k0", "k80", 4}, {"k1", "k80", 3}},
	}
	for _, parts := range mixes {
		slowest := math.Inf(1)
		for tp := range Counts(parts) {
			slowest = math.Min(slowest, job.Rates[tp])
		}
		for _, span := range []float64{0.3, 0.75, 1} {
			got, err := job.Rate(parts, span)
			if err != nil {
				t.Fatal(err)
			}
			if got > slowest || got < span*slowest-1e-12 {
				t.Errorf("%s span %v: rate %v outside [%v, %v]", FormatCounts(Counts(parts)), span, got, span*slowest, slowest)
			}
		}
	}
}

func TestCountsAndServers(t *testing.T) {
	parts := []Part{{"v0", "v100", 2}, {"v1", "v100", 1}, {"k0", "k80", 1}}
	if got := FormatCounts(Counts(parts)); got != "k80:1,v100:3" {
		t.Errorf("counts %s", got)
	}
	if got := Servers(parts); got != 3 {
		t.Errorf("servers %d", got)
	}
	if !Mixed(parts) || Mixed(parts[:2]) {
		t.Error("Mixed wrong")
	}
}
