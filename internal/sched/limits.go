package sched

import (
	"maps"
	"slices"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/internal/limits"
	"github.com/gavel-slurm/gavel-slurm/internal/siterules"
	"github.com/gavel-slurm/gavel-slurm/policy"
	"github.com/gavel-slurm/gavel-slurm/rounds"
)

// Slurm's accounting limits as constraints of the round (docs/limits.md).
//
// The daemon keeps the jobs it does not choose waiting, so Slurm's own
// reason for a job its QOS or association caps would stop (QOSMaxGRES-
// PerUser, AssocGrpGRES, ...) shows only once the daemon lets it go: the
// GPU the round meant for it then idles until the next round. Where the
// snapshot carries slurmdbd's limits, each round instead counts what the
// running jobs hold of every cap, and the mechanism never selects a job
// that would take a cap past its value; the GPUs go to the next jobs in
// line. A pair member counts the whole GPUs it asked for: Slurm does not
// count shards against gres/gpu caps, and pairing must not let a user run
// past them.

// limitsOf starts the round's limit table from the snapshot's accounting
// (empty when there is none: no caps, as before).
func (w *Core) limitsOf(snap *bridge.Snapshot) {
	w.limitTable = limits.New(snap.Accounting)
}

// memberOf is what decides a pending or running job's caps.
func memberOf(j bridge.Job) limits.Member {
	return limits.Member{User: j.User, Account: j.Account, QOS: j.QOS, Partition: j.Partition, GPUs: j.GPUs}
}

// blockedByLimit says why a per-job cap stops pending job j for good, ""
// when none does.
func (c *Core) blockedByLimit(j bridge.Job) string {
	if c.limitTable == nil {
		return ""
	}
	_, why := c.limitTable.Of(memberOf(j))
	return why
}

// syncLimits hands the mechanism this round's caps: each scheduled job's
// pools, and what the running jobs it does not schedule already hold of
// them (the daemon's unmanaged neighbours in its partitions, and every
// running GPU job of the other partitions).
func (w *Core) syncLimits(snap *bridge.Snapshot) error {
	tab := w.limitTable
	if tab == nil {
		tab = limits.New(nil)
	}
	for _, js := range w.jobs {
		if js.scale == 0 {
			continue
		}
		m := limits.Member{User: js.facts.User, Account: js.facts.Account, QOS: js.facts.QOS,
			Partition: js.facts.Partition, GPUs: js.scale}
		names, _ := tab.Of(m)
		if slices.Equal(names, js.limitNames) {
			continue
		}
		if err := w.mech.SetJobLimits(js.name, names); err != nil {
			return err
		}
		js.limitNames = names
	}
	var others []limits.Member
	for _, j := range snap.Jobs {
		if j.State != bridge.JobRunning || j.GPUs == 0 {
			continue
		}
		if js := w.jobs[keyOf(j.ID)]; js != nil && js.scale != 0 {
			continue // the mechanism counts it
		}
		others = append(others, memberOf(j))
	}
	for _, r := range snap.RunningOutside {
		others = append(others, limits.Member{User: r.User, Account: r.Account, QOS: r.QOS, Partition: r.Partition, GPUs: r.GPUs})
	}
	used := tab.Usage(others)
	pools := tab.Pools()
	out := make([]rounds.Limit, 0, len(pools))
	for _, p := range pools {
		u := used[p.Name]
		out = append(out, rounds.Limit{Name: p.Name, GPUs: p.GPUs, Jobs: p.Jobs, UsedGPUs: u.GPUs, UsedJobs: u.Jobs})
	}
	return w.mech.SetLimits(out)
}

// noteShares reads the entities' weights from the fair-share tree, where
// the site takes its entities from it ([entities] from = "fairshare"). A
// change made with sacctmgr asks for a new allocation at once. A round
// whose snapshot carries no accounting (slurmdbd did not answer) keeps
// the weights it had: one failed read must not reshuffle the cluster.
func (w *Core) noteShares(snap *bridge.Snapshot) {
	if w.set.Rules.EntitiesFrom != siterules.EntitiesFromFairShare || snap.Accounting == nil {
		return
	}
	weights := limits.AccountWeights(snap.Accounting, policy.MinWeight)
	if maps.Equal(weights, w.entityWeights) {
		return
	}
	w.entityWeights = weights
	w.mech.NoteEvent(rounds.EventOther)
}

// entityWeight is the weight of entity name in the policy: its account's
// fair-share weight where the site takes them from slurmdbd, else 1.
func (c *Core) entityWeight(name string) float64 {
	if w, ok := c.entityWeights[name]; ok {
		return w
	}
	return 1
}

// capRoom is what each accounting cap has left between rounds, for the
// refill: it starts jobs without the mechanism's walk, and must keep the
// same caps (a job it released past one would sit in Slurm's limit with
// the GPU claimed for it idle until the next round).
type capRoom struct {
	tab  *limits.Table
	used map[string]limits.Used
}

// capRoomOf counts what holds the caps now: every running GPU job of the
// snapshot (managed or not) and of the other partitions, and the pending
// jobs a round or refill released that Slurm has not started yet. nil
// when the snapshot carries no accounting: no caps to keep.
func capRoomOf(snap *bridge.Snapshot) *capRoom {
	if snap.Accounting == nil {
		return nil
	}
	tab := limits.New(snap.Accounting)
	var holding []limits.Member
	for _, j := range snap.Jobs {
		released := j.State == bridge.JobPending && !j.Held && j.Priority >= RunPriority
		if j.GPUs > 0 && (j.State == bridge.JobRunning || released) {
			holding = append(holding, memberOf(j))
		}
	}
	for _, r := range snap.RunningOutside {
		holding = append(holding, limits.Member{User: r.User, Account: r.Account, QOS: r.QOS, Partition: r.Partition, GPUs: r.GPUs})
	}
	return &capRoom{tab: tab, used: tab.Usage(holding)}
}

// fits reports whether m fits under every cap it counts against, and
// the caps' names for take.
func (r *capRoom) fits(m limits.Member) (bool, []string) {
	if r == nil {
		return true, nil
	}
	names, blocked := r.tab.Of(m)
	if blocked != "" {
		return false, nil
	}
	for _, n := range names {
		p, _ := r.tab.Pool(n)
		u := r.used[n]
		if (p.GPUs != limits.NoCap && u.GPUs+m.GPUs > p.GPUs) || (p.Jobs != limits.NoCap && u.Jobs+1 > p.Jobs) {
			return false, nil
		}
	}
	return true, names
}

// take counts m against the caps fits named.
func (r *capRoom) take(m limits.Member, names []string) {
	if r == nil {
		return
	}
	for _, n := range names {
		u := r.used[n]
		u.GPUs += m.GPUs
		u.Jobs++
		r.used[n] = u
	}
}
