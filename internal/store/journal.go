package store

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
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
		return putEntry(tx, e)
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
		e, err := decodeEntry(seqKey(seq), data)
		if err != nil {
			return err
		}
		change(&e)
		return putEntry(tx, e)
	})
	if err != nil {
		return fmt.Errorf("journal entry %d: %w", seq, err)
	}
	return nil
}

// putEntry writes e to the journal and keeps the pending index in step.
func putEntry(tx *bolt.Tx, e Entry) error {
	data, err := json.Marshal(e)
	if err != nil {
		return err
	}
	k := seqKey(e.Seq)
	if err := tx.Bucket(bucketJournal).Put(k, data); err != nil {
		return err
	}
	if e.State == Pending {
		return tx.Bucket(bucketPending).Put(k, nil)
	}
	return tx.Bucket(bucketPending).Delete(k)
}

// indexPending rebuilds the pending index from the whole journal, once
// at open: a state file of an older version has none, and one the disk
// damaged may disagree with its journal. Corrupt entries are indexed
// too: they may have been pending, and Pending reports them.
func indexPending(tx *bolt.Tx) error {
	if tx.Bucket(bucketPending) != nil {
		if err := tx.DeleteBucket(bucketPending); err != nil {
			return fmt.Errorf("drop bucket %s: %w", bucketPending, err)
		}
	}
	idx, err := tx.CreateBucket(bucketPending)
	if err != nil {
		return fmt.Errorf("create bucket %s: %w", bucketPending, err)
	}
	return tx.Bucket(bucketJournal).ForEach(func(k, v []byte) error {
		if e, err := decodeEntry(k, v); err == nil && e.State != Pending {
			return nil
		}
		return idx.Put(append([]byte(nil), k...), nil)
	})
}

// CorruptEntry is a journal record that cannot be read back: its key is
// not a sequence number, its value does not decode, or the value
// disagrees with its key. Reads skip such records and report them, so that
// one damaged record does not keep the daemon from starting.
type CorruptEntry struct {
	// Seq is the sequence number in the record's key; 0 when the key
	// itself is malformed.
	Seq uint64
	// Key is the record's key as stored.
	Key []byte
	// Err says what is wrong with it.
	Err error
}

func (c CorruptEntry) String() string {
	if len(c.Key) != 8 {
		return fmt.Sprintf("journal record with key %x: %v", c.Key, c.Err)
	}
	return fmt.Sprintf("journal entry %d: %v", c.Seq, c.Err)
}

// decodeEntry reads one journal record, checking it against its key.
func decodeEntry(k, v []byte) (Entry, error) {
	if len(k) != 8 {
		return Entry{}, errors.New("key is not a sequence number")
	}
	var e Entry
	if err := json.Unmarshal(v, &e); err != nil {
		return Entry{}, fmt.Errorf("corrupt: %w", err)
	}
	if seq := binary.BigEndian.Uint64(k); e.Seq != seq {
		return Entry{}, fmt.Errorf("corrupt: the entry names itself %d", e.Seq)
	}
	switch e.State {
	case Pending, Done, Failed:
		return e, nil
	}
	return Entry{}, fmt.Errorf("corrupt: unknown state %q", e.State)
}

func corruptEntry(k []byte, err error) CorruptEntry {
	c := CorruptEntry{Key: append([]byte(nil), k...), Err: err}
	if len(k) == 8 {
		c.Seq = binary.BigEndian.Uint64(k)
	}
	return c
}

// Pending returns the actions whose outcome is unknown, oldest first, and
// the corrupt entries it skipped, for the caller to log. A corrupt entry
// may have been pending: its action can no longer be reconciled. It reads
// the pending index, not the whole journal, so a read costs what is
// pending: an entry damaged while the store is open is reported from the
// next open on (Recent and PruneJournalChecked read every entry).
func (s *Store) Pending() ([]Entry, []CorruptEntry, error) {
	var out []Entry
	var corrupt []CorruptEntry
	err := s.db.View(func(tx *bolt.Tx) error {
		journal := tx.Bucket(bucketJournal)
		return tx.Bucket(bucketPending).ForEach(func(k, _ []byte) error {
			v := journal.Get(k)
			if v == nil {
				return nil // pruned as corrupt meanwhile
			}
			e, err := decodeEntry(k, v)
			switch {
			case err != nil:
				corrupt = append(corrupt, corruptEntry(k, err))
			case e.State == Pending:
				out = append(out, e)
			}
			return nil
		})
	})
	if err != nil {
		return nil, nil, fmt.Errorf("read journal: %w", err)
	}
	return out, corrupt, nil
}

