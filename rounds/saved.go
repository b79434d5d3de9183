package rounds

import "math"

// Saved is the part of a mechanism's state that a restarted scheduler needs
// to carry on where it stopped: per job or pair (by key) and GPU type (by
// name) the time received since the last reset, the deficit and the
// allocation, the per-type totals, and the reset clock. It is keyed by
// names rather than internal slots, so it can be stored as JSON and loaded
// into a mechanism rebuilt with the same jobs added in any order.
type Saved struct {
	LastReset float64 `json:"last_reset"`
	EverReset bool    `json:"ever_reset"`
	// AllocationSince is when the current allocation was installed, when
	// later than the last reset (Options.ReallocateOnEvents); 0 otherwise.
	AllocationSince float64 `json:"allocation_since,omitempty"`
	// Pending is whether a reset event was noted and not yet acted on.
	Pending bool `json:"pending"`
	// TypeTime is each type's total time received since the last reset.
	TypeTime map[string]float64    `json:"type_time"`
	Combos   map[string]SavedCombo `json:"combos"`
}

// SavedCombo is one job's or pair's state per GPU type name.
type SavedCombo struct {
	Received map[string]float64 `json:"received"`
	Deficit  map[string]float64 `json:"deficit,omitempty"`
	// Allocation is nil when the combination had no allocation row.
	Allocation map[string]float64 `json:"allocation,omitempty"`
	// Owed is the share × time of the allocations replaced since the last
	// reset (Options.ReallocateOnEvents).
	Owed map[string]float64 `json:"owed,omitempty"`
}

// Save returns the mechanism's state for Load.
func (m *Mechanism) Save() Saved {
	nt := len(m.types)
	s := Saved{LastReset: m.lastReset, EverReset: m.everReset, Pending: m.pending,
		TypeTime: make(map[string]float64, nt), Combos: make(map[string]SavedCombo, len(m.index))}
	if m.allocSince != m.lastReset {
		s.AllocationSince = m.allocSince
	}
	for t, name := range m.types {
		s.TypeTime[name] = m.typeTime[t]
	}
	for key, c := range m.index {
		cb := SavedCombo{Received: make(map[string]float64, nt), Deficit: make(map[string]float64, nt)}
		if m.combos[c].alloced {
			cb.Allocation = make(map[string]float64, nt)
		}
		for t, name := range m.types {
			i := int(c)*nt + t
			cb.Received[name] = m.received[i]
			if m.deficit[i] != 0 {
				cb.Deficit[name] = m.deficit[i]
			}
			if m.owed[i] != 0 {
				if cb.Owed == nil {
					cb.Owed = make(map[string]float64, nt)
				}
				cb.Owed[name] = m.owed[i]
			}
			if cb.Allocation != nil {
				cb.Allocation[name] = m.alloc[i]
			}
		}
		s.Combos[key] = cb
	}
	return s
}

// Load restores state saved by Save into a mechanism that already has its
// cluster and its jobs and pairs (added again after a restart). It is
// lenient, as a restart must be: saved combinations that are gone and
// types that left the cluster are dropped, combinations and types that are
// new keep their fresh state, and any such difference notes a reset event
// so that the next NeedsReset computes an allocation that covers them.
// Values that are not finite are ignored.
func (m *Mechanism) Load(s Saved) {
	nt := len(m.types)
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	gone, differs := false, false
	loaded := 0
	for key, cb := range s.Combos {
		c, ok := m.index[key]
		if !ok {
			gone = true // finished while the scheduler was down
			continue
		}
		loaded++
		m.combos[c].alloced = cb.Allocation != nil
		for t, name := range m.types {
			i := int(c)*nt + t
			if v, ok := cb.Received[name]; ok && finite(v) && v >= 0 {
				m.received[i] = v
			} else {
				differs = true
			}
			if v := cb.Deficit[name]; finite(v) {
				m.deficit[i] = v
			}
			m.owed[i] = 0
			if v := cb.Owed[name]; finite(v) && v >= 0 {
				m.owed[i] = v
			}
			m.alloc[i] = 0
			if v := cb.Allocation[name]; finite(v) {
				m.alloc[i] = min(max(v, 0), 1)
			}
		}
	}
	fresh := len(m.index) - loaded // arrived while the scheduler was down
	for t, name := range m.types {
		v, ok := s.TypeTime[name]
		if !ok || !finite(v) || v < 0 {
			differs = true
			continue
		}
		m.typeTime[t] = v + m.credit()*float64(fresh)
	}
	if finite(s.LastReset) {
		m.lastReset, m.everReset = s.LastReset, s.EverReset
		m.allocSince = s.LastReset
		if v := s.AllocationSince; finite(v) && v > s.LastReset {
			m.allocSince = v
		}
	}
	m.pending, m.events = s.Pending, 0
	if s.Pending {
		m.events |= 1 << EventOther
	}
	if fresh > 0 {
		m.NoteEvent(EventArrival)
	}
	if gone {
		m.NoteEvent(EventCompletion)
	}
	if differs {
		m.NoteEvent(EventClusterChange)
	}
}
