package nvml

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A progress step: what happens to the file, then what Update says.
type pstep struct {
	do        func(t *testing.T, path string)
	now       int64  // Unix seconds of the update
	stamp     string // the job file's stamp
	steps     int64  // -1: no count
	rate      float64
	hasRate   bool
	garbage   int
	restarted bool
}

func appendText(s string) func(*testing.T, string) {
	return func(t *testing.T, path string) {
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
}

// truncateTo rewrites the file in place (same inode, shorter).
func truncateTo(s string) func(*testing.T, string) {
	return func(t *testing.T, path string) {
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// replaceWith puts a new file in its place (new inode, possibly longer).
func replaceWith(s string) func(*testing.T, string) {
	return func(t *testing.T, path string) {
		tmp := path + ".new"
		if err := os.WriteFile(tmp, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
}

func remove(t *testing.T, path string) { os.Remove(path) }

func nothing(*testing.T, string) {}

func rate(v float64) (float64, bool) { return v, true }

func TestProgressTracker(t *testing.T) {
	cases := []struct {
		name  string
		steps []pstep
	}{
		{"steady, with times", []pstep{
			{do: appendText("0 1000\n100 1010\n"), now: 1020, steps: 100}, // warm-up: no rate
			{do: appendText("400 1040\n"), now: 1050, steps: 400, rate: 10, hasRate: true},
			{do: nothing, now: 1080, steps: 400},                                                   // nothing new: no rate
			{do: appendText("700 1100\n"), now: 1110, steps: 700, rate: 5, hasRate: true},          // over 60 s
			{do: appendText("700 1130\n"), now: 1140, steps: 700, rate: 0, hasRate: true},          // stalled
			{do: appendText("710 1131.5\n"), now: 1141, steps: 710, rate: 10 / 1.5, hasRate: true}, // fractional time
		}},
		{"no times: the read time stands in", []pstep{
			{do: appendText("10\n"), now: 1000, steps: 10},
			{do: appendText("40\n70\n"), now: 1030, steps: 70, rate: 2, hasRate: true},
		}},
		{"garbage lines are skipped and counted", []pstep{
			{do: appendText("abc\n100 1010\n-5\n1e3\n200 1020 extra\n\n150 NaN\n12 -4\n"), now: 1020, steps: 100, garbage: 6},
			{do: appendText("\x00\x01\n400 1040\n"), now: 1050, steps: 400, rate: 10, hasRate: true, garbage: 1},
		}},
		{"a line written in two pieces", []pstep{
			{do: appendText("100 1000\n200 10"), now: 1015, steps: 100},
			{do: appendText("10\n"), now: 1020, steps: 200, rate: 10, hasRate: true},
		}},
		{"a line too long", []pstep{
			{do: appendText("100 1000\n" + strings.Repeat("9", 300)), now: 1005, steps: 100, garbage: 1},
			{do: appendText(strings.Repeat("9", 300) + "\n200 1010\n"), now: 1015, steps: 200, rate: 10, hasRate: true},
		}},
		{"time going back", []pstep{
			{do: appendText("100 1010\n"), now: 1020, steps: 100},
			{do: appendText("200 1005\n"), now: 1050, steps: 100, garbage: 1},
		}},
		{"time in the future", []pstep{
			{do: appendText("100 99999999999\n"), now: 1020, steps: -1, garbage: 1},
		}},
		{"a job that never reports", []pstep{
			{do: nothing, now: 1000, steps: -1},
			{do: nothing, now: 1030, steps: -1},
		}},
		{"an empty file", []pstep{
			{do: appendText(""), now: 1000, steps: -1},
			{do: nothing, now: 1030, steps: -1},
		}},
		{"a file that shrinks: reset and warm up again", []pstep{
			{do: appendText("1000 1000\n"), now: 1010, steps: 1000},
			{do: appendText("1300 1030\n"), now: 1040, steps: 1300, rate: 10, hasRate: true},
			{do: truncateTo("5 1050\n"), now: 1060, steps: 5, restarted: true},
			{do: appendText("65 1080\n"), now: 1090, steps: 65, rate: 2, hasRate: true},
		}},
		{"a file replaced by a longer one", []pstep{
			{do: appendText("10 1000\n"), now: 1010, steps: 10},
			{do: replaceWith("0 1020\n50 1030\n100 1040\n"), now: 1045, steps: 100, restarted: true},
			{do: appendText("400 1070\n"), now: 1075, steps: 400, rate: 10, hasRate: true},
		}},
		{"a count that goes down: restart from a checkpoint", []pstep{
			{do: appendText("1000 1000\n"), now: 1010, steps: 1000},
			{do: appendText("1300 1030\n"), now: 1040, steps: 1300, rate: 10, hasRate: true},
			{do: appendText("900 1060\n950 1065\n"), now: 1070, steps: 950, restarted: true},
			{do: appendText("1250 1095\n"), now: 1100, steps: 1250, rate: 10, hasRate: true},
		}},
		{"a file removed", []pstep{
			{do: appendText("10 1000\n"), now: 1010, steps: 10},
			{do: remove, now: 1040, steps: -1, restarted: true},
			{do: appendText("20 1050\n"), now: 1060, steps: 20},
		}},
		{"the job's mapping written again", []pstep{
			{do: appendText("10 1000\n"), now: 1010, stamp: "a", steps: 10},
			{do: appendText("40 1030\n"), now: 1040, stamp: "a", steps: 40, rate: 1, hasRate: true},
			{do: appendText("70 1060\n"), now: 1070, stamp: "b", steps: 70, restarted: true},
			{do: appendText("100 1090\n"), now: 1100, stamp: "b", steps: 100, rate: 1, hasRate: true},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "77"+ProgressSuffix)
			p := NewProgressTracker(dir)
			for i, s := range c.steps {
				s.do(t, path)
				got, err := p.Update("77", s.stamp, time.Unix(s.now, 0))
				if err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				if err := checkProgress(got, s); err != nil {
					t.Errorf("step %d: %v", i, err)
				}
			}
		})
	}
}

func checkProgress(got JobProgress, want pstep) error {
	switch {
	case want.steps < 0 && got.Steps != nil:
		return fmt.Errorf("steps %d, want none", *got.Steps)
	case want.steps >= 0 && (got.Steps == nil || *got.Steps != want.steps):
		return fmt.Errorf("steps %v, want %d", fmtPtr(got.Steps), want.steps)
	case !want.hasRate && got.Rate != nil:
		return fmt.Errorf("rate %v, want none", *got.Rate)
	case want.hasRate && (got.Rate == nil || math.Abs(*got.Rate-want.rate) > 1e-9):
		return fmt.Errorf("rate %v, want %v", fmtPtr(got.Rate), want.rate)
	case got.Garbage != want.garbage:
		return fmt.Errorf("garbage %d, want %d", got.Garbage, want.garbage)
	case got.Restarted != want.restarted:
		return fmt.Errorf("restarted %v, want %v", got.Restarted, want.restarted)
	}
	return nil
}

func fmtPtr[T any](p *T) string {
	if p == nil {
		return "none"
	}
	return fmt.Sprint(*p)
}

// TestProgressBacklog: only the latest lines of a large file are read. A
// file first seen with a long history is normal; one that grew past the
// bound within an interval is counted.
func TestProgressBacklog(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "5"+ProgressSuffix)
	var b strings.Builder
	for i := 0; i < 1000; i++ {
		fmt.Fprintf(&b, "%d %d\n", i, 1000+i)
	}
	appendText(b.String())(t, path)
	p := NewProgressTracker(dir)
	p.maxReadBytes = 100
	got, err := p.Update("5", "", time.Unix(3000, 0))
	if err := checkProgress(got, pstep{steps: 999}); err != nil || got.Garbage != 0 {
		t.Fatalf("first read: %v (garbage %d)", err, got.Garbage)
	}
	b.Reset()
	for i := 1000; i < 1100; i++ {
		fmt.Fprintf(&b, "%d %d\n", i, 1000+i)
	}
	appendText(b.String())(t, path)
	got, err = p.Update("5", "", time.Unix(3000, 0))
	if err != nil {
		t.Fatal(err)
	}
	if err := checkProgress(got, pstep{steps: 1099, rate: 1, hasRate: true, garbage: 1}); err != nil {
		t.Error(err)
	}
}

func TestProgressRefusesLinks(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte("123\n"), 0o600)
	if err := os.Symlink(secret, filepath.Join(dir, "9"+ProgressSuffix)); err != nil {
		t.Fatal(err)
	}
	p := NewProgressTracker(dir)
	got, err := p.Update("9", "", time.Unix(1000, 0))
	if err == nil || got.Steps != nil {
		t.Errorf("followed a symbolic link: %+v, %v", got, err)
	}
}

func TestProgressForget(t *testing.T) {
	dir := t.TempDir()
	p := NewProgressTracker(dir)
	for _, job := range []string{"1", "2", "3"} {
		p.Update(job, "", time.Unix(1000, 0))
	}
	p.Forget(map[string]bool{"2": true})
	if len(p.jobs) != 1 || p.jobs["2"] == nil {
		t.Errorf("jobs left %v, want only 2", p.jobs)
	}
}

// A run's first progress is its first line's time, from the warm-up on and
// in every interval after; a line without a time stands in with the
// file's last change before the read, no later than the read. Each new run
// (count going down, a file replaced, removed or truncated, the mapping
// written again) starts over from its own first line.
func TestProgressFirstProgress(t *testing.T) {
	type fstep struct {
		do    func(t *testing.T, path string)
		mtime float64 // when the file was last written (Unix seconds); 0: left as the write made it
		now   int64
		stamp string
		first float64 // Unix seconds; 0: none
	}
	cases := map[string][]fstep{
		"timed lines: the first line's own time": {
			{do: nothing, now: 1000},
			{do: appendText("5000 1012.25\n5100 1020\n"), now: 1030, first: 1012.25}, // warm-up
			{do: appendText("5400 1050\n"), now: 1060, first: 1012.25},
			{do: nothing, now: 1090, first: 1012.25},
		},
		"untimed lines: the file's last change": {
			{do: appendText("5000\n"), mtime: 1013, now: 1030, first: 1013},
			{do: appendText("5300\n"), mtime: 1055, now: 1060, first: 1013},
		},
		"untimed lines: never after the read": {
			{do: appendText("5000\n"), mtime: 1100, now: 1030, first: 1030},
		},
		"count going down: the new run's first line": {
			{do: appendText("5000 1010\n"), now: 1030, first: 1010},
			{do: appendText("5300 1040\n4000 1052\n4100 1055\n"), now: 1060, first: 1052},
			{do: appendText("4400 1080\n"), now: 1090, first: 1052},
		},
		"file replaced": {
			{do: appendText("5000 1010\n"), now: 1030, first: 1010},
			{do: replaceWith("6000 1047\n"), now: 1060, first: 1047},
		},
		"file removed, then a new one": {
			{do: appendText("5000 1010\n"), now: 1030, first: 1010},
			{do: remove, now: 1060},
			{do: appendText("5000 1075\n"), now: 1090, first: 1075},
		},
		"mapping written again (requeued on this node)": {
			{do: appendText("5000 1010\n"), now: 1030, stamp: "a", first: 1010},
			{do: nothing, now: 1060, stamp: "b"},
			{do: appendText("5100 1081\n"), now: 1090, stamp: "b", first: 1081},
		},
	}
	for name, steps := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "77"+ProgressSuffix)
			p := NewProgressTracker(dir)
			for i, s := range steps {
				s.do(t, path)
				if s.mtime != 0 {
					whole, frac := math.Modf(s.mtime)
					mt := time.Unix(int64(whole), int64(frac*1e9))
					if err := os.Chtimes(path, mt, mt); err != nil {
						t.Fatal(err)
					}
				}
				got, err := p.Update("77", s.stamp, time.Unix(s.now, 0))
				if err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				var want time.Time
				if s.first != 0 {
					whole, frac := math.Modf(s.first)
					want = time.Unix(int64(whole), int64(frac*1e9))
				}
				if !got.FirstProgress.Equal(want) {
					t.Errorf("step %d: first progress %v, want %v", i, got.FirstProgress, want)
				}
			}
		})
	}
}

