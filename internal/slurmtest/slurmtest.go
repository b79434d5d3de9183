package slurmtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// EnvFileRelPath is where slurm-up.sh writes the settings, relative to the
// repository root. The file exists only while the local Slurm works.
const EnvFileRelPath = ".local/slurm/env"

// APIVersion is the slurmrestd API version the helpers speak (Slurm 24.11
// serves v0.0.40 to v0.0.42).
const APIVersion = "v0.0.42"

// Env describes a running local Slurm and carries the jobs one test submitted.
type Env struct {
	// URL of slurmrestd, e.g. http://127.0.0.1:16820.
	URL string
	// UserName and Token go into X-SLURM-USER-NAME / X-SLURM-USER-TOKEN. The
	// token is an admin one (root), so it may change any job and node.
	UserName string
	Token    string
	// SharedDir is a host folder that jobs see as SharedDirInJob.
	SharedDir      string
	SharedDirInJob string
	// Partition holds every node of the layout.
	Partition string
	// MixedPartition holds one node with GPUs of two types (v100 and k80),
	// for jobs whose GRES names several types; empty when the local Slurm
	// has none.
	MixedPartition string
	// GPUNodes is the node layout, "type:nodes:gpus_per_node ...".
	GPUNodes string
	// CollectorDir holds, per node N, the folders the node's Prolog
	// writes for the collector: CollectorDir/N/jobs (job to GPUs) and
	// CollectorDir/N/progress (the jobs' progress files). Empty when the
	// local Slurm runs no Prolog.
	CollectorDir string
	// Paths of wrapper scripts that run the Slurm commands against this Slurm.
	SbatchPath, ScontrolPath, SqueuePath, SinfoPath, ScancelPath string
	// Accounting is set when slurmdbd runs beside this Slurm (scripts/
	// slurm/accounts.sh has its account tree); SacctPath and
	// SacctmgrPath are then its commands.
	Accounting              bool
	SacctPath, SacctmgrPath string

	client *http.Client

	mu        sync.Mutex
	submitted []int
}

// requiredVars are the settings without which the helpers cannot work.
var requiredVars = []string{
	"SLURMRESTD_URL", "SLURM_JWT_FILE", "SLURM_USER_NAME", "SLURM_SHARED_DIR",
	"SLURM_SHARED_DIR_IN_JOB", "SBATCH", "SCONTROL", "SQUEUE", "SINFO", "SCANCEL",
}

// FromEnv returns the local Slurm's settings, from the environment when
// SLURMRESTD_URL is set there, else from .local/slurm/env found by walking up
// from the working directory. It skips the test when neither is there, and
// fails it when the settings are there but broken.
func FromEnv(t testing.TB) *Env {
	t.Helper()
	vars, source, err := lookupSettings()
	if err != nil {
		t.Fatalf("slurmtest: %v", err)
	}
	if vars == nil {
		t.Skip("slurmtest: no local Slurm (SLURMRESTD_URL unset and no " + EnvFileRelPath + "); run `make slurm-up`")
	}
	env, err := newEnv(vars)
	if err != nil {
		t.Fatalf("slurmtest: settings from %s: %v", source, err)
	}
	return env
}

// lookupSettings returns nil vars (and no error) when no settings exist.
func lookupSettings() (map[string]string, string, error) {
	if os.Getenv("SLURMRESTD_URL") != "" {
		vars := map[string]string{}
		for _, name := range append(requiredVars, "SLURM_PARTITION", "SLURM_GPU_NODES", "SLURM_MIXED_PARTITION", "SLURM_COLLECTOR_DIR",
			"SLURM_ACCOUNTING", "SACCT", "SACCTMGR") {
			vars[name] = os.Getenv(name)
		}
		return vars, "the environment", nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return nil, "", fmt.Errorf("working directory: %w", err)
	}
	for {
		path := filepath.Join(dir, EnvFileRelPath)
		f, err := os.Open(path)
		if err == nil {
			defer f.Close()
			vars, err := parseEnvFile(f)
			if err != nil {
				return nil, "", fmt.Errorf("%s: %w", path, err)
			}
			return vars, path, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return nil, "", fmt.Errorf("opening %s: %w", path, err)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return nil, "", nil
		}
		dir = parent
	}
}

