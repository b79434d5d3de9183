//go:build !cgo

package workload

import "math"

// Without cgo the Go implementations stand in for the C library's log and
// pow: workloads keep their jobs, but durations and arrival times may differ
// from the reference generator's in the last bits.

func libmLog(x float64) float64    { return math.Log(x) }
func libmPow(x, y float64) float64 { return math.Pow(x, y) }

// exactLibm reports whether results match the C library bit for bit.
const exactLibm = false
