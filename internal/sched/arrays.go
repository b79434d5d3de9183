package sched

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/rounds"
)

// Job arrays.
//
// Slurm keeps the tasks of an array that have not started in one record,
// the array's own (its id is the array's), with the request of one task;
// each task it starts gets a record of its own. Released whole, that
// record lets Slurm start every task that fits at once: one user's array
// took every GPU of a partition, and the rounds then preempted other
// users' jobs to make room for the rest of its tasks.
//
// An array therefore counts as its waiting tasks. Each waiting task is a
// job of its own to the policy and the rounds, a slot (slotKey; named
// "ARRAY_TASK" there, never a Slurm job id, so never confused with one),
// with the array record's request, tag and arrival. After a round
// the daemon counts the slots chosen and lets Slurm start that many:
// it sets the array's limit on tasks running at once (ArrayTaskThrottle)
// to the tasks the plan runs (those running that it keeps, its tasks on
// records of their own that it starts, and the chosen slots), then
// releases the array's record onto one GPU type at the run priority.
// Slurm starts tasks in order up to the limit, so the array never runs
// more tasks than the round gave it; a task that ends mid-round is
// replaced by the array's next one, within that count. A started task
// is an ordinary job under its own id (it takes over its slot's
// arrival), preempted and requeued like any other.
//
// Between rounds, a record the round held starts as many waiting tasks as
// freed GPUs fit, as held jobs do (refill.go), its limit raised by that
// many first. Slots chosen for another type than the one most of them
// got wait for a later round: one record takes one constraint. The
// user's own limit
// ("--array=0-7%2") bounds what the daemon sets, and is put back when
// the daemon stops managing the array (kept in the state meanwhile).

// maxArraySlots bounds the waiting tasks of one array the policy sees: a
// larger array counts as this many until some of them start. It is far
// beyond the GPUs of any managed partition, so the bound only keeps the
// daemon's work per round in proportion to the cluster.
const maxArraySlots = 1024

// arrayRunning counts each array's tasks that hold GPUs now.
func arrayRunning(snap *bridge.Snapshot) map[bridge.JobID]int {
	out := map[bridge.JobID]int{}
	for _, j := range snap.Jobs {
		if j.ArrayJobID != 0 && isRunning(j) {
			out[j.ArrayJobID]++
		}
	}
	return out
}

// syncArray brings a managed array's record and its slots up to date:
// whose hold keeps the record, and which of its waiting tasks the rounds
// schedule. seen collects the slots' keys.
func (c *Core) syncArray(j bridge.Job, head *jobState, running int, now time.Time, seen map[jobKey]bool) {
	key := keyOf(j.ID)
	if head != nil && !j.Held {
		head.heldByDaemon = false // whatever hold the daemon sent is gone
	}
	if head == nil && j.Held && j.Reason == "JobHeldAdmin" && c.set.AdoptAdminHolds && !c.adopted {
		head = c.track(key, now)
		head.heldByDaemon = true
	}
	if head == nil {
		head = c.track(key, now)
	}
	if j.LeaseHeld {
		head.heldByDaemon = true // the lease is the daemon's alone
	}
	head.arrayHead, head.tag, head.heldBy, head.slots = true, j.Tag, "", nil
	c.noteArray(j)
	if j.Held && !head.heldByDaemon {
		// Its user's or an admin's hold: no task of it competes (its
		// slots are forgotten) until it is released.
		head.heldBy = holdOwner(j)
		head.decision, head.reason = "", head.heldBy
		return
	}
	ids, total, _ := bridge.ArrayTaskIDs(j.ArrayTasks, maxArraySlots) // checked by the reader
	head.arrayWaiting, head.arrayRoom = total, len(ids)
	if u := c.arrayLimits[j.ArrayJobID]; u > 0 {
		// The user's own limit: no more of its tasks can run at once, so
		// no more compete.
		head.arrayRoom = min(len(ids), max(u-running, 0))
	}
	for _, t := range ids[:head.arrayRoom] {
		slot := slotKey(j.ArrayJobID, t)
		seen[slot] = true
		head.slots = append(head.slots, slot)
		js := c.jobs[slot]
		if js == nil {
			js = c.track(slot, head.firstSeen)
		}
		js.arrayOf = j.ID
		c.schedule(j, js, now)
		head.model = js.model
	}
}

