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
	c.Series[0].Saturated = []float64{3}
	var b strings.Builder
	if err := c.WriteSVG(&b); err != nil {
		t.Fatal(err)
	}
	svg := b.String()
	for _, want := range []string{"<svg", "</svg>", "a&lt;b&gt;", "rate (jobs/h)", "hours", ">saturated</text>"} {
		if !strings.Contains(svg, want) {
			t.Errorf("SVG lacks %q", want)
		}
	}
	// The NaN point is a gap: series a has 2 markers (circles), c has 3
	// (squares); a's saturated rate is one cross.
	if n := strings.Count(svg, `<circle class="point"`); n != 2 {
		t.Errorf("%d circle markers, want 2", n)
	}
	if n := strings.Count(svg, `<rect class="point"`); n != 3 {
		t.Errorf("%d square markers, want 3", n)
	}
	if n := strings.Count(svg, `class="saturated"`); n != 1 {
		t.Errorf("%d saturation crosses, want 1", n)
	}
	// Lines differ by dash pattern as well as colour: a solid, c dashed.
	if n := strings.Count(svg, "<polyline"); n != 2 {
		t.Errorf("%d lines, want 2", n)
	}
	if n := strings.Count(svg, `<polyline fill="none" stroke="#d62728" stroke-width="2" stroke-dasharray=`); n != 1 {
		t.Errorf("second series' line is not dashed")
	}
	empty := Chart{Series: []Series{{Name: "x", X: []float64{1}, Y: []float64{math.NaN()}}}}
	if err := empty.WriteSVG(&b); err == nil {
		t.Error("chart without finite points rendered")
	}
}

func TestSaturationLegendOnlyWhenMarked(t *testing.T) {
	c := Chart{Title: "t", Subtitle: "setup", Series: []Series{{Name: "a", X: []float64{1, 2}, Y: []float64{1, 2}}}}
	var b strings.Builder
	if err := c.WriteSVG(&b); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "saturated") {
		t.Error("legend mentions saturation without any saturated point")
	}
	if !strings.Contains(b.String(), ">setup</text>") {
		t.Error("subtitle missing")
	}
}
