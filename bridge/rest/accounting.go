package rest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

// slurmdbd's limits (bridge.Accounting) come through slurmrestd's
// /slurmdb/ endpoints, which slurmrestd serves only when started with the
// openapi/slurmdbd plugin. Each full snapshot asks for them again, two
// requests beside the jobs and nodes, since sacctmgr may change a limit at
// any time and the next round must follow it:
//
//  1. GET /slurmdb/{v}/qos: every QOS (QOS belong to no cluster). Its
//     meta names the cluster slurmrestd serves: the ClusterName of the
//     slurm.conf it shares with slurmctld.
//  2. GET /slurmdb/{v}/associations?cluster=NAME: that cluster's
//     associations alone, as slurmctld enforces them. The answer is
//     filtered by that name again, and where no reply names the cluster,
//     associations are taken only when they all belong to one. slurmdbd
//     answers with the limits a record inherits filled in (it is not
//     asked to exclude them): a MaxJobs, MaxTRESPerJob or QOS list an
//     association does not set is its nearest parent's; Grp limits are
//     each association's own.
//
// Both requests share one deadline, Config.Timeout. A look between rounds keeps the last reading: looks come every few
// seconds and judge no limit. A failure never fails the snapshot: its
// Accounting is nil and AccountingError says why. A slurmrestd that serves
// no /slurmdb/ endpoints is asked again only after accountingRetry.

// accountingRetry is how long a slurmrestd without the openapi/slurmdbd
// plugin is left unasked: it serves none until restarted.
const accountingRetry = 10 * time.Minute

// Why Snapshot.Accounting is nil, when slurmrestd gives no reason of its
// own.
const (
	noSlurmdbEndpoints = "slurmrestd serves no /slurmdb/ endpoints (start it with -s openapi/slurmctld,openapi/slurmdbd)"
	accountingOff      = "slurmdbd's limits are not read (turned off in the configuration)"
)

// slurmdbdFairshareParent is the raw shares slurmdbd keeps for
// Fairshare=parent (SLURMDB_FS_USE_PARENT).
const slurmdbdFairshareParent = math.MaxInt32

// qosReply is one answer to GET /slurmdb/{v}/qos.
type qosReply struct {
	qos []bridge.QOSLimits
	// cluster is the cluster slurmrestd serves, from the reply's meta.
	cluster string
}

// associationsReply is one answer to GET /slurmdb/{v}/associations.
type associationsReply struct {
	associations []rawAssociation
	cluster      string
}

// rawAssociation is one association as an adapter reads it, with the
// cluster it belongs to.
type rawAssociation struct {
	bridge.Association
	Cluster string
}

// accountingRead is one reading of slurmdbd's limits for a snapshot: the
// limits, or why there are none.
type accountingRead struct {
	accounting *bridge.Accounting
	err        string
}

// accountingState is what the client keeps between snapshots.
type accountingState struct {
	// last is the reading of the last snapshot that succeeded, which
	// looks keep; read is set once there is one.
	last accountingRead
	read bool
	// unservedUntil is when to ask again a slurmrestd that served no
	// /slurmdb/ endpoints.
	unservedUntil time.Time
}

// startAccounting starts reading slurmdbd's limits for a snapshot and
// returns the function that waits for the reading. A look keeps the last
// snapshot's. The caller holds readMu, until the wait too, and keeps the
// reading of a snapshot that succeeds.
func (c *Client) startAccounting(ctx context.Context, a adapter, look bool) func() accountingRead {
	switch {
	case c.cfg.SkipAccounting:
		return func() accountingRead { return accountingRead{err: accountingOff} }
	case c.cfg.Now().Before(c.accounting.unservedUntil):
		return func() accountingRead { return accountingRead{err: noSlurmdbEndpoints} }
	case look && c.accounting.read:
		last := c.accounting.last
		return func() accountingRead { return last }
	}
	var acc *bridge.Accounting
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		callCtx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
		defer cancel()
		acc, err = readAccounting(callCtx, a)
	}()
	return func() accountingRead {
		<-done
		r := accountingRead{accounting: acc}
		if err != nil {
			r.err = oneLine(err.Error())
			if endpointsMissing(err) {
				c.accounting.unservedUntil = c.cfg.Now().Add(accountingRetry)
				r.err = noSlurmdbEndpoints
			}
		}
		return r
	}
}

// readAccounting reads the QOS, then the associations of the cluster the
// QOS reply names (see the top of this file).
func readAccounting(ctx context.Context, a adapter) (*bridge.Accounting, error) {
	qos, err := a.qos(ctx)
	if err != nil {
		return nil, fmt.Errorf("read slurmdbd's QOS: %w", err)
	}
	assocs, err := a.associations(ctx, qos.cluster)
	if err != nil {
		return nil, fmt.Errorf("read slurmdbd's associations: %w", err)
	}
	own, err := clusterAssociations(assocs.associations, cmp.Or(qos.cluster, assocs.cluster))
	if err != nil {
		return nil, fmt.Errorf("read slurmdbd's associations: %w", err)
	}
	return newAccounting(qos.qos, own), nil
}