func newEnv(vars map[string]string) (*Env, error) {
	var missing []string
	for _, name := range requiredVars {
		if vars[name] == "" {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("missing %s", strings.Join(missing, ", "))
	}
	token, err := os.ReadFile(vars["SLURM_JWT_FILE"])
	if err != nil {
		return nil, fmt.Errorf("reading the token: %w", err)
	}
	env := &Env{
		URL:            strings.TrimRight(vars["SLURMRESTD_URL"], "/"),
		UserName:       vars["SLURM_USER_NAME"],
		Token:          strings.TrimSpace(string(token)),
		SharedDir:      vars["SLURM_SHARED_DIR"],
		SharedDirInJob: vars["SLURM_SHARED_DIR_IN_JOB"],
		Partition:      vars["SLURM_PARTITION"],
		MixedPartition: vars["SLURM_MIXED_PARTITION"],
		GPUNodes:       vars["SLURM_GPU_NODES"],
		CollectorDir:   vars["SLURM_COLLECTOR_DIR"],
		SbatchPath:     vars["SBATCH"],
		ScontrolPath:   vars["SCONTROL"],
		SqueuePath:     vars["SQUEUE"],
		SinfoPath:      vars["SINFO"],
		ScancelPath:    vars["SCANCEL"],
		Accounting:     vars["SLURM_ACCOUNTING"] == "1" && vars["SACCTMGR"] != "",
		SacctPath:      vars["SACCT"],
		SacctmgrPath:   vars["SACCTMGR"],
		client:         &http.Client{Timeout: 15 * time.Second},
	}
	if env.Partition == "" {
		env.Partition = "gpu"
	}
	return env, nil
}

// RequireAccounting skips the test where the local Slurm runs without
// slurmdbd (SLURM_ACCOUNTING=0 at make slurm-up).
func (e *Env) RequireAccounting(t testing.TB) {
	t.Helper()
	if !e.Accounting {
		t.Skip("slurmtest: the local Slurm runs without accounting (started with SLURM_ACCOUNTING=0)")
	}
}

// AuthHeader returns the headers slurmrestd wants on every request.
func (e *Env) AuthHeader() http.Header {
	h := http.Header{}
	h.Set("X-SLURM-USER-NAME", e.UserName)
	h.Set("X-SLURM-USER-TOKEN", e.Token)
	return h
}

// HostPath maps a path seen by jobs (under SharedDirInJob) to the host.
func (e *Env) HostPath(jobPath string) string {
	rel, err := filepath.Rel(e.SharedDirInJob, jobPath)
	if err != nil || strings.HasPrefix(rel, "..") {
		return jobPath
	}
	return filepath.Join(e.SharedDir, rel)
}

// JobPath maps a host path under SharedDir to the path jobs see.
func (e *Env) JobPath(hostPath string) string {
	rel, err := filepath.Rel(e.SharedDir, hostPath)
	if err != nil || strings.HasPrefix(rel, "..") {
		return hostPath
	}
	return filepath.Join(e.SharedDirInJob, rel)
}

// Run runs one of the wrapper commands (e.SbatchPath, e.ScontrolPath, ...) from the
// shared folder and returns its standard output; the test fails on a
// non-zero exit, with stderr in the message.
func (e *Env) Run(t testing.TB, command string, args ...string) string {
	t.Helper()
	out, err := e.run(command, args...)
	if err != nil {
		t.Fatalf("slurmtest: %v", err)
	}
	return out
}

func (e *Env) run(command string, args ...string) (string, error) {
	cmd := exec.Command(command, args...)
	cmd.Dir = e.SharedDir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %w: %s", filepath.Base(command),
			strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// Scontrol runs scontrol with the given arguments and returns its output.
func (e *Env) Scontrol(t testing.TB, args ...string) string {
	t.Helper()
	return e.Run(t, e.ScontrolPath, args...)
}

var unsafeNameChars = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// Submit writes script into the shared folder and submits it with
// `sbatch --parsable` plus args (in the partition, unless args name one),
// returning the job id. Without -o/--output the job writes to
// slurm-<id>.out in the shared folder (see JobOutput). The job is
// cancelled when the test ends, if it still runs then.
func (e *Env) Submit(t testing.TB, script string, args ...string) int {
	t.Helper()
	if !strings.HasPrefix(script, "#!") {
		t.Fatalf("slurmtest: Submit: script must start with #! (got %.20q)", script)
	}
	prefix := unsafeNameChars.ReplaceAllString(t.Name(), "_")
	f, err := os.CreateTemp(e.SharedDir, prefix+"-*.sh")
	if err != nil {
		t.Fatalf("slurmtest: Submit: creating the script: %v", err)
	}
	if _, err := f.WriteString(script); err != nil {
		f.Close()
		t.Fatalf("slurmtest: Submit: writing %s: %v", f.Name(), err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("slurmtest: Submit: closing %s: %v", f.Name(), err)
	}
	if err := os.Chmod(f.Name(), 0o755); err != nil {
		t.Fatalf("slurmtest: Submit: %v", err)
	}
	sbatchArgs := []string{"--parsable"}
	if !hasFlag(args, "-p", "--partition") {
		sbatchArgs = append(sbatchArgs, "--partition="+e.Partition)
	}
	sbatchArgs = append(sbatchArgs, args...)
	sbatchArgs = append(sbatchArgs, e.JobPath(f.Name()))
	out := e.Run(t, e.SbatchPath, sbatchArgs...)
	id, err := parseSbatchParsable(out)
	if err != nil {
		t.Fatalf("slurmtest: Submit: %v", err)
	}
	e.mu.Lock()
	e.submitted = append(e.submitted, id)
	e.mu.Unlock()
	t.Cleanup(func() {
		// Best effort: finished jobs make scancel complain, which is fine.
		_, _ = e.run(e.ScancelPath, strconv.Itoa(id))
	})
	return id
}

func hasFlag(args []string, short, long string) bool {
	for _, a := range args {
		if a == short || a == long || strings.HasPrefix(a, long+"=") ||
			(strings.HasPrefix(a, short) && len(a) > len(short) && !strings.HasPrefix(a, "--")) {
			return true
		}
	}
	return false
}

// parseSbatchParsable reads "<id>" or "<id>;<cluster>".
func parseSbatchParsable(out string) (int, error) {
	first, _, _ := strings.Cut(strings.TrimSpace(out), ";")
	id, err := strconv.Atoi(first)
	if err != nil || id <= 0 {
		return 0, fmt.Errorf("sbatch --parsable printed %q, not a job id", out)
	}
	return id, nil
}

// JobOutput reads slurm-<id>.out from the shared folder (the default output
// of a job submitted with Submit); empty when it does not exist yet.
func (e *Env) JobOutput(t testing.TB, id int) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(e.SharedDir, fmt.Sprintf("slurm-%d.out", id)))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("slurmtest: reading the output of job %d: %v", id, err)
	}
	return string(data)
}