// Recent returns the last n entries, oldest first (all when n <= 0), and
// the corrupt entries it met, in key order (those newer than the oldest of
// the n entries returned, all of them when n <= 0), for the caller to log.
// Corrupt entries do not count towards n.
func (s *Store) Recent(n int) ([]Entry, []CorruptEntry, error) {
	var out []Entry
	var corrupt []CorruptEntry
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketJournal).Cursor()
		for k, v := c.Last(); k != nil && (n <= 0 || len(out) < n); k, v = c.Prev() {
			e, err := decodeEntry(k, v)
			if err != nil {
				corrupt = append(corrupt, corruptEntry(k, err))
				continue
			}
			out = append(out, e)
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("read journal: %w", err)
	}
	sortBySeq(out)
	slices.Reverse(corrupt) // read newest first
	return out, corrupt, nil
}

// PruneJournal deletes finished (done or failed) entries last updated
// before cutoff, and corrupt entries known to be older than cutoff (see
// PruneJournalChecked), and returns how many it removed. Pending entries
// are kept whatever their age: they still need reconciling.
func (s *Store) PruneJournal(cutoff time.Time) (int, error) {
	p, err := s.PruneJournalChecked(cutoff)
	return p.Finished + len(p.CorruptRemoved), err
}

// Pruned is what PruneJournalChecked did.
type Pruned struct {
	// Finished counts the done or failed entries removed.
	Finished int
	// CorruptRemoved are the corrupt entries removed and CorruptKept
	// those whose age cannot be told yet.
	CorruptRemoved, CorruptKept []CorruptEntry
}

// PruneJournalChecked is PruneJournal that reports the corrupt entries.
// A corrupt entry has no readable time, but sequence numbers follow the
// order in which entries were created: one below the number of an entry
// created before cutoff is older than cutoff too, and is removed. Other
// corrupt entries (the newest ones, or a malformed key) are kept until
// that can be told, and reported.
func (s *Store) PruneJournalChecked(cutoff time.Time) (Pruned, error) {
	var p Pruned
	err := s.db.Update(func(tx *bolt.Tx) error {
		p = Pruned{}
		b := tx.Bucket(bucketJournal)
		var doomed [][]byte
		var corrupt []CorruptEntry
		var oldest uint64 // the highest seq of an entry created before cutoff
		err := b.ForEach(func(k, v []byte) error {
			e, err := decodeEntry(k, v)
			if err != nil {
				corrupt = append(corrupt, corruptEntry(k, err))
				return nil
			}
			if e.Created.Before(cutoff) {
				oldest = max(oldest, e.Seq)
			}
			if e.State != Pending && e.Updated.Before(cutoff) {
				doomed = append(doomed, append([]byte(nil), k...))
			}
			return nil
		})
		if err != nil {
			return err
		}
		p.Finished = len(doomed)
		for _, c := range corrupt {
			if len(c.Key) == 8 && c.Seq < oldest {
				p.CorruptRemoved = append(p.CorruptRemoved, c)
				doomed = append(doomed, c.Key)
			} else {
				p.CorruptKept = append(p.CorruptKept, c)
			}
		}
		for _, k := range doomed {
			if err := b.Delete(k); err != nil {
				return err
			}
			if err := tx.Bucket(bucketPending).Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return Pruned{}, fmt.Errorf("prune journal: %w", err)
	}
	return p, nil
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
			if err := putEntry(tx, entries[i]); err != nil {
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
// pending and a crash leaves them to reconciliation. A corrupt entry is
// left as it is, without holding back the other outcomes, and reported in
// the error once they are saved.
func (s *Store) Settle(outcomes []Outcome, now time.Time) error {
	var corrupt []string
	err := s.db.Update(func(tx *bolt.Tx) error {
		corrupt = corrupt[:0]
		b := tx.Bucket(bucketJournal)
		for _, o := range outcomes {
			k := seqKey(o.Seq)
			data := b.Get(k)
			if data == nil {
				continue
			}
			e, err := decodeEntry(k, data)
			if err != nil {
				corrupt = append(corrupt, corruptEntry(k, err).String())
				continue
			}
			e.State, e.Error, e.Updated = Done, "", now
			if o.Err != "" {
				e.State, e.Error = Failed, o.Err
			}
			if err := putEntry(tx, e); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("settle %d journal entries: %w", len(outcomes), err)
	}
	if len(corrupt) > 0 {
		return fmt.Errorf("settle %d journal entries: %d left unsettled: %s", len(outcomes), len(corrupt), strings.Join(corrupt, "; "))
	}
	return nil
}