// Sampling between updates dates a run's first line without a time of its
// own to the first sample that saw the file written, not to the file's
// last change before the update read it: for a job new to the node, one
// started again (the Prolog's fresh file) and one still starting up. A
// line with its own time keeps it, and a run that has its first line is
// no longer sampled.
func TestProgressSample(t *testing.T) {
	type sstep struct {
		do     func(t *testing.T, path string)
		mtime  int64 // Unix seconds; 0: left as the write made it
		sample bool  // Sample at now, else Update
		now    int64
		stamp  string
		first  int64 // after an update: Unix seconds; 0: none
	}
	cases := map[string][]sstep{
		"a job new to the node": {
			{do: appendText("5000\n"), mtime: 1002, sample: true, now: 1003},
			{do: appendText("5100\n5200\n"), mtime: 1025, now: 1030, first: 1002},
			{do: appendText("5300\n"), mtime: 1045, sample: true, now: 1046},
			{do: nothing, now: 1060, first: 1002},
		},
		"nothing written at the sample": {
			{do: appendText(""), sample: true, now: 1003},
			{do: appendText("5000\n5100\n"), mtime: 1025, now: 1030, first: 1025},
		},
		"still starting up": {
			{do: appendText(""), now: 1000},
			{do: nothing, sample: true, now: 1010},
			{do: nothing, now: 1030},
			{do: appendText("5000\n"), mtime: 1041, sample: true, now: 1042},
			{do: appendText("5100\n"), mtime: 1058, now: 1060, first: 1041},
		},
		"started again: a fresh file": {
			{do: appendText("5000\n"), mtime: 1010, stamp: "a", now: 1030, first: 1010},
			{do: replaceWith(""), stamp: "b", now: 1060},
			{do: appendText("5000\n"), mtime: 1071, sample: true, now: 1072},
			{do: appendText("5100\n"), mtime: 1088, stamp: "b", now: 1090, first: 1071},
		},
		"a line's own time": {
			{do: appendText("5000 1001.5\n"), mtime: 1002, sample: true, now: 1003},
			{do: nothing, now: 1030, first: 1001},
		},
		"a file changed after the sample's listing": {
			{do: appendText("5000\n"), mtime: 1100, sample: true, now: 1003},
			{do: nothing, now: 1030, first: 1003},
		},
	}
	for name, steps := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "77"+ProgressSuffix)
			p := NewProgressTracker(dir)
			for i, s := range steps {
				s.do(t, path)
				if s.mtime != 0 {
					if err := os.Chtimes(path, time.Unix(s.mtime, 0), time.Unix(s.mtime, 0)); err != nil {
						t.Fatal(err)
					}
				}
				if s.sample {
					if err := p.Sample(time.Unix(s.now, 0)); err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
					continue
				}
				got, err := p.Update("77", s.stamp, time.Unix(s.now, 0))
				if err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				var want time.Time
				if s.first != 0 {
					want = time.Unix(s.first, 0)
				}
				if !got.FirstProgress.Truncate(time.Second).Equal(want) {
					t.Errorf("step %d: first progress %v, want %v", i, got.FirstProgress, want)
				}
			}
		})
	}
}

// Sampling looks at the progress files of jobs only, never through a
// link, and keeps nothing of a job the collector forgot.
func TestProgressSampleSkipsOthers(t *testing.T) {
	dir := t.TempDir()
	other := filepath.Join(t.TempDir(), "elsewhere")
	os.WriteFile(other, []byte("5000\n"), 0o644)
	os.Symlink(other, filepath.Join(dir, "9"+ProgressSuffix))
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "x1"+ProgressSuffix), []byte("5000\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "12"+ProgressSuffix), []byte("5000\n"), 0o644)
	p := NewProgressTracker(dir)
	if err := p.Sample(time.Unix(2_000_000_000, 0)); err != nil {
		t.Fatal(err)
	}
	if len(p.firstWrites) != 1 || p.firstWrites["12"].at.IsZero() {
		t.Errorf("sampled %v, want job 12 only", p.firstWrites)
	}
	p.Forget(map[string]bool{})
	if len(p.firstWrites) != 0 {
		t.Errorf("kept %v of forgotten jobs", p.firstWrites)
	}
	if err := NewProgressTracker(filepath.Join(dir, "none")).Sample(time.Unix(2_000_000_000, 0)); err != nil {
		t.Errorf("no progress directory: %v", err)
	}
}
