package nvml

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
)

// JobFile is what the Prolog wrote for one job: the GPUs Slurm gave it on
// this node.
type JobFile struct {
	JobID string
	// GPUs are NVML indices ("0") or device UUIDs ("GPU-…"), as Slurm
	// and CUDA name them.
	GPUs []string
	// Stamp changes when the file is written again, which happens when a
	// requeued job starts anew on the node.
	Stamp string
}

// maxJobFileBytes bounds one mapping file: a list of 1024 UUIDs fits.
const maxJobFileBytes = 64 << 10

// ReadJobsDir reads the mapping files in dir, one per job named by its job
// id. Other names (the Prolog's temporary files, say) are ignored. A
// missing directory means the Prolog is not installed: no mapping, and the
// collector falls back on the GPUs' processes.
func ReadJobsDir(dir string) ([]JobFile, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the jobs directory: %w", err)
	}
	var jobs []JobFile
	for _, e := range entries {
		if !isJobID(e.Name()) {
			continue
		}
		jf, err := readJobFile(filepath.Join(dir, e.Name()))
		if errors.Is(err, fs.ErrNotExist) {
			continue // the Epilog removed it since the listing
		}
		if err != nil {
			return nil, err
		}
		jf.JobID = e.Name()
		jobs = append(jobs, jf)
	}
	return jobs, nil
}

func readJobFile(path string) (JobFile, error) {
	f, fi, err := openRegular(path)
	if err != nil {
		return JobFile{}, fmt.Errorf("job file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxJobFileBytes))
	if err != nil {
		return JobFile{}, fmt.Errorf("read job file %s: %w", path, err)
	}
	jf := JobFile{Stamp: fmt.Sprintf("%d:%d", fileID(fi), fi.ModTime().UnixNano())}
	// SLURM_JOB_GPUS separates with commas; be lenient about spaces and
	// lines too, since sites write these files with their own scripts.
	for _, tok := range strings.FieldsFunc(string(data), func(r rune) bool {
		return r == ',' || r == ' ' || r == '\t' || r == '\n' || r == '\r'
	}) {
		jf.GPUs = append(jf.GPUs, tok)
	}
	return jf, nil
}

// isJobID accepts Slurm job ids: decimal, and short enough for a report.
func isJobID(s string) bool {
	if s == "" || len(s) > 20 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// Slurm puts each job's processes in a cgroup named after the job:
//
//	cgroup v1: /slurm/uid_1000/job_123/step_0/task_0 (one line per
//	           controller; /slurm_NODE/... when several slurmd share a host)
//	cgroup v2: 0::/system.slice/slurmstepd.scope/job_123/step_0/user/task_0
//	           (NODE_slurmstepd.scope with several slurmd)
//
// Both are anchored at the hierarchy's root, the v2 one below slices only:
// a user may create cgroups of any name in the subtree systemd delegates
// to them (below user@UID.service), and a process there named
// .../slurmstepd.scope/job_123 must not pass for job 123's.
var (
	cgroupV1Job = regexp.MustCompile(`^/slurm[^/]*/uid_[0-9]+/job_([0-9]+)(?:/|$)`)
	cgroupV2Job = regexp.MustCompile(`^/(?:[^/]+\.slice/)*[^/]*slurmstepd\.scope/job_([0-9]+)(?:/|$)`)
)

// maxCgroupBytes bounds /proc/PID/cgroup: a line per controller.
const maxCgroupBytes = 16 << 10

// JobOfPID returns the Slurm job whose cgroup holds process pid, reading
// procRoot/PID/cgroup (procRoot is /proc but for tests). It returns ""
// with no error for a process outside any job, and for one that has
// exited since NVML listed it.
func JobOfPID(procRoot string, pid uint32) (string, error) {
	path := filepath.Join(procRoot, strconv.FormatUint(uint64(pid), 10), "cgroup")
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("cgroup of process %d: %w", pid, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxCgroupBytes))
	if errors.Is(err, syscall.ESRCH) {
		return "", nil // exited between the open and the read
	}
	if err != nil {
		return "", fmt.Errorf("cgroup of process %d: %w", pid, err)
	}
	return JobOfCgroup(string(data)), nil
}

// JobOfCgroup finds the job id in the content of a /proc/PID/cgroup file.
func JobOfCgroup(content string) string {
	for _, line := range strings.Split(content, "\n") {
		// hierarchy-ID:controllers:path; the path may hold colons.
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		path := parts[2]
		for _, re := range []*regexp.Regexp{cgroupV2Job, cgroupV1Job} {
			if m := re.FindStringSubmatch(path); m != nil && isJobID(m[1]) {
				return m[1]
			}
		}
	}
	return ""
}
