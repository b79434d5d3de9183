// Package store keeps the daemon's state on disk in one bbolt file, so a
// restart loses neither the service each job has received nor the Slurm
// actions that were decided but not yet confirmed.
//
// Three buckets:
//   - jobs: one record per managed job, as the daemon hands it over (the
//     scheduling step's sched.Record: time received per GPU type, the
//     last decision and its reason, the preemption in progress), kept as
//     JSON without being interpreted;
//   - journal: the action journal, keyed by a monotonic sequence number;
//   - meta: small named values (round counter, last allocation).
//
// Records are JSON so the file stays readable with bbolt's CLI and fields
// can be added without a migration. Times are passed in by the caller.
package store

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sort"
	"time"

	bolt "go.etcd.io/bbolt"
)

// FileName is the database's name inside the state directory.
const FileName = "state.db"

var (
	bucketJobs    = []byte("jobs")
	bucketJournal = []byte("journal")
	bucketMeta    = []byte("meta")
	// bucketPending indexes the journal entries whose outcome is unknown
	// (key: the entry's key, no value), so that the reads that look for
	// them at every round and look cost what is pending, not the whole
	// journal kept (24 hours of actions, hundreds of thousands at site
	// scale).
	bucketPending = []byte("journal-pending")
)

// ErrNotFound is returned for a journal entry or meta key that does not
// exist.
var ErrNotFound = errors.New("not found")

// Store is the open state database. It is safe for concurrent use: bbolt
// serializes writers and lets readers run beside them.
type Store struct {
	db *bolt.DB
}

// ErrLocked is returned when another process holds the database: a
// second daemon pointed at the same state directory, on this host or on
// another one sharing the directory.
var ErrLocked = errors.New("held by another process")

// lockTimeout is how long Open waits for another process's lock before
// giving up.
const lockTimeout = 3 * time.Second

// waitStep is how long each attempt of OpenWait waits for the lock before
// it looks at its context again. bbolt polls the lock every 50 ms inside
// an attempt, so a lock released mid-attempt is taken within that, not at
// the attempt's end.
const waitStep = time.Second

// Open opens (creating if needed) the database in dir. It fails with
// ErrLocked after a few seconds if another process holds the file, rather
// than waiting forever behind a second daemon.
func Open(dir string) (*Store, error) { return open(dir, lockTimeout) }

// OpenWait opens the database in dir, waiting as long as another process
// holds it: a standby daemon waits here until the active one stops or
// dies (the kernel drops a dead process's lock). It returns ctx's error
// when ctx ends first, and at once on any error but the lock.
func OpenWait(ctx context.Context, dir string) (*Store, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("wait for state in %s: %w", dir, err)
		}
		s, err := open(dir, waitStep)
		if errors.Is(err, ErrLocked) {
			continue
		}
		if err == nil && ctx.Err() != nil {
			// The lock came as the wait was called off: the caller
			// no longer wants the state, so the next daemon may have it.
			s.Close()
			return nil, fmt.Errorf("wait for state in %s: %w", dir, ctx.Err())
		}
		return s, err
	}
}

func open(dir string, timeout time.Duration) (*Store, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("create state dir: %w", err)
	}
	path := filepath.Join(dir, FileName)
	db, err := openReadable(path, timeout)
	if errors.Is(err, bolt.ErrTimeout) {
		return nil, fmt.Errorf("open state %s: %w", path, ErrLocked)
	}
	if err != nil {
		return nil, fmt.Errorf("open state %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketJobs, bucketJournal, bucketMeta} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return fmt.Errorf("create bucket %s: %w", b, err)
			}
		}
		return indexPending(tx)
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("init state %s: %w", path, err)
	}
	return &Store{db: db}, nil
}

// ErrDamaged is returned by Open when the state file cannot be read: cut
// short (a disk that filled, an interrupted copy) or overwritten.
var ErrDamaged = errors.New("state file damaged: move it aside (the daemon starts afresh without it) or restore a copy")

// openReadable opens the database and reads every page of it once, so that
// a damaged file is an error here rather than a crash later. bbolt reads
// its file through a memory map and takes damage for a bug: it panics, or
// faults on a page beyond the end of a file cut short, which kills the
// process unless the reading goroutine asked for faults as panics.
func openReadable(path string, timeout time.Duration) (db *bolt.DB, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			// The half-open database is left to the process's exit: its
			// own Close may fault on the same pages.
			db, err = nil, fmt.Errorf("%w (%v)", ErrDamaged, r)
		}
	}()
	db, err = bolt.Open(path, 0o600, &bolt.Options{Timeout: timeout})
	if err != nil {
		return nil, err
	}
	err = db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			return readAll(b)
		})
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("%w (%v)", ErrDamaged, err)
	}
	return db, nil
}

