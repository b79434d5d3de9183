package rest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os/exec"
	"os/user"
	"slices"
	"strings"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

// Requeues go through slurmrestd where the negotiated API version serves
// them (v0.0.45, Slurm 26.05 on: GET /slurm/v0.0.45/job/{id}/requeue, with
// the Hold flag for requeue-hold) and through scontrol otherwise (v0.0.42
// to v0.0.44 have no requeue endpoint).

// requeuer is an adapter whose API version can requeue a job; only
// adapterV0045 is one (requeue_v0045.go).
type requeuer interface {
	// requeue requeues the job slurmctld knows by name (a job id, or
	// ARRAY_TASK for a task of a job array).
	requeue(ctx context.Context, name string, hold bool) error
}

// Slurm error numbers (slurm/slurm_errno.h) that the requeue check reads
// in slurmrestd's replies.
const (
	slurmErrProtocolAuth = 1007 // SLURM_PROTOCOL_AUTHENTICATION_ERROR "Protocol authentication error"
	slurmErrAccessDenied = 2002 // ESLURM_ACCESS_DENIED "Access/permission denied"
	slurmErrInvalidJobID = 2017 // ESLURM_INVALID_JOB_ID "Invalid job id specified"
	slurmErrJobPending   = 2024 // ESLURM_JOB_PENDING "Job is pending execution"
	slurmErrDisabled     = 2037 // ESLURM_DISABLED "Requested operation is presently disabled"
	slurmErrRESTAuthFail = 9008 // ESLURM_REST_AUTH_FAIL
)

// What slurmrestd 26.05.5 answered to GET /slurm/v0.0.45/job/{id}/requeue
// (errors[] entries have source "op_handler_job_requeue" and description
// "Requeue JobID=N failed"; status[] stayed empty):
//
//	requeued (running job)          200, no errors
//	pending job, as root            422, 2024 Job is pending execution
//	--no-requeue job, as root       422, 2037 Requested operation is presently disabled
//	pending job, non-operator JWT   422, 2002 Access/permission denied
//	no such job                     404, 2017 Invalid job id specified
//	bad JWT or user name mismatch   511, 1007 Protocol authentication error
//
// The Hold flag holds only with a value that reads as true: "?Hold=true"
// and a bare "?Hold" hold the job, "?Hold=" (what an empty string
// parameter sends) requeues without holding.

// The texts slurmctld's answers carry (slurm_strerror), as scontrol
// prints them: "Job is pending execution for job 12".
const (
	textJobPending    = "Job is pending execution"
	textDisabled      = "Requested operation is presently disabled"
	textAccessDenied  = "Access/permission denied"
	textInvalidJobID  = "Invalid job id specified"
	textCannotContact = "Unable to contact slurm controller"
)

// requeue sends a requeue (or requeue-hold) of job by the path that
// RequeuePath names: slurmrestd when the negotiated version serves
// requeue, else scontrol. When the API version cannot be negotiated, or
// the endpoint is gone (404: slurmrestd was replaced by an older one),
// scontrol is tried, since a job already told to checkpoint and exit that
// is not requeued ends for good. Each call (negotiation, slurmrestd,
// scontrol) gets its own Config.Timeout within ctx.
func (c *Client) requeue(ctx context.Context, job bridge.JobID, hold bool) error {
	verb := "requeue"
	if hold {
		verb = "requeuehold"
	}
	negCtx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	a, negErr := c.adapter(negCtx)
	cancel()
	if negErr == nil {
		r, ok := a.(requeuer)
		if !ok {
			return c.scontrolTimed(ctx, verb, job)
		}
		name := c.nameOf(job)
		if name.wholeArray {
			return errWholeArray
		}
		callCtx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
		err := r.requeue(callCtx, name.name, hold)
		cancel()
		c.forget(err)
		var re *ReplyError
		switch {
		case err == nil:
			return nil
		case !errors.As(err, &re) || !re.NotFound():
			return fmt.Errorf("slurmrestd %s: %w", a.version(), err)
		}
		negErr = fmt.Errorf("slurmrestd %s does not serve requeue: %w", a.version(), err)
	}
	if err := c.scontrolTimed(ctx, verb, job); err != nil {
		return fmt.Errorf("%w (tried after slurmrestd failed: %v)", err, negErr)
	}
	return nil
}

