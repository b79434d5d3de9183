// Package store keeps the daemon's state on disk in one bbolt file, so a
// restart loses neither the service each job has received nor the Slurm
// actions that were decided but not yet confirmed.
//
// Three buckets:
//   - jobs: one JobRecord per managed job (time received per GPU type,
//     steps, throughput estimates, the last decision and its reason);
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
		return nil
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

// Estimate is one throughput value with where it came from (a collector
// measurement, the reference table, a default), so status can say how much
// to trust it.
type Estimate struct {
	StepsPerSecond float64 `json:"steps_per_second"`
	Source         string  `json:"source"`
}

// JobRecord is what the daemon remembers about one managed job between
// rounds and across restarts.
type JobRecord struct {
	JobID string `json:"job_id"`
	// FirstSeen is when the daemon first saw the job (its arrival for
	// the policies).
	FirstSeen time.Time `json:"first_seen"`
	// Received is the seconds of service the job has had on each GPU
	// type since it arrived.
	Received map[string]float64 `json:"received,omitempty"`
	// Steps is the number of training steps done, when known.
	Steps float64 `json:"steps,omitempty"`
	// Estimates is the job's throughput per GPU type.
	Estimates map[string]Estimate `json:"estimates,omitempty"`
	// LastDecision is the round mechanism's last decision for the job
	// (run, extend, wait, preempt, ...) and Reason says why.
	LastDecision string `json:"last_decision,omitempty"`
	Reason       string `json:"reason,omitempty"`
	// GraceStart is when the preemption signal was sent to the running
	// job (zero when it is not being preempted) and GraceTarget the type
	// it restarts on; kept so a restart neither repeats the signal nor
	// forgets the requeue.
	GraceStart  time.Time `json:"grace_start,omitzero"`
	GraceTarget string    `json:"grace_target,omitempty"`
	// GracePhase is where the preemption stands ("grace": signalled,
	// "requeued": the requeue went out) and GraceRestarts Slurm's restart
	// count when it started, which tells a landed requeue.
	GracePhase    string `json:"grace_phase,omitempty"`
	GraceRestarts int    `json:"grace_restarts,omitempty"`
	// GraceForTE is the trial-and-error job the preemption makes room
	// for, if any: after a restart the room stays claimed for it.
	GraceForTE string `json:"grace_for_te,omitempty"`
	// Preempt is the job's preemption mode from its tag, if any.
	Preempt string `json:"preempt,omitempty"`
	// HeldByDaemon is set while the job's hold is one the daemon sent;
	// other holds are the user's and are left alone.
	HeldByDaemon bool      `json:"held_by_daemon,omitempty"`
	UpdatedAt    time.Time `json:"updated_at"`
}

// PutJobs writes the records in one transaction, replacing earlier ones.
func (s *Store) PutJobs(records []JobRecord) error {
	if err := s.db.Update(func(tx *bolt.Tx) error { return putJobs(tx, records) }); err != nil {
		return fmt.Errorf("store jobs: %w", err)
	}
	return nil
}

func putJobs(tx *bolt.Tx, records []JobRecord) error {
	b := tx.Bucket(bucketJobs)
	for _, r := range records {
		if r.JobID == "" {
			return errors.New("job record without a job id")
		}
		data, err := json.Marshal(r)
		if err != nil {
			return fmt.Errorf("encode job %s: %w", r.JobID, err)
		}
		if err := b.Put([]byte(r.JobID), data); err != nil {
			return fmt.Errorf("write job %s: %w", r.JobID, err)
		}
	}
	return nil
}

// SaveRound writes a round's state in one transaction: the job records,
// the jobs to forget and the meta values. One transaction means one
// fsync, and a crash leaves either the whole round saved or none of it.
func (s *Store) SaveRound(records []JobRecord, forget []string, meta map[string]any) error {
	encoded := make(map[string][]byte, len(meta))
	for k, v := range meta {
		data, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("encode meta %s: %w", k, err)
		}
		encoded[k] = data
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		if err := putJobs(tx, records); err != nil {
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

// DeleteJobs forgets finished jobs. Unknown ids are ignored.
func (s *Store) DeleteJobs(ids []string) error {
	if err := s.db.Update(func(tx *bolt.Tx) error { return deleteJobs(tx, ids) }); err != nil {
		return fmt.Errorf("store: %w", err)
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

// Job returns one record; ok is false when the job is unknown.
func (s *Store) Job(id string) (rec JobRecord, ok bool, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		data := tx.Bucket(bucketJobs).Get([]byte(id))
		if data == nil {
			return nil
		}
		ok = true
		return json.Unmarshal(data, &rec)
	})
	if err != nil {
		return JobRecord{}, false, fmt.Errorf("read job %s: %w", id, err)
	}
	return rec, ok, nil
}

// Jobs returns every readable record, keyed by job id.
func (s *Store) Jobs() (map[string]JobRecord, error) {
	out, _, err := s.JobsChecked()
	return out, err
}

// JobsChecked returns every readable record, keyed by job id, and says
// which could not be read: one damaged record (a torn value, another
// build's layout) loses that job's history, not every job's.
func (s *Store) JobsChecked() (map[string]JobRecord, []CorruptJob, error) {
	out := map[string]JobRecord{}
	var corrupt []CorruptJob
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketJobs).ForEach(func(k, v []byte) error {
			var r JobRecord
			if err := json.Unmarshal(v, &r); err != nil {
				corrupt = append(corrupt, CorruptJob{JobID: string(k), Err: err})
				return nil
			}
			out[string(k)] = r
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
