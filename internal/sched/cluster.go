package sched

import (
	"strings"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/rounds"
)

// clusterOf lists the servers the mechanism may place managed jobs on:
// usable nodes, less the GPUs that others hold. Others are the unmanaged
// jobs in the snapshot and, from the node's own count of GPUs in use, jobs
// the snapshot does not show (those of partitions that share the node).
func (c *Core) clusterOf(snap *bridge.Snapshot) []rounds.Server {
	unmanaged := map[string]int{}
	managed := map[string]int{}
	types := nodeTypes(snap)
	for _, j := range snap.Jobs {
		if !isRunning(j) || c.mixOf(j, types) != nil {
			// A job on a mix of types is left out of the managed count:
			// its GPUs are then the node's others', which the rounds do
			// not place on while it holds them (mixed.go).
			continue
		}
		per := perNode(j)
		ok, _ := c.managed(j)
		for _, n := range j.RunningNodes {
			if ok {
				managed[n] += per
			} else {
				unmanaged[n] += per
			}
		}
	}
	var servers []rounds.Server
	for _, n := range snap.Nodes {
		if !c.nodeUsable(n) {
			continue
		}
		others := max(unmanaged[n.Name], n.GPUsUsed-managed[n.Name])
		if g := n.GPUs - others; g > 0 {
			servers = append(servers, rounds.Server{ID: n.Name, Type: n.GPUType, GPUs: g})
		}
	}
	return servers
}

func perNode(j bridge.Job) int {
	if j.GPUsPerNode > 0 {
		return j.GPUsPerNode
	}
	if len(j.RunningNodes) == 0 {
		return j.GPUs
	}
	return j.GPUs / len(j.RunningNodes)
}

func (c *Core) syncCluster(servers []rounds.Server, now float64) error {
	if c.mech != nil && equalServers(servers, c.cluster) {
		return nil
	}
	if c.mech == nil {
		opts := rounds.ForTraits(c.pol.Traits(), c.shuffle)
		opts.Credit = c.set.Round.Seconds() / 2
		opts.MinResetInterval = c.set.MinResetInterval.Seconds()
		opts.RoundSeconds = c.set.Round.Seconds()
		opts.RestartHoldMin = c.set.RestartHoldMin.Seconds()
		// A job that arrives between resets competes with priority 0
		// rather than leaving its GPUs idle: on a real cluster idle GPUs
		// cost more than a slightly unfair round.
		opts.HoldUnallocated = false
		opts = c.set.Mechanism.Apply(opts)
		m, err := rounds.New(rounds.Cluster{Servers: servers}, opts)
		if err != nil {
			return err
		}
		c.mech = m
	} else if err := c.mech.SetCluster(rounds.Cluster{Servers: servers}, now); err != nil {
		return err
	}
	c.addTypes(c.mech.Types()...)
	c.cluster = servers
	return nil
}

func equalServers(a, b []rounds.Server) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// account credits each running managed job with the time since the last
// round on the type it runs on, in the mechanism and in its lifetime
// totals. The gap is capped at two rounds so a daemon outage is not
// counted as service nobody observed.
func (c *Core) account(snap *bridge.Snapshot, now time.Time) {
	if c.lastRound.IsZero() || !now.After(c.lastRound) {
		return
	}
	gap := min(now.Sub(c.lastRound), 2*c.set.Round)
	var usages []rounds.Usage
	types := nodeTypes(snap)
	pairs := c.runningPairs(snap)
	pairSeen := map[string]bool{}
	for _, j := range snap.Jobs {
		js := c.jobs[keyOf(j.ID)]
		if mix := c.mixOf(j, types); mix != nil && js != nil && js.scale != 0 {
			usages = append(usages, c.creditMix(js, j, mix, gap, now)...)
			continue
		}
		if js == nil || js.scale == 0 || j.State != bridge.JobRunning || !c.typeManaged(j.RunningGPUType) {
			continue
		}
		d := gap
		if !j.StartTime.IsZero() && now.Sub(j.StartTime) < d {
			d = max(now.Sub(j.StartTime), 0)
		}
		js.received[j.RunningGPUType] += d.Seconds()
		key := js.name
		if pk, ok := pairs[j.ID]; ok {
			// A pair's time is the pair's, counted once.
			if pairSeen[pk] {
				continue
			}
			pairSeen[pk], key = true, pk
		}
		usages = append(usages, rounds.Usage{Key: key, Type: j.RunningGPUType, Seconds: d.Seconds()})
	}
	// Usages on types the mechanism does not know (a node that just left)
	// are dropped rather than failing the round.
	known := c.mech.Types()
	kept := usages[:0]
	for _, u := range usages {
		if indexOf(known, u.Type) >= 0 {
			kept = append(kept, u)
		}
	}
	c.mech.Record(kept) //nolint:errcheck // types checked above
}

