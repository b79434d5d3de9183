package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func openTemp(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(dir)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

// testRecord stands for the daemon's job record, which the store keeps
// without interpreting it.
type testRecord struct {
	JobID        string             `json:"job_id"`
	FirstSeen    time.Time          `json:"first_seen"`
	Received     map[string]float64 `json:"received,omitempty"`
	LastDecision string             `json:"last_decision,omitempty"`
	UpdatedAt    time.Time          `json:"updated_at"`
}

// jobsOf saves recs as one round's records.
func jobsOf(recs ...testRecord) []Job {
	out := make([]Job, len(recs))
	for i, r := range recs {
		out[i] = Job{ID: r.JobID, Value: r}
	}
	return out
}

// readJobs reads and decodes every record.
func readJobs(t *testing.T, s *Store) map[string]testRecord {
	t.Helper()
	raw, corrupt, err := s.Jobs()
	if err != nil || len(corrupt) > 0 {
		t.Fatalf("Jobs: %v, corrupt %v", err, corrupt)
	}
	out := map[string]testRecord{}
	for id, data := range raw {
		var r testRecord
		if err := json.Unmarshal(data, &r); err != nil {
			t.Fatalf("record %s: %v", id, err)
		}
		out[id] = r
	}
	return out
}

func TestJobsSurviveReopen(t *testing.T) {
	dir := t.TempDir()
	s := openTemp(t, dir)
	recs := []testRecord{
		{JobID: "17", FirstSeen: t0, Received: map[string]float64{"v100": 360, "k80": 720},
			LastDecision: "run", UpdatedAt: t0.Add(time.Hour)},
		{JobID: "18", FirstSeen: t0.Add(time.Minute), UpdatedAt: t0},
	}
	if err := s.SaveRound(jobsOf(recs...), nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openTemp(t, dir)
	defer s.Close()
	got := readJobs(t, s)
	want := map[string]testRecord{"17": recs[0], "18": recs[1]}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Jobs after reopen:\n got %+v\nwant %+v", got, want)
	}
	if err := s.SaveRound(nil, []string{"17", "unknown"}, nil); err != nil {
		t.Fatal(err)
	}
	got = readJobs(t, s)
	if _, ok := got["17"]; ok || got["18"].JobID != "18" {
		t.Errorf("after forgetting 17: %+v", got)
	}
}

func TestSaveRoundRejectsEmptyID(t *testing.T) {
	s := openTemp(t, t.TempDir())
	defer s.Close()
	if err := s.SaveRound([]Job{{ID: "1", Value: testRecord{JobID: "1"}}, {Value: testRecord{}}}, nil, nil); err == nil {
		t.Fatal("a record without id was accepted")
	}
	// The transaction is all or nothing: job 1 must not have been written.
	if got := readJobs(t, s); len(got) != 0 {
		t.Errorf("partial write of a failed batch: %+v", got)
	}
}

func TestMeta(t *testing.T) {
	s := openTemp(t, t.TempDir())
	defer s.Close()
	var round uint64
	if err := s.GetMeta("round", &round); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing key: err = %v, want ErrNotFound", err)
	}
	if err := s.PutMeta("round", uint64(41)); err != nil {
		t.Fatal(err)
	}
	if err := s.GetMeta("round", &round); err != nil || round != 41 {
		t.Errorf("round = %d, err %v", round, err)
	}
}

