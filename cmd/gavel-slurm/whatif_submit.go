package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gavel-slurm/gavel-slurm/internal/whatif"
)

// submitSweep runs the what-if on the cluster itself: every replay is a
// task of one job array on --partition, and one job that depends on the
// whole array gathers their schedules into the report. Everything the
// jobs read is first written to --dir (the history, the rates, the
// resolved settings as flags, the report's notes), so that they need
// neither slurmrestd nor this host's configuration; the workload was
// built here already, so a history or table the jobs could not use fails
// here. Each sweep has its own id and parts folder: a task of an earlier
// sweep in the same --dir cannot pass for one of this sweep.
func (f *whatifFlags) submitSweep(ctx context.Context, raw []byte, cluster whatif.Cluster, stdout io.Writer) error {
	var nonce [6]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return fmt.Errorf("sweep id: %w", err)
	}
	sweep := time.Now().UTC().Format("20060102T150405") + "-" + hex.EncodeToString(nonce[:])
	parts := "parts-" + sweep
	for _, sub := range []string{parts, "logs"} {
		if err := os.MkdirAll(filepath.Join(f.dir, sub), 0o755); err != nil {
			return fmt.Errorf("--dir: %w", err)
		}
	}
	history := "history-" + sweep + ".json"
	if err := os.WriteFile(filepath.Join(f.dir, history), raw, 0o644); err != nil {
		return fmt.Errorf("--dir: %w", err)
	}
	notes, err := json.Marshal(f.notes)
	if err == nil {
		err = os.WriteFile(filepath.Join(f.dir, "notes-"+sweep+".json"), notes, 0o644)
	}
	if err != nil {
		return fmt.Errorf("--dir: %w", err)
	}
	jobDir := f.jobDir
	if jobDir == "" {
		jobDir = f.dir
	}
	in := func(name string) string { return filepath.Join(jobDir, name) }
	binary := f.binary
	if binary == "" {
		if binary, err = os.Executable(); err != nil {
			return fmt.Errorf("find this program for the jobs (give --binary): %w", err)
		}
	}
	sc := f.set.Sim
	args := []string{"whatif", "--quiet", "--config", "none", "--sweep-id", sweep,
		"--sacct", in(history),
		"--partitions", strings.Join(f.partitions, ","),
		"--cluster", typeCounts(cluster.GPUs), "--gpus-per-node", typeCounts(cluster.PerServer),
		"--typed", string(f.typed), "--entities", f.entities,
		"--policies", strings.Join(f.set.Policies, ","), "--seeds", joinInts(f.set.Seeds),
		"--round", seconds(sc.RoundSeconds), "--mechanism", string(sc.Mechanism),
		"--min-reset-interval", seconds(sc.MinResetInterval), "--restart-overhead", seconds(sc.PreemptionOverhead),
		"--min-run-time", seconds(sc.MinRunTime), "--parallel", "1",
	}
	if len(f.speed) > 0 {
		var parts []string
		for _, t := range slices.Sorted(maps.Keys(f.speed)) {
			parts = append(parts, t+"="+strconv.FormatFloat(f.speed[t], 'g', -1, 64))
		}
		args = append(args, "--speed", strings.Join(parts, ","))
	}
	if f.noReference {
		args = append(args, "--no-reference")
	} else if f.throughputsFile != "" {
		if err := copyInto(f.throughputsFile, filepath.Join(f.dir, "throughputs-"+sweep+".json")); err != nil {
			return fmt.Errorf("--throughputs: %w", err)
		}
		args = append(args, "--throughputs", in("throughputs-"+sweep+".json"))
	}
	if len(f.nodeTypes) > 0 {
		raw, err := json.Marshal(f.nodeTypes)
		if err == nil {
			err = os.WriteFile(filepath.Join(f.dir, "node-types-"+sweep+".json"), raw, 0o644)
		}
		if err != nil {
			return fmt.Errorf("--dir: %w", err)
		}
		args = append(args, "--node-types", in("node-types-"+sweep+".json"))
	}
	if f.measured != "" {
		st, err := os.ReadFile(f.measured)
		if err != nil {
			if st, err = fetchStatus(f.measured); err != nil {
				return fmt.Errorf("--measured: %w", err)
			}
		}
		if err := os.WriteFile(filepath.Join(f.dir, "measured-"+sweep+".json"), st, 0o644); err != nil {
			return fmt.Errorf("--dir: %w", err)
		}
		args = append(args, "--measured", in("measured-"+sweep+".json"))
	}
	tasks := len(f.set.Tasks())
	replay := shellLine(append([]string{binary}, args...)) +
		` --part "$SLURM_ARRAY_TASK_ID" --part-out ` + shellQuote(in(parts)) + `/part-"$SLURM_ARRAY_TASK_ID".json`
	arrayID, err := f.sbatchJob(ctx, []string{"--array", fmt.Sprintf("0-%d", tasks-1), "--job-name", "gavel-whatif",
		"--output", in("logs/replay-%A_%a.out")}, replay)
	if err != nil {
		return fmt.Errorf("submit the replays: %w", err)
	}
	gather := shellLine(append([]string{binary}, append(args, "--gather", in(parts), "--notes", in("notes-"+sweep+".json"),
		"--html", in("report.html"), "--json-out", in("report.json"), "--text-out", in("report.txt"))...))
	// afterany: a replay that failed is reported as failed rather than
	// leaving the report waiting for ever.
	gatherID, err := f.sbatchJob(ctx, []string{"--dependency", "afterany:" + arrayID, "--job-name", "gavel-whatif-report",
		"--output", in("logs/report-%j.out")}, gather)
	if err != nil {
		return fmt.Errorf("submit the report job (the replays, array job %s, are queued; scancel it): %w", arrayID, err)
	}
	fmt.Fprintf(stdout, "submitted %d replays (sweep %s) as array job %s and the report as job %s on partition %s\n", tasks, sweep, arrayID, gatherID, f.partition)
	fmt.Fprintf(stdout, "the report will be in %s (report.txt, report.json, report.html)\n", f.dir)
	return nil
}

// sbatchJob submits a batch job that runs script on --partition and
// returns its id.
func (f *whatifFlags) sbatchJob(ctx context.Context, opts []string, script string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	args := append([]string{"--parsable", "--partition", f.partition}, opts...)
	args = append(args, "--wrap", script)
	cmd := exec.CommandContext(ctx, f.sbatch, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s: %w: %s", f.sbatch, err, strings.TrimSpace(errOut.String()))
	}
	// --parsable prints "id" or "id;cluster".
	id, _, _ := strings.Cut(strings.TrimSpace(out.String()), ";")
	if _, err := strconv.Atoi(id); err != nil {
		return "", fmt.Errorf("%s printed %q, not a job id", f.sbatch, out.String())
	}
	return id, nil
}

func typeCounts(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, ",")
}

func joinInts(xs []int64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.FormatInt(x, 10)
	}
	return strings.Join(parts, ",")
}

func seconds(s float64) string { return strconv.FormatFloat(s, 'f', -1, 64) + "s" }

func copyInto(from, to string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, data, 0o644)
}

// shellQuote quotes s for sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func shellLine(args []string) string {
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = shellQuote(a)
	}
	return strings.Join(quoted, " ")
}
