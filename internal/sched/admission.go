package sched

import (
	"errors"
	"fmt"
	"strings"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

func (c *Core) inPartitions(names ...string) bool {
	if len(c.set.Partitions) == 0 {
		return true
	}
	for _, n := range names {
		for _, p := range c.set.Partitions {
			if n == p {
				return true
			}
		}
	}
	return false
}

func (c *Core) typeManaged(t string) bool {
	if t == "" {
		return false
	}
	if len(c.set.GPUTypes) == 0 {
		return true
	}
	for _, x := range c.set.GPUTypes {
		if x == t {
			return true
		}
	}
	return false
}

func (c *Core) nodeUsable(n bridge.Node) bool {
	return n.Available() && n.GPUs > 0 && c.typeManaged(n.GPUType) && c.inPartitions(n.Partitions...)
}

// AdmitCode classifies why a job is or is not scheduled by the daemon.
type AdmitCode uint8

const (
	// Admitted: the daemon schedules the job.
	Admitted AdmitCode = iota
	// NotInPartition: the job's partition is not scheduled.
	NotInPartition
	// UnreadableRecord: Slurm's record of the job could not be read.
	UnreadableRecord
	// NoTag: the comment carries no gavel: tag.
	NoTag
	// BadTag: the tag does not parse.
	BadTag
	// NoGPUs: the job asks for no GPUs.
	NoGPUs
	// UnscheduledType: a typed request for a type not scheduled.
	UnscheduledType
	// ConstraintOperators: the constraint uses operators other than &.
	ConstraintOperators
	// NoNodeWithFeatures: no GPU node has the job's own features.
	NoNodeWithFeatures
	// HetJob: a component of a heterogeneous job.
	HetJob
)

// Admission is the verdict on one job, with the words status shows.
type Admission struct {
	Code AdmitCode
	// Reason is empty for admitted jobs.
	Reason string
}

// OK reports whether the job is scheduled.
func (a Admission) OK() bool { return a.Code == Admitted }

// admit decides whether the daemon schedules job j.
func (c *Core) admit(j bridge.Job) Admission {
	no := func(code AdmitCode, format string, args ...any) Admission {
		return Admission{Code: code, Reason: "not managed: " + fmt.Sprintf(format, args...)}
	}
	switch {
	case !c.inPartitions(j.Partition):
		return no(NotInPartition, "partition %s is not scheduled", j.Partition)
	case j.Unreadable != nil:
		return no(UnreadableRecord, "Slurm's record of the job could not be read: %v", j.Unreadable)
	case errors.Is(j.TagErr, bridge.ErrNoTag):
		return no(NoTag, "%v", j.TagErr)
	case j.TagErr != nil:
		return no(BadTag, "%v", j.TagErr)
	case j.HetJobID != 0:
		// Slurm starts a heterogeneous job's components together, each
		// on nodes of its own, and each is a record of its own: the
		// rounds, which place one job on one GPU type, would hold one
		// component while choosing another (and preempt others for a
		// job that cannot start), leaving the GPUs idle.
		return no(HetJob, "heterogeneous job (component %d of job %d): left to Slurm, which starts its components together; the daemon never holds, releases or preempts for it", j.HetJobOffset, j.HetJobID)
	case j.GPUs <= 0:
		return no(NoGPUs, "requests no GPUs")
	case j.RequestedGPUType != "" && !c.typeManaged(j.RequestedGPUType):
		return no(UnscheduledType, "typed request for gpu:%s, a type this daemon does not schedule", j.RequestedGPUType)
	case j.RequestedGPUType != "":
		return Admission{}
	}
	own, ok := ownFeatures(j.Constraints, c.isGPUType)
	if !ok && j.Tag.MixedOK() && isMixConstraint(j.Constraints, c.isGPUType) {
		// The daemon's own request for a mix (mixed.go).
		own, ok = nil, true
	}
	if !ok {
		return no(ConstraintOperators, "--constraint=%q uses operators other than & (the daemon adds the GPU type to a job's own features with &)", j.Constraints)
	}
	if len(own) > 0 && c.typeNodes != nil && len(c.typesWithFeatures(own)) == 0 {
		return no(NoNodeWithFeatures, "no GPU node has all of its features %s", strings.Join(own, "&"))
	}
	return Admission{}
}

// eligible is admit as a yes/no and the reason.
func (c *Core) eligible(j bridge.Job) (bool, string) {
	a := c.admit(j)
	return a.OK(), a.Reason
}

// managed says whether the daemon schedules job j now: it is admitted, or
// it is a running job the daemon scheduled whose owner has since edited
// its tag away (keepsAdmission); why is the admission's reason otherwise.
func (c *Core) managed(j bridge.Job) (ok bool, why string) {
	if ok, why = c.eligible(j); ok {
		return true, ""
	}
	return c.keepsAdmission(c.jobs[keyOf(j.ID)], j), why
}

// holdOwner says whose hold keeps a job the daemon did not hold.
func holdOwner(j bridge.Job) string {
	if j.Reason == "JobHeldAdmin" {
		return "held by admin"
	}
	return "held by user"
}
