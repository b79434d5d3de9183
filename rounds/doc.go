// Package rounds is Gavel's round-based scheduling mechanism: it turns an
// allocation (the fraction of time each job or pair should spend on each
// GPU type, see package policy) into per-round decisions that realize it
// over time, and places the chosen jobs on servers.
//
// The package is pure: no I/O, no clock (every call takes `now`, seconds on
// the caller's clock, simulated or wall), and no global randomness (the
// optional type-order shuffle uses the Shuffler in Options). The same calls
// give the same plans.
//
// # State
//
// For every job and co-located pair ("combination") and every GPU type the
// mechanism keeps the time received since the last allocation reset and a
// deficit. Each new combination, and every combination at a reset, starts
// with Options.Credit seconds credited (the reference: half a 360 s round),
// so fractions are never 0 and early rounds do not swing priorities. The
// priority on a type is
//
//	allocation / (time received on the type / total time received on the type)
//
// or allocation × 1e9 while the fraction is 0 (only possible with no
// credit: then jobs not yet served since the reset go first); it is 0 without an
// allocation row, with a zero share, or where the throughput is 0. Deficits
// only change at resets (deficit += share × elapsed − time received beyond
// the credit) and break ties between equal priorities.
//
// # Driving it
//
//	m, err := rounds.New(cluster, rounds.ForTraits(pol.Traits(), shuffle))
//	// on arrivals / completions (each notes a reset event):
//	m.AddJob(rounds.Job{ID: "7", ScaleFactor: 4, Throughputs: tput}, now)
//	m.AddPair(rounds.Pair{Jobs: [2]string{"7", "9"}, Throughputs: pairTput}, now) // policies whose traits say Packs
//	m.RemoveJob("3", now)
//	// at every round boundary:
//	if m.NeedsReset(now) {
//		alloc, err := pol.Allocate(problem)     // rows keyed like policy.Row.Key
//		err = m.SetAllocation(alloc, now)       // folds deficits, resets time received
//	}
//	plan, err := m.Plan(now, running)           // running: what holds GPUs now
//	for _, d := range plan.Decisions {          // one per job, arrival order
//		switch d.Action {
//		case rounds.Run:     // start d.Job on d.Type / d.Slots
//		case rounds.Keep:    // lease extended: nothing to do
//		case rounds.Preempt: // stop it on d.FromSlots; if d.Type != "" restart on d.Slots
//		case rounds.Wait:    // nothing; d.Reason.String() says why
//		}
//	}
//	// after the round ran:
//	m.Record([]rounds.Usage{{Key: "7", Type: "v100", Seconds: 360}})
//
// plan.Assignments (one per job or pair that runs, with its slots and
// whether the lease was extended) is what runs next round; pass it back as
// running to the next Plan. Entries of jobs removed in between are ignored;
// GPUs that left the cluster (SetCluster) cannot be kept, so their job
// restarts wherever it is selected. A GPU held twice is an error.
// A simulator can alternate two Plan values with PlanInto to avoid
// allocating per round.
//
// # Selection and placement
//
// Candidates (combination, type) are sorted by priority, then deficit, then
// allocation, then type order and arrival. By default types are filled one
// after another in Options.TypeOrder (shuffled every round when
// Options.Shuffle is set, as the reference does for heterogeneity-agnostic
// policies); Options.GlobalOrder walks one order across all types. A
// candidate is skipped when one of its jobs is already scheduled this round
// (a pair conflicts with its members), when its throughput on the type is 0,
// when its priority is 0 and Options.SkipZeroPriority is set (FIFO), or when
// fewer than its scale factor GPUs of the type are left; smaller jobs
// further down may fill the gap.
//
// Selected combinations that ran on the same type keep their GPUs (lease
// extension, no restart). The others are placed from the largest scale
// factor down, each on the fullest server that has room for all of it, or
// else across the servers with the most free GPUs, so every job spans as
// few servers as possible.
//
// # Limits
//
// SetLimits installs a site's accounting caps as limits (a QOS's GPUs or
// running jobs per user, an association's group caps, ...), each with
// what jobs outside the mechanism's view already hold; jobs name the
// limits they count in (Job.Limits, SetJobLimits). A limit counts the
// pinned and PinOutside combinations first, over its caps or not, then
// every candidate the walk takes; a candidate that would take any of its
// members' limits over a cap is refused and the walk goes on, so the GPUs
// go to the next candidates rather than to a job Slurm would leave
// pending. A pair counts each member as holding the pair's whole scale
// factor. A job refused that way waits with ReasonLimit, which names the
// limit; one that merely lost on priority keeps its usual reason.
//
// # Resets
//
// AddJob, RemoveJob and SetCluster note events; NoteEvent adds others.
// NeedsReset(now) is true when an event is pending and MinResetInterval has
// passed since the last reset (or none happened), or always with
// ResetEveryRound. The caller then computes a new allocation and passes it
// to SetAllocation, which performs the reset.
//
// With Options.ReallocateOnEvents, NeedsReset is true on every pending
// event, and SetAllocation resets the time received only once
// MinResetInterval has passed; sooner, it replaces the fractions, keeps
// the time received and keeps what the replaced allocation owed
// (share × time in force) for the next fold into the deficits.
//
// # Variants
//
// VariantGavel is the reference mechanism (DefaultOptions, ForTraits).
// VariantImproved (Variant.Apply) sets ReallocateOnEvents, GlobalOrder and
// UpgradeIdle (after the walk, a selected job moves to a faster type whose
// GPUs nobody was selected for) and clears HoldUnallocated: a job is given
// its share at the round after it arrives and runs where its allocation
// puts it, instead of on the first type of the walk.
//
// VariantRestart is VariantImproved that weighs every preemption and move
// against the job's restart cost (Job.RestartCost, SetRestartCost,
// SetRemainingSteps, Options.RestartHold; restart.go): a job keeps its
// GPUs until its last restart is paid for, a job near its end finishes,
// and a move to faster GPUs must save more than it costs. With every
// cost 0 its plans are VariantImproved's.
//
// # Restarts
//
// Save returns the state above keyed by job/pair key and type name (JSON
// friendly); after a restart, rebuild the mechanism with the same cluster
// and jobs and call Load, which notes reset events for whatever changed
// meanwhile (jobs that arrived or finished, types that appeared).
//
// # Room to grow
//
// Job.Class (trial-and-error, best-effort) is stored but not yet acted on;
// ReasonCode is open-ended, so class-aware preemption and task-level
// placement can add their own reasons without changing Decision.
package rounds
