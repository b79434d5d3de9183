// Package limits turns Slurm's accounting limits into the pools the round
// mechanism keeps under their caps: which caps each job counts against,
// and how much of each the jobs the mechanism does not schedule already
// hold. Pure: no I/O, no clocks.
//
// Slurm's rules followed here (resource_limits in Slurm's documentation):
//   - a QOS caps GPUs (gres/gpu) and running jobs per user, per account
//     and for all its jobs (MaxTRESPerUser, MaxTRESPerAccount, GrpTRES,
//     MaxJobsPerUser, MaxJobsPerAccount, GrpJobs);
//   - every association from the job's user association up to root caps
//     the GPUs and jobs of its whole subtree (GrpTRES, GrpJobs). Group
//     caps are the exception to "the first level that sets a limit wins":
//     each level's is enforced, so all are kept here;
//   - MaxJobs caps each user association's running jobs, inherited from
//     the nearest association above that sets it, unless the job's QOS
//     sets MaxJobsPerUser, which comes first;
//   - MaxTRESPerJob (QOS first, then associations) stops a job that asks
//     for more for good.
//
// Partition QOS are not read: a site that caps through one is judged from
// the jobs' reasons only, as without accounting.
package limits

import (
	"fmt"
	"sort"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

// NoCap marks a pool cap that is not set.
const NoCap = bridge.NoLimit

// Member is what decides the caps a job counts against.
type Member struct {
	User, Account, QOS, Partition string
	// GPUs the job asks for in all, whole (a job on shards counts the
	// GPUs it would need whole: the site's gres/gpu caps must hold for
	// it as well, though Slurm counts shards apart).
	GPUs int
}

// Pool is one cap shared by the jobs that count against it.
type Pool struct {
	Name string
	// GPUs and Jobs are the caps, NoCap where not set.
	GPUs, Jobs int
}

// Table maps jobs to pools for one reading of the accounting.
type Table struct {
	qos   map[string]bridge.QOSLimits
	assoc map[assocKey]bridge.Association
	pools map[string]Pool
}

type assocKey struct{ account, user, partition string }

// New indexes acc; a nil acc makes a table with no caps at all.
func New(acc *bridge.Accounting) *Table {
	t := &Table{qos: map[string]bridge.QOSLimits{}, assoc: map[assocKey]bridge.Association{}, pools: map[string]Pool{}}
	if acc == nil {
		return t
	}
	for _, q := range acc.QOS {
		t.qos[q.Name] = q
	}
	for _, a := range acc.Associations {
		t.assoc[assocKey{a.Account, a.User, a.Partition}] = a
	}
	return t
}

// Of returns the names of the pools job m counts against, in a stable
// order, and registers them in the table. blocked is non-empty when a
// per-job cap stops m for good (it asks for more GPUs than its QOS or
// association allows one job): Slurm will never start it as it is.
func (t *Table) Of(m Member) (names []string, blocked string) {
	q, hasQOS := t.qos[m.QOS]
	if hasQOS && capped(q.MaxGPUsPerJob) && m.GPUs > q.MaxGPUsPerJob {
		return nil, fmt.Sprintf("QOS %s allows %d GPUs per job, it asks for %d", q.Name, q.MaxGPUsPerJob, m.GPUs)
	}
	if hasQOS {
		names = t.add(names, "qos "+q.Name+" user "+m.User, q.MaxGPUsPerUser, q.MaxJobsPerUser)
		names = t.add(names, "qos "+q.Name+" account "+m.Account, q.MaxGPUsPerAccount, q.MaxJobsPerAccount)
		names = t.add(names, "qos "+q.Name, q.GrpGPUs, q.GrpJobs)
	}
	chain := t.chain(m)
	maxJobs, perJob := NoCap, NoCap
	for _, a := range chain {
		if maxJobs == NoCap && capped(a.MaxJobs) {
			maxJobs = a.MaxJobs
		}
		if perJob == NoCap && capped(a.MaxGPUsPerJob) {
			perJob = a.MaxGPUsPerJob
		}
	}
	if !(hasQOS && capped(q.MaxGPUsPerJob)) && perJob != NoCap && m.GPUs > perJob {
		return nil, fmt.Sprintf("association %s allows %d GPUs per job, it asks for %d", assocName(chain[0]), perJob, m.GPUs)
	}
	if len(chain) > 0 && !(hasQOS && capped(q.MaxJobsPerUser)) {
		names = t.add(names, "association "+assocName(chain[0])+" max jobs", NoCap, maxJobs)
	}
	for _, a := range chain {
		names = t.add(names, "association "+assocName(a), a.GrpGPUs, a.GrpJobs)
	}
	return names, ""
}

// chain is m's user association, then each account above it up to root;
// empty when the accounting has no association for m.
func (t *Table) chain(m Member) []bridge.Association {
	a, ok := t.assoc[assocKey{m.Account, m.User, m.Partition}]
	if !ok {
		a, ok = t.assoc[assocKey{m.Account, m.User, ""}]
	}
	if !ok {
		return nil
	}
	out := []bridge.Association{a}
	seen := map[string]bool{}
	for account := a.Account; account != "" && !seen[account]; {
		seen[account] = true // a loop in a broken tree ends here
		acc, ok := t.assoc[assocKey{account, "", ""}]
		if !ok {
			break
		}
		out = append(out, acc)
		account = acc.ParentAccount
	}
	return out
}

func assocName(a bridge.Association) string {
	name := a.Account
	if a.User != "" {
		name += "/" + a.User
	}
	if a.Partition != "" {
		name += "/" + a.Partition
	}
	return name
}

// add registers a pool with at least one cap and appends its name.
func (t *Table) add(names []string, name string, gpus, jobs int) []string {
	if !capped(gpus) && !capped(jobs) {
		return names
	}
	t.pools[name] = Pool{Name: name, GPUs: capOrNone(gpus), Jobs: capOrNone(jobs)}
	return append(names, name)
}

// Pool returns the registered pool of that name.
func (t *Table) Pool(name string) (Pool, bool) {
	p, ok := t.pools[name]
	return p, ok
}

// Pools returns every pool registered so far, sorted by name.
func (t *Table) Pools() []Pool {
	out := make([]Pool, 0, len(t.pools))
	for _, p := range t.pools {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func capped(n int) bool { return n >= 0 }

func capOrNone(n int) int {
	if n < 0 {
		return NoCap
	}
	return n
}

// Used is what running jobs hold of each pool.
type Used struct{ GPUs, Jobs int }

// Usage adds up what the running jobs hold of each pool they count
// against (registering the pools as Of does). A job a per-job cap would
// have stopped runs all the same (Slurm let it start before the cap was
// set) and counts against nothing here.
func (t *Table) Usage(running []Member) map[string]Used {
	out := map[string]Used{}
	for _, m := range running {
		names, _ := t.Of(m)
		for _, n := range names {
			u := out[n]
			u.GPUs += m.GPUs
			u.Jobs++
			out[n] = u
		}
	}
	return out
}
