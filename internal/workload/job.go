// Package workload produces the jobs a simulation replays: synthetic
// workloads drawn exactly like the reference simulator draws them (same
// random streams, same distributions), traces read from and written to
// files, and the draws the other simulators' workloads are made of (random
// streams, weighted picks, the Philly mix of scale factors, models and
// rates on the reference type, truncated normals), so that every workload
// is drawn one way.
//
// The generators and draws are pure: no I/O, no clock; randomness comes
// only from the seeds passed in.
package workload

// Job is one training job of a workload.
type Job struct {
	// Model names the job type in the throughput table.
	Model string
	// ScaleFactor is the number of GPUs the job runs on at once.
	ScaleFactor int
	// TotalSteps is the work to do, in steps of the whole job.
	TotalSteps float64
	// Duration is the run time alone on a V100 at the job's scale factor,
	// in seconds (generated jobs only; 0 for trace jobs).
	Duration float64
	// Priority is the job's weight (1 by default).
	Priority float64
	// SLO is the job's deadline in seconds after arrival; 0 means none.
	SLO float64
	// Arrival is the submission time in seconds from the start.
	Arrival float64

	// Launch details carried through from traces so a trace can be written
	// back unchanged; the simulator ignores them.
	Command      string
	WorkingDir   string
	NumStepsArg  string
	NeedsDataDir bool
}
