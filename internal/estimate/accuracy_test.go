package estimate

import (
	"testing"

	"github.com/gavel-slurm/gavel-slurm/internal/throughputs"
)

// TestAccuracy runs the leave-one-out evaluation over the reference table,
// logs the table (go test -run TestAccuracy -v) and checks that the
// estimator's median error beats every baseline in every setting.
func TestAccuracy(t *testing.T) {
	table, err := throughputs.Reference()
	if err != nil {
		t.Fatal(err)
	}
	rows, err := Accuracy(table, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + FormatAccuracy(rows) + "\n" + FormatAccuracyByScale(rows))
	type setting struct {
		hidden   string
		revealed int
	}
	ours := map[setting]AccuracyRow{}
	var all []AccuracyRow
	for _, r := range rows {
		if r.Scale != 0 {
			continue
		}
		all = append(all, r)
		if r.Method == MethodEstimator {
			ours[setting{r.Hidden, r.Revealed}] = r
		}
	}
	if len(ours) != 6 {
		t.Fatalf("%d settings for the estimator, want 3 hidden parts × 2 revealed counts", len(ours))
	}
	for _, r := range all {
		mine, ok := ours[setting{r.Hidden, r.Revealed}]
		if !ok {
			t.Fatalf("no estimator row for %s, %d revealed", r.Hidden, r.Revealed)
		}
		if r.Method != MethodEstimator && mine.Median >= r.Median {
			t.Errorf("hidden %s, %d revealed: estimator median %.3f does not beat %s (%.3f)", r.Hidden, r.Revealed, mine.Median, r.Method, r.Median)
		}
		if r.Cells != mine.Cells {
			t.Errorf("hidden %s, %d revealed: %s predicted %d cells, estimator %d", r.Hidden, r.Revealed, r.Method, r.Cells, mine.Cells)
		}
	}
}

func TestQuantile(t *testing.T) {
	xs := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, tt := range []struct{ q, want float64 }{{0.5, 5}, {0.9, 9}, {1, 10}, {0, 1}} {
		if got := quantile(xs, tt.q); got != tt.want {
			t.Errorf("quantile(%v) = %v, want %v", tt.q, got, tt.want)
		}
	}
}
