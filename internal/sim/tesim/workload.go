// Package tesim is a node-level event simulator for FitGpp's synthetic
// experiment: single-node jobs of two classes, trial-and-error (TE) and
// best-effort (BE), on identical nodes of CPUs, memory and GPUs, scheduled
// once a simulated minute. Non-preemptive FIFO is the baseline; the other
// methods give TE jobs precedence and make room for them at once by
// preempting BE jobs with a tepreempt.Chooser (FitGpp, LRTP, random).
//
// Everything is in whole minutes, as in the paper's simulator; seeds are
// passed in, so a run is repeatable.
package tesim

import (
	"fmt"

	"github.com/gavel-slurm/gavel-slurm/internal/tepreempt"
	"github.com/gavel-slurm/gavel-slurm/internal/workload"
)

// Class is the shape of one class of jobs: each quantity a truncated
// normal, as the paper fits them.
type Class struct {
	Minutes, GPUs, CPUs, MemGB workload.TruncNormal
}

// Workload is how jobs are drawn.
type Workload struct {
	TE, BE Class
	// GraceMinutes is the grace period every job asks for (only BE
	// jobs are ever preempted).
	GraceMinutes workload.TruncNormal
	// TEFraction is the share of TE jobs.
	TEFraction float64
}

// PaperWorkload is the workload of the synthetic experiment (§4.2 of the
// FitGpp paper) as far as the project's copy of the paper gives it: 30%
// TE jobs, one truncated normal per quantity and class, grace periods a
// few minutes long. The copy has lost the fitted means and bounds, so the
// values here are the project's: TE jobs are small and short, BE jobs
// larger and about six times longer, chosen so that non-preemptive FIFO
// lands near the paper's FIFO row; docs/fitgpp.md lists them.
func PaperWorkload() Workload {
	return Workload{
		TE: Class{
			Minutes: workload.TruncNormal{Mean: 45, SD: 20, Min: 8, Max: 480},
			GPUs:    workload.TruncNormal{Mean: 2, SD: 2, Min: 1, Max: 8},
			CPUs:    workload.TruncNormal{Mean: 4, SD: 4, Min: 1, Max: 32},
			MemGB:   workload.TruncNormal{Mean: 24, SD: 24, Min: 1, Max: 256},
		},
		BE: Class{
			Minutes: workload.TruncNormal{Mean: 300, SD: 120, Min: 30, Max: 2880},
			GPUs:    workload.TruncNormal{Mean: 4, SD: 3, Min: 1, Max: 8},
			CPUs:    workload.TruncNormal{Mean: 12, SD: 8, Min: 1, Max: 32},
			MemGB:   workload.TruncNormal{Mean: 64, SD: 48, Min: 1, Max: 256},
		},
		GraceMinutes: workload.TruncNormal{Mean: 3, SD: 3, Min: 0, Max: 10},
		TEFraction:   0.3,
	}
}

// ScaleGrace multiplies the grace distribution's mean, spread and upper
// bound by k (the paper's Fig. 7 axis: "2.0" doubles all three).
func (w Workload) ScaleGrace(k float64) Workload {
	w.GraceMinutes.Mean *= k
	w.GraceMinutes.SD *= k
	w.GraceMinutes.Max *= k
	return w
}

// FixedGrace gives every job the same grace period.
func (w Workload) FixedGrace(minutes int) Workload {
	g := float64(minutes)
	w.GraceMinutes = workload.TruncNormal{Mean: g, Min: g, Max: g}
	return w
}

func (w Workload) valid() error {
	if w.TEFraction < 0 || w.TEFraction > 1 {
		return fmt.Errorf("TE fraction %v outside [0, 1]", w.TEFraction)
	}
	for _, d := range []workload.TruncNormal{w.TE.Minutes, w.TE.GPUs, w.TE.CPUs, w.TE.MemGB, w.BE.Minutes, w.BE.GPUs, w.BE.CPUs, w.BE.MemGB, w.GraceMinutes} {
		if err := d.Check(); err != nil {
			return err
		}
	}
	if w.TE.Minutes.Min < 1 || w.BE.Minutes.Min < 1 {
		return fmt.Errorf("jobs must run at least a minute (slowdown divides by the run time)")
	}
	return nil
}

// Job is one generated job. Arrival is filled by Arrivals.
type Job struct {
	ID      int
	TE      bool
	Demand  tepreempt.Resources // MemMB holds GB × 1024
	Minutes int
	Grace   int
	Arrival int
}

// teStream keeps the experiment's draws apart from other generators' of
// the same seed.
const teStream = 0x7e5e

// Generate draws n jobs from w with the given seed, in submission order.
func Generate(w Workload, n int, seed uint64) ([]Job, error) {
	if err := w.valid(); err != nil {
		return nil, fmt.Errorf("workload: %w", err)
	}
	r := workload.NewStream(seed, teStream)
	jobs := make([]Job, n)
	for i := range jobs {
		te := r.Float64() < w.TEFraction
		c := w.BE
		if te {
			c = w.TE
		}
		jobs[i] = Job{
			ID: i, TE: te,
			Minutes: c.Minutes.Draw(r),
			Demand: tepreempt.Resources{
				GPUs:  c.GPUs.Draw(r),
				CPUs:  c.CPUs.Draw(r),
				MemMB: int64(c.MemGB.Draw(r)) * 1024,
			},
			Grace: w.GraceMinutes.Draw(r),
		}
	}
	return jobs, nil
}
