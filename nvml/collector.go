// Package nvml is the node collector: it reads the node's GPUs through
// NVML, finds which Slurm job holds each one, follows each job's progress
// file, and builds the reports that tell the daemon how fast each job
// trains on each GPU type.
package nvml

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/rs/zerolog"

	"github.com/gavel-slurm/gavel-slurm/internal/reports"
)

// Defaults shared by the collector command and the contrib/slurm scripts.
const (
	DefaultJobsDir     = "/run/gavel-slurm/jobs"
	DefaultProgressDir = "/run/gavel-slurm/progress"
	DefaultProcRoot    = "/proc"
	DefaultInterval    = 30 * time.Second
	// DefaultProgressSample is how often Run looks for progress files
	// that a starting run has written its first line to: what bounds the
	// error on a first progress line without a time of its own.
	DefaultProgressSample = time.Second
)

// Config is where a collector looks.
type Config struct {
	// Node is the Slurm node name reports carry.
	Node string
	// JobsDir holds one file per job, written by the Prolog, naming the
	// job's GPUs.
	JobsDir string
	// ProgressDir holds the jobs' progress files, JOBID.progress.
	ProgressDir string
	// ProcRoot is where /proc is: GPU processes of jobs the Prolog did
	// not record are found through their cgroups.
	ProcRoot string
	// Types maps NVML product names to GRES types; nil: the defaults.
	Types *TypeMap
	// Interval is how often Run collects.
	Interval time.Duration
	// ProgressSample is how often Run looks, between collections, for
	// the first line of a starting run (ProgressTracker.Sample); zero:
	// DefaultProgressSample. Not shorter than Interval: none.
	ProgressSample time.Duration
	Log            zerolog.Logger
	// Now is the clock; nil: time.Now.
	Now func() time.Time
}

// Collector measures one node.
type Collector struct {
	cfg      Config
	lib      Library
	progress *ProgressTracker
	last     time.Time
	skipped  map[int]bool // devices skipped in the last interval
}

