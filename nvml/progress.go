package nvml

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gavel-slurm/gavel-slurm/internal/reports"
)

// Progress files are appended to by the jobs themselves, one line per
// report:
//
//	STEPS [UNIX_TIME]
//
// STEPS is the cumulative step count since the job first started (it goes
// on from a checkpoint after a requeue), UNIX_TIME the seconds since the
// epoch when it was reached (may have a fraction; without it, the time the
// collector read the line stands in).

// ProgressSuffix ends every progress file's name: DIR/JOBID.progress.
const ProgressSuffix = ".progress"

const (
	// maxLineBytes bounds one line; longer ones are garbage.
	maxLineBytes = 256
	// defaultMaxReadBytes bounds what one interval reads from a file. A
	// job that wrote more (a runaway loop, or garbage) has its backlog
	// skipped: only its latest lines count.
	defaultMaxReadBytes = 64 << 10
)

// JobProgress is what a job's progress file says at the end of an interval.
type JobProgress struct {
	// Steps is the last cumulative count read; nil when the job never
	// reported (or not since it restarted).
	Steps *int64
	// Rate is steps per second from the last count of the previous
	// interval to the last of this one; nil when unknown: no count
	// before, none new, or the first interval after a (re)start.
	Rate *float64
	// Garbage counts the lines skipped this interval as unreadable.
	Garbage int
	// Restarted tells that the job started over this interval: its file
	// shrank or was replaced, its count went down, or the Prolog wrote its
	// mapping again.
	Restarted bool
	// FirstProgress is when the job's current run wrote its first line:
	// the line's own time, else (a line without one) the file's last
	// change when a sample (Sample) or else this read first saw it
	// written in the run, which is late by what the job wrote since.
	// Zero until the run writes a line. It comes with every interval of
	// the run, so that the daemon learns when a restarted job got going
	// from the line rather than from the end of the interval that holds
	// it.
	FirstProgress time.Time
}

type sample struct {
	steps int64
	t     time.Time
	// timed tells that t is the line's own time, not the read's.
	timed bool
}

type progressState struct {
	stamp    string // the job file's Stamp when this state began
	file     uint64 // file identity (inode)
	offset   int64  // bytes consumed
	partial  []byte // an unfinished last line
	skipping bool   // dropping bytes up to the next newline
	last     *sample
	base     *sample   // last sample of the previous interval: the rate's start
	first    time.Time // the run's first line (JobProgress.FirstProgress)
}

// firstWrite is when Sample first saw a job's progress file written while
// the file's run had no line read yet: a stand-in for the time of the
// run's first line when the line has none, closer than what Update alone
// knows (the file's last change before its read).
type firstWrite struct {
	file uint64 // the file's identity: a new file is a new run
	at   time.Time
}

// ProgressTracker follows the progress files of the jobs on a node.
type ProgressTracker struct {
	dir          string
	maxReadBytes int64
	jobs         map[string]*progressState
	firstWrites  map[string]firstWrite
	// Garbage counts every line skipped since the tracker started.
	Garbage int
}

// NewProgressTracker follows the files in dir.
func NewProgressTracker(dir string) *ProgressTracker {
	return &ProgressTracker{dir: dir, maxReadBytes: defaultMaxReadBytes, jobs: map[string]*progressState{},
		firstWrites: map[string]firstWrite{}}
}

// Update reads what job appended since the last call and returns its
// progress for the interval ending now. stamp is the job's mapping file
// stamp ("" when the job was found by its processes).
func (p *ProgressTracker) Update(job, stamp string, now time.Time) (JobProgress, error) {
	st := p.jobs[job]
	var out JobProgress
	switch {
	case st == nil:
		st = &progressState{stamp: stamp}
		p.jobs[job] = st
	case st.stamp != stamp:
		// The Prolog wrote the job's mapping again: a new run. What
		// was read of the file is the last run's; the new run's lines
		// are those after it (or all of a new file's).
		out.Restarted = true
		st.stamp, st.last, st.base, st.first = stamp, nil, nil, time.Time{}
	}
	f, fi, err := openRegular(filepath.Join(p.dir, job+ProgressSuffix))
	if errors.Is(err, fs.ErrNotExist) {
		if st.file != 0 || st.offset > 0 {
			// The file went away (the Epilog removes it): whatever
			// comes next is a new run.
			*st = progressState{stamp: stamp}
			out.Restarted = true
		}
		return out, nil
	}
	if err != nil {
		return out, fmt.Errorf("job %s: progress file: %w", job, err)
	}
	defer f.Close()
	if id := fileID(fi); id != st.file || fi.Size() < st.offset {
		// Replaced or truncated: start again from its beginning, with no
		// baseline, so that the new run gets its warm-up interval.
		out.Restarted = out.Restarted || st.offset > 0
		*st = progressState{stamp: stamp, file: id}
	}
	if backlog := fi.Size() - st.offset; backlog > p.maxReadBytes {
		// Only the latest lines matter. Skipping the history of a job
		// followed for the first time is normal; a job that wrote that
		// much within one interval is misbehaving, and counted.
		if st.offset > 0 {
			out.Garbage++
		}
		st.offset = fi.Size() - p.maxReadBytes
		st.partial = st.partial[:0]
		st.skipping = true
	}
	buf := make([]byte, fi.Size()-st.offset)
	n, err := f.ReadAt(buf, st.offset)
	if err != nil && err != io.EOF {
		return out, fmt.Errorf("job %s: read progress file: %w", job, err)
	}
	st.offset += int64(n)
	// What was read was all written by the file's last change: for a
	// line without its own time, that is closer to when the job wrote it
	// than now, with the collector's interval between reads.
	written := fi.ModTime()
	if fw, ok := p.firstWrites[job]; ok && fw.file == st.file && st.last == nil && fw.at.Before(written) {
		written = fw.at
	}
	if written.After(now) {
		written = now
	}
	restarted, garbage := st.consume(buf[:n], now, written)
	out.Garbage += garbage
	p.Garbage += out.Garbage
	if restarted {
		out.Restarted = true
	}
	if st.last == nil {
		return out, nil
	}
	delete(p.firstWrites, job) // the run has its first line
	out.FirstProgress = st.first
	steps := st.last.steps
	out.Steps = &steps
	switch {
	case st.base == nil:
		// First counts since the (re)start: they become the baseline,
		// and this interval's rate, which holds the job's start-up, is
		// left out.
		st.base = st.last
	case st.last != st.base:
		if dt := st.last.t.Sub(st.base.t).Seconds(); dt > 0 {
			rate := float64(st.last.steps-st.base.steps) / dt
			out.Rate = &rate
			st.base = st.last
		}
	}
	return out, nil
}