// noteArray remembers the limit a managed array had when the daemon
// first saw it: its user's, bound to what the daemon sets and put back
// when the daemon stops managing the array.
func (c *Core) noteArray(j bridge.Job) {
	if j.ArrayJobID == 0 {
		return
	}
	if _, ok := c.arrayLimits[j.ArrayJobID]; !ok {
		if c.arrayLimits == nil {
			c.arrayLimits = map[bridge.JobID]int{}
		}
		c.arrayLimits[j.ArrayJobID] = j.ArrayLimit
	}
}

// noteArrayOwn writes each set-array-limit's array's own limit into the
// action, for the journal (Action.ArrayOwn).
func (c *Core) noteArrayOwn(actions []Action) {
	for i := range actions {
		if actions[i].Kind != bridge.ActSetArrayLimit {
			continue
		}
		if u, ok := c.arrayLimits[actions[i].Job]; ok {
			actions[i].ArrayOwn, actions[i].ArrayOwnSet = u, true
		}
	}
}

// forgetArrays puts back the user's limit of the arrays the daemon no
// longer manages (every record of them finished, left, or lost its tag);
// managed lists the arrays with a record the daemon manages this round.
func (c *Core) forgetArrays(snap *bridge.Snapshot, managed map[bridge.JobID]bool) {
	for _, a := range slices.Sorted(maps.Keys(c.arrayLimits)) {
		if managed[a] {
			continue
		}
		u := c.arrayLimits[a]
		delete(c.arrayLimits, a)
		j, ok := snap.Job(a)
		if !ok {
			j, ok = snap.ElsewhereJob(a) // moved out of the managed partitions
		}
		if ok && j.Active() && j.ArrayJobID == a && j.ArrayLimit != u {
			c.released = append(c.released, queuedRelease{blind: true, Action: Action{
				Action: bridge.Action{Kind: bridge.ActSetArrayLimit, Job: a, Tasks: u},
				Why:    "array limit put back to its user's: the array is no longer managed", Restarts: j.Restarts}})
		}
	}
}

// arrayTally is what a round's plan does with one array's tasks.
type arrayTally struct {
	// chosen are the slots the plan runs, by type, and order the types in
	// the order the plan chose them.
	chosen map[string]int
	order  []string
	// firstRun and firstWait are the reasons of the first slot chosen
	// and left waiting.
	firstRun, firstWait string
	// runs counts the array's tasks on records of their own that the
	// plan runs: running ones it keeps and waiting ones it starts.
	runs int
}

// tallySlot notes a slot's decision.
func (t *arrayTally) tallySlot(d *rounds.Decision) {
	if d.Action != rounds.Run {
		if t.firstWait == "" {
			t.firstWait = describe(d)
		}
		return
	}
	if t.chosen == nil {
		t.chosen = map[string]int{}
	}
	if t.chosen[d.Type] == 0 {
		t.order = append(t.order, d.Type)
	}
	t.chosen[d.Type]++
	if t.firstRun == "" {
		t.firstRun = describe(d)
	}
}

// arrayActions turns the plan's choice of each managed array's slots into
// actions on the array's record (see the top of this file), and keeps
// the limit of arrays whose tasks all have records of their own out of
// the way. tallies are the slots' decisions by array record.
func (c *Core) arrayActions(snap *bridge.Snapshot, plan []keyedDecision, tallies map[bridge.JobID]*arrayTally) []Action {
	decisions := make(map[jobKey]*rounds.Decision, len(plan))
	for _, d := range plan {
		decisions[d.key] = d.Decision
	}
	managed := map[bridge.JobID]bool{}
	records := map[bridge.JobID]bridge.Job{} // each array's own record, when it holds tasks
	for _, j := range snap.Jobs {
		if j.ArrayJobID == 0 || !j.Active() {
			continue
		}
		js := c.jobs[keyOf(j.ID)]
		if js != nil {
			managed[j.ArrayJobID] = true
		}
		t := tallies[j.ArrayJobID]
		if t == nil {
			t = &arrayTally{}
			tallies[j.ArrayJobID] = t
		}
		if j.HoldsArrayTasks() {
			if js != nil && js.arrayHead && js.heldBy == "" {
				records[j.ArrayJobID] = j
			}
			continue
		}
		d := decisions[keyOf(j.ID)]
		switch {
		case isRunning(j) && (d == nil || !d.Stops() || d.Starts()):
			// Slurm counts every running task against the limit, the
			// ones the rounds do not place (or the daemon does not
			// manage) included; one the round moves runs again once
			// requeued. Only those it stops free their place.
			t.runs++
		case j.State == bridge.JobPending && d != nil && d.Starts() && !c.teWaiting(j.ID):
			// Started by the round: chosen, or a requeued task it
			// restarts on a type (translate's placeRequeued).
			t.runs++
		}
	}
	var out []Action
	for _, a := range slices.Sorted(maps.Keys(tallies)) {
		t := tallies[a]
		u := c.arrayLimits[a]
		if !managed[a] {
			continue // Slurm's alone
		}
		m, waits := records[a]
		if !waits {
			// Every task has a record of its own: the daemon holds and
			// releases each, and a limit it set would only stop the ones
			// it starts. The user's own limit applies again.
			if j, ok := snap.Job(a); ok && j.Active() && j.ArrayJobID == a && !j.HoldsArrayTasks() && j.ArrayLimit != u {
				out = append(out, Action{Action: bridge.Action{Kind: bridge.ActSetArrayLimit, Job: a, Tasks: u},
					Why: "array limit back to its user's: every task has a record of its own", Restarts: j.Restarts})
			}
			continue
		}
		out = append(out, c.arrayRecordActions(m, t, u)...)
	}
	c.forgetArrays(snap, managed)
	return out
}