// CancelAll cancels every job submitted through this Env. It leaves other
// jobs alone: the cluster is shared with other tests.
func (e *Env) CancelAll(t testing.TB) {
	t.Helper()
	e.mu.Lock()
	ids := slices.Clone(e.submitted)
	e.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	args := make([]string, len(ids))
	for i, id := range ids {
		args[i] = strconv.Itoa(id)
	}
	// scancel exits non-zero when some of the jobs already finished; the
	// remaining ones are cancelled all the same.
	_, _ = e.run(e.ScancelPath, args...)
}

// NumberField is slurmrestd's optional number: {"set", "infinite", "number"}.
type NumberField struct {
	Set      bool  `json:"set"`
	Infinite bool  `json:"infinite"`
	Number   int64 `json:"number"`
}

// Job is the part of a v0.0.42 job record the tests look at.
type Job struct {
	ID           int         `json:"job_id"`
	Name         string      `json:"name"`
	State        []string    `json:"job_state"`
	StateReason  string      `json:"state_reason"`
	Comment      string      `json:"comment"`
	Nodes        string      `json:"nodes"`
	Features     string      `json:"features"`
	TresPerNode  string      `json:"tres_per_node"`
	GresDetail   []string    `json:"gres_detail"`
	RestartCount int         `json:"restart_cnt"`
	Hold         bool        `json:"hold"`
	Priority     NumberField `json:"priority"`
	EligibleTime NumberField `json:"eligible_time"`
}

