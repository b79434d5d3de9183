package estimate

import (
	"math"
	"testing"
	"time"
)

func TestCellSmoothing(t *testing.T) {
	o, err := Options{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	type interval struct {
		rate       float64
		sinceStart time.Duration
	}
	steady := func(rates ...float64) []interval {
		out := make([]interval, len(rates))
		for i, r := range rates {
			out[i] = interval{r, time.Hour}
		}
		return out
	}
	tests := []struct {
		name      string
		intervals []interval
		rate      float64
		accepted  int
		outliers  int
		warmUp    int
	}{
		{"first interval sets the rate", steady(10), 10, 1, 0, 0},
		{"moving average with alpha 0.5", steady(10, 20), 15, 2, 0, 0},
		{"warm-up interval skipped", []interval{{100, 10 * time.Second}, {10, time.Hour}}, 10, 1, 0, 1},
		{"too few intervals to reject", steady(10, 100), 55, 2, 0, 0},
		{"spike rejected against the median", steady(10, 10, 10, 100), 10, 3, 1, 0},
		{"dip rejected against the median", steady(10, 10, 10, 2), 10, 3, 1, 0},
		{"within the factor accepted", steady(10, 10, 10, 19), 14.5, 4, 0, 0},
		// A lasting change takes over the median after half the window;
		// the average then restarts from the median instead of crawling.
		{"lasting change adopted", steady(10, 10, 10, 50, 50, 50, 50, 50, 50), 50, 5, 4, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c cell
			at := time.Unix(1e9, 0)
			for _, iv := range tt.intervals {
				at = at.Add(time.Minute)
				c.add(iv.rate, at, iv.sinceStart, o)
			}
			if math.Abs(c.rate-tt.rate) > 1e-9 || c.accepted != tt.accepted || c.outliers != tt.outliers || c.warmUp != tt.warmUp {
				t.Errorf("rate %v accepted %d outliers %d warm-up %d, want %v %d %d %d",
					c.rate, c.accepted, c.outliers, c.warmUp, tt.rate, tt.accepted, tt.outliers, tt.warmUp)
			}
		})
	}
}

func TestCellIgnoresRepeatsAndOldReports(t *testing.T) {
	o, _ := Options{}.withDefaults()
	var c cell
	at := time.Unix(1e9, 0)
	if v := c.add(10, at, time.Hour, o); v != verdictAccepted {
		t.Fatalf("first report: verdict %v", v)
	}
	for _, when := range []time.Time{at, at.Add(-time.Minute)} {
		if v := c.add(99, when, time.Hour, o); v != verdictOld {
			t.Errorf("report at %v: verdict %v, want old", when, v)
		}
	}
	if c.rate != 10 || c.accepted != 1 || !c.last.Equal(at) {
		t.Errorf("cell changed by old reports: %+v", c)
	}
}

func TestMedian(t *testing.T) {
	tests := []struct {
		xs   []float64
		min  int
		want float64
		ok   bool
	}{
		{nil, 1, 0, false},
		{[]float64{3, 1}, 3, 0, false},
		{[]float64{3, 1, 2}, 3, 2, true},
		{[]float64{4, 1, 3, 2}, 3, 2.5, true},
	}
	for _, tt := range tests {
		got, ok := median(tt.xs, tt.min)
		if got != tt.want || ok != tt.ok {
			t.Errorf("median(%v, %d) = %v, %v; want %v, %v", tt.xs, tt.min, got, ok, tt.want, tt.ok)
		}
	}
}
