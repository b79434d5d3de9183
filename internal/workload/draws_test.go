package workload

import (
	"math"
	"slices"
	"strings"
	"testing"
)

func TestPick(t *testing.T) {
	cases := []struct {
		name    string
		weights []float64
		u       float64
		want    int
	}{
		{"first of equal", []float64{1, 1, 1, 1}, 0, 0},
		{"just below a boundary", []float64{1, 1, 1, 1}, 0.2499, 0},
		{"on a boundary", []float64{1, 1, 1, 1}, 0.25, 1},
		{"last of equal", []float64{1, 1, 1, 1}, 0.99, 3},
		{"zero weight skipped", []float64{1, 0, 1}, 0.5, 2},
		{"Philly mix, one GPU", PhillyScaleWeights[:], 0.69, 0},
		{"Philly mix, eight GPUs", PhillyScaleWeights[:], 0.96, 3},
		{"u past the end", []float64{1, 1}, 1, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Pick(c.weights, c.u); got != c.want {
				t.Errorf("Pick(%v, %v) = %d, want %d", c.weights, c.u, got, c.want)
			}
		})
	}
}

func TestCheckWeights(t *testing.T) {
	def := []float64{70, 10, 15, 5}
	cases := []struct {
		name    string
		w       []float64
		want    []float64
		wantErr string
	}{
		{"given weights kept", []float64{1, 2, 3, 4}, []float64{1, 2, 3, 4}, ""},
		{"all zero means the default", []float64{0, 0, 0, 0}, def, ""},
		{"some zero kept", []float64{0, 0, 1, 0}, []float64{0, 0, 1, 0}, ""},
		{"negative", []float64{1, -1, 1, 1}, nil, "scale weight 1 is -1"},
		{"NaN", []float64{math.NaN(), 1, 1, 1}, nil, "scale weight 0 is NaN"},
		{"infinite", []float64{1, 1, 1, math.Inf(1)}, nil, "scale weight 3 is +Inf"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := CheckWeights("scale", c.w, def)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error = %v, want one mentioning %q", err, c.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(got, c.want) {
				t.Errorf("got %v, %v; want %v", got, err, c.want)
			}
		})
	}
}

// fixedNormals replays the standard normal draws it holds, then zeros.
type fixedNormals []float64

func (f *fixedNormals) NormFloat64() float64 {
	if len(*f) == 0 {
		return 0
	}
	v := (*f)[0]
	*f = (*f)[1:]
	return v
}

func TestTruncNormalDraw(t *testing.T) {
	cases := []struct {
		name  string
		dist  TruncNormal
		draws []float64
		want  int
	}{
		{"inside: rounded", TruncNormal{Mean: 10, SD: 2, Min: 0, Max: 20}, []float64{0.3}, 11},
		{"below: redrawn", TruncNormal{Mean: 10, SD: 2, Min: 8, Max: 20}, []float64{-3, 1}, 12},
		{"above: redrawn", TruncNormal{Mean: 10, SD: 2, Min: 0, Max: 12}, []float64{5, 5, -0.2}, 10},
		{"no spread", TruncNormal{Mean: 3, Min: 3, Max: 3}, []float64{7}, 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := fixedNormals(c.draws)
			if got := c.dist.Draw(&src); got != c.want {
				t.Errorf("Draw = %d, want %d", got, c.want)
			}
		})
	}
	// All the mass beyond Max: after the redraws, the nearest bound.
	far := TruncNormal{Mean: 1000, SD: 0.1, Min: 1, Max: 5}
	if got := far.Draw(NewStream(1, 1)); got != 5 {
		t.Errorf("mass outside the bounds: Draw = %d, want 5", got)
	}
}

func TestTruncNormalCheck(t *testing.T) {
	cases := []struct {
		name string
		dist TruncNormal
		ok   bool
	}{
		{"valid", TruncNormal{Mean: 3, SD: 1, Min: 0, Max: 10}, true},
		{"a single value", TruncNormal{Mean: 3, Min: 3, Max: 3}, true},
		{"negative spread", TruncNormal{Mean: 3, SD: -1, Min: 0, Max: 10}, false},
		{"bounds reversed", TruncNormal{Mean: 3, SD: 1, Min: 10, Max: 0}, false},
		{"negative lower bound", TruncNormal{Mean: 3, SD: 1, Min: -1, Max: 10}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := c.dist.Check(); (err == nil) != c.ok {
				t.Errorf("Check() = %v, want ok %v", err, c.ok)
			}
		})
	}
}

// The shared Uniform and Rand.Uniform are one expression: the same stream
// gives the same values through either.
func TestUniformMatchesRand(t *testing.T) {
	a, b := NewRand(7), NewRand(7)
	for range 100 {
		if x, y := a.Uniform(1.5, 3), Uniform(b, 1.5, 3); x != y {
			t.Fatalf("Rand.Uniform %v, Uniform %v", x, y)
		}
	}
}

func TestNewStreamSeparatesStreams(t *testing.T) {
	if NewStream(3, 1).Float64() == NewStream(3, 2).Float64() {
		t.Error("two streams of one seed start alike")
	}
	if NewStream(3, 1).Float64() != NewStream(3, 1).Float64() {
		t.Error("one stream of one seed starts differently")
	}
}