func (c *Client) scontrolTimed(ctx context.Context, verb string, job bridge.JobID) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	return c.scontrol(ctx, verb, job)
}

// RequeuePath implements bridge.RequeueChecker: "slurmrestd v0.0.45" when
// the negotiated API version serves requeue, else "scontrol (PATH)". Before
// a version is negotiated it names what the configuration allows. It does
// not contact Slurm (nor wait for a negotiation in progress).
func (c *Client) RequeuePath() string {
	if a := c.current(); a != nil {
		if _, ok := a.(requeuer); ok {
			return "slurmrestd " + a.version()
		}
		return c.scontrolName()
	}
	var served []string
	for _, a := range c.adapters {
		if _, ok := a.(requeuer); ok {
			served = append(served, a.version())
		}
	}
	switch {
	case len(served) == 0:
		return c.scontrolName()
	case len(served) == len(c.adapters):
		return "slurmrestd " + served[0]
	}
	return "slurmrestd " + strings.Join(served, "/") + " if offered, else " + c.scontrolName()
}

// scontrolName is "scontrol (PATH)", PATH as found in $PATH, or as
// configured with ", not found" when it is not there.
func (c *Client) scontrolName() string {
	path, err := c.scontrolPath()
	if err != nil {
		return "scontrol (" + c.cfg.Scontrol + ", not found)"
	}
	return "scontrol (" + path + ")"
}

// scontrolPath resolves Config.Scontrol once; a failed look-up is tried
// again at the next call, and a run that finds the command gone drops the
// resolved path (forgetScontrol).
func (c *Client) scontrolPath() (string, error) {
	c.scontrolMu.Lock()
	defer c.scontrolMu.Unlock()
	if c.scontrolFound != "" {
		return c.scontrolFound, nil
	}
	path, err := c.cfg.LookPath(c.cfg.Scontrol)
	if err != nil {
		return "", err
	}
	c.scontrolFound = path
	return path, nil
}

// forgetScontrol drops the resolved scontrol path when err says the
// command could not be started.
func (c *Client) forgetScontrol(err error) {
	if commandMissing(err) {
		c.scontrolMu.Lock()
		c.scontrolFound = ""
		c.scontrolMu.Unlock()
	}
}

// commandMissing reports whether err is a command that could not be
// started: not in $PATH, no such file, or not executable.
func commandMissing(err error) bool {
	var ee *exec.Error
	return errors.As(err, &ee) || errors.Is(err, exec.ErrNotFound) ||
		errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission)
}

// osUserName is the name of the user running this process: the user
// scontrol runs as.
func osUserName() (string, error) {
	u, err := user.Current()
	if err != nil {
		return "", err
	}
	return u.Username, nil
}

// CheckRequeue implements bridge.RequeueChecker. It sends a plain requeue
// of one pending, held job of another user, by the path real requeues
// take, and reads slurmctld's answer: slurmctld checks the caller's rights
// before the job's state, so "job is pending" (or "requeue disabled", for
// a --no-requeue job) proves that the command or endpoint works, reaches
// slurmctld and may requeue other users' jobs, and the job is left as it
// was. A held job cannot start between the snapshot and the probe, so the
// probe never requeues a running job. A requeue that succeeds means the
// job was not pending after all, and is reported as a failed check.
func (c *Client) CheckRequeue(ctx context.Context, snap *bridge.Snapshot) error {
	negCtx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	a, err := c.adapter(negCtx)
	cancel()
	if err != nil {
		return fmt.Errorf("cannot choose the requeue path: %w", err)
	}
	if r, ok := a.(requeuer); ok {
		return c.checkRESTRequeue(ctx, "slurmrestd "+a.version(), r, snap)
	}
	return c.checkScontrolRequeue(ctx, snap)
}

