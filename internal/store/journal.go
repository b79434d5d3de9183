package store

import (
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// State is where a journaled action stands.
type State string

const (
	// Pending: written before sending; the outcome is not known yet.
	// After a crash, pending entries are what must be reconciled.
	Pending State = "pending"
	// Done: Slurm accepted the action (or already showed its effect).
	Done State = "done"
	// Failed: Slurm refused it, or it was re-sent once and still did not
	// show; it is not sent again.
	Failed State = "failed"
)

// Entry is one Slurm action in the journal.
type Entry struct {
	Seq   uint64 `json:"seq"`
	Round uint64 `json:"round"`
	JobID string `json:"job_id"`
	// Kind names the action (hold, release, requeue, ...) and Payload is
	// its parameters as the daemon encoded them; the store does not
	// interpret either.
	Kind    string          `json:"kind"`
	Payload json.RawMessage `json:"payload,omitempty"`
	State   State           `json:"state"`
	// Attempts counts the times the action was handed to Slurm.
	Attempts int       `json:"attempts"`
	Error    string    `json:"error,omitempty"`
	Created  time.Time `json:"created"`
	Updated  time.Time `json:"updated"`
}

// Intent journals an action before it is sent, with Attempts=1 and state
// pending, and returns it with its sequence number. The write is durable
// (fsync'd by bbolt) when Intent returns, so a crash right after sending
// leaves a pending entry to reconcile.
func (s *Store) Intent(round uint64, jobID, kind string, payload any, now time.Time) (Entry, error) {
	raw, err := json.Marshal(payload)
	if err != nil {
		return Entry{}, fmt.Errorf("encode %s for job %s: %w", kind, jobID, err)
	}
	e := Entry{Round: round, JobID: jobID, Kind: kind, Payload: raw, State: Pending, Attempts: 1, Created: now, Updated: now}
	err = s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketJournal)
		seq, err := b.NextSequence()
		if err != nil {
			return err
		}
		e.Seq = seq
		return putEntry(b, e)
	})
	if err != nil {
		return Entry{}, fmt.Errorf("journal %s for job %s: %w", kind, jobID, err)
	}
	return e, nil
}

// MarkDone records that the action took effect.
func (s *Store) MarkDone(seq uint64, now time.Time) error {
	return s.update(seq, func(e *Entry) { e.State, e.Error, e.Updated = Done, "", now })
}

// MarkFailed records that the action failed and will not be retried.
func (s *Store) MarkFailed(seq uint64, reason string, now time.Time) error {
	return s.update(seq, func(e *Entry) { e.State, e.Error, e.Updated = Failed, reason, now })
}

// MarkResent counts one more attempt of a pending action, before it is
// sent again during reconciliation.
func (s *Store) MarkResent(seq uint64, now time.Time) error {
	return s.update(seq, func(e *Entry) { e.Attempts++; e.Updated = now })
}

func (s *Store) update(seq uint64, change func(*Entry)) error {
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketJournal)
		data := b.Get(seqKey(seq))
		if data == nil {
			return ErrNotFound
		}
		var e Entry
		if err := json.Unmarshal(data, &e); err != nil {
			return err
		}
		change(&e)
		return putEntry(b, e)
	})
	if err != nil {
		return fmt.Errorf("journal entry %d: %w", seq, err)
	}
	return nil
}

func putEntry(b *bolt.Bucket, e Entry) error {
	data, err := json.Marshal(e)
	if err != nil {
		return err
	}
	return b.Put(seqKey(e.Seq), data)
}

// Pending returns the actions whose outcome is unknown, oldest first.
func (s *Store) Pending() ([]Entry, error) {
	return s.entries(func(e Entry) bool { return e.State == Pending }, 0)
}

// Recent returns the last n entries, oldest first (all when n <= 0).
func (s *Store) Recent(n int) ([]Entry, error) {
	var out []Entry
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketJournal).Cursor()
		for k, v := c.Last(); k != nil && (n <= 0 || len(out) < n); k, v = c.Prev() {
			var e Entry
			if err := json.Unmarshal(v, &e); err != nil {
				return fmt.Errorf("decode entry %x: %w", k, err)
			}
			out = append(out, e)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read journal: %w", err)
	}
	sortBySeq(out)
	return out, nil
}

func (s *Store) entries(keep func(Entry) bool, limit int) ([]Entry, error) {
	var out []Entry
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketJournal).ForEach(func(k, v []byte) error {
			var e Entry
			if err := json.Unmarshal(v, &e); err != nil {
				return fmt.Errorf("decode entry %x: %w", k, err)
			}
			if keep(e) && (limit <= 0 || len(out) < limit) {
				out = append(out, e)
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("read journal: %w", err)
	}
	return out, nil
}

// PruneJournal deletes finished (done or failed) entries last updated
// before cutoff and returns how many it removed. Pending entries are kept
// whatever their age: they still need reconciling.
func (s *Store) PruneJournal(cutoff time.Time) (int, error) {
	removed := 0
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketJournal)
		var doomed [][]byte
		err := b.ForEach(func(k, v []byte) error {
			var e Entry
			if err := json.Unmarshal(v, &e); err != nil {
				return fmt.Errorf("decode entry %x: %w", k, err)
			}
			if e.State != Pending && e.Updated.Before(cutoff) {
				doomed = append(doomed, append([]byte(nil), k...))
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, k := range doomed {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		removed = len(doomed)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("prune journal: %w", err)
	}
	return removed, nil
}

// IntentSpec is one action for Intents to journal.
type IntentSpec struct {
	JobID   string
	Kind    string
	Payload any
}

// Intents journals a round's actions in one durable transaction, each as
// Intent would, and returns their entries in order. A round of a thousand
// actions then costs one disk sync instead of a thousand.
func (s *Store) Intents(round uint64, specs []IntentSpec, now time.Time) ([]Entry, error) {
	entries := make([]Entry, len(specs))
	for i, sp := range specs {
		raw, err := json.Marshal(sp.Payload)
		if err != nil {
			return nil, fmt.Errorf("encode %s for job %s: %w", sp.Kind, sp.JobID, err)
		}
		entries[i] = Entry{Round: round, JobID: sp.JobID, Kind: sp.Kind, Payload: raw, State: Pending, Attempts: 1, Created: now, Updated: now}
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketJournal)
		for i := range entries {
			seq, err := b.NextSequence()
			if err != nil {
				return err
			}
			entries[i].Seq = seq
			if err := putEntry(b, entries[i]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("journal %d actions of round %d: %w", len(specs), round, err)
	}
	return entries, nil
}

// Outcome is what became of one journaled action: done when Err is empty,
// failed with Err as the reason otherwise.
type Outcome struct {
	Seq uint64
	Err string
}

// Settle records many outcomes in one transaction. Entries it cannot find
// (pruned meanwhile) are skipped; until Settle returns, the entries stay
// pending and a crash leaves them to reconciliation.
func (s *Store) Settle(outcomes []Outcome, now time.Time) error {
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketJournal)
		for _, o := range outcomes {
			data := b.Get(seqKey(o.Seq))
			if data == nil {
				continue
			}
			var e Entry
			if err := json.Unmarshal(data, &e); err != nil {
				return fmt.Errorf("entry %d: %w", o.Seq, err)
			}
			e.State, e.Error, e.Updated = Done, "", now
			if o.Err != "" {
				e.State, e.Error = Failed, o.Err
			}
			if err := putEntry(b, e); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("settle %d journal entries: %w", len(outcomes), err)
	}
	return nil
}
