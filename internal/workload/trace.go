package workload

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/gavel-slurm/gavel-slurm/internal/throughputs"
)

// traceColumns is the number of tab-separated fields of a trace line:
// job type, command, working directory, steps flag, needs data dir, total
// steps, scale factor, priority weight, SLO (-1 for none), arrival time.
const traceColumns = 10

// ReadTraceFile parses the trace at path; see ParseTrace.
func ReadTraceFile(path string, table *throughputs.Table) ([]Job, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open trace: %w", err)
	}
	defer f.Close()
	jobs, err := ParseTrace(f, table)
	if err != nil {
		return nil, fmt.Errorf("trace %s: %w", path, err)
	}
	return jobs, nil
}

// ParseTrace reads one job per line in the 10-column tab-separated trace
// format. Blank lines are skipped. Arrival times must not decrease. When
// table is not nil every (job type, scale factor) must have a rate in it, so
// a typo fails here rather than as a job that can never run.
func ParseTrace(r io.Reader, table *throughputs.Table) ([]Job, error) {
	var jobs []Job
	scanner := bufio.NewScanner(r)
	scanner.Buffer(make([]byte, 64*1024), 1<<20)
	line := 0
	for scanner.Scan() {
		line++
		text := strings.TrimRight(scanner.Text(), "\r")
		if strings.TrimSpace(text) == "" {
			continue
		}
		job, err := parseTraceLine(text)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		if n := len(jobs); n > 0 && job.Arrival < jobs[n-1].Arrival {
			return nil, fmt.Errorf("line %d: arrival time %v is before the previous job's %v", line, job.Arrival, jobs[n-1].Arrival)
		}
		if table != nil && !table.Has(job.Model, job.ScaleFactor) {
			return nil, fmt.Errorf("line %d: job type %q at scale factor %d is not in the throughput table", line, job.Model, job.ScaleFactor)
		}
		jobs = append(jobs, job)
	}
	if err := scanner.Err(); err != nil {
		return nil, fmt.Errorf("line %d: %w", line+1, err)
	}
	return jobs, nil
}

func parseTraceLine(text string) (Job, error) {
	fields := strings.Split(text, "\t")
	if len(fields) != traceColumns {
		return Job{}, fmt.Errorf("%d tab-separated fields, want %d (job type, command, working dir, steps flag, needs data dir, total steps, scale factor, priority, SLO, arrival)", len(fields), traceColumns)
	}
	job := Job{
		Model:       fields[0],
		Command:     fields[1],
		WorkingDir:  fields[2],
		NumStepsArg: fields[3],
	}
	if job.Model == "" {
		return Job{}, fmt.Errorf("empty job type")
	}
	switch fields[4] {
	case "0", "False", "false":
	case "1", "True", "true":
		job.NeedsDataDir = true
	default:
		return Job{}, fmt.Errorf("needs data dir %q: want 0 or 1", fields[4])
	}
	steps, err := strconv.ParseInt(fields[5], 10, 64)
	if err != nil || steps <= 0 {
		return Job{}, fmt.Errorf("total steps %q: want a positive integer", fields[5])
	}
	job.TotalSteps = float64(steps)
	sf, err := strconv.Atoi(fields[6])
	if err != nil || sf < 1 {
		return Job{}, fmt.Errorf("scale factor %q: want a positive integer", fields[6])
	}
	job.ScaleFactor = sf
	if job.Priority, err = parseFinite("priority weight", fields[7]); err != nil {
		return Job{}, err
	}
	if job.Priority <= 0 {
		return Job{}, fmt.Errorf("priority weight %q: must be positive", fields[7])
	}
	slo, err := parseFinite("SLO", fields[8])
	if err != nil {
		return Job{}, err
	}
	switch {
	case slo == -1:
		// -1 marks a job without deadline.
	case slo <= 0:
		return Job{}, fmt.Errorf("SLO %q: want a positive number of seconds or -1 for none", fields[8])
	default:
		job.SLO = slo
	}
	if job.Arrival, err = parseFinite("arrival time", fields[9]); err != nil {
		return Job{}, err
	}
	if job.Arrival < 0 {
		return Job{}, fmt.Errorf("arrival time %q: must be >= 0", fields[9])
	}
	return job, nil
}

func parseFinite(what, s string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%s %q: not a finite number", what, s)
	}
	return v, nil
}

// WriteTrace writes jobs in the trace format ParseTrace reads. Generated
// jobs have fractional step counts; the format stores integers, so steps are
// rounded up (a job never gets less work than it was generated with).
func WriteTrace(w io.Writer, jobs []Job) error {
	bw := bufio.NewWriter(w)
	for i, j := range jobs {
		needsData := 0
		if j.NeedsDataDir {
			needsData = 1
		}
		slo := -1.0
		if j.SLO > 0 {
			slo = j.SLO
		}
		priority := j.Priority
		if priority == 0 {
			priority = 1
		}
		if _, err := fmt.Fprintf(bw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\n",
			j.Model, j.Command, j.WorkingDir, j.NumStepsArg, needsData,
			int64(math.Ceil(j.TotalSteps)), j.ScaleFactor,
			strconv.FormatFloat(priority, 'f', -1, 64), strconv.FormatFloat(slo, 'f', -1, 64),
			strconv.FormatFloat(j.Arrival, 'f', -1, 64)); err != nil {
			return fmt.Errorf("write trace job %d: %w", i, err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write trace: %w", err)
	}
	return nil
}
