package nvml

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
)

// The Slurm scripts in contrib/slurm write what this package reads: these
// tests run them as slurmd would, with the job's environment.

func runScript(t *testing.T, name string, env map[string]string) string {
	t.Helper()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	cmd := exec.Command(sh, filepath.Join("..", "contrib", "slurm", name))
	cmd.Env = []string{}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return string(out)
}

func TestSlurmScripts(t *testing.T) {
	dir := t.TempDir()
	jobsDir, progDir := filepath.Join(dir, "jobs"), filepath.Join(dir, "progress")
	env := func(job, gpus string) map[string]string {
		return map[string]string{"SLURM_JOB_ID": job, "SLURM_JOB_GPUS": gpus, "SLURM_JOB_UID": strconv.Itoa(os.Getuid()),
			"GAVEL_JOBS_DIR": jobsDir, "GAVEL_PROGRESS_DIR": progDir}
	}
	cases := []struct {
		name, job, gpus string
		want            []string // the file's GPUs; nil: no file
	}{
		{"two GPUs", "42", "0,2", []string{"0", "2"}},
		{"UUIDs", "43", "GPU-aa-bb,GPU-cc", []string{"GPU-aa-bb", "GPU-cc"}},
		{"a forged value", "44", "1\n../../etc/passwd 3", []string{"1etcpasswd3"}},
		{"no GPUs", "45", "", nil},
		{"a job id that is no number", "../46", "0", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			runScript(t, "gavel-prolog.sh", env(c.job, c.gpus))
			jobs, err := ReadJobsDir(jobsDir)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			found := false
			for _, j := range jobs {
				if j.JobID == c.job {
					got, found = j.GPUs, true
				}
			}
			if c.want == nil {
				if found {
					t.Errorf("a mapping file was written: %v", got)
				}
				return
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("GPUs %q, want %q", got, c.want)
			}
			progress := filepath.Join(progDir, c.job+ProgressSuffix)
			fi, err := os.Stat(progress)
			if err != nil || fi.Mode().Perm() != 0o600 || fi.Size() != 0 {
				t.Errorf("progress file: %v, %v", fi, err)
			}
			out := runScript(t, "gavel-taskprolog.sh", env(c.job, c.gpus))
			if want := "export GAVEL_PROGRESS_FILE=" + progress + "\n"; out != want {
				t.Errorf("TaskProlog printed %q, want %q", out, want)
			}
			runScript(t, "gavel-epilog.sh", env(c.job, c.gpus))
			if _, err := os.Stat(filepath.Join(jobsDir, c.job)); !os.IsNotExist(err) {
				t.Errorf("the Epilog left the mapping file: %v", err)
			}
			if _, err := os.Stat(progress); !os.IsNotExist(err) {
				t.Errorf("the Epilog left the progress file: %v", err)
			}
			if out := runScript(t, "gavel-taskprolog.sh", env(c.job, c.gpus)); out != "" {
				t.Errorf("TaskProlog printed %q for a job without a progress file", out)
			}
		})
	}
	entries, _ := os.ReadDir(jobsDir)
	for _, e := range entries {
		t.Errorf("left behind in the jobs directory: %s", e.Name())
	}
}

// TestPrologRequeue: a requeued job's Prolog writes a new mapping file
// (a new stamp, so the collector restarts the job's warm-up) and an empty
// progress file.
func TestPrologRequeue(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"SLURM_JOB_ID": "7", "SLURM_JOB_GPUS": "0",
		"GAVEL_JOBS_DIR": filepath.Join(dir, "jobs"), "GAVEL_PROGRESS_DIR": filepath.Join(dir, "progress")}
	runScript(t, "gavel-prolog.sh", env)
	first, _ := ReadJobsDir(env["GAVEL_JOBS_DIR"])
	os.WriteFile(filepath.Join(env["GAVEL_PROGRESS_DIR"], "7.progress"), []byte("100\n"), 0o600)
	runScript(t, "gavel-prolog.sh", env)
	second, _ := ReadJobsDir(env["GAVEL_JOBS_DIR"])
	if len(first) != 1 || len(second) != 1 || first[0].Stamp == second[0].Stamp {
		t.Errorf("stamps %v then %v: want a new one", first, second)
	}
	if fi, err := os.Stat(filepath.Join(env["GAVEL_PROGRESS_DIR"], "7.progress")); err != nil || fi.Size() != 0 {
		t.Errorf("progress file after the second Prolog: %v, %v; want it empty", fi, err)
	}
}

// TestPrologRefusesDirectoriesOthersMayWrite: a mapping or progress
// directory whose parent someone else may write to (say the daemon's own
// runtime directory, on a host that is also a GPU node) could be swapped
// for a link to anywhere, and the Prolog writes as root: it writes
// nothing there, and the Epilog removes nothing.
func TestPrologRefusesDirectoriesOthersMayWrite(t *testing.T) {
	parent := filepath.Join(t.TempDir(), "run")
	if err := os.Mkdir(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(parent, 0o777); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"SLURM_JOB_ID": "8", "SLURM_JOB_GPUS": "0", "SLURM_JOB_UID": strconv.Itoa(os.Getuid()),
		"GAVEL_JOBS_DIR": filepath.Join(parent, "jobs"), "GAVEL_PROGRESS_DIR": filepath.Join(parent, "progress")}
	runScript(t, "gavel-prolog.sh", env)
	for _, f := range []string{filepath.Join(parent, "jobs", "8"), filepath.Join(parent, "progress", "8.progress")} {
		if _, err := os.Lstat(f); err == nil {
			t.Errorf("%s written under a directory others may write to", f)
		}
	}
	// Made safe, the Prolog writes; a directory swapped for a link is
	// refused again.
	if err := os.Chmod(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	runScript(t, "gavel-prolog.sh", env)
	if jobs, err := ReadJobsDir(env["GAVEL_JOBS_DIR"]); err != nil || len(jobs) != 1 {
		t.Fatalf("safe directories: mappings %v, %v", jobs, err)
	}
	elsewhere := t.TempDir()
	if err := os.Rename(env["GAVEL_JOBS_DIR"], filepath.Join(parent, "jobs.old")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, env["GAVEL_JOBS_DIR"]); err != nil {
		t.Fatal(err)
	}
	env["SLURM_JOB_ID"] = "9"
	runScript(t, "gavel-prolog.sh", env)
	if entries, _ := os.ReadDir(elsewhere); len(entries) != 0 {
		t.Errorf("the Prolog wrote through a link: %v", entries)
	}
}
