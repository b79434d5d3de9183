//go:build cgo

package workload

// #cgo LDFLAGS: -lm
// #include <math.h>
import "C"

// The reference generator computes durations with the C library's pow and
// inter-arrival gaps with its log. Go's math.Pow and math.Log differ from
// them in the last bit for a fraction of inputs, and a single differing gap
// shifts every later arrival, so the same libm functions are called here.

func libmLog(x float64) float64    { return float64(C.log(C.double(x))) }
func libmPow(x, y float64) float64 { return float64(C.pow(C.double(x), C.double(y))) }

// exactLibm reports whether results match the C library bit for bit.
const exactLibm = true
