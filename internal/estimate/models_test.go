package estimate_test

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/internal/estimate"
	"github.com/gavel-slurm/gavel-slurm/internal/sched"
	"github.com/gavel-slurm/gavel-slurm/internal/throughputs"
)

// The adapter answers the per-model question the table estimator answers.
var _ interface {
	Estimate(model string, scale int, types []string) (string, map[string]float64, string)
} = estimate.Models{}

// Without measurements the adapter answers as the table estimator does,
// for every job type of the table, for unknown models and for types
// outside the table.
func TestModelsMatchesTableWithoutMeasurements(t *testing.T) {
	table, err := throughputs.Reference()
	if err != nil {
		t.Fatal(err)
	}
	e, err := estimate.New(table, estimate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	adapter := estimate.Models{Estimator: e}
	reference := sched.TableEstimator{Table: table}
	types := append(table.Types(), "a100")
	var asks [][2]any
	for _, m := range table.Models() {
		for sf := 1; sf <= 8; sf++ {
			asks = append(asks, [2]any{m, sf})
		}
	}
	asks = append(asks, [2]any{"resnet50-bs64", 1}, [2]any{"mystery", 1}, [2]any{"", 2})
	for _, a := range asks {
		model, sf := a[0].(string), a[1].(int)
		wantName, wantRates, _ := reference.Estimate(model, sf, types)
		name, rates, source := adapter.Estimate(model, sf, types)
		if name != wantName || !maps.Equal(rates, wantRates) {
			t.Errorf("%s x%d: got %s %v, want %s %v", model, sf, name, rates, wantName, wantRates)
		}
		if source == "" {
			t.Errorf("%s x%d: no source", model, sf)
		}
	}
}

// Measurements of every job of a model are pooled for the model.
func TestModelsPoolsJobsOfAModel(t *testing.T) {
	table, _ := throughputs.Reference()
	e, _ := estimate.New(table, estimate.Options{})
	at := time.Unix(1e9, 0)
	for _, m := range []estimate.Measurement{
		{JobID: "1", Model: "resnet50-bs64", Scale: 1, Type: "v100", StepsPerSecond: 4, At: at, SinceStart: time.Hour},
		{JobID: "2", Model: "ResNet-50 (batch size 64)", Scale: 1, Type: "v100", StepsPerSecond: 9, At: at, SinceStart: time.Hour},
		{JobID: "3", Model: "ResNet-50 (batch size 64)", Scale: 2, Type: "v100", StepsPerSecond: 100, At: at, SinceStart: time.Hour},
	} {
		if err := e.Observe(m); err != nil {
			t.Fatal(err)
		}
	}
	name, rates, source := estimate.Models{Estimator: e}.Estimate("ResNet50_BS64", 1, []string{"k80", "v100"})
	if name != "ResNet-50 (batch size 64)" || rates["v100"] != 6 {
		t.Errorf("got %s %v, want the table name and the geometric mean 6 on v100", name, rates)
	}
	for _, want := range []string{"v100: measured 6 steps/s over 2 intervals of 2 jobs", "k80: estimated from reference table"} {
		if !strings.Contains(source, want) {
			t.Errorf("source %q lacks %q", source, want)
		}
	}
	// Past the staleness limit the pool is empty: the table answers.
	later := func() time.Time { return at.Add(7 * time.Hour) }
	_, rates, source = estimate.Models{Estimator: e, Now: later}.Estimate("ResNet50_BS64", 1, []string{"v100"})
	if rates["v100"] != table.Isolated("ResNet-50 (batch size 64)", 1, "v100") || !strings.HasPrefix(source, "reference table") {
		t.Errorf("stale pool: %v %q", rates, source)
	}
}

func TestSummary(t *testing.T) {
	est := map[string]estimate.Estimate{
		"a": {Detail: "x"}, "b": {Detail: "x"}, "c": {Detail: "y"},
	}
	tests := []struct {
		types []string
		want  string
	}{
		{nil, ""},
		{[]string{"a", "b"}, "x"},
		{[]string{"c", "a"}, "c: y; a: x"},
	}
	for _, tt := range tests {
		if got := estimate.Summary(est, tt.types); got != tt.want {
			t.Errorf("Summary(%v) = %q, want %q", tt.types, got, tt.want)
		}
	}
}