func TestJournalLifecycle(t *testing.T) {
	s := openTemp(t, t.TempDir())
	defer s.Close()
	type hold struct {
		Hold bool `json:"hold"`
	}
	a, err := s.Intent(1, "17", "hold", hold{true}, t0)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := s.Intent(1, "18", "release", nil, t0)
	c, _ := s.Intent(2, "19", "requeue", nil, t0.Add(time.Minute))
	if !(a.Seq < b.Seq && b.Seq < c.Seq) {
		t.Fatalf("sequence numbers not increasing: %d %d %d", a.Seq, b.Seq, c.Seq)
	}
	if string(a.Payload) != `{"hold":true}` || a.State != Pending || a.Attempts != 1 {
		t.Errorf("intent = %+v", a)
	}
	if err := s.MarkDone(a.Seq, t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkFailed(b.Seq, "Job is no longer pending execution", t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkResent(c.Seq, t0.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkDone(999, t0); !errors.Is(err, ErrNotFound) {
		t.Errorf("MarkDone(unknown) = %v, want ErrNotFound", err)
	}

	pending, _, err := s.Pending()
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) != 1 || pending[0].Seq != c.Seq || pending[0].Attempts != 2 {
		t.Fatalf("pending = %+v, want only entry %d with 2 attempts", pending, c.Seq)
	}
	all, _, _ := s.Recent(0)
	states := []State{}
	for _, e := range all {
		states = append(states, e.State)
	}
	if !reflect.DeepEqual(states, []State{Done, Failed, Pending}) {
		t.Errorf("states = %v", states)
	}
	if all[1].Error == "" {
		t.Error("failure reason lost")
	}
	last, _, _ := s.Recent(2)
	if len(last) != 2 || last[0].Seq != b.Seq || last[1].Seq != c.Seq {
		t.Errorf("Recent(2) = %+v", last)
	}

	removed, err := s.PruneJournal(t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if removed != 2 {
		t.Errorf("pruned %d entries, want the 2 finished ones", removed)
	}
	if left, _, _ := s.Recent(0); len(left) != 1 || left[0].State != Pending {
		t.Errorf("after prune: %+v", left)
	}
	// Sequence numbers are never reused after a prune.
	d, _ := s.Intent(3, "20", "hold", nil, t0)
	if d.Seq <= c.Seq {
		t.Errorf("seq %d reused (last was %d)", d.Seq, c.Seq)
	}
}

// crashEnv tells the test binary, re-executed as a child, to act as a
// daemon that dies mid-round.
const crashEnv = "GAVEL_STORE_CRASH_DIR"

// TestCrashHelper is the child: it journals two actions, confirms the
// first, and exits abruptly (no Close, no deferred functions) as if
// killed between sending the second action and recording its outcome.
func TestCrashHelper(t *testing.T) {
	dir := os.Getenv(crashEnv)
	if dir == "" {
		t.Skip("only runs as the child of TestCrashLeavesPendingIntents")
	}
	s, err := Open(dir)
	if err != nil {
		os.Exit(2)
	}
	a, err1 := s.Intent(7, "101", "hold", nil, t0)
	_, err2 := s.Intent(7, "102", "requeue", nil, t0)
	if err1 != nil || err2 != nil || s.MarkDone(a.Seq, t0) != nil {
		os.Exit(2)
	}
	os.Exit(3)
}

func TestCrashLeavesPendingIntents(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashHelper$")
	cmd.Env = append(os.Environ(), crashEnv+"="+dir)
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("child did not crash as planned: %v", err)
	}

	s := openTemp(t, dir)
	defer s.Close()
	pending, _, err := s.Pending()
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) != 1 || pending[0].JobID != "102" || pending[0].Kind != "requeue" || pending[0].Round != 7 {
		t.Fatalf("pending after crash = %+v, want the requeue of job 102 only", pending)
	}
	all, _, _ := s.Recent(0)
	if len(all) != 2 || all[0].State != Done {
		t.Errorf("journal after crash = %+v", all)
	}
}

func TestOpenFailsWhileLocked(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the lock timeout")
	}
	dir := t.TempDir()
	s := openTemp(t, dir)
	defer s.Close()
	// bbolt's flock is per open file description, so a second Open in the
	// same process contends like a second daemon would.
	if _, err := Open(dir); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open of a locked state: err = %v, want ErrLocked", err)
	}
}

// A second daemon's OpenWait waits while the first holds the state and
// gets it, with the first one's data, once the first closes it.
func TestOpenWaitSucceedsWhenTheHolderCloses(t *testing.T) {
	dir := t.TempDir()
	first := openTemp(t, dir)
	if err := first.PutMeta("round", 41); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got := waitInBackground(ctx, dir)
	select {
	case r := <-got:
		t.Fatalf("OpenWait returned while the state was held: %v", r.err)
	case <-time.After(1500 * time.Millisecond):
		// Longer than one attempt (waitStep): it retries, not fails.
	}
	closed := time.Now()
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatalf("OpenWait after the holder closed: %v", r.err)
	}
	defer r.store.Close()
	if took := time.Since(closed); took > 500*time.Millisecond {
		t.Errorf("took the released lock after %v, want well under a wait step", took)
	}
	var round int
	if err := r.store.GetMeta("round", &round); err != nil || round != 41 {
		t.Errorf("round = %d (%v), want the first holder's 41", round, err)
	}
}

// lockHolderEnv tells the test binary, re-executed as a child, to hold
// the state until it is killed.
const lockHolderEnv = "GAVEL_STORE_HOLD_DIR"

