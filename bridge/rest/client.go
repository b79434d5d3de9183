// Package rest reads and changes Slurm through slurmrestd: it implements
// bridge.Reader and bridge.Actuator with SchedMD's generated API clients,
// picks the newest API version the server offers (v0.0.42 to v0.0.45),
// authenticates with a JWT read from a file, reads slurmdbd's limits
// through slurmrestd's /slurmdb/ endpoints, requeues through slurmrestd
// where the version serves it (v0.0.45) and with scontrol otherwise, and
// runs scontrol to update many jobs in one call (holds and releases).
package rest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

// Config says how to reach Slurm.
type Config struct {
	// URL of slurmrestd, such as http://127.0.0.1:6820.
	URL string
	// UserName is sent as X-SLURM-USER-NAME; it must be an admin (root or
	// SlurmUser) to change other users' jobs.
	UserName string
	// TokenFile holds the JWT (as written by `scontrol token`); it is
	// re-read whenever it changes.
	TokenFile string
	// Partitions limits the snapshot to these partitions; empty means all.
	Partitions []string
	// Timeout bounds every call to slurmrestd or scontrol (default 10s)
	// but the snapshot's reads.
	Timeout time.Duration
	// ReadTimeout bounds the snapshot's reads of nodes and jobs
	// (default 60s): their cost grows with every job slurmctld keeps.
	ReadTimeout time.Duration
	// SkipAccounting leaves slurmdbd's limits unread: every snapshot's
	// Accounting is then nil (accounting.go).
	SkipAccounting bool
	// Versions restricts the API versions to try, such as ["v0.0.42"];
	// empty means every supported one, newest first.
	Versions []string
	// Scontrol is the scontrol command used for requeue when the API
	// version has no requeue endpoint (before v0.0.45), and for holding or
	// releasing many jobs at once (default "scontrol"). Without it, holds
	// and releases go through slurmrestd one by one.
	Scontrol string
	// HTTPClient replaces the default HTTP client (tests).
	HTTPClient *http.Client
	// Now replaces time.Now (tests).
	Now func() time.Time
	// Run replaces running a command (tests): it gets the program and its
	// arguments and returns the combined output.
	Run func(ctx context.Context, name string, args ...string) ([]byte, error)
	// LookPath replaces exec.LookPath (tests), to find Scontrol. When Run
	// is replaced and LookPath is not, every command is taken as found.
	LookPath func(file string) (string, error)
}

// adapter is one API version's client, reduced to what the bridge needs.
type adapter interface {
	version() string
	ping(ctx context.Context) (status int, err error)
	// nodes and jobs read every node and job; since > 0 asks for them
	// only when something changed after that time (light.go).
	nodes(ctx context.Context, since int64) (nodesReply, error)
	jobs(ctx context.Context, since int64) (jobsReply, error)
	// jobStates reads every job's id and state alone (light.go).
	jobStates(ctx context.Context) ([]jobState, error)
	update(ctx context.Context, job int64, u jobUpdate) error
	// submit submits a batch job and returns its id.
	submit(ctx context.Context, s submission) (int64, error)
	// signal sends signal to the job slurmctld knows by name (a job id,
	// or ARRAY_TASK for a task of a job array).
	signal(ctx context.Context, name string, signal string) error
	// signalMany sends signal to many jobs in one request, and returns
	// the error of each job slurmctld refused, by name.
	signalMany(ctx context.Context, names []string, signal string) (map[string]error, error)
	// qos reads every QOS slurmdbd keeps, and associations the
	// associations of cluster (every cluster's when empty), through
	// slurmrestd's /slurmdb/ endpoints (accounting.go).
	qos(ctx context.Context) (qosReply, error)
	associations(ctx context.Context, cluster string) (associationsReply, error)
}

type adapterFactory func(server string, doer *http.Client, auth func(context.Context, *http.Request) error) (adapter, error)