// HasState reports whether the job's state list holds state (e.g. RUNNING).
func (j Job) HasState(state string) bool { return slices.Contains(j.State, state) }

// RESTError is one entry of slurmrestd's errors[] list.
type RESTError struct {
	Description string `json:"description"`
	Number      int    `json:"error_number"`
	Error       string `json:"error"`
	Source      string `json:"source"`
}

// Request sends a request to slurmrestd with the token and returns the body.
// It fails on transport errors, on a status other than 2xx and on a
// non-empty errors[] (which slurmrestd sometimes sends with status 200).
// body, when not nil, is sent as JSON.
func (e *Env) Request(t testing.TB, method, path string, body any) []byte {
	t.Helper()
	data, err := e.request(method, path, body)
	if err != nil {
		t.Fatalf("slurmtest: %v", err)
	}
	return data
}

func (e *Env) request(method, path string, body any) ([]byte, error) {
	var reader io.Reader
	if body != nil {
		encoded, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("%s %s: encoding the body: %w", method, path, err)
		}
		reader = bytes.NewReader(encoded)
	}
	req, err := http.NewRequest(method, e.URL+path, reader)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	req.Header = e.AuthHeader()
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: reading the reply: %w", method, path, err)
	}
	var envelope struct {
		Errors []RESTError `json:"errors"`
	}
	// A reply that is not JSON leaves errors empty; the status still counts.
	_ = json.Unmarshal(data, &envelope)
	if resp.StatusCode/100 != 2 || len(envelope.Errors) > 0 {
		return data, fmt.Errorf("%s %s: HTTP %d, errors %+v: %.300s", method, path, resp.StatusCode, envelope.Errors, data)
	}
	return data, nil
}

// GetJSON GETs path (e.g. "/slurm/v0.0.42/nodes") and decodes the reply into out.
func (e *Env) GetJSON(t testing.TB, path string, out any) {
	t.Helper()
	data := e.Request(t, http.MethodGet, path, nil)
	if err := json.Unmarshal(data, out); err != nil {
		t.Fatalf("slurmtest: GET %s: decoding the reply: %v", path, err)
	}
}

// PostJSON POSTs body as JSON to path, e.g. a job update to
// "/slurm/v0.0.42/job/ID", and fails the test on any error in the reply.
func (e *Env) PostJSON(t testing.TB, path string, body any) {
	t.Helper()
	e.Request(t, http.MethodPost, path, body)
}

// Job fetches one job through REST.
func (e *Env) Job(t testing.TB, id int) Job {
	t.Helper()
	job, err := e.job(id)
	if err != nil {
		t.Fatalf("slurmtest: %v", err)
	}
	return job
}

func (e *Env) job(id int) (Job, error) {
	path := fmt.Sprintf("/slurm/%s/job/%d", APIVersion, id)
	data, err := e.request(http.MethodGet, path, nil)
	if err != nil {
		return Job{}, err
	}
	var reply struct {
		Jobs []Job `json:"jobs"`
	}
	if err := json.Unmarshal(data, &reply); err != nil {
		return Job{}, fmt.Errorf("GET %s: decoding the reply: %w", path, err)
	}
	if len(reply.Jobs) != 1 {
		return Job{}, fmt.Errorf("GET %s: %d jobs in the reply, want 1", path, len(reply.Jobs))
	}
	return reply.Jobs[0], nil
}

// terminalStates end a job for good: waiting for another state is pointless.
var terminalStates = []string{
	"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL",
	"OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "PREEMPTED",
}