// Open starts NVML and returns a collector on it. Without an NVIDIA
// driver it fails with ErrNoDriver.
func Open(lib Library, cfg Config) (*Collector, error) {
	if cfg.Node == "" {
		return nil, fmt.Errorf("collector: no node name")
	}
	if cfg.Types == nil {
		cfg.Types = DefaultTypeMap()
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.ProgressSample <= 0 {
		cfg.ProgressSample = DefaultProgressSample
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if err := initLibrary(lib); err != nil {
		return nil, err
	}
	return &Collector{cfg: cfg, lib: lib, progress: NewProgressTracker(cfg.ProgressDir), skipped: map[int]bool{}}, nil
}

// Close shuts NVML down. (Shutdown must follow a successful Init only:
// without the library loaded it would call into nothing.)
func (c *Collector) Close() error {
	if ret := c.lib.Shutdown(); ret != gonvml.SUCCESS {
		return fmt.Errorf("NVML shutdown: %s", ret.Error())
	}
	return nil
}

// Inventory reads the node's GPUs as Collect does, for the collector to
// say at start what it found and how it named each type.
func (c *Collector) Inventory() ([]GPU, []Skipped, error) {
	return Enumerate(c.lib, c.cfg.Types)
}

// jobGPUs is what the collector knows of one job this interval.
type jobGPUs struct {
	stamp string
	gpus  map[int]bool // positions in the interval's GPU list
}

// Collect measures the node once and returns the report for the interval
// since the previous call.
func (c *Collector) Collect() (reports.Report, error) {
	now := c.cfg.Now()
	gpus, skipped, err := Enumerate(c.lib, c.cfg.Types)
	if err != nil {
		return reports.Report{}, err
	}
	c.logSkipped(skipped)
	jobs, err := c.mapJobs(gpus)
	if err != nil {
		return reports.Report{}, err
	}

	// Milliseconds are plenty, and keep the reports readable. The first
	// report, and one at the same instant as the last, say the nominal
	// interval.
	interval := c.cfg.Interval.Seconds()
	if since := math.Round(now.Sub(c.last).Seconds()*1000) / 1000; !c.last.IsZero() && since > 0 {
		interval = since
	}
	c.last = now
	rep := reports.Report{Node: c.cfg.Node, Time: now.UTC().Truncate(time.Second), IntervalS: interval, Jobs: []reports.Job{}}
	keep := map[string]bool{}
	for id, jg := range jobs {
		keep[id] = true
		byType := map[string][]int{}
		for pos := range jg.gpus {
			byType[gpus[pos].Type] = append(byType[gpus[pos].Type], pos)
		}
		prog, err := c.progress.Update(id, jg.stamp, now)
		if err != nil {
			c.cfg.Log.Warn().Err(err).Str("job", id).Msg("progress not read")
		}
		if prog.Garbage > 0 {
			c.cfg.Log.Warn().Str("job", id).Int("lines", prog.Garbage).Msg("skipped unreadable progress lines (want: STEPS [UNIX_TIME])")
		}
		if prog.Rate != nil && *prog.Rate > reports.MaxStepsPerS {
			c.cfg.Log.Warn().Str("job", id).Float64("steps_per_s", *prog.Rate).Msg("implausible rate left out")
			prog.Rate = nil
		}
		first, ok := reportedFirstProgress(prog.FirstProgress, rep.Time)
		if !ok {
			c.cfg.Log.Warn().Str("job", id).Time("first_progress", prog.FirstProgress).Msg("implausible first progress left out")
		}
		for typ, positions := range byType {
			j := reports.Job{JobID: id, GPUType: typ, GPUs: len(positions)}
			var util float64
			var mem uint64
			for _, pos := range positions {
				util += gpus[pos].Util
				mem += gpus[pos].MemUsed
			}
			j.SMUtil = util / float64(len(positions))
			j.MemUsedBytes = int64(min(mem, uint64(reports.MaxMemUsedBytes)))
			// A job's progress is the job's as a whole: it can be put
			// on a type only when the job uses one type on the node.
			if len(byType) == 1 {
				j.Steps, j.StepsPerS, j.FirstProgress = prog.Steps, prog.Rate, first
			}
			rep.Jobs = append(rep.Jobs, j)
		}
	}
	c.progress.Forget(keep)
	sort.Slice(rep.Jobs, func(a, b int) bool {
		ja, jb := rep.Jobs[a], rep.Jobs[b]
		if ja.JobID != jb.JobID {
			na, _ := strconv.ParseUint(ja.JobID, 10, 64)
			nb, _ := strconv.ParseUint(jb.JobID, 10, 64)
			return na < nb
		}
		return ja.GPUType < jb.GPUType
	})
	if err := rep.Validate(now, 0); err != nil {
		return reports.Report{}, fmt.Errorf("collector built an invalid report: %w", err)
	}
	return rep, nil
}

// reportedFirstProgress is a run's first progress as a report at reportAt
// carries it: nil when there is none, or (with false) when it is too far
// back for the daemon to take, which only a job's own times can make.
// A time after the report's, which is truncated to the second (or a
// line's time a little ahead of the node's clock), is sent as the
// report's time: the progress was made by then.
func reportedFirstProgress(first, reportAt time.Time) (*time.Time, bool) {
	switch {
	case first.IsZero():
		return nil, true
	case reportAt.Sub(first) > reports.MaxFirstProgressAge:
		return nil, false
	case first.After(reportAt):
		first = reportAt
	}
	// Milliseconds, as the interval: the clocks that compare them are no
	// finer.
	first = first.UTC().Truncate(time.Millisecond)
	return &first, true
}

// mapJobs finds the jobs on the node's GPUs: first from the Prolog's
// files, then, for GPUs no file names, from the cgroups of the processes
// running on them (a job started before the Prolog was installed, or a
// node without it).
func (c *Collector) mapJobs(gpus []GPU) (map[string]*jobGPUs, error) {
	byIndex := map[string]int{}
	for pos, g := range gpus {
		byIndex[strconv.Itoa(g.Index)] = pos
		byIndex[g.UUID] = pos
	}
	jobs := map[string]*jobGPUs{}
	claimed := map[int]bool{}
	files, err := ReadJobsDir(c.cfg.JobsDir)
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		jg := &jobGPUs{stamp: f.Stamp, gpus: map[int]bool{}}
		for _, name := range f.GPUs {
			// A GPU that is gone (or a name that is no GPU) is skipped;
			// the job is reported on what is left.
			if pos, ok := byIndex[name]; ok {
				jg.gpus[pos] = true
				claimed[pos] = true
			}
		}
		if len(jg.gpus) > 0 {
			jobs[f.JobID] = jg
		}
	}
	pidJob := map[uint32]string{}
	for pos, g := range gpus {
		if claimed[pos] {
			continue
		}
		for _, pid := range g.PIDs {
			job, seen := pidJob[pid]
			if !seen {
				if job, err = JobOfPID(c.cfg.ProcRoot, pid); err != nil {
					c.cfg.Log.Debug().Err(err).Uint32("pid", pid).Msg("process not mapped to a job")
				}
				pidJob[pid] = job
			}
			if job == "" {
				continue
			}
			jg := jobs[job]
			if jg == nil {
				jg = &jobGPUs{gpus: map[int]bool{}}
				jobs[job] = jg
			}
			jg.gpus[pos] = true
		}
	}
	return jobs, nil
}

// logSkipped warns when a device stops answering and when it is back,
// not at every interval in between.
func (c *Collector) logSkipped(skipped []Skipped) {
	now := map[int]bool{}
	for _, s := range skipped {
		now[s.Index] = true
		if !c.skipped[s.Index] {
			c.cfg.Log.Warn().Err(s.Err).Int("gpu", s.Index).Msg("GPU not readable: left out of the reports")
		}
	}
	for i := range c.skipped {
		if !now[i] {
			c.cfg.Log.Info().Int("gpu", i).Msg("GPU readable again")
		}
	}
	c.skipped = now
}

// SampleProgress looks for the first progress lines of starting runs
// between collections (ProgressTracker.Sample).
func (c *Collector) SampleProgress() {
	if err := c.progress.Sample(c.cfg.Now()); err != nil {
		c.cfg.Log.Debug().Err(err).Msg("progress files not sampled")
	}
}

// Run collects at once and then every interval, handing each report to
// send, until ctx is done. A failed collection is logged and skipped.
// In between it samples the progress files every ProgressSample.
func (c *Collector) Run(ctx context.Context, send func(reports.Report)) error {
	t := time.NewTicker(c.cfg.Interval)
	defer t.Stop()
	var samples <-chan time.Time // nil: no sampling
	if c.cfg.ProgressSample < c.cfg.Interval {
		s := time.NewTicker(c.cfg.ProgressSample)
		defer s.Stop()
		samples = s.C
	}
	for {
		rep, err := c.Collect()
		if err != nil {
			c.cfg.Log.Error().Err(err).Msg("collection failed")
		} else {
			send(rep)
		}
	wait:
		for {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-t.C:
				break wait
			case <-samples:
				c.SampleProgress()
			}
		}
	}
}
