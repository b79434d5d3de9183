package store

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"
)

// MemJournal is a journal kept in memory, for the step simulator: the
// same calls as the store's journal, without a disk. It keeps only the
// entries whose outcome is not recorded yet, which is all reconciliation
// reads; done and failed entries are dropped at once.
// The daemon marks signals done from several senders at once, so it
// locks as the store's transactions do.
type MemJournal struct {
	mu      sync.Mutex
	seq     uint64
	pending map[uint64]Entry
}

// NewMemJournal returns an empty in-memory journal.
func NewMemJournal() *MemJournal { return &MemJournal{pending: map[uint64]Entry{}} }

// Intents records the actions as pending and returns their entries.
func (m *MemJournal) Intents(round uint64, specs []IntentSpec, now time.Time) ([]Entry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	entries := make([]Entry, len(specs))
	for i, sp := range specs {
		raw, err := json.Marshal(sp.Payload)
		if err != nil {
			return nil, fmt.Errorf("encode %s for job %s: %w", sp.Kind, sp.JobID, err)
		}
		m.seq++
		entries[i] = Entry{Seq: m.seq, Round: round, JobID: sp.JobID, Kind: sp.Kind, Payload: raw, State: Pending,
			Attempts: 1, Created: now, Updated: now}
		m.pending[m.seq] = entries[i]
	}
	return entries, nil
}

// Settle records the outcomes: the entries are no longer pending.
func (m *MemJournal) Settle(outcomes []Outcome, _ time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, o := range outcomes {
		delete(m.pending, o.Seq)
	}
	return nil
}

// MarkDone records that the action took effect.
func (m *MemJournal) MarkDone(seq uint64, _ time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.pending, seq)
	return nil
}

// MarkFailed records that the action failed.
func (m *MemJournal) MarkFailed(seq uint64, _ string, _ time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.pending, seq)
	return nil
}

// MarkResent counts another attempt of a pending action.
func (m *MemJournal) MarkResent(seq uint64, now time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.pending[seq]
	if !ok {
		return fmt.Errorf("journal entry %d: not pending", seq)
	}
	e.Attempts++
	e.Updated = now
	m.pending[seq] = e
	return nil
}

// Pending returns the pending entries, oldest first.
func (m *MemJournal) Pending() ([]Entry, []CorruptEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Entry, 0, len(m.pending))
	for _, e := range m.pending {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b Entry) int { return int(a.Seq) - int(b.Seq) })
	return out, nil, nil
}