// running lists the managed jobs that hold GPUs now, as the mechanism
// expects them: GPU indices per node are assigned in job order, since
// Slurm's snapshot says how many GPUs a job holds on a node, not which.
func (c *Core) running(snap *bridge.Snapshot, now time.Time) []rounds.Assignment {
	servers := map[string]rounds.Server{}
	for _, s := range c.cluster {
		servers[s.ID] = s
	}
	next := map[string]int{}
	var out []rounds.Assignment
	var types map[string]string
	pairs := c.runningPairs(snap)
	pairAt := map[string]int{} // a running pair's index in out
	for _, js := range c.jobs {
		js.partner = ""
	}
	defer func() {
		for _, i := range pairAt {
			if a := out[i]; len(a.Jobs) == 2 {
				if x, y := c.byNameKey(a.Jobs[0]), c.byNameKey(a.Jobs[1]); x != nil && y != nil {
					x.partner, y.partner = y.name, x.name
				}
			}
		}
	}()
	for _, j := range snap.Jobs {
		js := c.jobs[keyOf(j.ID)]
		if js == nil || js.scale == 0 || !isRunning(j) {
			continue
		}
		if key, ok := pairs[j.ID]; ok {
			// Two jobs on one GPU: one assignment, one slot.
			if i, seen := pairAt[key]; seen {
				a := &out[i]
				a.Jobs = append(a.Jobs, js.name)
				a.Pin = max(a.Pin, c.pinOf(js, j, now))
				a.Since = max(a.Since, seconds(runSince(js, j)))
				if !strings.HasPrefix(key, a.Jobs[0]+"+") {
					a.Jobs[0], a.Jobs[1] = a.Jobs[1], a.Jobs[0]
				}
				continue
			}
			n := j.RunningNodes[0]
			if s, ok := servers[n]; ok && s.Type == j.RunningGPUType && next[n] < s.GPUs {
				pairAt[key] = len(out)
				out = append(out, rounds.Assignment{Key: key, Jobs: []string{js.name}, Type: j.RunningGPUType,
					Pin: c.pinOf(js, j, now), Since: seconds(runSince(js, j)), Slots: []rounds.Slot{{Server: n, GPU: next[n]}}})
				next[n]++
			}
			continue
		}
		if j.RunningGPUType == "" && j.Tag.MixedOK() {
			if types == nil {
				types = nodeTypes(snap)
			}
			if c.mixOf(j, types) != nil {
				// On a mix of types: it keeps those GPUs until it ends,
				// and must not be selected for, and hold, other GPUs.
				out = append(out, rounds.Assignment{Key: js.name, Jobs: []string{js.name}, Pin: rounds.PinOutside})
				continue
			}
		}
		a := rounds.Assignment{Key: js.name, Jobs: []string{js.name}, Type: j.RunningGPUType, Pin: c.pinOf(js, j, now),
			Since: seconds(runSince(js, j))}
		per := perNode(j)
		fits := true
		for _, n := range j.RunningNodes {
			s, ok := servers[n]
			if !ok || s.Type != j.RunningGPUType || next[n]+per > s.GPUs {
				fits = false
				break
			}
			for g := 0; g < per; g++ {
				a.Slots = append(a.Slots, rounds.Slot{Server: n, GPU: next[n] + g})
			}
		}
		if !fits || len(a.Slots) == 0 {
			// Running where the mechanism cannot see (a drained node):
			// it is left alone and competes as if waiting.
			continue
		}
		for _, n := range j.RunningNodes {
			next[n] += per
		}
		out = append(out, a)
	}
	return out
}