// supported lists the API versions this package speaks, newest first:
// v0.0.42 to v0.0.45 cover Slurm 24.11 (v0.0.40-42), 25.05 (v0.0.40-43),
// 25.11 (v0.0.41-44) and 26.05 (v0.0.42-45).
var supported = []struct {
	version string
	build   adapterFactory
}{
	{"v0.0.45", func(s string, d *http.Client, a func(context.Context, *http.Request) error) (adapter, error) {
		return newAdapterV0045(s, d, a)
	}},
	{"v0.0.44", func(s string, d *http.Client, a func(context.Context, *http.Request) error) (adapter, error) {
		return newAdapterV0044(s, d, a)
	}},
	{"v0.0.43", func(s string, d *http.Client, a func(context.Context, *http.Request) error) (adapter, error) {
		return newAdapterV0043(s, d, a)
	}},
	{"v0.0.42", func(s string, d *http.Client, a func(context.Context, *http.Request) error) (adapter, error) {
		return newAdapterV0042(s, d, a)
	}},
}

// SupportedVersions returns the API versions this package speaks, newest first.
func SupportedVersions() []string {
	out := make([]string, len(supported))
	for i, s := range supported {
		out[i] = s.version
	}
	return out
}

// Client is a bridge.Reader and bridge.Actuator backed by slurmrestd.
type Client struct {
	cfg      Config
	token    *tokenFile
	adapters []adapter
	// whoami names the user running scontrol (os/user; tests replace it).
	whoami func() (string, error)

	// negotiating serializes negotiations; mu guards chosen alone, so
	// that reading it never waits for a negotiation.
	negotiating sync.Mutex
	mu          sync.Mutex
	chosen      adapter

	scontrolMu sync.Mutex
	// scontrolFound is Config.Scontrol as found by LookPath ("" until
	// found).
	scontrolFound string

	// namesMu guards names: the records of job arrays and heterogeneous
	// jobs in the last snapshot, which an action must not name by their
	// bare job id everywhere (see nameOf).
	namesMu sync.Mutex
	names   map[bridge.JobID]bridge.Job

	// readMu serializes snapshots and guards cache (light.go); noStates
	// is set once slurmrestd answered /jobs/state with 404.
	readMu   sync.Mutex
	cache    readCache
	noStates bool
	// accounting is the last reading of slurmdbd's limits, and when
	// slurmrestd may be asked again after it served none (accounting.go);
	// guarded by readMu.
	accounting accountingState
	// lease is the daemon's lease (lease.go).
	lease leaseState
	// acted is set by every action sent: a job's state alone does not
	// show the daemon's own changes (a release, a priority), so the next
	// look reads the jobs.
	acted atomic.Bool
}