// consume parses the complete lines in data, written by the time written
// at the latest. It reports whether the count went down (the job restarted
// from a checkpoint and kept appending) and how many lines it skipped.
func (st *progressState) consume(data []byte, now, written time.Time) (restarted bool, garbage int) {
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			if st.skipping {
				return restarted, garbage
			}
			if len(st.partial)+len(data) > maxLineBytes {
				// Too long to be a line of ours; drop it up to its end.
				st.partial = st.partial[:0]
				st.skipping = true
				return restarted, garbage + 1
			}
			st.partial = append(st.partial, data...)
			return restarted, garbage
		}
		chunk := data[:i]
		data = data[i+1:]
		if st.skipping {
			st.skipping = false
			continue
		}
		line := chunk
		if len(st.partial) > 0 {
			line = append(st.partial, chunk...)
			st.partial = st.partial[:0]
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if len(line) > maxLineBytes {
			garbage++
			continue
		}
		s, ok := parseProgressLine(line, now)
		if !ok {
			garbage++
			continue
		}
		switch {
		case st.last == nil:
			st.first = s.firstProgress(written)
		case s.steps < st.last.steps:
			// Counting again from a checkpoint: a new run, with a new
			// warm-up, whose first progress is this line.
			restarted = true
			st.base = nil
			st.first = s.firstProgress(written)
		case s.t.Before(st.last.t):
			// Time going back with the count going forward: not a line
			// to trust.
			garbage++
			continue
		}
		st.last = &s
	}
	return restarted, garbage
}

// firstProgress is when the line was written: its own time, else the
// file's last change before it was read.
func (s sample) firstProgress(written time.Time) time.Time {
	if s.timed {
		return s.t
	}
	return written
}

// parseProgressLine reads "STEPS [UNIX_TIME]". A time ahead of now (by
// more than the skew the daemon allows) is refused: it would make every
// later line look like time going back.
func parseProgressLine(line []byte, now time.Time) (sample, bool) {
	fields := bytes.Fields(line)
	if len(fields) == 0 || len(fields) > 2 {
		return sample{}, false
	}
	steps, err := strconv.ParseInt(string(fields[0]), 10, 64)
	if err != nil || steps < 0 || steps > reports.MaxSteps {
		return sample{}, false
	}
	s := sample{steps: steps, t: now}
	if len(fields) == 2 {
		sec, err := strconv.ParseFloat(string(fields[1]), 64)
		if err != nil || math.IsNaN(sec) || sec <= 0 || sec > float64(now.Add(reports.MaxFutureSkew).Unix()) {
			return sample{}, false
		}
		whole, frac := math.Modf(sec)
		s.t, s.timed = time.Unix(int64(whole), int64(frac*1e9)), true
	}
	return s, true
}

// Forget drops the state of every job not in keep, so that the tracker's
// memory follows the jobs on the node.
func (p *ProgressTracker) Forget(keep map[string]bool) {
	for job := range p.jobs {
		if !keep[job] {
			delete(p.jobs, job)
		}
	}
	for job := range p.firstWrites {
		if !keep[job] {
			delete(p.firstWrites, job)
		}
	}
}

// Sample looks, between two updates, for progress files written while
// their run has no line read yet: a job that has just started, on the
// node or again, or one still starting up. It notes when it first sees
// each written, so that the run's first line, when it has no time of its
// own, is dated to the sample rather than to the next update's read. It
// reads no line and only looks at the directory and the files' sizes, so
// that it can run every second or so.
func (p *ProgressTracker) Sample(now time.Time) error {
	entries, err := os.ReadDir(p.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("progress files: %w", err)
	}
	for _, e := range entries {
		job, ok := strings.CutSuffix(e.Name(), ProgressSuffix)
		if !ok || !e.Type().IsRegular() || !isJobID(job) {
			continue
		}
		fi, err := e.Info()
		if err != nil || !fi.Mode().IsRegular() || fi.Size() == 0 {
			continue // gone since the listing, or nothing written yet
		}
		id := fileID(fi)
		if fw, ok := p.firstWrites[job]; ok && fw.file == id {
			continue
		}
		if st := p.jobs[job]; st != nil && st.file == id && (st.last != nil || fi.Size() <= st.offset) {
			continue // the run has its first line, or nothing new
		}
		at := fi.ModTime()
		if at.After(now) {
			at = now
		}
		p.firstWrites[job] = firstWrite{file: id, at: at}
	}
	return nil
}
