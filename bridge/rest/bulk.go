package rest

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

// Actions in bulk. slurmctld carries out each job's change as its own
// request whatever the path, but the path decides what comes around it:
// one slurmrestd request per job costs an HTTP round trip, a JWT check,
// JSON in and out and slurmrestd's own serialization, about 15 ms each;
// scontrol with a list of job ids sends the requests back to back from
// one process, and slurmrestd's list endpoints do the same from one
// request. ApplyBatch therefore sends:
//
//	hold, release        scontrol hold|release ID,ID,... (with the lease:
//	                     scontrol update JobId=ID,... Dependency=D, lease.go)
//	reset-priority       scontrol release ID,ID,...
//	set-constraints      scontrol update JobId=ID,ID,... Features=F (one call per value)
//	set-priority         scontrol update JobId=ID,ID,... Priority=P (one call per value)
//	begin-now            scontrol update JobId=ID,ID,... StartTime=now
//	updates of one job   scontrol update JobId=ID,ID,... Features=F Priority=P StartTime=now
//	sharing a request    (one call per set of values; bridge.Requests)
//	signal               DELETE /jobs {jobs, signal, flags: FULL_JOB} (Slurm 24.05 on)
//	requeue(-hold)       POST /jobs/requeue {jobs, flags: Hold} on v0.0.45,
//	                     scontrol requeue|requeuehold ID,ID,... before
//	anything else        one REST request per job, restWorkers at a time
//
// Without scontrol the scontrol kinds go one REST request per job too.
// Records of job arrays and heterogeneous jobs always go one by one (see
// jobName.alone).

// bulkOrder is the order in which ApplyBatch sends the kinds of a batch:
// holds first, so that a job that must wait is stopped before others are
// made startable, and releases and begin-now last, after the changes a
// released job must start with. Every kind must be here
// (TestBulkOrderHasEveryKind): a kind left out would be reported sent
// without being sent.
var bulkOrder = []bridge.ActionKind{
	bridge.ActHold, bridge.ActSignal, bridge.ActRequeue, bridge.ActRequeueHold,
	bridge.ActSetConstraints, bridge.ActSetShape, bridge.ActSetShare, bridge.ActSetArrayLimit, bridge.ActSetPriority,
	bridge.ActResetPriority, bridge.ActRelease, bridge.ActBeginNow,
}

// textNotPending is slurmctld's answer to an update of a job that has
// started (ESLURM_JOB_NOT_PENDING).
const textNotPending = "Job is no longer pending execution"

// restWorkers bounds the REST requests ApplyBatch has in flight at once
// for actions sent one by one: slurmctld serializes job updates, so more
// would only queue in slurmrestd and in front of users' commands.
const restWorkers = 8

// bulkSize bounds the jobs of one slurmrestd list request (signal,
// requeue): slurmrestd carries a requeue list out one job at a time, and
// a request whose deadline passes leaves every job of it unknown. 960
// requeues of running jobs in one request outlived a 29 s deadline on the
// loaded 2-core machine; requests of 100 are settled one after another.
const bulkSize = 100

// bulkTimeout is the deadline of a call that carries n jobs: the usual
// one plus a share per job, since slurmctld takes each job in turn. A
// requeue of a running job took up to 200 ms while 960 were requeued and
// as many started on the same 2-core machine, and a deadline that passes
// makes a requeue that may well have happened count as failed.
func (c *Client) bulkTimeout(n int) time.Duration {
	return c.cfg.Timeout + time.Duration(n)*500*time.Millisecond
}

