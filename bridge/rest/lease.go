package rest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

// The lease: how the daemon keeps jobs waiting without ever stopping a
// partition (docs/design-notes.md, "Fail-open: the lease").
//
// A Slurm hold lasts until someone releases it: a daemon that dies, or
// whose host does, leaves its held jobs waiting for ever while the GPUs
// idle. With a lease the daemon instead makes each job it keeps waiting
// depend on one job of its own, the lease job (--dependency=afterany:L):
// a pending, held job that can never run, with a deadline. Each round
// the daemon moves the deadline forward: one request, however many jobs
// wait. When the daemon stops renewing it, slurmctld cancels the lease
// job at its deadline (state DEADLINE), every job that waited on it
// becomes eligible at once, and Slurm schedules the partitions as if
// the daemon had never been there. Nothing on the daemon's host is
// needed for that.
//
// slurmctld cancels a pending job once it could no longer end by its
// deadline, that is once now + its time limit passes the deadline; the
// lease job's time limit is one minute, so its deadline is set one
// minute past the lease's end.

// LeaseJobName is the name of the daemon's lease job, by which a daemon
// finds the lease of the one before it.
const LeaseJobName = "gavel-slurm-lease"

// leaseTimeLimit is the lease job's time limit. It never runs (it is
// held); if an administrator releases it, it ends at once (its script
// exits), which frees the jobs that wait on it: the safe direction.
const leaseTimeLimit = time.Minute

// leaseComment says what the lease job is to anyone who finds it in
// squeue.
const leaseComment = "gavel-slurm lease: jobs that depend on it wait for gavel-slurm's next round; " +
	"slurmctld ends it at its deadline if gavel-slurm stops renewing it, and they become eligible"

// submission is a batch job to submit (the lease job).
type submission struct {
	Name, Partition, Comment, Script, WorkDir, Output string
	Environment                                       []string
	Hold                                              bool
	Requeue                                           *bool
	TimeLimitMinutes                                  int
	Deadline                                          int64
}

// ErrNoLease is the error of a hold sent while the daemon holds no lease:
// the job is not held, so that nothing keeps it waiting that would
// outlive the daemon.
var ErrNoLease = errors.New("no lease job: not held (a job the daemon keeps waiting depends on its lease job, " +
	"which could not be found or submitted)")

// leaseState is what the client knows of the lease.
type leaseState struct {
	mu sync.Mutex
	// on is set by EnableLease; while it is not, holds are Slurm's own.
	on bool
	// partition is where the lease job is submitted ("" for Slurm's
	// default partition).
	partition string
	// current is the lease job the daemon renews, 0 when none is known;
	// expires when slurmctld ends it unless renewed.
	current bridge.JobID
	expires time.Time
	// others are older pending lease jobs of this user (a daemon before
	// this one): jobs that still wait on them are the daemon's too, and
	// become eligible when they expire.
	others []bridge.JobID
	// deps is, by job, what the last snapshot showed of the dependencies
	// and holds of every pending job that has either.
	deps map[bridge.JobID]jobDeps
	// strays are pending jobs outside the managed partitions that still
	// depend on a lease job: moved away while waiting, they are freed at
	// the next renewal rather than kept waiting on a lease renewed for
	// jobs they no longer are.
	strays []bridge.JobID
}

// jobDeps is one pending job's dependencies as the lease reads them.
type jobDeps struct {
	// shown is its dependency list as Slurm shows it, without the lease's
	// elements; own the same list as a dependency to set again: no
	// element that Slurm has marked fulfilled, no notes.
	shown, own string
	// or is set when its own list is any-of ('?'), to which a lease
	// cannot be added.
	or bool
	// lease is set when it depends on a lease job; held when it has a
	// Slurm hold (priority 0).
	lease, held bool
}

// EnableLease makes the client keep waiting jobs with the lease instead
// of Slurm holds, the lease job being submitted to partition.
func (c *Client) EnableLease(partition string) {
	c.lease.mu.Lock()
	c.lease.on, c.lease.partition = true, partition
	c.lease.mu.Unlock()
}

// Leasing implements bridge.Leaser.
func (c *Client) Leasing() bool {
	on, _ := c.leasing()
	return on
}

// leasing reports whether holds go through the lease, and its job.
func (c *Client) leasing() (bool, bridge.JobID) {
	c.lease.mu.Lock()
	defer c.lease.mu.Unlock()
	return c.lease.on, c.lease.current
}

