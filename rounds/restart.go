package rounds

import (
	"fmt"
	"math"
)

// The restart rule (Options.RestartHold) weighs every preemption and move
// against what the job pays to restart. The reference mechanism treats a
// restart as free and re-decides every GPU every round, so a job that
// shares GPUs over time restarts after almost every round it runs: with
// 6-minute rounds and a 3-minute restart, half of its GPU time goes to
// restarts. The rule keeps the priorities and the walk as they are and
// changes only what a running job may lose, with H = min(RestartHold × c,
// RestartHoldMax) for a job whose restart costs c:
//
//   - a job keeps its GPUs until it has run H since it last started
//     (PinRestartUnpaid): each restart then costs at most 1/RestartHold
//     of the run it starts, and no earlier preemption gains more than the
//     restart it wastes;
//   - a job whose remaining work on its GPUs takes at most
//     RestartFinish × H runs to its end (PinNearEnd): stopping it would
//     cost a restart to free GPUs that its end frees soon anyway;
//   - a running job moves to faster idle GPUs (Options.UpgradeIdle) only
//     when the time the move saves over the time ahead (its hold on the
//     new GPUs, or its remaining work there if shorter) exceeds c;
//   - a run on a type where the allocation gives the job nothing is not
//     held: it only fills GPUs nobody with a share wanted, and holding it
//     would keep the job on GPUs its allocation does not want for it;
//   - the time received is reset no sooner than restartResetSpan holds,
//     so the priorities remember the held runs (restartResetInterval).
//
// Everything else is the walk's: the GPUs that completions and ended holds
// free go to the candidates of highest priority, the jobs furthest behind
// their share. With c = 0, H = 0 and nothing changes.

const (
	// DefaultRestartHold is VariantRestart's RestartHold: a run lasts at
	// least 40 times its restart cost, so restarts cost at most 2.5% of
	// the time run. Shorter holds lost too much to restarts near
	// saturation, longer ones kept newcomers waiting (docs/evaluation.md,
	// "Restarts that cost").
	DefaultRestartHold = 40.0
	// DefaultRestartHoldRounds is VariantRestart's RestartHoldMin in
	// rounds: 72 minutes with 6-minute rounds. With 30 s restarts the hold
	// K × c alone is 20 minutes, and at 5.6 jobs/h on the single-GPU trace
	// those restarts cost 10-16% of average JCT; held at least 12 rounds
	// they cost 2-5% (docs/evaluation.md, "The shortest hold"). Restarts
	// of 108 s and more are held longer than that anyway.
	DefaultRestartHoldRounds = 12.0
	// DefaultRestartHoldMax is VariantRestart's RestartHoldMax (seconds):
	// no restart is held for longer than 4 hours.
	DefaultRestartHoldMax = 4 * 3600.0
	// DefaultRestartFinish is VariantRestart's RestartFinish: a job runs
	// to its end when that is at most two holds away.
	DefaultRestartFinish = 2.0
)

// restartResetSpan is how many of the longest hold in force the time
// received must span before a reset. The priority (allocation / share of
// the type's time received since the reset) remembers service only since
// the last reset; a job held for an hour right before a reset would be
// back at the credit after it, like the jobs that waited: those are then
// ranked by allocation alone, and near saturation a newcomer with a small
// share waits for days. Resetting no sooner than four holds keeps each held
// run in the priorities for most of the period it distorts.
const restartResetSpan = 4.0

// restartResetInterval is the least time between resets the restart rule
// needs: restartResetSpan × the longest hold of a job in the system (0
// when the rule is off or every restart is free).
func (m *Mechanism) restartResetInterval() float64 {
	if !(m.opts.RestartHold > 0) {
		return 0
	}
	longest := 0.0
	for _, c := range m.jobs {
		longest = max(longest, m.combos[c].restart)
	}
	return restartResetSpan * m.opts.restartHold(longest)
}

// checkRestartOptions refuses knobs that are negative or not finite.
func checkRestartOptions(o Options) error {
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	if !finite(o.RestartHold) || o.RestartHold < 0 {
		return fmt.Errorf("rounds: restart hold must be a finite multiple ≥ 0 of the restart cost, got %v", o.RestartHold)
	}
	if !finite(o.RestartHoldMin) || o.RestartHoldMin < 0 {
		return fmt.Errorf("rounds: shortest restart hold must be a finite number of seconds ≥ 0, got %v", o.RestartHoldMin)
	}
	if !finite(o.RestartHoldMax) || o.RestartHoldMax < 0 {
		return fmt.Errorf("rounds: restart hold cap must be a finite number of seconds ≥ 0, got %v", o.RestartHoldMax)
	}
	if !finite(o.RestartFinish) || o.RestartFinish < 0 {
		return fmt.Errorf("rounds: restart finish must be a finite multiple ≥ 0 of the hold, got %v", o.RestartFinish)
	}
	return nil
}

func checkRestartCost(id string, v float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return fmt.Errorf("rounds: job %s: restart cost %v, want a finite number of seconds ≥ 0", id, v)
	}
	return nil
}

// SetRestartCost replaces a job's restart cost (seconds), for a caller
// that measures it as the job runs. It takes effect at the next Plan.
func (m *Mechanism) SetRestartCost(id string, seconds float64) error {
	c, ok := m.index[id]
	if !ok || m.combos[c].isPair() {
		return fmt.Errorf("rounds: unknown job %q", id)
	}
	if err := checkRestartCost(id, seconds); err != nil {
		return err
	}
	m.combos[c].restart = seconds
	return nil
}