// ApplyBatch implements bridge.BatchActuator (see the table above). Each
// action's error is wrapped with the action, as Apply's are. Where a list
// call names the jobs it failed for, the others are taken as done; where
// it fails without naming any, idempotent actions are sent again one by
// one so that each job's error is known, and signals and requeues are
// reported failed rather than sent twice.
func (c *Client) ApplyBatch(ctx context.Context, actions []bridge.Action) []error {
	c.acted.Store(true)
	errs := make([]error, len(actions))
	// Requests by the kind of their first action, which places them in
	// bulkOrder.
	byKind := map[bridge.ActionKind][][]int{}
	for _, req := range bridge.Requests(actions) {
		if req = validRun(actions, req, errs); len(req) > 0 {
			kind := actions[req[0]].Kind
			byKind[kind] = append(byKind[kind], req)
		}
	}
	for kind, reqs := range byKind {
		if !slices.Contains(bulkOrder, kind) {
			for _, req := range reqs {
				for _, i := range req {
					errs[i] = fmt.Errorf("%s: not sent: no batch step carries %s", actions[i], kind)
				}
			}
		}
	}
	for _, kind := range bulkOrder {
		var alone, updates [][]int
		var listed []int
		for _, req := range byKind[kind] {
			switch {
			case c.nameOf(actions[req[0]].Job).alone:
				alone = append(alone, req)
			case bridge.UpdateField(kind):
				updates = append(updates, req)
			default:
				listed = append(listed, req[0])
			}
		}
		c.applyEach(ctx, actions, alone, errs)
		// Updates, alone or several of a job in one request: one scontrol
		// update per set of values.
		for _, group := range groupRequests(updates, func(req []int) string { return strings.Join(updateArgs(actions, req), " ") }) {
			fields := updateArgs(actions, group[0])
			c.scontrolBulk(ctx, actions, group, errs, func(ids string) []string { return append([]string{"update", "JobId=" + ids}, fields...) })
		}
		for _, req := range updates {
			if i := req[0]; len(req) == 1 && actions[i].Kind == bridge.ActBeginNow && errs[i] != nil && strings.Contains(errs[i].Error(), textNotPending) {
				// Released in an earlier step, the job started before its
				// begin time could be set: what begin-now is for has
				// happened.
				errs[i] = nil
			}
		}
		if len(listed) == 0 {
			continue
		}
		switch kind {
		case bridge.ActResetPriority:
			// Slurm's release recomputes the priority (and lifts no
			// lease: that is a dependency).
			c.scontrolBulk(ctx, actions, singles(listed), errs, func(ids string) []string { return []string{"release", ids} })
		case bridge.ActHold, bridge.ActRelease:
			if on, lease := c.leasing(); on {
				c.leaseBulk(ctx, actions, listed, errs, kind, lease)
				continue
			}
			c.scontrolBulk(ctx, actions, singles(listed), errs, func(ids string) []string { return []string{string(kind), ids} })
		case bridge.ActSignal:
			for _, group := range groupBy(actions, listed, func(a bridge.Action) string {
				n, _ := bridge.SignalNumber(a.Signal) // valid: checked above
				return strconv.Itoa(n)
			}) {
				c.signalBulk(ctx, actions, group, errs)
			}
		case bridge.ActRequeue, bridge.ActRequeueHold:
			if on, lease := c.leasing(); on && kind == bridge.ActRequeueHold {
				// Requeued, then kept waiting on the lease (holdAfterRequeue).
				c.requeueBulk(ctx, actions, listed, errs, false)
				// Holds of their own, so that nothing sent again one by one
				// is a requeue. A hold that fails leaves the job to become
				// eligible after Slurm's requeue delay.
				var holds []bridge.Action
				var which []int
				for _, i := range listed {
					if errs[i] == nil {
						which = append(which, len(holds))
						holds = append(holds, bridge.Action{Kind: bridge.ActHold, Job: actions[i].Job})
					}
				}
				if len(holds) > 0 && lease != 0 {
					c.leaseBulk(ctx, holds, which, make([]error, len(holds)), bridge.ActHold, lease)
				}
				continue
			}
			c.requeueBulk(ctx, actions, listed, errs, kind == bridge.ActRequeueHold)
		default:
			c.applyEach(ctx, actions, singles(listed), errs)
		}
	}
	return errs
}

// validRun returns the part of request req before its first invalid
// action; that action gets its error and those after it are not sent.
func validRun(actions []bridge.Action, req []int, errs []error) []int {
	for k, i := range req {
		if err := actions[i].Validate(); err != nil {
			errs[i] = err
			for _, j := range req[k+1:] {
				errs[j] = fmt.Errorf("%s: not sent: an earlier update of the job in its request is invalid: %w", actions[j], err)
			}
			return req[:k]
		}
	}
	return req
}

// updateArgs is scontrol update's fields for the updates of request req
// (bridge.UpdateField kinds).
func updateArgs(actions []bridge.Action, req []int) []string {
	args := make([]string, 0, len(req))
	for _, i := range req {
		switch a := actions[i]; a.Kind {
		case bridge.ActSetConstraints:
			args = append(args, "Features="+a.Constraints)
		case bridge.ActSetPriority:
			args = append(args, fmt.Sprintf("Priority=%d", a.Priority))
		case bridge.ActBeginNow:
			args = append(args, "StartTime=now")
		}
	}
	return args
}

// singles makes each index its own request.
func singles(which []int) [][]int {
	out := make([][]int, len(which))
	for k, i := range which {
		out[k] = []int{i}
	}
	return out
}

