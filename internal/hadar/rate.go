// Package hadar lets a multi-GPU job's workers span GPU types within a
// round (task-level heterogeneity, after Hadar), and lets a job run forked
// copies on GPUs nobody else uses (after HadarE).
//
// Gavel gives a job of scale factor k k GPUs of one type per round: with 3
// V100 and 3 K80 free, a 4-GPU job waits. Here the same job may run on 3
// V100 and 1 K80. Its rate follows synchronous data parallelism: every
// step waits for the slowest worker, so the job advances at the rate it
// would have on k GPUs of its slowest type, and a job whose workers sit on
// more than one server pays a communication penalty.
//
// The package is pure: no I/O, no clock, no randomness. It does not change
// the policies' linear programs (see docs/hadar.md for why mixed columns
// would never be chosen there); it realizes an allocation's rounds more
// fully, by placing on a mix the jobs that the per-type walk of package
// rounds leaves waiting while GPUs of several types sit idle.
package hadar

import (
	"errors"
	"fmt"
	"math"
	"sort"
)

// Job is a data-parallel training job as the mixed placement sees it.
type Job struct {
	ID string
	// Scale is the number of workers (GPUs) the job runs at once.
	Scale int
	// Rates is the job's whole-job step rate at its scale on each GPU type:
	// steps/s when all Scale workers are of that type and on one server
	// (the reference table's meaning for a k-GPU job type). 0 or missing:
	// the job cannot run on that type.
	Rates map[string]float64
}

// Part is the GPUs a job holds of one type on one server.
type Part struct {
	Server string
	Type   string
	GPUs   int
}

// ErrBadParts reports parts that do not describe a placement of the job.
var ErrBadParts = errors.New("parts do not place the job")

// Rate is the job's step rate on parts: the whole-job rate on its slowest
// type among those the parts use, times spanFactor when the parts lie on
// more than one server. The slowest worker bounds a synchronous step
// (Hadar's bottleneck rate), and the table's rates already hold the cost
// of k workers talking on one server, so only leaving the server is
// charged. spanFactor is in (0, 1]; 1 charges nothing.
func (j Job) Rate(parts []Part, spanFactor float64) (float64, error) {
	if j.Scale < 1 {
		return 0, fmt.Errorf("job %s: scale %d, need at least 1", j.ID, j.Scale)
	}
	if !(spanFactor > 0 && spanFactor <= 1) {
		return 0, fmt.Errorf("job %s: span factor %v, need 0 < f <= 1", j.ID, spanFactor)
	}
	total := 0
	slowest := math.Inf(1)
	servers := map[string]bool{}
	for _, p := range parts {
		if p.GPUs < 1 {
			return 0, fmt.Errorf("job %s: %w: %d GPUs of %s on %s", j.ID, ErrBadParts, p.GPUs, p.Type, p.Server)
		}
		total += p.GPUs
		servers[p.Server] = true
		slowest = math.Min(slowest, j.Rates[p.Type])
	}
	if total != j.Scale {
		return 0, fmt.Errorf("job %s: %w: %d GPUs for a job of scale %d", j.ID, ErrBadParts, total, j.Scale)
	}
	if slowest <= 0 || math.IsNaN(slowest) || math.IsInf(slowest, 0) {
		// A worker on a type the job cannot use stalls every step.
		return 0, nil
	}
	if len(servers) > 1 {
		slowest *= spanFactor
	}
	return slowest, nil
}

// Counts sums parts per GPU type, e.g. {v100: 3, k80: 1}.
func Counts(parts []Part) map[string]int {
	out := map[string]int{}
	for _, p := range parts {
		out[p.Type] += p.GPUs
	}
	return out
}

// Mixed reports whether the parts use more than one GPU type.
func Mixed(parts []Part) bool { return len(Counts(parts)) > 1 }

// Servers counts the distinct servers the parts use.
func Servers(parts []Part) int {
	seen := map[string]bool{}
	for _, p := range parts {
		seen[p.Server] = true
	}
	return len(seen)
}

// FormatCounts renders type counts in name order, e.g. "k80:1,v100:3".
func FormatCounts(c map[string]int) string {
	names := make([]string, 0, len(c))
	for t := range c {
		names = append(names, t)
	}
	sort.Strings(names)
	s := ""
	for i, t := range names {
		if i > 0 {
			s += ","
		}
		s += fmt.Sprintf("%s:%d", t, c[t])
	}
	return s
}