// SetRemainingSteps tells the mechanism how many steps a job still has to
// run, so that the restart rule lets a job near its end finish. 0 means
// unknown (the job is never taken to be near its end).
func (m *Mechanism) SetRemainingSteps(id string, steps float64) error {
	c, ok := m.index[id]
	if !ok || m.combos[c].isPair() {
		return fmt.Errorf("rounds: unknown job %q", id)
	}
	if math.IsNaN(steps) || math.IsInf(steps, 0) || steps < 0 {
		return fmt.Errorf("rounds: job %s: %v steps remaining, want a finite count ≥ 0", id, steps)
	}
	m.combos[c].remaining = steps
	return nil
}

// restartPin reports whether p is one of the restart rule's pins, which
// (unlike a caller's) still let a job move to faster idle GPUs when the
// move pays for itself.
func restartPin(p Pin) bool { return p == PinRestartUnpaid || p == PinNearEnd }

// restartHold is H for a restart cost: RestartHold × cost, at least
// RestartHoldMin, capped at RestartHoldMax; 0 when the rule is off or the
// restart free.
func (o *Options) restartHold(cost float64) float64 {
	h := o.RestartHold * cost
	if !(h > 0) {
		return 0
	}
	h = max(h, o.RestartHoldMin)
	if o.RestartHoldMax > 0 {
		h = min(h, o.RestartHoldMax)
	}
	return h
}

// finishWithin is how close to its end (seconds of remaining work) a job
// with hold H runs to its end: RestartFinish × H.
func (o *Options) finishWithin(hold float64) float64 {
	if o.RestartFinish > 0 {
		return o.RestartFinish * hold
	}
	return hold
}

// holdDecision is the restart rule for a running job with hold H that
// has run ranFor seconds since it started and has remaining seconds of
// work left where it runs (0: unknown): keep it while its restart is not
// paid for, or to its end when that is at most finish away. The end is
// the job's own estimate (its tag's steps less the steps it reported): a
// job that was near its end once it had paid for its restart has ended by
// hold + finish unless the estimate was wrong, so the pin lapses there
// whatever the tag says. A tag that understates the steps (steps=1, or a
// job past its total, which counts one step left), on a site where
// progress is never reported or not, keeps no GPU longer than
// (1 + RestartFinish) × H.
func holdDecision(hold, finish, ranFor, remaining float64) Pin {
	switch {
	case !(hold > 0):
		return NotPinned
	case ranFor < hold:
		return PinRestartUnpaid
	case remaining > 0 && remaining <= finish && ranFor < hold+finish:
		return PinNearEnd
	}
	return NotPinned
}

// moveGain is the time a job saves by running the time ahead at rate to
// instead of rate from: the same work takes ahead × to / from where it is.
func moveGain(ahead, from, to float64) float64 {
	if !(from > 0) || !(to > 0) {
		return 0
	}
	return ahead * (to/from - 1)
}

// restartCost of combination c: a job's own, a pair's dearer member's
// (stopping a pair restarts both; the dearer one sets how long a run
// must last to pay for it).
func (m *Mechanism) restartCost(c int32) float64 {
	cb := &m.combos[c]
	if !cb.isPair() {
		return cb.restart
	}
	return max(m.combos[cb.members[0]].restart, m.combos[cb.members[1]].restart)
}

// remainingTime is how long single job c still runs on type t (0:
// unknown, or c is a pair).
func (m *Mechanism) remainingTime(c int32, t int32) float64 {
	cb := &m.combos[c]
	if cb.isPair() || !(cb.remaining > 0) {
		return 0
	}
	v := m.speed[int(c)*len(m.types)+int(t)]
	if !(v > 0) {
		return 0
	}
	return cb.remaining / v
}

// holdRestarts pins, before the walk, every running combination that the
// restart rule keeps on its GPUs this round. Pins the caller set win.
func (m *Mechanism) holdRestarts(now float64, running []Assignment) {
	if !(m.opts.RestartHold > 0) {
		return
	}
	s := &m.scratch
	s.runType = grow(s.runType, len(m.combos))
	for c := range m.combos {
		s.runType[c] = -1
		r := s.prev[c]
		if r < 0 || s.gone[c] || !m.combos[c].alive {
			continue
		}
		a := &running[r]
		t := m.typeIndex(a.Type)
		s.runType[c] = t
		if t < 0 || s.pinned[c] != NotPinned {
			continue
		}
		if m.alloc[c*len(m.types)+int(t)] <= 0 {
			// A run where the allocation gives the job nothing only
			// fills GPUs nobody with a share wanted: the rule does not
			// keep the job there.
			continue
		}
		hold := m.opts.restartHold(m.restartCost(int32(c)))
		s.pinned[c] = holdDecision(hold, m.opts.finishWithin(hold), now-a.Since, m.remainingTime(int32(c), t))
	}
}

// moveWorthIt reports whether moving selected combination c from type
// from (where it was selected) to the faster type to pays for the
// restart. A combination that does not run on from restarts anyway and
// moves for free; one that does moves only when the time saved over the
// time ahead (its hold on the new GPUs, or its remaining work there if
// shorter) exceeds its restart cost.
func (m *Mechanism) moveWorthIt(c, from, to int32) bool {
	cost := m.restartCost(c)
	if !(m.opts.RestartHold > 0) || cost == 0 {
		return true
	}
	if m.scratch.runType[c] != from {
		return true
	}
	ahead := m.opts.restartHold(cost)
	if rem := m.remainingTime(c, to); rem > 0 {
		ahead = min(ahead, rem)
	}
	nt := len(m.types)
	return moveGain(ahead, m.speed[int(c)*nt+int(from)], m.speed[int(c)*nt+int(to)]) > cost
}