// WaitState polls the job through REST until its state list holds state
// (e.g. "RUNNING", "PENDING", "COMPLETED") and returns the job as then seen.
// The test fails at the timeout, or at once when the job ends in another
// final state. Note that a requeued job is PENDING and COMPLETING at first.
func (e *Env) WaitState(t testing.TB, id int, state string, timeout time.Duration) Job {
	t.Helper()
	return e.WaitFor(t, id, state, timeout, func(j Job) bool { return j.HasState(state) })
}

// WaitFor polls the job through REST every 200 ms until done(job) holds and
// returns the job as then seen; what describes the condition in failures.
// The test fails at the timeout, or at once when the job reaches a final
// state that does not satisfy done.
func (e *Env) WaitFor(t testing.TB, id int, what string, timeout time.Duration, done func(Job) bool) Job {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		job, err := e.job(id)
		if err != nil {
			t.Fatalf("slurmtest: waiting for job %d to be %s: %v", id, what, err)
		}
		if done(job) {
			return job
		}
		for _, final := range terminalStates {
			if job.HasState(final) {
				t.Fatalf("slurmtest: job %d ended %v (reason %q) while waiting for %s", id, job.State, job.StateReason, what)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("slurmtest: job %d still %v (reason %q) after %v, want %s", id, job.State, job.StateReason, timeout, what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// ExpectedNode is one node that the SLURM_GPU_NODES layout defines.
type ExpectedNode struct {
	Name    string
	GPUType string
	GPUs    int
}

var nodeGroup = regexp.MustCompile(`^([a-z0-9]+):([0-9]+):([1-9][0-9]*)$`)

// ParseGPUNodes expands a layout "type:nodes:gpus_per_node ..." into nodes
// named <type>-<i>, as slurm-up.sh names them.
func ParseGPUNodes(spec string) ([]ExpectedNode, error) {
	groups := strings.Fields(spec)
	if len(groups) == 0 {
		return nil, errors.New("no node groups in the GPU node layout")
	}
	var nodes []ExpectedNode
	for _, group := range groups {
		m := nodeGroup.FindStringSubmatch(group)
		if m == nil {
			return nil, fmt.Errorf("bad node group %q (want type:nodes:gpus_per_node, e.g. v100:2:4)", group)
		}
		count, _ := strconv.Atoi(m[2])
		gpus, _ := strconv.Atoi(m[3])
		for i := 1; i <= count; i++ {
			nodes = append(nodes, ExpectedNode{Name: fmt.Sprintf("%s-%d", m[1], i), GPUType: m[1], GPUs: gpus})
		}
	}
	return nodes, nil
}

// Accounted is what slurmdbd recorded of a job (sacct): its state, as
// Slurm's accounting keeps it after the controller forgets the job, and
// how many times it was requeued.
type Accounted struct {
	ID       int
	State    string
	Restarts int
	User     string
	Account  string
	QOS      string
}

// Sacct reads the accounting records of jobs ids (allocations only, no
// steps) through sacct --json. It needs accounting (RequireAccounting).
func (e *Env) Sacct(t testing.TB, ids ...int) map[int]Accounted {
	t.Helper()
	list := make([]string, len(ids))
	for i, id := range ids {
		list[i] = strconv.Itoa(id)
	}
	out := e.Run(t, e.SacctPath, "--json", "-X", "-j", strings.Join(list, ","))
	var reply struct {
		Jobs []struct {
			JobID      int    `json:"job_id"`
			User       string `json:"user"`
			Account    string `json:"account"`
			QOS        string `json:"qos"`
			RestartCnt int    `json:"restart_cnt"`
			State      struct {
				Current []string `json:"current"`
			} `json:"state"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal([]byte(out), &reply); err != nil {
		t.Fatalf("sacct --json: %v: %.300s", err, out)
	}
	got := map[int]Accounted{}
	for _, j := range reply.Jobs {
		got[j.JobID] = Accounted{ID: j.JobID, State: strings.Join(j.State.Current, ","), Restarts: j.RestartCnt,
			User: j.User, Account: j.Account, QOS: j.QOS}
	}
	return got
}