// TestLockHolderHelper is the child: it opens the state, says so on
// stdout and sleeps until killed.
func TestLockHolderHelper(t *testing.T) {
	dir := os.Getenv(lockHolderEnv)
	if dir == "" {
		t.Skip("only runs as the child of TestOpenWaitSucceedsWhenTheHolderIsKilled")
	}
	if _, err := Open(dir); err != nil {
		os.Exit(2)
	}
	fmt.Println("holding")
	time.Sleep(time.Minute)
	os.Exit(3)
}

// A holder killed with SIGKILL never closes the database; the kernel drops
// its lock with the process and the waiting one takes the state.
func TestOpenWaitSucceedsWhenTheHolderIsKilled(t *testing.T) {
	dir := t.TempDir()
	child := exec.Command(os.Args[0], "-test.run=^TestLockHolderHelper$")
	child.Env = append(os.Environ(), lockHolderEnv+"="+dir)
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer child.Process.Kill() //nolint:errcheck // already dead when the test passes
	line := make([]byte, len("holding"))
	if _, err := io.ReadFull(out, line); err != nil || string(line) != "holding" {
		t.Fatalf("child did not take the lock: %q %v", line, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got := waitInBackground(ctx, dir)
	select {
	case r := <-got:
		t.Fatalf("OpenWait returned while the child held the state: %v", r.err)
	case <-time.After(500 * time.Millisecond):
	}
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	r := <-got
	if r.err != nil {
		t.Fatalf("OpenWait after the holder was killed: %v", r.err)
	}
	r.store.Close()
}

// OpenWait gives up when its context ends, and at once on an error that
// waiting cannot cure.
func TestOpenWaitGivesUp(t *testing.T) {
	held := t.TempDir()
	holder := openTemp(t, held)
	defer holder.Close()
	notADir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notADir, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		dir      string
		cancelIn time.Duration
		want     error
		within   time.Duration
	}{
		"context cancelled while held": {dir: held, cancelIn: 200 * time.Millisecond, want: context.Canceled, within: waitStep + time.Second},
		"state dir is a file":          {dir: notADir, cancelIn: time.Minute, within: 500 * time.Millisecond},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			time.AfterFunc(tc.cancelIn, cancel)
			start := time.Now()
			s, err := OpenWait(ctx, tc.dir)
			if err == nil {
				s.Close()
				t.Fatal("OpenWait succeeded")
			}
			if errors.Is(err, ErrLocked) {
				t.Errorf("err = %v: the lock is not the caller's problem", err)
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("err = %v, want %v", err, tc.want)
			}
			if took := time.Since(start); took > tc.within {
				t.Errorf("gave up after %v, want within %v", took, tc.within)
			}
		})
	}
	// The holder was never disturbed.
	if err := holder.PutMeta("still", true); err != nil {
		t.Errorf("holder after the waits: %v", err)
	}
}

type openResult struct {
	store *Store
	err   error
}

func waitInBackground(ctx context.Context, dir string) <-chan openResult {
	got := make(chan openResult, 1)
	go func() {
		s, err := OpenWait(ctx, dir)
		got <- openResult{s, err}
	}()
	return got
}