// clusterAssociations keeps the associations of cluster; with no cluster
// name, all of them when they belong to one cluster.
func clusterAssociations(list []rawAssociation, cluster string) ([]bridge.Association, error) {
	if cluster == "" {
		var names []string
		for _, a := range list {
			if a.Cluster != "" && !slices.Contains(names, a.Cluster) {
				names = append(names, a.Cluster)
			}
		}
		if len(names) > 1 {
			slices.Sort(names)
			return nil, fmt.Errorf("slurmrestd names no cluster, and slurmdbd keeps associations of several (%s): "+
				"which are slurmctld's is unknown", strings.Join(names, ", "))
		}
	}
	var out []bridge.Association
	for _, a := range list {
		// Slurm keeps cluster names in lower case; a reply that leaves
		// the record's name out is taken as being of the cluster asked.
		if cluster == "" || a.Cluster == "" || strings.EqualFold(a.Cluster, cluster) {
			out = append(out, a.Association)
		}
	}
	return out, nil
}

// newAccounting puts the limits in the order and form bridge.Accounting
// documents: a user's association names its account as its parent
// (slurmdbd leaves it empty there), lists are sorted.
func newAccounting(qos []bridge.QOSLimits, assocs []bridge.Association) *bridge.Accounting {
	acc := &bridge.Accounting{}
	for _, q := range qos {
		if q.Name != "" {
			acc.QOS = append(acc.QOS, q)
		}
	}
	slices.SortFunc(acc.QOS, func(a, b bridge.QOSLimits) int { return strings.Compare(a.Name, b.Name) })
	for _, a := range assocs {
		if a.Account == "" {
			continue // not an association slurmctld could charge a job to
		}
		if a.User != "" {
			a.ParentAccount = a.Account
		}
		a.QOS = slices.Clone(a.QOS)
		slices.Sort(a.QOS)
		acc.Associations = append(acc.Associations, a)
	}
	slices.SortFunc(acc.Associations, func(a, b bridge.Association) int {
		return cmp.Or(strings.Compare(a.Account, b.Account), strings.Compare(a.User, b.User),
			strings.Compare(a.Partition, b.Partition))
	})
	return acc
}

// endpointsMissing reports whether err says that slurmrestd serves no
// /slurmdb/ endpoints: it answers their paths 404, with its "Unable to
// find requested URL" page.
func endpointsMissing(err error) bool {
	var re *ReplyError
	if !errors.As(err, &re) {
		return false
	}
	return re.Status == 404 || strings.Contains(re.Body, "requested URL")
}

// capOf turns a cap read from slurmdbd into a bridge cap: bridge.NoLimit
// when it is not set (or Slurm's infinite or NO_VAL, negative as signed
// numbers), bounded to fit an int on every platform otherwise.
func capOf(n int64, set bool) int {
	if !set || n < 0 {
		return bridge.NoLimit
	}
	return int(min(n, math.MaxInt32))
}

// isGPUTRES reports whether a TRES limit entry is gres/gpu: the cap on
// all of a job's GPUs, whatever their type ("gres/gpu:v100" caps one
// type's and is not read).
func isGPUTRES(kind, name string) bool {
	return strings.EqualFold(kind, "gres") && strings.EqualFold(name, "gpu")
}

// sharesOf reads an association's raw shares: bridge.NoLimit for
// Fairshare=parent. A record without them has Slurm's default, 1.
func sharesOf(raw *int32) int {
	switch {
	case raw == nil:
		return 1
	case *raw == slurmdbdFairshareParent || *raw < 0:
		return bridge.NoLimit
	}
	return int(*raw)
}

// fillAccounting sets the snapshot's accounting, and with it the running
// jobs outside the managed partitions whose GPUs count against the same
// limits.
func fillAccounting(snap *bridge.Snapshot, r accountingRead, partitions []string, raws []rawJob) {
	snap.Accounting, snap.AccountingError = r.accounting, r.err
	if r.accounting != nil {
		snap.RunningOutside = runningOutside(partitions, raws)
	}
}

// runningOutside lists the running jobs with GPUs outside the managed
// partitions, sorted by id. Their GPUs are read as a managed job's are
// (convertJob): a job on shards counts one GPU per node.
func runningOutside(partitions []string, raws []rawJob) []bridge.Running {
	var out []bridge.Running
	for _, r := range raws {
		if len(r.States) == 0 || r.States[0] != string(bridge.JobRunning) ||
			inPartitions(partitions, strings.Split(r.Partition, ",")...) {
			continue
		}
		j, err := convertJob(r, nil)
		if err != nil || j.GPUs <= 0 {
			continue
		}
		out = append(out, bridge.Running{ID: j.ID, User: j.User, Account: j.Account, QOS: j.QOS,
			Partition: j.Partition, GPUs: j.GPUs})
	}
	slices.SortFunc(out, func(a, b bridge.Running) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// oneLine joins a message's lines, for AccountingError.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
