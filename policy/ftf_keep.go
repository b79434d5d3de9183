package policy

import "slices"

// keepRunningSlack is how far above the optimal max ρ (relative) the
// allocation keepRunningFTF picks may go: enough to leave the LP an
// interior to choose from despite the search's tolerance, too little for
// any job to notice.
const keepRunningSlack = 1e-4

// keepRunningFTF replaces the optimal allocation a of
// finish_time_fairness_perf by another optimal one, chosen for a
// mechanism that pays for every restart (Options.KeepRunning).
//
// The policy fixes only the largest ρ: every job's effective throughput
// must reach c_j(ρ*) = R_j / (ρ*·D_j − t_j), and the rest of the cluster
// may go to any job. The vertex the search ends on hands that rest to a
// few jobs, and which ones changes from one event to the next, so a
// mechanism that follows it restarts jobs at every event; with free
// restarts that costs nothing. This choice keeps each job's ρ_j at most
// ρ_j^v + room·(ρ* − ρ_j^v), ρ_j^v its ρ at the vertex (room 0: no job
// worse off than the policy's own answer, room 1: any job up to the
// optimum's max), and among those allocations maximizes
//
//	Σ_j eff_j / c_j  +  Σ_{j running on w} x_jw,
//
// with c_j the throughput job j needs at its bound: the jobs' throughput
// in units of what each needs (so no job's share of what is left depends
// on its speed's scale) plus the time of each running job on the type it
// runs on, worth as much as a job's whole need. What the bounds leave
// goes first to the jobs already running, where they run. a keeps its
// vertex when the LP fails.
func keepRunningFTF(p *Problem, a *Allocation, tput throughputFunc, room float64) {
	types := p.Types()
	if !slices.Equal(types, a.Types) {
		return
	}
	face, rho, ok := ftfVertexFace(p, a, tput)
	if !ok {
		return
	}
	b, err := newPlacementLP(p, tput, false)
	if err != nil {
		return
	}
	target := rho * (1 + keepRunningSlack)
	for _, fj := range face {
		// No slack at room 0: a relative slack on ρ_j is seconds of a
		// job's whole expected time, which for a job near its end is
		// most of what it has left, and it would lose its GPUs for it.
		bound := fj.rho + room*(target-fj.rho)
		slack := bound*fj.isoTime - fj.since
		if !(slack > 0) {
			return
		}
		need := fj.remaining / slack
		b.effectiveRow(fj.row, nil, nil, need, Inf)
		b.addThroughputObjective(fj.row, 1/need)
	}
	for i := range p.Jobs {
		on := p.Jobs[i].RunningOn
		if on == "" {
			continue
		}
		for k, t := range types {
			if c := b.units[i].cols[k]; t == on && c >= 0 {
				b.lp.SetObjective(c, b.lp.obj[c]+1)
			}
		}
	}
	b.lp.Maximize()
	res, err := b.lp.Solve()
	if err != nil {
		return
	}
	kept := b.allocation(p, a.Policy, res.X)
	if len(kept.Rows) != len(a.Rows) {
		return
	}
	a.Rows = kept.Rows
	noteLP(&a.Stats, b.lp)
	if obj, err := MaxFinishTimeFairness(p, a); err == nil {
		a.Objective = obj
	}
}