// groupRequests splits reqs by key, in order of first appearance.
func groupRequests(reqs [][]int, key func([]int) string) [][][]int {
	var keys []string
	groups := map[string][][]int{}
	for _, req := range reqs {
		k := key(req)
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], req)
	}
	out := make([][][]int, len(keys))
	for n, k := range keys {
		out[n] = groups[k]
	}
	return out
}

// groupBy splits which by key, in order of first appearance.
func groupBy(actions []bridge.Action, which []int, key func(bridge.Action) string) [][]int {
	var keys []string
	groups := map[string][]int{}
	for _, i := range which {
		k := key(actions[i])
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], i)
	}
	out := make([][]int, len(keys))
	for n, k := range keys {
		out[n] = groups[k]
	}
	return out
}

// applyEach sends each request of reqs (one action through Apply, a run
// of one job's updates as one slurmrestd update), restWorkers at a time,
// and stores each action's outcome in errs.
func (c *Client) applyEach(ctx context.Context, actions []bridge.Action, reqs [][]int, errs []error) {
	var wg sync.WaitGroup
	slots := make(chan struct{}, restWorkers)
	for _, req := range reqs {
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			if len(req) == 1 {
				errs[req[0]] = c.Apply(ctx, actions[req[0]])
				return
			}
			acts := make([]bridge.Action, len(req))
			for k, i := range req {
				acts[k] = actions[i]
			}
			if err := c.applyUpdates(ctx, acts); err != nil {
				err = unanswered(err)
				for _, i := range req {
					errs[i] = fmt.Errorf("%s: %w", actions[i], err)
				}
			}
		}()
	}
	wg.Wait()
}

// scontrolFailedJob finds the job id in one line of scontrol's errors,
// which it prints per job as "<error> for job <id>".
var scontrolFailedJob = regexp.MustCompile(`for job (\d+)\s*$`)

// perJobErrors reads scontrol's output for the jobs it names: their
// errors, and whether every line named one of ids (so that the jobs not
// named went through).
func perJobErrors(out string, ids map[string]bool) (map[string]string, bool) {
	failed := map[string]string{}
	all := true
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		m := scontrolFailedJob.FindStringSubmatch(line)
		if m == nil || !ids[m[1]] {
			all = false
			continue
		}
		failed[m[1]] = line
	}
	return failed, all && len(failed) > 0
}

// scontrolBulk runs scontrol with args(ids) for the requests of reqs (a
// request's job named once, its outcome each of its actions'), in chunks
// of job ids run a few at once (batchChunks). A call that fails naming
// its failed jobs settles each job; one that fails otherwise sends its
// requests again one by one, except requeues (see ApplyBatch). Without
// scontrol every request goes one by one.
func (c *Client) scontrolBulk(ctx context.Context, actions []bridge.Action, reqs [][]int, errs []error, args func(ids string) []string) {
	if _, err := c.scontrolPath(); err != nil {
		c.applyEach(ctx, actions, reqs, errs)
		return
	}
	var wg sync.WaitGroup
	callers := make(chan struct{}, batchCallers)
	for _, size := range batchChunks(len(reqs)) {
		chunk := reqs[:size]
		reqs = reqs[size:]
		wg.Add(1)
		callers <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-callers }()
			ids := make([]string, len(chunk))
			named := make(map[string]bool, len(chunk))
			for k, req := range chunk {
				ids[k] = actions[req[0]].Job.String()
				named[ids[k]] = true
			}
			callCtx, cancel := context.WithTimeout(ctx, c.bulkTimeout(len(ids)))
			argv := args(strings.Join(ids, ","))
			out, err := c.cfg.Run(callCtx, c.cfg.Scontrol, argv...)
			cancel()
			if err == nil {
				return
			}
			c.forgetScontrol(err)
			failed, complete := perJobErrors(string(out), named)
			if !complete || commandMissing(err) {
				kind := actions[chunk[0][0]].Kind
				if isRequeueKind(kind) && !commandMissing(err) {
					// Some may have been requeued: sending again would
					// answer "job is pending" for those, not requeue twice,
					// but their outcome is unknown; report the call's error.
					for _, req := range chunk {
						for _, i := range req {
							errs[i] = bridge.NoReply(fmt.Errorf("%s: %s %s: %w: %s", actions[i], c.cfg.Scontrol, argv[0], err, strings.TrimSpace(string(out))))
						}
					}
					return
				}
				c.applyEach(ctx, actions, chunk, errs)
				return
			}
			for k, req := range chunk {
				if line, ok := failed[ids[k]]; ok {
					for _, i := range req {
						errs[i] = fmt.Errorf("%s: %s %s: %s", actions[i], c.cfg.Scontrol, argv[0], line)
					}
				}
			}
		}()
	}
	wg.Wait()
}