// arrayRecordActions are the actions on array record m for the round's
// tally t; u is its user's limit (0: none).
func (c *Core) arrayRecordActions(m bridge.Job, t *arrayTally, u int) []Action {
	head := c.jobs[keyOf(m.ID)]
	gpuType, k := "", 0
	for _, typ := range t.order { // the first type chosen wins ties
		if t.chosen[typ] > k {
			gpuType, k = typ, t.chosen[typ]
		}
	}
	limit := t.runs + k
	if u > 0 {
		limit = min(limit, u)
	}
	var out []Action
	add := func(a bridge.Action, why string) {
		a.Job = m.ID
		out = append(out, Action{Action: a, Why: why, Restarts: m.Restarts})
	}
	waiting := fmt.Sprintf("job array: %d tasks waiting", head.arrayWaiting)
	if head.arrayRoom < head.arrayWaiting {
		waiting += fmt.Sprintf(" (%d compete: %s)", head.arrayRoom, c.roomWhy(m, head))
	}
	if k == 0 {
		head.decision = rounds.Wait.String()
		head.reason = waiting + "; none chosen"
		if t.firstWait != "" {
			head.reason += ": " + t.firstWait
		}
		if !m.Held {
			add(bridge.Action{Kind: bridge.ActHold}, head.reason)
		}
		if m.ArrayLimit != 0 && m.ArrayLimit < limit {
			// Its tasks on records of their own that the round starts
			// must not be stopped by an older, lower limit.
			add(bridge.Action{Kind: bridge.ActSetArrayLimit, Tasks: limit}, head.reason)
		}
		return out
	}
	head.decision = rounds.Run.String()
	head.reason = fmt.Sprintf("%s; %d start on %s (%s); at most %d of its tasks run at once", waiting, k, gpuType, t.firstRun, limit)
	if others := t.chosen; len(others) > 1 {
		head.reason += fmt.Sprintf("; %d chosen for other types wait for a later round (its waiting tasks take one type at a time)",
			sumCounts(others)-k)
	}
	// The limit goes first: released without it, Slurm would start every
	// task that fits.
	if m.ArrayLimit != limit {
		add(bridge.Action{Kind: bridge.ActSetArrayLimit, Tasks: limit}, head.reason)
	}
	return append(out, c.runActions(m, gpuType, head.reason)...)
}

// roomWhy says why fewer of an array's waiting tasks compete than wait.
func (c *Core) roomWhy(m bridge.Job, head *jobState) string {
	if u := c.arrayLimits[m.ArrayJobID]; u > 0 && head.arrayRoom < min(head.arrayWaiting, maxArraySlots) {
		return fmt.Sprintf("its own limit %%%d", u)
	}
	return fmt.Sprintf("at most %d per array", maxArraySlots)
}

func sumCounts(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// startableTasks is how many tasks array record j may still start: its
// waiting tasks, within its limit.
func startableTasks(j bridge.Job, running map[bridge.JobID]int) int {
	_, n, err := bridge.ArrayTaskIDs(j.ArrayTasks, 0)
	if err != nil {
		return 0
	}
	if j.ArrayLimit > 0 {
		n = min(n, max(j.ArrayLimit-running[j.ArrayJobID], 0))
	}
	return n
}