// RenewLease implements bridge.Leaser. It makes the lease last until until: it moves the lease job's
// deadline (one request), or submits a lease job when the last snapshot
// showed none, and frees the strays. It needs a snapshot first, which
// shows the lease jobs already there.
func (c *Client) RenewLease(ctx context.Context, until time.Time) (bridge.Lease, error) {
	c.acted.Store(true)
	c.lease.mu.Lock()
	on, partition, current, strays := c.lease.on, c.lease.partition, c.lease.current, c.lease.strays
	c.lease.mu.Unlock()
	if !on {
		return bridge.Lease{}, errors.New("the lease is off")
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	a, err := c.adapter(ctx)
	if err != nil {
		return bridge.Lease{}, fmt.Errorf("renew the lease: %w", err)
	}
	deadline := until.Add(leaseTimeLimit).Unix()
	if current != 0 {
		err := a.update(ctx, int64(current), jobUpdate{Deadline: &deadline})
		c.forget(err)
		switch {
		case err != nil && leaseEnded(err):
			// Ended (expired, cancelled) since the snapshot: a new one.
			current = 0
		case err != nil:
			// Not renewed this time (slurmrestd or slurmctld did not
			// answer): the lease runs on to its deadline, and a new one
			// would only split the jobs between two.
			return bridge.Lease{Job: current}, fmt.Errorf("renew lease job %s: %w", current, unanswered(err))
		}
	}
	if current == 0 {
		no := false
		id, err := a.submit(ctx, submission{
			Name: LeaseJobName, Partition: partition, Comment: leaseComment, Hold: true, Requeue: &no,
			Script: "#!/bin/sh\nexit 0\n", WorkDir: "/tmp", Output: "/dev/null", Environment: []string{"PATH=/usr/bin:/bin"},
			TimeLimitMinutes: int(leaseTimeLimit / time.Minute), Deadline: deadline,
		})
		c.forget(err)
		if err != nil {
			c.lease.mu.Lock()
			c.lease.current, c.lease.expires = 0, time.Time{}
			c.lease.mu.Unlock()
			return bridge.Lease{}, fmt.Errorf("submit the lease job to partition %s: %w", partition, err)
		}
		current = bridge.JobID(id)
	}
	c.lease.mu.Lock()
	c.lease.current, c.lease.expires = current, until
	c.lease.mu.Unlock()
	var freed []error
	for _, id := range strays {
		if err := c.leaseRelease(ctx, a, id); err != nil {
			freed = append(freed, fmt.Errorf("job %s: %w", id, err))
		}
	}
	if len(freed) > 0 {
		return bridge.Lease{Job: current, Expires: until}, fmt.Errorf("free jobs outside the managed partitions that waited on the lease: %w", errors.Join(freed...))
	}
	return bridge.Lease{Job: current, Expires: until}, nil
}

// EndLease implements bridge.Leaser: it cancels the lease job, so that every job still waiting on it
// becomes eligible now (handing the partitions back).
func (c *Client) EndLease(ctx context.Context) error {
	c.lease.mu.Lock()
	ids := append([]bridge.JobID{c.lease.current}, c.lease.others...)
	c.lease.current, c.lease.expires = 0, time.Time{}
	c.lease.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	a, err := c.adapter(ctx)
	if err != nil {
		return fmt.Errorf("end the lease: %w", err)
	}
	var errs []error
	for _, id := range ids {
		if id == 0 {
			continue
		}
		if err := a.signal(ctx, id.String(), "9"); err != nil && !isGone(err) {
			errs = append(errs, fmt.Errorf("cancel lease job %s: %w", id, err))
		}
	}
	return errors.Join(errs...)
}

// slurmErrAlreadyDone is ESLURM_ALREADY_DONE: the job has ended.
const (
	slurmErrAlreadyDone = 2021
	textAlreadyDone     = "already completing or completed"
)

// leaseEnded reports an answer to the lease job's renewal that says it has
// ended or is gone.
func leaseEnded(err error) bool {
	return isGone(err) || strings.Contains(err.Error(), textNotPending)
}

// isGone reports an answer saying the job no longer exists or has ended.
func isGone(err error) bool {
	var re *ReplyError
	return errors.As(err, &re) && (re.has(slurmErrInvalidJobID, textInvalidJobID) || re.has(slurmErrAlreadyDone, textAlreadyDone))
}

// noteLease reads the lease's part of a job list: the pending lease jobs
// of this user, and every pending job's dependencies and holds. managed
// says whether a job is in the managed partitions. It returns the list
// without the lease jobs, which the scheduler never sees.
func (c *Client) noteLease(raws []rawJob, managed func(rawJob) bool) []rawJob {
	c.lease.mu.Lock()
	partition := c.lease.partition
	c.lease.mu.Unlock()
	var leases []bridge.JobID
	for _, r := range raws {
		if isLeaseJob(r, c.cfg.UserName, partition) {
			leases = append(leases, bridge.JobID(r.ID))
		}
	}
	if on, _ := c.leasing(); len(leases) == 0 && !on {
		c.lease.mu.Lock()
		c.lease.deps, c.lease.strays = nil, nil
		c.lease.mu.Unlock()
		return raws
	}
	slices.Sort(leases)
	isLease := func(id bridge.JobID) bool { _, ok := slices.BinarySearch(leases, id); return ok }
	deps := map[bridge.JobID]jobDeps{}
	var strays []bridge.JobID
	out := raws[:0:0]
	for _, r := range raws {
		if isLeaseJob(r, c.cfg.UserName, partition) {
			continue
		}
		out = append(out, r)
		if len(r.States) == 0 || r.States[0] != string(bridge.JobPending) {
			continue
		}
		held := r.Hold != nil && *r.Hold || r.Hold == nil && r.PrioritySet && r.Priority == 0
		if r.Dependency == "" && !held {
			continue
		}
		d := splitLeaseDeps(r.Dependency, isLease)
		d.held = held
		deps[bridge.JobID(r.ID)] = d
		if d.lease && !managed(r) {
			strays = append(strays, bridge.JobID(r.ID))
		}
	}
	c.lease.mu.Lock()
	defer c.lease.mu.Unlock()
	c.lease.deps, c.lease.strays, c.lease.others = deps, strays, nil
	if n := len(leases); n > 0 {
		// The newest is renewed; the others run out.
		if c.lease.current == 0 || !isLease(c.lease.current) {
			c.lease.current = leases[n-1]
		}
		for _, id := range leases {
			if id != c.lease.current {
				c.lease.others = append(c.lease.others, id)
			}
		}
	} else {
		c.lease.current = 0
	}
	return out
}

// markLeaseHeld shows the jobs of snap that wait on a lease job as held
// by the daemon (bridge.Job.LeaseHeld), their dependency without it.
func (c *Client) markLeaseHeld(snap *bridge.Snapshot) {
	c.lease.mu.Lock()
	defer c.lease.mu.Unlock()
	for _, jobs := range [][]bridge.Job{snap.Jobs, snap.Elsewhere} {
		for i := range jobs {
			j := &jobs[i]
			d, ok := c.lease.deps[j.ID]
			if !ok || !d.lease {
				continue
			}
			j.LeaseHeld, j.Held, j.Dependency = true, true, d.shown
		}
	}
}

// isLeaseJob reports a pending lease job of user in partition (in any
// partition when it is "", Slurm's default): daemons of other partitions
// may run as the same user, each with its own lease.
func isLeaseJob(r rawJob, user, partition string) bool {
	return r.Name == LeaseJobName && r.User == user && len(r.States) > 0 && r.States[0] == string(bridge.JobPending) &&
		(partition == "" || r.Partition == partition)
}

// splitLeaseDeps splits a dependency list as Slurm shows it
// ("afterok:12(unfulfilled),afterany:40(unfulfilled)") into the lease's
// elements and the others.
func splitLeaseDeps(dep string, isLease func(bridge.JobID) bool) jobDeps {
	var d jobDeps
	if dep == "" {
		return d
	}
	sep := ","
	if strings.Contains(dep, "?") {
		sep, d.or = "?", true
	}
	var shown, own []string
	for _, e := range strings.Split(dep, sep) {
		bare, note := e, ""
		if k := strings.IndexByte(e, '('); k >= 0 {
			bare, note = e[:k], e[k:]
		}
		if id, ok := strings.CutPrefix(bare, "afterany:"); ok {
			if n, err := strconv.ParseUint(id, 10, 32); err == nil && isLease(bridge.JobID(n)) {
				d.lease = true
				continue
			}
		}
		shown = append(shown, e)
		if note != "(fulfilled)" {
			own = append(own, bare)
		}
	}
	d.shown, d.own = strings.Join(shown, sep), strings.Join(own, sep)
	if len(own) < 2 {
		d.or = false
	}
	return d
}

// leaseHoldDependency is the dependency that keeps job waiting on lease:
// its own list with the lease added. A job whose own list is any-of
// cannot take one (Slurm does not mix ',' and '?').
func (c *Client) leaseHoldDependency(job bridge.JobID, lease bridge.JobID) (string, error) {
	c.lease.mu.Lock()
	d := c.lease.deps[job]
	c.lease.mu.Unlock()
	mine := "afterany:" + lease.String()
	switch {
	case d.or:
		return "", fmt.Errorf("its own dependency %q is any-of ('?'), to which the lease cannot be added: not held", d.shown)
	case d.own == "":
		return mine, nil
	}
	return d.own + "," + mine, nil
}

// leaseHold keeps pending job waiting on the lease (one update).
func (c *Client) leaseHold(ctx context.Context, a adapter, job, lease bridge.JobID) error {
	dep, err := c.leaseHoldDependency(job, lease)
	if err != nil {
		return err
	}
	err = a.update(ctx, int64(job), jobUpdate{Dependency: &dep})
	c.forget(err)
	return err
}

// leaseRelease lets job go: its lease dependency removed, its own kept,
// and a Slurm hold released where it has one and no lease (a hold an
// earlier version of the daemon sent).
func (c *Client) leaseRelease(ctx context.Context, a adapter, job bridge.JobID) error {
	c.lease.mu.Lock()
	d, known := c.lease.deps[job]
	c.lease.mu.Unlock()
	var u jobUpdate
	switch {
	case d.lease:
		u.Dependency = &d.own
	case !known || d.held:
		release := false
		u.Hold = &release
	default:
		return nil // neither held nor waiting on the lease: nothing to undo
	}
	err := a.update(ctx, int64(job), u)
	c.forget(err)
	return err
}

// holdAfterRequeue keeps a job just requeued waiting on the lease. Slurm
// puts a requeued job's begin time about two minutes ahead, so the job
// cannot start before this lands; if it fails, the job becomes eligible
// then and the next round sees it so: nothing outlives the daemon.
func (c *Client) holdAfterRequeue(ctx context.Context, job, lease bridge.JobID) {
	if lease == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	if a, err := c.adapter(ctx); err == nil {
		_ = c.leaseHold(ctx, a, job, lease)
	}
}

// leaseBulk carries out the holds or releases of which (kind) with the
// lease: one scontrol update per dependency value (most jobs share one),
// and scontrol release for the jobs a Slurm hold keeps.
func (c *Client) leaseBulk(ctx context.Context, actions []bridge.Action, which []int, errs []error, kind bridge.ActionKind, lease bridge.JobID) {
	byDep := map[string][]int{}
	var deps []string
	var released []int
	add := func(dep string, i int) {
		if _, ok := byDep[dep]; !ok {
			deps = append(deps, dep)
		}
		byDep[dep] = append(byDep[dep], i)
	}
	for _, i := range which {
		job := actions[i].Job
		if kind == bridge.ActHold {
			if lease == 0 {
				errs[i] = fmt.Errorf("%s: %w", actions[i], ErrNoLease)
				continue
			}
			dep, err := c.leaseHoldDependency(job, lease)
			if err != nil {
				errs[i] = fmt.Errorf("%s: %w", actions[i], err)
				continue
			}
			add(dep, i)
			continue
		}
		c.lease.mu.Lock()
		d, known := c.lease.deps[job]
		c.lease.mu.Unlock()
		switch {
		case d.lease:
			add(d.own, i)
		case !known || d.held:
			released = append(released, i)
		}
	}
	for _, dep := range deps {
		c.scontrolBulk(ctx, actions, singles(byDep[dep]), errs, func(ids string) []string {
			return []string{"update", "JobId=" + ids, "Dependency=" + dep}
		})
	}
	if len(released) > 0 {
		c.scontrolBulk(ctx, actions, singles(released), errs, func(ids string) []string { return []string{"release", ids} })
	}
}
