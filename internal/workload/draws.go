package workload

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// The draws below are shared by every generator. The reference-compatible
// generator feeds them from a Rand; the project's own generators (batch,
// trial-and-error) feed them from PCG streams. Each draw consumes its
// source in a fixed way, so a seed keeps giving the same jobs.

// UnitSource yields uniform floats in [0, 1): *Rand and *rand.Rand both do.
type UnitSource interface {
	Float64() float64
}

// NormalSource yields standard normal draws, as *rand.Rand does.
type NormalSource interface {
	NormFloat64() float64
}

// NewStream is the PCG stream a generator of the project's own draws
// from. stream tells generators apart, so two of them given the same seed
// still draw independently.
func NewStream(seed, stream uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, stream))
}

// Uniform is a + (b-a)*U for one draw U of r: the same expression as
// CPython's uniform(a, b), so Rand.Uniform and the other sources agree.
func Uniform(r UnitSource, a, b float64) float64 { return a + (b-a)*r.Float64() }

// CheckWeights returns w, or def when every weight of w is zero. It
// refuses negative, infinite and NaN weights, naming them by what and
// their index.
func CheckWeights(what string, w, def []float64) ([]float64, error) {
	sum := 0.0
	for i, v := range w {
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return w, fmt.Errorf("%s weight %d is %v: need a finite number >= 0", what, i, v)
		}
		sum += v
	}
	if sum == 0 {
		return def, nil
	}
	return w, nil
}

// Pick is the index of weights that u in [0, 1) falls on when the weights
// are laid end to end and scaled to [0, 1). A rounding error past the end
// gives the last index.
func Pick(weights []float64, u float64) int {
	sum := 0.0
	for _, w := range weights {
		sum += w
	}
	u *= sum
	for i, w := range weights {
		if u < w {
			return i
		}
		u -= w
	}
	return len(weights) - 1
}

// TruncNormal is a normal distribution truncated to [Min, Max] whose
// draws are rounded to whole numbers: draws outside are redrawn, the way
// jobs are generated from truncated fitted normals.
type TruncNormal struct {
	Mean, SD, Min, Max float64
}

// maxRedraws bounds the rejection loop of TruncNormal.Draw.
const maxRedraws = 10000

// Draw returns one value rounded to an integer in [Min, Max].
func (d TruncNormal) Draw(r NormalSource) int {
	for range maxRedraws {
		v := math.Round(d.Mean + d.SD*r.NormFloat64())
		if v >= d.Min && v <= d.Max {
			return int(v)
		}
	}
	// A distribution whose mass lies almost all outside its bounds: the
	// nearest bound is what the rejection loop would tend to anyway.
	return int(math.Round(min(max(d.Mean, d.Min), d.Max)))
}

// Check refuses a negative spread, a negative lower bound and bounds in
// the wrong order.
func (d TruncNormal) Check() error {
	if d.SD < 0 || d.Min > d.Max || d.Min < 0 {
		return fmt.Errorf("distribution %+v: want SD ≥ 0 and 0 ≤ Min ≤ Max", d)
	}
	return nil
}
