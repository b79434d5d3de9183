package nvml

import (
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// writeProc builds a fake /proc with one cgroup file per process.
func writeProc(t *testing.T, cgroups map[uint32]string) string {
	t.Helper()
	root := t.TempDir()
	for pid, content := range cgroups {
		dir := filepath.Join(root, strconv.FormatUint(uint64(pid), 10))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroup"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

const (
	cgroupV1 = `12:pids:/slurm/uid_1000/job_4242/step_0/task_0
11:memory:/slurm/uid_1000/job_4242/step_0/task_0
10:devices:/slurm/uid_1000/job_4242/step_0
1:name=systemd:/system.slice/slurmd.service
`
	cgroupV1MultipleSlurmd = `5:freezer:/slurm_node7/uid_0/job_77/step_batch/task_0
`
	cgroupV2 = `0::/system.slice/slurmstepd.scope/job_9001/step_0/user/task_0
`
	cgroupV2MultipleSlurmd = `0::/system.slice/node3_slurmstepd.scope/job_12/step_extern/user/task_special
`
	cgroupV2Stepd = `0::/system.slice/slurmstepd.scope/system
`
	cgroupOther = `0::/user.slice/user-1000.slice/session-3.scope
`
	cgroupLookalike = `0::/user.slice/job_55/x
11:memory:/slurmx/uid_1000/job_4x/step_0
`
)

func TestJobOfCgroup(t *testing.T) {
	cases := []struct{ name, content, want string }{
		{"cgroup v1", cgroupV1, "4242"},
		{"cgroup v1, several slurmd", cgroupV1MultipleSlurmd, "77"},
		{"cgroup v2", cgroupV2, "9001"},
		{"cgroup v2, several slurmd", cgroupV2MultipleSlurmd, "12"},
		{"slurmstepd itself", cgroupV2Stepd, ""},
		{"a login session", cgroupOther, ""},
		{"job_ outside Slurm's tree", cgroupLookalike, ""},
		{"empty", "", ""},
		{"no trailing path", "0::/system.slice/slurmstepd.scope/job_5", "5"},
	}
	for _, c := range cases {
		if got := JobOfCgroup(c.content); got != c.want {
			t.Errorf("%s: job %q, want %q", c.name, got, c.want)
		}
	}
}

func TestJobOfPID(t *testing.T) {
	root := writeProc(t, map[uint32]string{100: cgroupV1, 200: cgroupV2, 300: cgroupOther})
	cases := []struct {
		pid  uint32
		want string
	}{
		{100, "4242"},
		{200, "9001"},
		{300, ""},
		{400, ""}, // exited since NVML listed it
	}
	for _, c := range cases {
		got, err := JobOfPID(root, c.pid)
		if err != nil || got != c.want {
			t.Errorf("pid %d: job %q, err %v; want %q", c.pid, got, err, c.want)
		}
	}
}

func TestReadJobsDir(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"101":           "0,1\n",
		"102":           "2 3\n4",
		"103":           "GPU-fa4e0000-0000-0000-0000-000000000005\n",
		"104":           "",
		"105.tmp.12345": "6", // the Prolog's file before its rename
		"README":        "not a job",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(dir, "101"), filepath.Join(dir, "106")); err != nil {
		t.Fatal(err)
	}
	_, err := ReadJobsDir(dir)
	if err == nil || !strings.Contains(err.Error(), "106") {
		t.Fatalf("a symbolic link was followed: err %v", err)
	}
	os.Remove(filepath.Join(dir, "106"))
	jobs, err := ReadJobsDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, j := range jobs {
		got[j.JobID] = j.GPUs
		if j.Stamp == "" {
			t.Errorf("job %s has no stamp", j.JobID)
		}
	}
	want := map[string][]string{
		"101": {"0", "1"},
		"102": {"2", "3", "4"},
		"103": {"GPU-fa4e0000-0000-0000-0000-000000000005"},
		"104": nil,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("jobs %v, want %v", got, want)
	}

	missing, err := ReadJobsDir(filepath.Join(dir, "absent"))
	if err != nil || missing != nil {
		t.Errorf("a missing directory: %v, %v; want nothing and no error", missing, err)
	}
}

// TestJobFileStamp: the Prolog writing the file again (a requeued job
// starting over) changes its stamp.
func TestJobFileStamp(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "7")
	write := func() string {
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte("0\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
		jobs, err := ReadJobsDir(dir)
		if err != nil || len(jobs) != 1 {
			t.Fatalf("%v %v", jobs, err)
		}
		return jobs[0].Stamp
	}
	first := write()
	if again, _ := ReadJobsDir(dir); again[0].Stamp != first {
		t.Error("stamp changed without a write")
	}
	if second := write(); second == first {
		t.Error("stamp unchanged after the file was replaced")
	}
}