// probeJob picks the job to ask about: pending and held (so that it cannot
// start meanwhile), not completing, owned by a known user other than self
// (slurmctld lets users requeue their own jobs, which would prove
// nothing, except for root, who may requeue any job). Jobs held by an
// administrator come first, since their owner cannot release them
// between the snapshot and the probe; then the lowest job id.
func probeJob(snap *bridge.Snapshot, self string) (bridge.Job, bool) {
	if j, ok := probeAmong(snap, self, func(j bridge.Job) bool { return j.Held && !j.LeaseHeld && j.Reason == "JobHeldAdmin" }); ok {
		return j, true
	}
	// Then a job waiting on the daemon's lease: its owner could remove
	// the dependency between the snapshot and the probe only where
	// job_submit.lua does not refuse that.
	return probeAmong(snap, self, func(j bridge.Job) bool { return j.LeaseHeld })
}

// probeAmong is probeJob's pick among the jobs that pass held.
func probeAmong(snap *bridge.Snapshot, self string, held func(bridge.Job) bool) (bridge.Job, bool) {
	var best bridge.Job
	found := false
	for _, j := range snap.Jobs {
		if j.State != bridge.JobPending || !held(j) || j.User == "" ||
			(j.User == self && self != "root") || slices.Contains(j.StateFlags, "COMPLETING") ||
			j.ArrayJobID != 0 || j.HetJobID != 0 {
			// Only the holds held accepts: an owner could release any
			// other between the snapshot and the probe, and Slurm start
			// the job, which the probe would then requeue. Nor a record of a job array or a
			// heterogeneous job: a requeue of its id would reach the
			// array's or the job's other records, running ones included.
			continue
		}
		if !found {
			best, found = j, true
		}
	}
	return best, found
}

// unusedJobID is a job id above any Slurm gives (MaxJobId is at most
// 67,043,328), asked about when no job can serve as the probe: slurmctld
// answers "Invalid job id specified" to anyone, which proves that the
// path runs and reaches slurmctld but not the rights.
const unusedJobID bridge.JobID = 2147483632

// reachedOnly is the check's outcome when the path reached slurmctld with
// a job id no Slurm gives: proven for root, who may requeue any job; for
// any other user the rights are still to prove.
func reachedOnly(path, self string) error {
	if self == "root" {
		return nil
	}
	return noProbe(path, self)
}

func noProbe(path, self string) error {
	return fmt.Errorf("%w (%s reaches slurmctld, acting as user %s; proving its rights needs a pending, held job of "+
		"another user)", bridge.ErrNoRequeueProbe, path, self)
}

// unexpectedRequeue is the error for a probe that requeued its job.
func unexpectedRequeue(path string, job bridge.Job) error {
	return fmt.Errorf("%s requeued job %s, which the snapshot showed pending and held: slurmctld should have answered "+
		"%q, so the requeue path is not proven and the job's state has changed under the scheduler (was it released "+
		"and started meanwhile?); please look at job %s", path, job.ID, textJobPending, job.ID)
}