func isRequeueKind(k bridge.ActionKind) bool {
	return k == bridge.ActRequeue || k == bridge.ActRequeueHold
}

// signalBulk sends one signal to the jobs of which in DELETE /jobs
// requests of up to bulkSize jobs. When slurmrestd does not serve the
// endpoint (404) the signals go one by one; when a request fails
// otherwise its jobs are reported failed, not signalled again.
func (c *Client) signalBulk(ctx context.Context, actions []bridge.Action, which []int, errs []error) {
	n, err := bridge.SignalNumber(actions[which[0]].Signal)
	if err != nil {
		for _, i := range which {
			errs[i] = fmt.Errorf("%s: %w", actions[i], err)
		}
		return
	}
	for len(which) > 0 {
		chunk := which[:min(bulkSize, len(which))]
		which = which[len(chunk):]
		names := make([]string, len(chunk))
		for k, i := range chunk {
			names[k] = c.nameOf(actions[i].Job).name
		}
		callCtx, cancel := context.WithTimeout(ctx, c.bulkTimeout(len(names)))
		a, err := c.adapter(callCtx)
		var failed map[string]error
		if err == nil {
			failed, err = a.signalMany(callCtx, names, strconv.Itoa(n))
		}
		cancel()
		var re *ReplyError
		switch {
		case err != nil && errors.As(err, &re) && re.NotFound():
			c.applyEach(ctx, actions, singles(chunk), errs)
			continue
		case err != nil:
			c.forget(err)
			for _, i := range chunk {
				errs[i] = fmt.Errorf("%s: slurmrestd signal of %d jobs: %w", actions[i], len(chunk), unanswered(err))
			}
			continue
		}
		for k, i := range chunk {
			if e, ok := failed[names[k]]; ok {
				errs[i] = fmt.Errorf("%s: %w", actions[i], e)
			}
		}
	}
}

// bulkRequeuer is an adapter that requeues many jobs in one request
// (v0.0.45: POST /jobs/requeue); it returns each refused job's error by
// job id.
type bulkRequeuer interface {
	requeueMany(ctx context.Context, names []string, hold bool) (map[string]error, error)
}

// requeueBulk requeues the jobs of which through slurmrestd's list
// endpoint where the API version has one, and through scontrol lists
// otherwise (or when the endpoint answers 404).
func (c *Client) requeueBulk(ctx context.Context, actions []bridge.Action, which []int, errs []error, hold bool) {
	verb := "requeue"
	if hold {
		verb = "requeuehold"
	}
	viaScontrol := func(which []int) {
		if _, err := c.scontrolPath(); err != nil {
			// Apply says why requeues cannot go out.
			c.applyEach(ctx, actions, singles(which), errs)
			return
		}
		c.scontrolBulk(ctx, actions, singles(which), errs, func(ids string) []string { return []string{verb, ids} })
	}
	negCtx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	a, err := c.adapter(negCtx)
	cancel()
	r, ok := a.(bulkRequeuer)
	if err != nil || !ok {
		viaScontrol(which)
		return
	}
	for len(which) > 0 {
		chunk := which[:min(bulkSize, len(which))]
		which = which[len(chunk):]
		names := make([]string, len(chunk))
		for k, i := range chunk {
			names[k] = c.nameOf(actions[i].Job).name
		}
		callCtx, cancel := context.WithTimeout(ctx, c.bulkTimeout(len(names)))
		failed, err := r.requeueMany(callCtx, names, hold)
		cancel()
		c.forget(err)
		var re *ReplyError
		switch {
		case err != nil && errors.As(err, &re) && re.NotFound():
			viaScontrol(chunk)
			continue
		case err != nil:
			for _, i := range chunk {
				errs[i] = fmt.Errorf("%s: slurmrestd %s of %d jobs: %w", actions[i], verb, len(chunk), unanswered(err))
			}
			continue
		}
		for k, i := range chunk {
			// slurmrestd names a refused job as it was asked (errors[]),
			// or by its own job id (status[]): an array's task may come
			// back under either.
			e, ok := failed[names[k]]
			if !ok {
				e, ok = failed[actions[i].Job.String()]
			}
			if ok {
				errs[i] = fmt.Errorf("%s: slurmrestd %s: %w", actions[i], a.version(), e)
			}
		}
	}
}