func TestBatchIntentsAndSettle(t *testing.T) {
	s := openTemp(t, t.TempDir())
	defer s.Close()
	entries, err := s.Intents(3, []IntentSpec{
		{JobID: "7", Kind: "release", Payload: map[string]int{"job": 7}},
		{JobID: "7", Kind: "set-priority", Payload: map[string]int{"job": 7}},
		{JobID: "9", Kind: "hold", Payload: map[string]int{"job": 9}},
	}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 3 || entries[0].Seq >= entries[1].Seq || entries[1].Seq >= entries[2].Seq {
		t.Fatalf("entries not in order: %+v", entries)
	}
	if pending, _, _ := s.Pending(); len(pending) != 3 {
		t.Fatalf("%d pending after Intents, want 3", len(pending))
	}
	err = s.Settle([]Outcome{{Seq: entries[0].Seq}, {Seq: entries[2].Seq, Err: "refused"}, {Seq: 999}}, t0.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	all, _, _ := s.Recent(0)
	want := []State{Done, Pending, Failed}
	for i, e := range all {
		if e.State != want[i] || e.Round != 3 || e.Attempts != 1 {
			t.Errorf("entry %d: %+v, want state %s", i, e, want[i])
		}
	}
	if all[2].Error != "refused" || !all[0].Updated.Equal(t0.Add(time.Second)) {
		t.Errorf("outcome details lost: %+v", all)
	}
}

func TestSaveRoundIsOneTransaction(t *testing.T) {
	dir := t.TempDir()
	s := openTemp(t, dir)
	if err := s.SaveRound(jobsOf(testRecord{JobID: "1", UpdatedAt: t0}, testRecord{JobID: "2", UpdatedAt: t0}), nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveRound(jobsOf(testRecord{JobID: "2", LastDecision: "run", UpdatedAt: t0}, testRecord{JobID: "3", UpdatedAt: t0}),
		[]string{"1"}, map[string]any{"round": 7}); err != nil {
		t.Fatal(err)
	}
	// A failure at the last write (bbolt refuses an empty key) undoes the
	// whole round: the records and the forget written before it do not
	// land either.
	if err := s.SaveRound(jobsOf(testRecord{JobID: "4", UpdatedAt: t0}), []string{"2"}, map[string]any{"": 8}); err == nil {
		t.Fatal("a meta value without a key was accepted")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTemp(t, dir)
	defer s.Close()
	jobs := readJobs(t, s)
	if len(jobs) != 2 || jobs["2"].LastDecision != "run" || jobs["3"].JobID != "3" {
		t.Errorf("jobs after SaveRound: %+v", jobs)
	}
	var round int
	if err := s.GetMeta("round", &round); err != nil || round != 7 {
		t.Errorf("round = %d, %v; want 7", round, err)
	}
}

// putRaw writes a journal record as it is, bypassing the encoding, as disk
// damage or an older bug might have left it. With seq 0 it takes the next
// sequence number.
func putRaw(t *testing.T, s *Store, key []byte, seq uint64, value string) uint64 {
	t.Helper()
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketJournal)
		if key == nil {
			if seq == 0 {
				var err error
				if seq, err = b.NextSequence(); err != nil {
					return err
				}
			}
			key = seqKey(seq)
		}
		return b.Put(key, []byte(value))
	})
	if err != nil {
		t.Fatal(err)
	}
	return seq
}

func seqsOf(cs []CorruptEntry) []uint64 {
	out := []uint64{}
	for _, c := range cs {
		out = append(out, c.Seq)
	}
	return out
}

// One damaged journal record must not keep the daemon from reading the
// rest: reads skip it and report it, and pruning removes it once it is
// known to be old.
func TestCorruptJournalEntriesAreSkippedAndReported(t *testing.T) {
	dir := t.TempDir()
	s := openTemp(t, dir)
	defer func() { s.Close() }()
	a, _ := s.Intent(1, "17", "hold", nil, t0)
	b, _ := s.Intent(1, "18", "hold", nil, t0)
	garbage := putRaw(t, s, nil, 0, `{"seq":`)
	wrongSeq := putRaw(t, s, nil, 0, `{"seq":1,"state":"pending"}`)
	badState := putRaw(t, s, nil, 0, `{"seq":5,"state":"lost"}`)
	if badState != 5 {
		t.Fatalf("test setup: seq %d, want 5", badState)
	}
	putRaw(t, s, []byte("odd-key"), 0, `{}`)
	d, _ := s.Intent(2, "19", "requeue", nil, t0.Add(2*time.Hour))
	wantCorrupt := []uint64{garbage, wrongSeq, badState}
	// Damage is found when the store opens: the pending index is built
	// from every record then.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTemp(t, dir)

	pending, corrupt, err := s.Pending()
	if err != nil {
		t.Fatalf("Pending: %v", err)
	}
	if len(pending) != 3 || pending[0].Seq != a.Seq || pending[1].Seq != b.Seq || pending[2].Seq != d.Seq {
		t.Errorf("pending = %+v, want entries %d, %d, %d", pending, a.Seq, b.Seq, d.Seq)
	}
	if got := seqsOf(corrupt); !reflect.DeepEqual(got, append(wantCorrupt, 0)) {
		t.Errorf("corrupt = %v, want %v and the malformed key", got, wantCorrupt)
	}
	if p, _, err := s.Pending(); err != nil || len(p) != 3 {
		t.Errorf("Pending = %d entries, %v; want 3, no error", len(p), err)
	}
	if all, _, err := s.Recent(0); err != nil || len(all) != 3 {
		t.Errorf("Recent(0) = %d entries, %v; want 3, no error", len(all), err)
	}
	last, corrupt, err := s.Recent(2)
	if err != nil || len(last) != 2 || last[0].Seq != b.Seq || last[1].Seq != d.Seq {
		t.Errorf("Recent(2) = %+v, %v; want entries %d and %d", last, err, b.Seq, d.Seq)
	}
	if got := seqsOf(corrupt); !reflect.DeepEqual(got, append(wantCorrupt, 0)) {
		t.Errorf("Recent(2) met corrupt %v, want %v and the malformed key", got, wantCorrupt)
	}
	for _, c := range corrupt {
		if c.String() == "" || c.Err == nil {
			t.Errorf("corrupt entry without a reason: %+v", c)
		}
	}

	if err := s.MarkDone(garbage, t0); err == nil {
		t.Error("MarkDone of a corrupt entry succeeded")
	}
	err = s.Settle([]Outcome{{Seq: a.Seq}, {Seq: garbage}, {Seq: b.Seq, Err: "refused"}}, t0.Add(time.Minute))
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("journal entry %d", garbage)) {
		t.Errorf("Settle = %v, want the corrupt entry reported", err)
	}
	if all, _, _ := s.Recent(0); all[0].State != Done || all[1].State != Failed {
		t.Errorf("outcomes beside a corrupt entry were not saved: %+v", all)
	}

	// At t0+1h the finished entries go; the corrupt ones were written
	// after the newest entry known to be that old, so they stay.
	p, err := s.PruneJournalChecked(t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if p.Finished != 2 || len(p.CorruptRemoved) != 0 || len(p.CorruptKept) != 4 {
		t.Errorf("first prune: %d finished, removed %v, kept %v", p.Finished, seqsOf(p.CorruptRemoved), seqsOf(p.CorruptKept))
	}
	// Once an entry written after them is older than the cutoff, they go
	// too; the malformed key has no place in the order and stays.
	removed, err := s.PruneJournal(t0.Add(3 * time.Hour))
	if err != nil || removed != 3 {
		t.Errorf("second prune removed %d, %v; want the 3 corrupt entries", removed, err)
	}
	if _, corrupt, _ := s.Pending(); !reflect.DeepEqual(seqsOf(corrupt), []uint64{0}) {
		t.Errorf("after pruning, corrupt = %v, want the malformed key only", seqsOf(corrupt))
	}
	if pending, _, _ := s.Pending(); len(pending) != 1 || pending[0].Seq != d.Seq {
		t.Errorf("after pruning, pending = %+v, want entry %d", pending, d.Seq)
	}
}

// The pending index follows the journal: what Intents and Intent write is
// pending, what Settle, MarkDone and MarkFailed settle is not, a resent
// entry stays pending, and an index dropped (a state file of an older
// version) is rebuilt from the journal at open.
func TestPendingIndexFollowsTheJournal(t *testing.T) {
	dir := t.TempDir()
	s := openTemp(t, dir)
	defer func() { s.Close() }()
	entries, err := s.Intents(1, []IntentSpec{{JobID: "1", Kind: "hold"}, {JobID: "2", Kind: "hold"}, {JobID: "3", Kind: "hold"}, {JobID: "4", Kind: "hold"}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	one, _ := s.Intent(2, "5", "release", nil, t0)
	if err := s.Settle([]Outcome{{Seq: entries[0].Seq}, {Seq: entries[1].Seq, Err: "refused"}}, t0); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkDone(one.Seq, t0); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkFailed(entries[2].Seq, "gone", t0); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkResent(entries[3].Seq, t0); err != nil {
		t.Fatal(err)
	}
	want := []uint64{entries[3].Seq}
	pendingSeqs := func() []uint64 {
		t.Helper()
		p, corrupt, err := s.Pending()
		if err != nil || len(corrupt) != 0 {
			t.Fatalf("Pending: %v, corrupt %v", err, corrupt)
		}
		var out []uint64
		for _, e := range p {
			out = append(out, e.Seq)
		}
		return out
	}
	if got := pendingSeqs(); !reflect.DeepEqual(got, want) {
		t.Errorf("pending %v, want %v", got, want)
	}
	indexed := 0
	_ = s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketPending).ForEach(func(_, _ []byte) error { indexed++; return nil })
	})
	if indexed != 1 {
		t.Errorf("index holds %d keys, want 1: settled entries must leave it", indexed)
	}
	// A state file without the index, as an older version wrote it.
	if err := s.db.Update(func(tx *bolt.Tx) error { return tx.DeleteBucket(bucketPending) }); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTemp(t, dir)
	if got := pendingSeqs(); !reflect.DeepEqual(got, want) {
		t.Errorf("after rebuilding the index: pending %v, want %v", got, want)
	}
}
