// Package batchsim reproduces Hadar's batch comparison: a fixed batch of
// jobs, all present at time 0, scheduled round by round on a cluster of
// single-type servers by a Gavel policy, with and without mixed-type
// placement (package hadar) and forked copies, until the last job
// finishes. It reports the time to finish the batch and GPU utilization.
//
// The package is pure: no I/O, no clock; randomness comes only from the
// seeds in its inputs.
package batchsim

import (
	"errors"
	"fmt"

	"github.com/gavel-slurm/gavel-slurm/internal/throughputs"
	"github.com/gavel-slurm/gavel-slurm/internal/workload"
)

// SizeClass is one of Hadar's job sizes, by the GPU-hours a job needs.
type SizeClass uint8

const (
	Small SizeClass = iota
	Medium
	Large
	XLarge
)

// Classes lists the size classes in order.
var Classes = []SizeClass{Small, Medium, Large, XLarge}

func (c SizeClass) String() string {
	switch c {
	case Small:
		return "S"
	case Medium:
		return "M"
	case Large:
		return "L"
	case XLarge:
		return "XL"
	}
	return fmt.Sprintf("class(%d)", uint8(c))
}

// GPUHours is the class's range of GPU-hours as Hadar's evaluation
// defines it (the paper leaves 50-60 out).
func (c SizeClass) GPUHours() (lo, hi float64) {
	switch c {
	case Small:
		return 0, 1
	case Medium:
		return 1, 10
	case Large:
		return 10, 50
	case XLarge:
		return 60, 100
	}
	return 0, 0
}

// families are the model families of each class, after Hadar's Table II:
// ResNet-18 on CIFAR-10 is small, CycleGAN medium, the LSTM language model
// and the Transformer large, ResNet-50 on ImageNet extra large. Names are
// the prefixes of the reference table's models.
var families = map[SizeClass][]string{
	Small:  {"ResNet-18"},
	Medium: {"CycleGAN"},
	Large:  {"LM", "Transformer"},
	XLarge: {"ResNet-50"},
}

// Job is one job of the batch.
type Job struct {
	ID string
	// Model is the reference table's model (family and batch size).
	Model string
	Scale int
	Class SizeClass
	// GPUHours is the work in GPU-hours on the reference type (V100):
	// the job runs GPUHours/Scale hours alone on Scale V100s.
	GPUHours float64
	// Steps is the total work in whole-job steps.
	Steps float64
}

// WorkloadOptions describe a batch.
type WorkloadOptions struct {
	Jobs int
	Seed int64
	// Weights are the relative frequencies of Small, Medium, Large and
	// XLarge; all zero means equal (the paper samples the classes
	// uniformly).
	Weights [4]float64
	// ScaleWeights are the relative frequencies of jobs on 1, 2, 4 and 8
	// GPUs (workload.ScaleFactors); all zero means the Philly mix Gavel
	// draws from (workload.PhillyScaleWeights).
	ScaleWeights [4]float64
}

// batchStream keeps the batch's draws apart from other generators' of the
// same seed ("hadar" in ASCII).
const batchStream = 0x6861646172

// Generate draws a batch: for each job a scale factor by ScaleWeights (by
// default the Philly mix Gavel uses), a size class by Weights, a
// model of that class (family uniformly, then a batch size the table has
// at the scale factor), and GPU-hours uniformly within the class's range.
// A family that cannot run distributed (CycleGAN) runs on one GPU.
func Generate(table *throughputs.Table, opts WorkloadOptions) ([]Job, error) {
	if table == nil {
		return nil, errors.New("batch workload needs a throughput table")
	}
	if opts.Jobs < 1 {
		return nil, fmt.Errorf("batch of %d jobs: need at least 1", opts.Jobs)
	}
	weights, err := workload.CheckWeights("size class", opts.Weights[:], []float64{1, 1, 1, 1})
	if err != nil {
		return nil, err
	}
	scaleWeights, err := workload.CheckWeights("scale", opts.ScaleWeights[:], workload.PhillyScaleWeights[:])
	if err != nil {
		return nil, err
	}
	rng := workload.NewStream(uint64(opts.Seed), batchStream)
	jobs := make([]Job, 0, opts.Jobs)
	for i := range opts.Jobs {
		scale := workload.ScaleFactors[workload.Pick(scaleWeights, rng.Float64())]
		class := Classes[workload.Pick(weights, rng.Float64())]
		fams := families[class]
		family := fams[rng.IntN(len(fams))]
		models := workload.ModelsAt(table, family, scale)
		if len(models) == 0 {
			scale = 1
			models = workload.ModelsAt(table, family, 1)
		}
		if len(models) == 0 {
			return nil, fmt.Errorf("throughput table has no %s model", family)
		}
		model := models[rng.IntN(len(models))]
		lo, hi := class.GPUHours()
		hours := workload.Uniform(rng, lo, hi)
		rate, err := workload.ReferenceRate(table, model, scale)
		if err != nil {
			return nil, fmt.Errorf("job %d: %w", i, err)
		}
		jobs = append(jobs, Job{
			ID: fmt.Sprint(i), Model: model, Scale: scale, Class: class, GPUHours: hours,
			Steps: hours * 3600 / float64(scale) * rate,
		})
	}
	return jobs, nil
}