// New checks the configuration and prepares the clients; it does not
// contact Slurm (the API version is chosen on first use).
func New(cfg Config) (*Client, error) {
	if cfg.URL == "" {
		return nil, errors.New("slurmrestd URL is not set")
	}
	if cfg.TokenFile == "" {
		return nil, errors.New("JWT file is not set")
	}
	if cfg.UserName == "" {
		return nil, errors.New("slurmrestd user name is not set")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = time.Minute
	}
	if cfg.Scontrol == "" {
		cfg.Scontrol = "scontrol"
	}
	if cfg.HTTPClient == nil {
		// Each call has its own deadline (Timeout or ReadTimeout).
		cfg.HTTPClient = &http.Client{}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.LookPath == nil {
		cfg.LookPath = exec.LookPath
		if cfg.Run != nil {
			cfg.LookPath = func(file string) (string, error) { return file, nil }
		}
	}
	if cfg.Run == nil {
		cfg.Run = func(ctx context.Context, name string, args ...string) ([]byte, error) {
			return exec.CommandContext(ctx, name, args...).CombinedOutput()
		}
	}
	c := &Client{cfg: cfg, token: &tokenFile{path: cfg.TokenFile}, whoami: osUserName}
	server := strings.TrimRight(cfg.URL, "/")
	for _, s := range supported {
		if len(cfg.Versions) > 0 && !slices.Contains(cfg.Versions, s.version) {
			continue
		}
		a, err := s.build(server, cfg.HTTPClient, c.authenticate)
		if err != nil {
			return nil, err
		}
		c.adapters = append(c.adapters, a)
	}
	if len(c.adapters) == 0 {
		return nil, fmt.Errorf("none of the API versions %v is supported (supported: %v)", cfg.Versions, SupportedVersions())
	}
	return c, nil
}

// authenticate adds the JWT headers to a request.
func (c *Client) authenticate(_ context.Context, req *http.Request) error {
	token, err := c.token.get()
	if err != nil {
		return err
	}
	req.Header.Set("X-SLURM-USER-NAME", c.cfg.UserName)
	req.Header.Set("X-SLURM-USER-TOKEN", token)
	return nil
}

// APIVersion negotiates (once) and returns the API version in use.
func (c *Client) APIVersion(ctx context.Context) (string, error) {
	a, err := c.adapter(ctx)
	if err != nil {
		return "", err
	}
	return a.version(), nil
}

// current returns the negotiated version's adapter, nil before a
// negotiation.
func (c *Client) current() adapter {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.chosen
}

// adapter returns the negotiated version's adapter: the newest whose ping
// is served. A version the server does not offer answers 404.
func (c *Client) adapter(ctx context.Context) (adapter, error) {
	if a := c.current(); a != nil {
		return a, nil
	}
	c.negotiating.Lock()
	defer c.negotiating.Unlock()
	if a := c.current(); a != nil {
		return a, nil
	}
	var tried []string
	for _, a := range c.adapters {
		callCtx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
		status, err := a.ping(callCtx)
		cancel()
		if status == http.StatusNotFound {
			tried = append(tried, a.version())
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("negotiate API version: ping %s: %w", a.version(), err)
		}
		c.mu.Lock()
		c.chosen = a
		c.mu.Unlock()
		return a, nil
	}
	return nil, fmt.Errorf("negotiate API version: slurmrestd at %s serves none of %s", c.cfg.URL, strings.Join(tried, ", "))
}

// forget drops the negotiated version after a 404, so that the next call
// negotiates again (slurmrestd was upgraded or replaced).
func (c *Client) forget(err error) {
	var re *ReplyError
	if errors.As(err, &re) && re.NotFound() {
		c.mu.Lock()
		c.chosen = nil
		c.mu.Unlock()
	}
}

// Snapshot implements bridge.Reader: nodes and jobs of the managed
// partitions, read with one call each, or less where slurmctld can tell
// that nothing changed since the last read (light.go), and slurmdbd's
// limits with two more, which looks between rounds do without
// (accounting.go).
func (c *Client) Snapshot(ctx context.Context) (*bridge.Snapshot, error) {
	taken := c.cfg.Now()
	a, err := c.adapter(ctx)
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	callCtx, cancel := context.WithTimeout(ctx, c.cfg.ReadTimeout)
	defer cancel()
	c.readMu.Lock()
	defer c.readMu.Unlock()
	if c.cache.version != a.version() {
		c.cache = readCache{version: a.version()}
	}
	// Swapped before the reads: an action sent while they run makes the
	// next look read the jobs again.
	acted := c.acted.Swap(false)
	look := bridge.IsLook(ctx) && c.cache.jobs != nil && !c.noStates && !acted
	// The two reads are independent; the job list is by far the slower
	// (slurmrestd spends about a millisecond per job), so the nodes come
	// for free alongside it.
	var nodes nodesReply
	var nodesErr error
	nodesDone := make(chan struct{})
	go func() {
		defer close(nodesDone)
		nodes, nodesErr = a.nodes(callCtx, c.cache.nodesSince)
	}()
	// So do slurmdbd's limits, which never fail the snapshot.
	accounting := c.startAccounting(callCtx, a, bridge.IsLook(ctx))
	jobs, jobsErr := c.readJobs(callCtx, a, look)
	if jobsErr != nil {
		cancel() // the snapshot has failed: do not wait for the nodes
	}
	<-nodesDone
	acct := accounting()
	if jobsErr != nil {
		c.forget(jobsErr)
		c.cache = readCache{version: a.version()}
		return nil, fmt.Errorf("snapshot: read jobs: %w", jobsErr)
	}
	if nodesErr != nil {
		c.forget(nodesErr)
		c.cache = readCache{version: a.version()}
		return nil, fmt.Errorf("snapshot: read nodes: %w", nodesErr)
	}
	readAt := c.cfg.Now()
	if !jobs.unchanged {
		c.cache.jobs, c.cache.jobsUpdate = jobs.jobs, safeSince(jobs.lastUpdate, readAt)
	}
	if !nodes.unchanged || c.cache.nodes == nil {
		c.cache.nodes, c.cache.nodesSince = nodes.nodes, safeSince(nodes.lastUpdate, readAt)
	}
	rawJobs := c.noteLease(c.cache.jobs, func(r rawJob) bool { return inPartitions(c.cfg.Partitions, strings.Split(r.Partition, ",")...) })
	snap, err := buildSnapshot(taken, a.version(), c.cfg.Partitions, c.cache.nodes, rawJobs)
	if err != nil {
		c.cache = readCache{version: a.version()}
		return nil, err
	}
	c.accounting.last, c.accounting.read = acct, true
	fillAccounting(snap, acct, c.cfg.Partitions, rawJobs)
	c.markLeaseHeld(snap)
	c.noteNames(snap)
	return snap, nil
}

// readJobs reads the job list: for a look, /jobs/state first, and the kept
// list when it shows every job in its kept state; else /jobs with
// update_time when the kept list allows it. An unchanged answer is
// returned as such, the kept list standing.
func (c *Client) readJobs(ctx context.Context, a adapter, look bool) (jobsReply, error) {
	if look {
		states, err := a.jobStates(ctx)
		var re *ReplyError
		switch {
		case err == nil && sameStates(states, c.cache.jobs):
			return jobsReply{unchanged: true}, nil
		case errors.As(err, &re) && re.NotFound():
			// Before Slurm 24.05: looks read the jobs as rounds do.
			c.noStates = true
		}
		// Any other failure or a change: read the jobs themselves.
	}
	since := c.cache.jobsUpdate
	if c.cache.jobs == nil {
		since = 0
	}
	r, err := a.jobs(ctx, since)
	if err == nil && r.unchanged && c.cache.jobs == nil {
		return a.jobs(ctx, 0)
	}
	return r, err
}

// noteNames keeps the snapshot's records of job arrays and heterogeneous
// jobs, for nameOf. The daemon acts on the jobs of the snapshot it read
// last, so that is the one that says how to name them.
func (c *Client) noteNames(snap *bridge.Snapshot) {
	names := map[bridge.JobID]bridge.Job{}
	for _, j := range snap.Jobs {
		if j.ArrayJobID != 0 || j.HetJobID != 0 {
			names[j.ID] = bridge.Job{ID: j.ID, ArrayJobID: j.ArrayJobID, ArrayTaskID: j.ArrayTaskID,
				ArrayTasks: j.ArrayTasks, HetJobID: j.HetJobID, HetJobOffset: j.HetJobOffset}
		}
	}
	c.namesMu.Lock()
	c.names = names
	c.namesMu.Unlock()
}

// jobName says how to name job id in a command that takes Slurm's job
// names (scontrol's, and slurmrestd's signal and requeue), and whether
// such a command may name it with others in one call.
type jobName struct {
	// name is the job's name in those commands (bridge.Job.SlurmName).
	name string
	// wholeArray is set for a job array's own record while it holds
	// tasks not started: every name such a command takes for it means
	// the whole array, the tasks already started included.
	wholeArray bool
	// alone is set for the records of job arrays and heterogeneous jobs,
	// which go through slurmrestd one by one: slurmrestd's updates
	// change the one record whose id they name, where scontrol reads an
	// array's or a heterogeneous job's leader's id as all of its
	// records (scontrol hold ARRAY holds every task, running ones
	// included).
	alone bool
}

// nameOf is how to name job id (see jobName); a job the last snapshot did
// not show is taken for a plain job.
func (c *Client) nameOf(id bridge.JobID) jobName {
	c.namesMu.Lock()
	j, ok := c.names[id]
	c.namesMu.Unlock()
	if !ok {
		return jobName{name: id.String()}
	}
	return jobName{name: j.SlurmName(), wholeArray: j.HoldsArrayTasks(), alone: true}
}

// inPartitions reports whether any of names is one of partitions; every
// name is when partitions is empty (all are managed).
func inPartitions(partitions []string, names ...string) bool {
	if len(partitions) == 0 {
		return true
	}
	for _, n := range names {
		if slices.Contains(partitions, n) {
			return true
		}
	}
	return false
}

func buildSnapshot(taken time.Time, version string, partitions []string, rawNodes []rawNode, rawJobs []rawJob) (*bridge.Snapshot, error) {
	managed := func(names ...string) bool { return inPartitions(partitions, names...) }
	byName := map[string]bridge.Node{}
	var nodes []bridge.Node
	for _, r := range rawNodes {
		n, err := convertNode(r)
		if err != nil {
			// One node Slurm describes in a way the scheduler cannot
			// (several GPU types) is left out, not the whole cluster.
			n.GPUs, n.GPUType, n.GPUsUsed, n.Unreadable = 0, "", 0, err
		}
		byName[n.Name] = n
		if managed(n.Partitions...) {
			nodes = append(nodes, n)
		}
	}
	var jobs, elsewhere []bridge.Job
	for _, r := range rawJobs {
		// A pending job may list several partitions ("gpu,cpu").
		if !managed(strings.Split(r.Partition, ",")...) {
			if len(r.States) > 0 && r.States[0] == string(bridge.JobPending) && strings.Contains(r.Comment, "gavel") {
				if j, err := convertJob(r, byName); err == nil {
					elsewhere = append(elsewhere, j)
				}
			}
			continue
		}
		j, err := convertJob(r, byName)
		if err != nil {
			return nil, fmt.Errorf("snapshot: %w", err)
		}
		jobs = append(jobs, j)
	}
	snap, err := bridge.NewSnapshot(taken, version, nodes, jobs)
	if err != nil {
		return nil, fmt.Errorf("snapshot from %s: %w", version, err)
	}
	slices.SortFunc(elsewhere, func(a, b bridge.Job) int { return cmp.Compare(a.ID, b.ID) })
	snap.Elsewhere = elsewhere
	return snap, nil
}

// Apply implements bridge.Actuator.
func (c *Client) Apply(ctx context.Context, act bridge.Action) error {
	c.acted.Store(true)
	if err := act.Validate(); err != nil {
		return err
	}
	if err := c.apply(ctx, act); err != nil {
		return fmt.Errorf("%s: %w", act, unanswered(err))
	}
	return nil
}

func (c *Client) apply(ctx context.Context, act bridge.Action) error {
	switch act.Kind {
	case bridge.ActRequeue, bridge.ActRequeueHold:
		// Bounds each of its calls itself: it may fall back to scontrol.
		if on, lease := c.leasing(); on && act.Kind == bridge.ActRequeueHold {
			// With the lease a requeued job waits on it, not on a hold.
			if err := c.requeue(ctx, act.Job, false); err != nil {
				return err
			}
			c.holdAfterRequeue(ctx, act.Job, lease)
			return nil
		}
		return c.requeue(ctx, act.Job, act.Kind == bridge.ActRequeueHold)
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	a, err := c.adapter(ctx)
	if err != nil {
		return err
	}
	job := int64(act.Job)
	var u jobUpdate
	switch act.Kind {
	case bridge.ActSetPriority, bridge.ActSetConstraints, bridge.ActBeginNow:
		c.fieldUpdate(&u, act)
	case bridge.ActHold, bridge.ActRelease:
		if on, lease := c.leasing(); on {
			switch {
			case act.Kind == bridge.ActRelease:
				return c.leaseRelease(ctx, a, act.Job)
			case lease == 0:
				return ErrNoLease
			}
			return c.leaseHold(ctx, a, act.Job, lease)
		}
		hold := act.Kind == bridge.ActHold
		u.Hold = &hold
	case bridge.ActResetPriority:
		// A release recomputes the job's priority from Slurm's factors.
		release := false
		u.Hold = &release
	case bridge.ActSetShape:
		shapeUpdate(&u, act)
	case bridge.ActSetShare:
		shareUpdate(&u, act)
	case bridge.ActSetArrayLimit:
		limit := strconv.Itoa(act.Tasks)
		u.ArrayLimit = &limit
	case bridge.ActSignal:
		n, err := bridge.SignalNumber(act.Signal)
		if err != nil {
			return err
		}
		name := c.nameOf(act.Job)
		if name.wholeArray {
			return errWholeArray
		}
		err = a.signal(ctx, name.name, fmt.Sprint(n))
		c.forget(err)
		return err
	default:
		return fmt.Errorf("unknown action kind %q", act.Kind)
	}
	err = a.update(ctx, job, u)
	c.forget(err)
	return err
}

// fieldUpdate sets in u the field that act, one of the kinds that may
// share a request (bridge.SharesRequest), changes.
func (c *Client) fieldUpdate(u *jobUpdate, act bridge.Action) {
	switch act.Kind {
	case bridge.ActSetPriority:
		// The generated type holds a signed 32-bit number.
		p := min(act.Priority, math.MaxInt32)
		u.Priority = &p
	case bridge.ActSetConstraints:
		u.Constraints = &act.Constraints
	case bridge.ActBeginNow:
		now := c.cfg.Now().Unix()
		u.BeginTime = &now
	}
}

// applyUpdates sends the updates of one job that share a request (see
// bridge.Requests) as one slurmrestd job update: one RPC to slurmctld.
func (c *Client) applyUpdates(ctx context.Context, acts []bridge.Action) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	a, err := c.adapter(ctx)
	if err != nil {
		return err
	}
	var u jobUpdate
	for _, act := range acts {
		c.fieldUpdate(&u, act)
	}
	err = a.update(ctx, int64(acts[0].Job), u)
	c.forget(err)
	return err
}

// shapeUpdate fills the update that gives a pending job the shape act
// asks for: the node count as both minimum and maximum, the GPUs per node
// or per job (the other form cleared, since Slurm adds them up), and the
// constraint, all in one request so the job is never seen half changed.
func shapeUpdate(u *jobUpdate, act bridge.Action) {
	nodes := int32(act.Nodes) // bounded by Validate
	perNode, perJob := "", ""
	if act.GPUsPerNode > 0 {
		perNode = fmt.Sprintf("gres/gpu:%d", act.GPUsPerNode)
	} else {
		perJob = fmt.Sprintf("gres/gpu:%d", act.GPUs)
	}
	constraints := act.Constraints
	u.Nodes, u.TresPerNode, u.TresPerJob, u.Constraints = &nodes, &perNode, &perJob, &constraints
}

// scontrol sends one request per job id it is given, and most of each
// request's cost is outside slurmctld's job lock (authentication, the
// round trip), so a few calls at once finish sooner than one: 1,000 holds
// took about 1.2 s in one call and 0.8 s in four on a 2-core machine.
// batchCallers bounds the calls at once and batchMaxChunk the ids of one
// call, so that one call stays within its deadline; batchMinChunk keeps
// small batches in one call, where starting scontrol would dominate.
//
// Pacing (a pause after each call, half as long as the call) was tried at
// 5,000 jobs: users' squeue took as long with it as without (0.5-1.1 s
// while 4,040 jobs were held, 4-17 s while 960 running jobs were
// requeued and as many started, which is slurmctld's and the nodes' own
// work), and the round's sending took three times as long.
const (
	batchCallers  = 4
	batchMinChunk = 100
	batchMaxChunk = 250
)

// batchChunks splits n ids into contiguous chunk sizes for the calls.
func batchChunks(n int) []int {
	calls := max(min(batchCallers, n/batchMinChunk), (n+batchMaxChunk-1)/batchMaxChunk, 1)
	sizes := make([]int, calls)
	for i := range sizes {
		sizes[i] = n / calls
		if i < n%calls {
			sizes[i]++
		}
	}
	return sizes
}

// errWholeArray refuses a signal or a requeue of a job array's own record
// while it holds tasks not started: Slurm would read its id as the whole
// array and stop every task of it. The daemon never means to (such a
// record is pending), so a request for it is a mistake caught here.
var errWholeArray = errors.New("the record of a job array's tasks not started: its id names every task of the array, so it is not signalled or requeued")

// scontrol runs `scontrol VERB NAME`: slurmrestd has no requeue before
// v0.0.45 (Slurm 26.05). A task of a job array is named ARRAY_TASK.
func (c *Client) scontrol(ctx context.Context, verb string, job bridge.JobID) error {
	name := c.nameOf(job)
	if name.wholeArray {
		return fmt.Errorf("%s %s %s: %w", c.cfg.Scontrol, verb, job, errWholeArray)
	}
	out, err := c.cfg.Run(ctx, c.cfg.Scontrol, verb, name.name)
	if err != nil {
		c.forgetScontrol(err)
		if commandMissing(err) {
			return fmt.Errorf("%s %s %s: %w (requeues need scontrol while slurmrestd is older than v0.0.45: "+
				"install Slurm's client commands on this host or set the scontrol path)", c.cfg.Scontrol, verb, job, err)
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s %s %s: %w", c.cfg.Scontrol, verb, job, ctx.Err())
		}
		return fmt.Errorf("%s %s %s: %w: %s", c.cfg.Scontrol, verb, job, err, strings.TrimSpace(string(out)))
	}
	return nil
}

var (
	_ bridge.Reader        = (*Client)(nil)
	_ bridge.Actuator      = (*Client)(nil)
	_ bridge.BatchActuator = (*Client)(nil)
)