// checkRESTRequeue proves both ways requeues go through slurmrestd: one
// job's (GET .../job/{id}/requeue, Apply) and a list's (POST
// .../jobs/requeue, ApplyBatch), each with the same probe. A list
// endpoint that answers 404 sends the lists through scontrol instead,
// which is then the path to prove.
func (c *Client) checkRESTRequeue(ctx context.Context, path string, r requeuer, snap *bridge.Snapshot) error {
	self := c.cfg.UserName
	job, ok := probeJob(snap, self)
	if !ok {
		job = bridge.Job{ID: unusedJobID, User: "(none)"}
	}
	callCtx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	err := r.requeue(callCtx, job.ID.String(), false)
	timedOut := callCtx.Err() != nil && ctx.Err() == nil
	cancel()
	c.forget(err)
	if err := c.requeueVerdict(path, job, ok, err, timedOut); err != nil {
		return err
	}
	many, isMany := r.(bulkRequeuer)
	if !isMany {
		return nil
	}
	listPath := path + " (lists: POST /jobs/requeue)"
	callCtx, cancel = context.WithTimeout(ctx, c.cfg.Timeout)
	failed, err := many.requeueMany(callCtx, []string{job.ID.String()}, false)
	timedOut = callCtx.Err() != nil && ctx.Err() == nil
	cancel()
	c.forget(err)
	var re *ReplyError
	switch {
	case err != nil && errors.As(err, &re) && re.NotFound():
		// Lists go through scontrol on this server (requeueBulk).
		return c.checkScontrolRequeue(ctx, snap)
	case err == nil && failed[job.ID.String()] == nil:
		return unexpectedRequeue(listPath, job)
	case err == nil:
		err = failed[job.ID.String()]
	}
	return c.requeueVerdict(listPath, job, ok, err, timedOut)
}

// requeueVerdict reads slurmctld's answer to the probe's requeue of job
// (ok: a real job, not unusedJobID) sent by path; nil proves the path.
func (c *Client) requeueVerdict(path string, job bridge.Job, ok bool, err error, timedOut bool) error {
	self := c.cfg.UserName
	if err == nil {
		return unexpectedRequeue(path, job)
	}
	if timedOut {
		return fmt.Errorf("%s did not answer a requeue of job %s within %v: %w", path, job.ID, c.cfg.Timeout, err)
	}
	var re *ReplyError
	if !errors.As(err, &re) {
		return fmt.Errorf("%s: requeue of job %s failed: %w", path, job.ID, err)
	}
	switch {
	case re.has(slurmErrJobPending, textJobPending), re.has(slurmErrDisabled, textDisabled):
		return nil
	case re.has(slurmErrAccessDenied, textAccessDenied):
		return fmt.Errorf("%s refused to requeue job %s of user %s: the bridge's user %s may not requeue other users' jobs; "+
			"use root or SlurmUser, or make %s a Slurm operator (sacctmgr modify user %s set adminlevel=Operator), "+
			"and a token minted for that user: %w", path, job.ID, job.User, self, self, self, err)
	case re.authFailed():
		return fmt.Errorf("%s rejected the credentials of user %s (HTTP %d): check the JWT file %s (expired? minted "+
			"for another user?) and that slurmrestd accepts JWTs (AuthAltTypes=auth/jwt): %w",
			path, self, re.Status, c.cfg.TokenFile, err)
	case re.NotFound():
		return fmt.Errorf("%s does not serve the requeue endpoint (404) at %s: %w", path, c.cfg.URL, err)
	case re.has(slurmErrInvalidJobID, textInvalidJobID) && !ok:
		return reachedOnly(path, self)
	case re.has(slurmErrInvalidJobID, textInvalidJobID):
		return fmt.Errorf("%s does not know job %s, which the snapshot showed pending (it may have ended just now; "+
			"the next check asks about another job): %w", path, job.ID, err)
	case re.cannotContact():
		return fmt.Errorf("%s cannot reach slurmctld (check that slurmctld is up and that slurmrestd's host can "+
			"reach it): %w", path, err)
	}
	return fmt.Errorf("%s: requeue of job %s was refused in an unexpected way: %w", path, job.ID, err)
}

