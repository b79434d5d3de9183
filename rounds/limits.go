package rounds

import (
	"fmt"
	"slices"
)

// Limits keep the round within a site's accounting caps (Slurm's
// MaxTRESPerUser, GrpTRES, MaxJobsPerUser, an association's GrpJobs, ...).
// Slurm would leave a job over such a cap pending however many GPUs are
// free, so a plan that selects it idles the GPUs it was given; refusing it
// in the walk gives them to the next candidates instead.
//
// Each round a limit starts at what outside jobs hold (UsedGPUs,
// UsedJobs) and counts every combination selected: pinned and PinOutside
// ones first, kept even over the cap (Slurm already lets them run), then
// each one the walk takes. The walk refuses a candidate that would take
// any of its members' limits over a cap and goes on down the list, where
// smaller jobs may still fit. A held selection (Options.HoldUnallocated)
// must fit but does not count: it does not run. Moves after the walk
// (UpgradeIdle) keep a job's scale factor, so they change no usage.

// limitStop is the limit that refused one of a job's candidates this
// round, and whether its job cap (rather than its GPU cap) did.
type limitStop struct {
	limit  int32 // index into Mechanism.limits; -1: none
	jobCap bool
}

// SetLimits replaces every limit. Jobs refer to limits by name, so a
// job's names (Job.Limits) may be set before or after their limits: a
// name no limit has constrains nothing. It takes effect at the next Plan.
// Limits are not part of Saved: a caller sets them every round from the
// accounting it reads.
func (m *Mechanism) SetLimits(limits []Limit) error {
	for i, l := range limits {
		switch {
		case l.Name == "":
			return fmt.Errorf("rounds: limit %d has no name", i)
		case l.GPUs < NoCap:
			return fmt.Errorf("rounds: limit %q: GPU cap %d, want NoCap (%d) or a count ≥ 0", l.Name, l.GPUs, NoCap)
		case l.Jobs < NoCap:
			return fmt.Errorf("rounds: limit %q: job cap %d, want NoCap (%d) or a count ≥ 0", l.Name, l.Jobs, NoCap)
		case l.UsedGPUs < 0:
			return fmt.Errorf("rounds: limit %q: %d GPUs used outside, want a count ≥ 0", l.Name, l.UsedGPUs)
		case l.UsedJobs < 0:
			return fmt.Errorf("rounds: limit %q: %d jobs running outside, want a count ≥ 0", l.Name, l.UsedJobs)
		}
	}
	// The index is rebuilt in place, so a caller that sets the same
	// limits every round allocates nothing; on a duplicate it is rebuilt
	// for the limits still in force.
	if dup, ok := m.indexLimits(limits); !ok {
		m.indexLimits(m.limits)
		return fmt.Errorf("rounds: limit %q listed twice", dup)
	}
	m.limits = append(m.limits[:0], limits...)
	for _, c := range m.jobs {
		m.resolveLimits(c)
	}
	return nil
}

// indexLimits maps the limits' names to their indexes; false, with the
// name, when a name is there twice.
func (m *Mechanism) indexLimits(limits []Limit) (dup string, ok bool) {
	if m.limitIndex == nil {
		m.limitIndex = make(map[string]int32, len(limits))
	}
	clear(m.limitIndex)
	for i, l := range limits {
		if _, seen := m.limitIndex[l.Name]; seen {
			return l.Name, false
		}
		m.limitIndex[l.Name] = int32(i)
	}
	return "", true
}

// SetJobLimits replaces the names of the limits a job counts in (its QOS
// or account changed). It takes effect at the next Plan.
func (m *Mechanism) SetJobLimits(id string, names []string) error {
	c, ok := m.index[id]
	if !ok || m.combos[c].isPair() {
		return fmt.Errorf("rounds: unknown job %q", id)
	}
	if err := checkLimitNames(id, names); err != nil {
		return err
	}
	m.jobLimitNames[c] = append(m.jobLimitNames[c][:0], names...)
	m.resolveLimits(c)
	return nil
}

func checkLimitNames(id string, names []string) error {
	for i, name := range names {
		if name == "" {
			return fmt.Errorf("rounds: job %s: limit name %d is empty", id, i)
		}
	}
	return nil
}

// resolveLimits turns single job c's limit names into the indexes of the
// limits in force, each once, reusing its buffer.
func (m *Mechanism) resolveLimits(c int32) {
	resolved := m.jobLimits[c][:0]
	for _, name := range m.jobLimitNames[c] {
		if l, ok := m.limitIndex[name]; ok && !slices.Contains(resolved, l) {
			resolved = append(resolved, l)
		}
	}
	m.jobLimits[c] = resolved
}

// startLimits sets each limit's usage for the round to what outside jobs
// hold.
func (m *Mechanism) startLimits() {
	s := &m.scratch
	s.limitGPUs = grow(s.limitGPUs, len(m.limits))
	s.limitJobs = grow(s.limitJobs, len(m.limits))
	for i := range m.limits {
		s.limitGPUs[i], s.limitJobs[i] = m.limits[i].UsedGPUs, m.limits[i].UsedJobs
	}
}

// countLimits adds selected combination c to the usage of its members'
// limits: each member as one job holding the combination's scale factor.
func (m *Mechanism) countLimits(c int32) {
	s := &m.scratch
	cb := &m.combos[c]
	for _, j := range cb.members {
		if j < 0 {
			continue
		}
		for _, l := range m.jobLimits[j] {
			s.limitGPUs[l] += cb.sf
			s.limitJobs[l]++
		}
	}
}

// fitsLimits reports whether selecting combination c keeps every limit
// its members count in within its caps. When it does not, the members
// that count in the limit it would take over are noted as stopped by it
// (the first such limit of the round per job), for their decisions.
func (m *Mechanism) fitsLimits(c int32) bool {
	s := &m.scratch
	cb := &m.combos[c]
	for k, j := range cb.members {
		if j < 0 {
			continue
		}
		other := cb.members[1-k]
		for _, l := range m.jobLimits[j] {
			// A limit both members of a pair count in takes both.
			shared := other >= 0 && slices.Contains(m.jobLimits[other], l)
			n := 1
			if shared {
				n = 2
			}
			lim := &m.limits[l]
			overGPUs := lim.GPUs != NoCap && s.limitGPUs[l]+n*cb.sf > lim.GPUs
			overJobs := lim.Jobs != NoCap && s.limitJobs[l]+n > lim.Jobs
			if !overGPUs && !overJobs {
				continue
			}
			stop := limitStop{limit: l, jobCap: !overGPUs}
			if s.stopped[j].limit < 0 {
				s.stopped[j] = stop
			}
			if shared && s.stopped[other].limit < 0 {
				s.stopped[other] = stop
			}
			return false
		}
	}
	return true
}

// limitReason is the wait reason of job slot j, which a limit stopped.
func (m *Mechanism) limitReason(j int32) Reason {
	s := &m.scratch
	st := s.stopped[j]
	lim := &m.limits[st.limit]
	r := Reason{Code: ReasonLimit, Limit: lim.Name, Needed: m.combos[j].sf,
		Held: s.limitGPUs[st.limit], Cap: lim.GPUs}
	if st.jobCap {
		r.JobCap = true
		r.Held, r.Cap = s.limitJobs[st.limit], lim.Jobs
	}
	return r
}