// readAll touches every key and value of b and its nested buckets.
func readAll(b *bolt.Bucket) error {
	return b.ForEach(func(k, v []byte) error {
		if v == nil {
			if nested := b.Bucket(k); nested != nil {
				return readAll(nested)
			}
		}
		return nil
	})
}

// Close closes the database file.
func (s *Store) Close() error { return s.db.Close() }

// Path is the database file's path.
func (s *Store) Path() string { return s.db.Path() }

// Job is one job's record as the daemon hands it over: the store keeps
// Value JSON-encoded under ID and does not interpret it, as it keeps the
// journal's payloads.
type Job struct {
	ID    string
	Value any
}

func putJobs(tx *bolt.Tx, jobs []Job) error {
	b := tx.Bucket(bucketJobs)
	for _, j := range jobs {
		if j.ID == "" {
			return errors.New("job record without a job id")
		}
		data, err := json.Marshal(j.Value)
		if err != nil {
			return fmt.Errorf("encode job %s: %w", j.ID, err)
		}
		if err := b.Put([]byte(j.ID), data); err != nil {
			return fmt.Errorf("write job %s: %w", j.ID, err)
		}
	}
	return nil
}

// SaveRound writes a round's state in one transaction: the job records
// (replacing earlier ones), the jobs to forget (unknown ids are ignored)
// and the meta values. One transaction means one fsync, and a crash
// leaves either the whole round saved or none of it.
func (s *Store) SaveRound(jobs []Job, forget []string, meta map[string]any) error {
	encoded := make(map[string][]byte, len(meta))
	for k, v := range meta {
		data, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("encode meta %s: %w", k, err)
		}
		encoded[k] = data
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		if err := putJobs(tx, jobs); err != nil {
			return err
		}
		if err := deleteJobs(tx, forget); err != nil {
			return err
		}
		for k, data := range encoded {
			if err := tx.Bucket(bucketMeta).Put([]byte(k), data); err != nil {
				return fmt.Errorf("write meta %s: %w", k, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("save round: %w", err)
	}
	return nil
}

func deleteJobs(tx *bolt.Tx, ids []string) error {
	b := tx.Bucket(bucketJobs)
	for _, id := range ids {
		if err := b.Delete([]byte(id)); err != nil {
			return fmt.Errorf("delete job %s: %w", id, err)
		}
	}
	return nil
}

// Jobs returns every job record as it was saved, keyed by job id, and says
// which could not be read: one damaged record (a torn value) loses that
// job's history, not every job's. The caller decodes the records and
// treats one that does not decode the same way.
func (s *Store) Jobs() (map[string]json.RawMessage, []CorruptJob, error) {
	out := map[string]json.RawMessage{}
	var corrupt []CorruptJob
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketJobs).ForEach(func(k, v []byte) error {
			if !json.Valid(v) {
				corrupt = append(corrupt, CorruptJob{JobID: string(k), Err: errors.New("not a JSON value")})
				return nil
			}
			out[string(k)] = json.RawMessage(slices.Clone(v)) // v is valid only inside the transaction
			return nil
		})
	})
	if err != nil {
		return nil, nil, fmt.Errorf("read jobs: %w", err)
	}
	return out, corrupt, nil
}

// CorruptJob is a job record that could not be decoded.
type CorruptJob struct {
	JobID string
	Err   error
}

func (c CorruptJob) String() string { return fmt.Sprintf("job %q: %v", c.JobID, c.Err) }

// PutMeta stores v (JSON-encoded) under key.
func (s *Store) PutMeta(key string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode meta %s: %w", key, err)
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put([]byte(key), data)
	})
	if err != nil {
		return fmt.Errorf("write meta %s: %w", key, err)
	}
	return nil
}

// GetMeta decodes the value under key into v; ErrNotFound when absent.
func (s *Store) GetMeta(key string, v any) error {
	var data []byte
	err := s.db.View(func(tx *bolt.Tx) error {
		if d := tx.Bucket(bucketMeta).Get([]byte(key)); d != nil {
			data = append([]byte(nil), d...)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read meta %s: %w", key, err)
	}
	if data == nil {
		return fmt.Errorf("meta %s: %w", key, ErrNotFound)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("decode meta %s: %w", key, err)
	}
	return nil
}

func seqKey(seq uint64) []byte {
	k := make([]byte, 8)
	binary.BigEndian.PutUint64(k, seq)
	return k
}

// sortBySeq orders entries oldest first.
func sortBySeq(es []Entry) {
	sort.Slice(es, func(i, j int) bool { return es[i].Seq < es[j].Seq })
}

// Backup writes a consistent copy of the whole database to path, as it
// stands between two writes.
func (s *Store) Backup(path string) error {
	return s.db.View(func(tx *bolt.Tx) error { return tx.CopyFile(path, 0o600) })
}