func (c *Client) checkScontrolRequeue(ctx context.Context, snap *bridge.Snapshot) error {
	name := c.scontrolName()
	if _, err := c.scontrolPath(); err != nil {
		return fmt.Errorf("%s: requeues need scontrol while slurmrestd is older than v0.0.45, and %q cannot be run: "+
			"install Slurm's client commands on this host or set the scontrol path: %w", name, c.cfg.Scontrol, err)
	}
	self, err := c.whoami()
	if err != nil {
		return fmt.Errorf("%s: cannot tell which user runs scontrol: %w", name, err)
	}
	job, ok := probeJob(snap, self)
	if !ok {
		job = bridge.Job{ID: unusedJobID, User: "(none)"}
	}
	callCtx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	out, err := c.cfg.Run(callCtx, c.cfg.Scontrol, "requeue", job.ID.String())
	text := strings.TrimSpace(string(out))
	if err == nil {
		return unexpectedRequeue(name, job)
	}
	c.forgetScontrol(err)
	if commandMissing(err) {
		return fmt.Errorf("%s cannot be run: %v; install Slurm's client commands on this host or set the scontrol path", name, err)
	}
	if callCtx.Err() != nil && ctx.Err() == nil {
		return fmt.Errorf("%s did not finish a requeue of job %s within %v (is slurmctld reachable from this host?): %v: %s",
			name, job.ID, c.cfg.Timeout, err, text)
	}
	switch {
	case strings.Contains(text, textJobPending), strings.Contains(text, textDisabled):
		return nil
	case strings.Contains(text, textAccessDenied):
		return fmt.Errorf("%s, run by user %s, may not requeue other users' jobs (asked about job %s of %s): scontrol "+
			"must act as root, SlurmUser or a Slurm operator (sacctmgr modify user %s set adminlevel=Operator; if %s "+
			"is a wrapper, check which user it runs scontrol as): %v: %s",
			name, self, job.ID, job.User, self, c.cfg.Scontrol, err, text)
	case strings.Contains(text, textCannotContact):
		return fmt.Errorf("%s cannot contact slurmctld: check this host's slurm.conf (SlurmctldHost) and munge (munged "+
			"running, the cluster's munge.key): %v: %s", name, err, text)
	case strings.Contains(strings.ToLower(text), "munge") || strings.Contains(text, "authentication"):
		return fmt.Errorf("%s cannot authenticate to slurmctld: check munge on this host (munged running, the "+
			"cluster's munge.key): %v: %s", name, err, text)
	case strings.Contains(text, textInvalidJobID) && !ok:
		return reachedOnly(name, self)
	case strings.Contains(text, textInvalidJobID):
		return fmt.Errorf("%s does not know job %s, which slurmrestd lists as pending: it may have ended just now, or "+
			"scontrol talks to another cluster (check SLURM_CONF and slurm.conf on this host): %v: %s",
			name, job.ID, err, text)
	}
	return fmt.Errorf("%s: requeue of job %s failed in an unexpected way: %v: %s", name, job.ID, err, text)
}

// has reports whether one of the reply's errors has Slurm error number
// number, or (when the reply gives no number) mentions text.
func (e *ReplyError) has(number int, text string) bool {
	for _, m := range e.Errors {
		if m.Number == number {
			return true
		}
		if m.Number == 0 && text != "" && (strings.Contains(m.Error, text) || strings.Contains(m.Description, text)) {
			return true
		}
	}
	return false
}

// authFailed reports whether slurmrestd refused the credentials: HTTP
// 401, 403 or 511 (what 26.05 answers to a bad JWT), or Slurm's
// authentication error numbers.
func (e *ReplyError) authFailed() bool {
	switch e.Status {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusNetworkAuthenticationRequired:
		return true
	}
	for _, m := range e.Errors {
		if m.Number == slurmErrProtocolAuth || m.Number == slurmErrRESTAuthFail || (m.Number >= 6000 && m.Number < 6100) {
			return true
		}
	}
	return false
}

// cannotContact reports whether slurmrestd says it could not reach
// slurmctld: the connection error numbers (1001-1004 and 1800-1805) or
// the text.
func (e *ReplyError) cannotContact() bool {
	for _, m := range e.Errors {
		if (m.Number >= 1001 && m.Number <= 1004) || (m.Number >= 1800 && m.Number < 1900) ||
			strings.Contains(m.Error, textCannotContact) || strings.Contains(m.Description, textCannotContact) {
			return true
		}
	}
	return false
}

var _ bridge.RequeueChecker = (*Client)(nil)
