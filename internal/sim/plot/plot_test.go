package plot

import (
	"math"
	"slices"
	"strings"
	"testing"
)

func TestNiceTicks(t *testing.T) {
	cases := []struct {
		lo, hi float64
		n      int
		want   []float64
	}{
		{0, 10, 5, []float64{0, 2, 4, 6, 8, 10}},
		{0.4, 6, 8, []float64{0, 1, 2, 3, 4, 5, 6}},
		{0, 73, 6, []float64{0, 20, 40, 60, 80}},
		{5, 5, 4, []float64{5, 5.5, 6}}, // degenerate range widened to 1
	}
	for _, c := range cases {
		if got := niceTicks(c.lo, c.hi, c.n); !slices.Equal(got, c.want) {
			t.Errorf("niceTicks(%v, %v, %d) = %v, want %v", c.lo, c.hi, c.n, got, c.want)
		}
	}
}

func TestWriteSVG(t *testing.T) {
	c := Chart{
		Title: "avg JCT", XLabel: "rate (jobs/h)", YLabel: "hours",
		Series: []Series{
			{Name: "a<b>", X: []float64{1, 2, 3}, Y: []float64{10, 12, math.NaN()}},
			{Name: "c", X: []float64{1, 2, 3}, Y: []float64{5, 6, 7}},
		},
	}
	var b strings.Builder
	if err := c.WriteSVG(&b); err != nil {
		t.Fatal(err)
	}
	svg := b.String()
	for _, want := range []string{"<svg", "</svg>", "a&lt;b&gt;", "rate (jobs/h)", "hours"} {
		if !strings.Contains(svg, want) {
			t.Errorf("SVG lacks %q", want)
		}
	}
	// The NaN point is a gap: series a has 2 markers, c has 3.
	if n := strings.Count(svg, "<circle"); n != 5 {
		t.Errorf("%d point markers, want 5", n)
	}
	if n := strings.Count(svg, "<polyline"); n != 2 {
		t.Errorf("%d lines, want 2", n)
	}
	empty := Chart{Series: []Series{{Name: "x", X: []float64{1}, Y: []float64{math.NaN()}}}}
	if err := empty.WriteSVG(&b); err == nil {
		t.Error("chart without finite points rendered")
	}
}
