package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/bridge/fake"
	"github.com/gavel-slurm/gavel-slurm/internal/api"
	"github.com/gavel-slurm/gavel-slurm/internal/config"
)

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gavel-slurm.toml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestDaemonFlagsOverrideFile(t *testing.T) {
	path := writeConfig(t, "[scheduler]\nround = \"6m\"\npolicy = \"max_min_fairness\"\n[daemon]\nlisten = \"127.0.0.1:9000\"\n")
	tests := map[string]struct {
		args    []string
		check   func(t *testing.T, round time.Duration, policy, listen, parts string, dry bool)
		wantErr string
	}{
		"file only": {
			args: []string{"--config", path},
			check: func(t *testing.T, round time.Duration, policy, listen, parts string, dry bool) {
				if round != 6*time.Minute || policy != "max_min_fairness" || listen != "127.0.0.1:9000" || dry {
					t.Errorf("got %s %s %s %v", round, policy, listen, dry)
				}
			},
		},
		"flags win": {
			args: []string{"--config", path, "--round", "20s", "--policy", "fifo_perf", "--listen", "unix:/run/gs.sock",
				"--partitions", "a,b", "--dry-run"},
			check: func(t *testing.T, round time.Duration, policy, listen, parts string, dry bool) {
				if round != 20*time.Second || policy != "fifo_perf" || listen != "unix:/run/gs.sock" || parts != "a,b" || !dry {
					t.Errorf("got %s %s %s %s %v", round, policy, listen, parts, dry)
				}
			},
		},
		"round in bare seconds": {
			args: []string{"--config", path, "--round", "360"},
			check: func(t *testing.T, round time.Duration, policy, listen, parts string, dry bool) {
				if round != 6*time.Minute {
					t.Errorf("--round 360 gave %s", round)
				}
			},
		},
		"round in Slurm form": {
			args: []string{"--config", path, "--round=0-00:02:30"},
			check: func(t *testing.T, round time.Duration, policy, listen, parts string, dry bool) {
				if round != 150*time.Second {
					t.Errorf("--round 0-00:02:30 gave %s", round)
				}
			},
		},
		"bad flag value names flag and key": {args: []string{"--config", path, "--round", "soon"}, wantErr: "--round: scheduler.round"},
		"negative round":                    {args: []string{"--config", path, "--round", "-360"}, wantErr: "--round: scheduler.round: is negative"},
		"bad preempt mode":                  {args: []string{"--config", path, "--default-preempt", "sometimes"}, wantErr: "--default-preempt: scheduler.default_preempt"},
		"bad min run time":                  {args: []string{"--config", path, "--min-run-time", "later"}, wantErr: "--min-run-time: scheduler.min_run_time"},
		"invalid after flags":               {args: []string{"--config", path, "--listen", "nowhere"}, wantErr: "daemon.listen"},
		"missing file":                      {args: []string{"--config", filepath.Join(t.TempDir(), "none.toml")}, wantErr: "none.toml"},
		"stray argument":                    {args: []string{"--config", path, "extra"}, wantErr: `unexpected argument "extra"`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var stderr bytes.Buffer
			cfg, _, err := loadDaemonConfig(tc.args, &stderr)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, cfg.Scheduler.Round, cfg.Scheduler.Policy, cfg.Daemon.Listen, strings.Join(cfg.Slurm.Partitions, ","), cfg.Scheduler.DryRun)
		})
	}
}

func TestDaemonPreemptionSettings(t *testing.T) {
	withMode := writeConfig(t, "[scheduler]\nround = \"1m\"\ndefault_preempt = \"requeue\"\nmin_run_time = \"5m\"\n")
	bare := writeConfig(t, "[scheduler]\nround = \"1m\"\n")
	tests := map[string]struct {
		args        []string
		wantPreempt bridge.PreemptMode
		wantMinRun  time.Duration
	}{
		"defaults: never, twice the round": {[]string{"--config", bare}, bridge.PreemptNever, 2 * time.Minute},
		"min run time follows --round":     {[]string{"--config", bare, "--round", "20"}, bridge.PreemptNever, 40 * time.Second},
		"file":                             {[]string{"--config", withMode}, bridge.PreemptRequeue, 5 * time.Minute},
		"flags win": {[]string{"--config", withMode, "--default-preempt", "checkpoint", "--min-run-time", "90"},
			bridge.PreemptCheckpoint, 90 * time.Second},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg, _, err := loadDaemonConfig(tc.args, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			set := coreSettings(cfg)
			if set.DefaultPreempt != tc.wantPreempt || set.MinRunTime != tc.wantMinRun {
				t.Errorf("settings preempt %q min run %s, want %q %s", set.DefaultPreempt, set.MinRunTime, tc.wantPreempt, tc.wantMinRun)
			}
		})
	}
}

// Without --config the daemon reads the default file if there is one and
// runs on the defaults and flags if not; a file named with --config must
// exist.
func TestDaemonConfigFileIsOptional(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "absent.toml")
	flags := []string{"--slurmrestd-url", "http://127.0.0.1:6820", "--token-file", filepath.Join(dir, "jwt"), "--state-dir", dir}
	tests := map[string]struct {
		defaultPath string
		args        []string
		wantSource  string
		wantErr     string
	}{
		"no default file: defaults and flags": {defaultPath: missing, args: flags, wantSource: ""},
		"default file is read when present": {defaultPath: writeConfig(t, "[scheduler]\nround = \"1m\"\n"), args: flags,
			wantSource: "file"},
		"bad default file is still an error": {defaultPath: writeConfig(t, "[scheduler]\nrounds = \"1m\"\n"), args: flags,
			wantErr: "scheduler.rounds"},
		"missing explicit file is an error even with a default file": {defaultPath: writeConfig(t, ""),
			args: append([]string{"--config", missing}, flags...), wantErr: "absent.toml"},
		"explicit default path that is missing is an error": {defaultPath: missing,
			args: append([]string{"--config", missing}, flags...), wantErr: "no such file"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			old := defaultConfigPath
			defaultConfigPath = tc.defaultPath
			t.Cleanup(func() { defaultConfigPath = old })
			cfg, source, err := loadDaemonConfig(tc.args, io.Discard)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (source != "") != (tc.wantSource != "") {
				t.Errorf("source = %q", source)
			}
			if cfg.Daemon.StateDir != dir || cfg.Slurm.TokenFile != filepath.Join(dir, "jwt") {
				t.Errorf("flags not applied: %+v", cfg)
			}
			if tc.wantSource == "" && cfg.Scheduler.Round != config.Default().Scheduler.Round {
				t.Errorf("round %s is not the default", cfg.Scheduler.Round)
			}
		})
	}
}

// The whole daemon starts with no configuration file at all, on the
// defaults and the flags.
func TestDaemonRunsWithoutConfigFile(t *testing.T) {
	dir := t.TempDir()
	old := defaultConfigPath
	defaultConfigPath = filepath.Join(dir, "absent.toml")
	t.Cleanup(func() { defaultConfigPath = old })
	sock := filepath.Join(dir, "api.sock")
	ctx, cancel := context.WithCancel(context.Background())
	var logs bytes.Buffer
	done := make(chan int)
	go func() {
		done <- runDaemon(ctx, []string{"--slurmrestd-url", "http://127.0.0.1:6820", "--token-file", filepath.Join(dir, "jwt"),
			"--state-dir", dir, "--listen", "unix:" + sock, "--round", "1"}, &logs, fake.New(time.Now))
	}()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var out bytes.Buffer
		if runStatus([]string{"--server", "unix:" + sock, "--json"}, &out, io.Discard) == 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	if rc := <-done; rc != 0 {
		t.Fatalf("rc=%d logs:\n%s", rc, logs.String())
	}
	if !strings.Contains(logs.String(), "no configuration file") {
		t.Errorf("start-up does not say it runs without a file:\n%s", logs.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "state.db")); err != nil {
		t.Errorf("daemon did not start: %v\n%s", err, logs.String())
	}
}

func TestDaemonUnknownPolicyIsAConfigError(t *testing.T) {
	dir := t.TempDir()
	path := writeConfig(t, "[scheduler]\npolicy = \"no_such_policy\"\n[daemon]\nstate_dir = \""+dir+"\"\nlisten = \"unix:"+filepath.Join(dir, "s")+"\"\n")
	var stderr bytes.Buffer
	rc := runDaemon(context.Background(), []string{"--config", path}, &stderr, fake.New(time.Now))
	if rc != 1 || !strings.Contains(stderr.String(), "scheduler.policy") {
		t.Errorf("rc=%d stderr=%s", rc, stderr.String())
	}
}

// TestDaemonServesStatus runs the whole daemon over a fake Slurm for a few
// one-second rounds and reads it back through the status command.
func TestDaemonServesStatus(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "api.sock")
	path := writeConfig(t, `
[slurm]
partitions = ["gpu"]
[scheduler]
round = "1s"
default_grace = "0s"
[daemon]
state_dir = "`+dir+`"
listen = "unix:`+sock+`"
`)
	slurm := fake.New(time.Now)
	slurm.AddNode(bridge.Node{Name: "g1", GPUType: "v100", GPUs: 1, Partitions: []string{"gpu"}})
	managed := slurm.Submit(bridge.Job{User: "ana", Partition: "gpu", GPUs: 1, Comment: "gavel: model=resnet50-bs64"})
	slurm.Submit(bridge.Job{User: "bo", Partition: "gpu", GPUs: 1, Comment: "no tag"})

	ctx, cancel := context.WithCancel(context.Background())
	var logs bytes.Buffer
	done := make(chan int)
	go func() { done <- runDaemon(ctx, []string{"--config", path}, &logs, slurm) }()

	var st api.Status
	deadline := time.Now().Add(10 * time.Second)
	for st.Round.Number < 2 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		var out, errOut bytes.Buffer
		if runStatus([]string{"--server", "unix:" + sock, "--json"}, &out, &errOut) == 0 {
			json.Unmarshal(out.Bytes(), &st)
		}
	}
	cancel()
	if rc := <-done; rc != 0 {
		t.Fatalf("daemon rc=%d logs:\n%s", rc, logs.String())
	}
	if st.Round.Number < 2 {
		t.Fatalf("no second round within 10s; logs:\n%s", logs.String())
	}
	if len(st.Jobs) != 2 || !st.Jobs[0].Managed || st.Jobs[1].Managed {
		t.Errorf("jobs %+v", st.Jobs)
	}
	snap, _ := slurm.Snapshot(context.Background())
	if j, _ := snap.Job(managed); j.Constraints != "v100" || j.Priority == 0 {
		t.Errorf("managed job not steered to v100: %+v", j)
	}
	// One log line per round, with its figures.
	rounds := 0
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, `"message":"round"`) {
			rounds++
			for _, f := range []string{`"jobs":`, `"managed":`, `"actions":`, `"solve_ms":`, `"round_ms":`} {
				if !strings.Contains(line, f) {
					t.Errorf("round log line lacks %s: %s", f, line)
				}
			}
		}
	}
	if rounds < 2 {
		t.Errorf("%d round log lines", rounds)
	}
	if _, err := os.Stat(filepath.Join(dir, "state.db")); err != nil {
		t.Errorf("state database: %v", err)
	}
}

func TestDaemonStateDirFlagIsMadeAbsolute(t *testing.T) {
	t.Chdir(t.TempDir())
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	cfg, _, err := loadDaemonConfig([]string{"--config", writeConfig(t, ""), "--state-dir", "state"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(cwd, "state"); cfg.Daemon.StateDir != want {
		t.Errorf("state dir %q, want %q", cfg.Daemon.StateDir, want)
	}
	if _, _, err := loadDaemonConfig([]string{"--config", writeConfig(t, "[daemon]\nstate_dir = \"state\"\n")}, io.Discard); err == nil ||
		!strings.Contains(err.Error(), "daemon.state_dir") {
		t.Errorf("relative state_dir in the file: err = %v", err)
	}
}

// The daemon logs what is risky in its configuration when it starts.
func TestDaemonLogsWarnings(t *testing.T) {
	dir := t.TempDir()
	token := filepath.Join(dir, "jwt")
	if err := os.WriteFile(token, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	path := writeConfig(t, "[slurm]\ntoken_file = \""+token+"\"\n[daemon]\nstate_dir = \""+dir+"\"\nlisten = \"0.0.0.0:0\"\n")
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // start, log, and stop at once
	var logs bytes.Buffer
	runDaemon(ctx, []string{"--config", path}, &logs, fake.New(time.Now))
	for _, want := range []string{"PrivateData=jobs", "mode 0644"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("logs lack a warning with %q:\n%s", want, logs.String())
		}
	}
}

// A unix socket path is cleared only of an earlier run's socket, never of
// another kind of file.
func TestListenUnixSocketPath(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, "stale.sock")
	ln, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	regular := filepath.Join(dir, "state.db")
	if err := os.WriteFile(regular, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.sock")
	if err := os.Symlink(stale, link); err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		path    string
		wantErr string
	}{
		"fresh path":          {filepath.Join(dir, "new.sock"), ""},
		"stale socket":        {stale, ""},
		"regular file":        {regular, "is not a socket"},
		"directory":           {dir, "is not a socket"},
		"symlink to a socket": {link, "is not a socket"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ln, err := api.Listen("unix:" + tc.path)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				ln.Close()
				return
			}
			if err == nil {
				ln.Close()
				t.Fatal("Listen replaced a path that is not a socket")
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
	if data, err := os.ReadFile(regular); err != nil || string(data) != "precious" {
		t.Errorf("regular file changed: %q, %v", data, err)
	}
	if _, err := os.Lstat(link); err != nil {
		t.Errorf("symlink removed: %v", err)
	}
}

// A daemon pointed at a file that is not a socket refuses to start.
func TestDaemonRefusesToReplaceAFile(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "gavel-slurm.toml")
	if err := os.WriteFile(target, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := writeConfig(t, "[daemon]\nstate_dir = \""+dir+"\"\nlisten = \"unix:"+target+"\"\n")
	var logs bytes.Buffer
	if rc := runDaemon(context.Background(), []string{"--config", path}, &logs, fake.New(time.Now)); rc != 1 ||
		!strings.Contains(logs.String(), "is not a socket") {
		t.Errorf("rc=%d logs:\n%s", rc, logs.String())
	}
	if data, _ := os.ReadFile(target); string(data) != "keep" {
		t.Errorf("file at the socket path changed: %q", data)
	}
}

// SIGHUP re-reads the configuration without losing state: the rounds go
// on from where they were, with the new settings; a configuration that
// does not parse is refused and the daemon runs on the old one.
func TestSIGHUPReloadsTheConfigurationKeepingState(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "api.sock")
	body := func(policy string) string {
		return `
[slurm]
partitions = ["gpu"]
[scheduler]
policy = "` + policy + `"
round = "1s"
[daemon]
state_dir = "` + dir + `"
listen = "unix:` + sock + `"
`
	}
	path := writeConfig(t, body("max_min_fairness_perf"))
	slurm := fake.New(time.Now)
	slurm.AddNode(bridge.Node{Name: "g1", GPUType: "v100", GPUs: 1, Partitions: []string{"gpu"}})
	job := slurm.Submit(bridge.Job{User: "ana", Partition: "gpu", GPUs: 1, Comment: "gavel: model=resnet50-bs64"})
	if err := slurm.Start(job, "g1"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs syncBuffer
	done := make(chan int)
	go func() { done <- runDaemon(ctx, []string{"--config", path}, &logs, slurm) }()
	status := func() api.Status {
		var st api.Status
		var out, errOut bytes.Buffer
		if runStatus([]string{"--server", "unix:" + sock, "--json"}, &out, &errOut) == 0 {
			json.Unmarshal(out.Bytes(), &st) //nolint:errcheck // retried
		}
		return st
	}
	waitFor := func(what string, ok func(api.Status) bool) api.Status {
		t.Helper()
		for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if st := status(); ok(st) {
				return st
			}
		}
		t.Fatalf("no %s; logs:\n%s", what, logs.String())
		return api.Status{}
	}
	before := waitFor("third round", func(st api.Status) bool { return st.Round.Number >= 3 && len(st.Jobs) == 1 })

	// A broken file is refused; the daemon runs on.
	if err := os.WriteFile(path, []byte("[scheduler\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor("round after a refused reload", func(st api.Status) bool { return st.Round.Number >= before.Round.Number+2 })
	if !strings.Contains(logs.String(), "configuration refused") {
		t.Errorf("the broken configuration was not reported; logs:\n%s", logs.String())
	}

	if err := os.WriteFile(path, []byte(body("max_min_fairness")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	after := waitFor("a round with the new policy", func(st api.Status) bool { return st.Round.Policy == "max_min_fairness" })
	if after.Round.Number <= before.Round.Number {
		t.Errorf("round counter went back: %d -> %d", before.Round.Number, after.Round.Number)
	}
	was, now := before.Jobs[0].Received["v100"], after.Jobs[0].Received["v100"]
	if now < was || was == 0 {
		t.Errorf("time received went from %.1f to %.1f s across the reload", was, now)
	}
	cancel()
	if rc := <-done; rc != 0 {
		t.Fatalf("daemon rc=%d logs:\n%s", rc, logs.String())
	}
}

// syncBuffer is a bytes.Buffer safe for the daemon's log writes and the
// test's reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// standbyDaemon is one of two in-process daemons on one state directory.
type standbyDaemon struct {
	sock   string
	config string
	logs   *syncBuffer
	cancel context.CancelFunc
	done   chan int
}

// startOnSharedState starts a daemon on dir over slurm, with its own API
// socket and configuration file (policy given), plus extra flags.
func startOnSharedState(t *testing.T, dir string, slurm bridge.Slurm, policy string, extra ...string) *standbyDaemon {
	t.Helper()
	own := t.TempDir()
	p := &standbyDaemon{sock: filepath.Join(own, "api.sock"), logs: &syncBuffer{}, done: make(chan int, 1)}
	p.config = filepath.Join(own, "gavel-slurm.toml")
	p.writeConfig(t, dir, policy)
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	go func() { p.done <- runDaemon(ctx, append([]string{"--config", p.config}, extra...), p.logs, slurm) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			t.Errorf("daemon on %s did not stop", p.sock)
		}
	})
	return p
}

func (p *standbyDaemon) writeConfig(t *testing.T, dir, policy string) {
	t.Helper()
	body := `
[slurm]
partitions = ["gpu"]
[scheduler]
policy = "` + policy + `"
round = "1s"
[daemon]
state_dir = "` + dir + `"
listen = "unix:` + p.sock + `"
`
	if err := os.WriteFile(p.config, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

// get fetches path from the daemon's API; code 0 when it does not answer.
func (p *standbyDaemon) get(path string) (int, string) {
	client, base := api.Client("unix:" + p.sock)
	resp, err := client.Get(base + path)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func (p *standbyDaemon) status() api.Status {
	var st api.Status
	if code, body := p.get("/v1/status"); code == 200 {
		json.Unmarshal([]byte(body), &st) //nolint:errcheck // retried
	}
	return st
}

func (p *standbyDaemon) waitFor(t *testing.T, what string, within time.Duration, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if ok() {
			return
		}
	}
	t.Fatalf("no %s within %v; logs:\n%s", what, within, p.logs.String())
}

// A second daemon on the same state waits as a standby: its API answers
// (status and /healthz say standby, gavel_slurm_active is 0), it reloads
// its configuration on SIGHUP, and when the active one stops it takes
// over from the saved state (round counter, time received) with the
// configuration it reloaded.
func TestStandbyTakesOverWhenTheActiveStops(t *testing.T) {
	dir := t.TempDir()
	slurm := fake.New(time.Now)
	slurm.AddNode(bridge.Node{Name: "g1", GPUType: "v100", GPUs: 1, Partitions: []string{"gpu"}})
	job := slurm.Submit(bridge.Job{User: "ana", Partition: "gpu", GPUs: 1, Comment: "gavel: model=resnet50-bs64"})
	if err := slurm.Start(job, "g1"); err != nil {
		t.Fatal(err)
	}
	active := startOnSharedState(t, dir, slurm, "max_min_fairness_perf")
	active.waitFor(t, "second round", 15*time.Second, func() bool { return active.status().Round.Number >= 2 })

	standby := startOnSharedState(t, dir, slurm, "max_min_fairness_perf")
	standby.waitFor(t, "standby answer", 10*time.Second, func() bool { code, _ := standby.get("/healthz"); return code != 0 })
	if code, body := standby.get("/healthz"); code != 503 || !strings.HasPrefix(body, "standby: another daemon holds the state "+filepath.Join(dir, "state.db")) {
		t.Errorf("standby /healthz = %d %q", code, body)
	}
	if st := standby.status(); !st.Round.Standby || st.Round.Number != 0 || len(st.Jobs) != 0 {
		t.Errorf("standby status %+v", st)
	}
	var out bytes.Buffer
	if rc := runStatus([]string{"--server", "unix:" + standby.sock}, &out, io.Discard); rc != 0 || !strings.Contains(out.String(), "sent nothing: standby: another daemon holds the state") {
		t.Errorf("status rc=%d:\n%s", rc, out.String())
	}
	if _, body := standby.get("/metrics"); !strings.Contains(body, "\ngavel_slurm_active 0\n") {
		t.Errorf("standby metrics lack gavel_slurm_active 0")
	}
	if _, body := active.get("/metrics"); !strings.Contains(body, "\ngavel_slurm_active 1\n") {
		t.Errorf("active metrics lack gavel_slurm_active 1")
	}
	if code, _ := active.get("/healthz"); code != 200 {
		t.Errorf("active /healthz = %d", code)
	}

	// SIGHUP reaches both (one process): the standby takes the new policy
	// and refuses a broken file; the active one's file is unchanged.
	standby.writeConfig(t, dir, "max_min_fairness")
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	standby.waitFor(t, "the reloaded policy", 10*time.Second, func() bool { return standby.status().Round.Policy == "max_min_fairness" })
	if err := os.WriteFile(standby.config, []byte("[scheduler\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	standby.waitFor(t, "a refused reload", 10*time.Second, func() bool { return strings.Contains(standby.logs.String(), "configuration refused") })
	if st := standby.status(); st.Round.Policy != "max_min_fairness" || !st.Round.Standby {
		t.Errorf("standby after a refused reload: %+v", st.Round)
	}

	before := active.status()
	stopped := time.Now()
	active.cancel()
	if rc := <-active.done; rc != 0 {
		t.Fatalf("active rc=%d logs:\n%s", rc, active.logs.String())
	}
	active.done <- 0 // for the cleanup
	standby.waitFor(t, "takeover", 10*time.Second, func() bool { code, _ := standby.get("/healthz"); return code == 200 })
	t.Logf("took over %v after the active daemon stopped", time.Since(stopped).Round(time.Millisecond))
	standby.waitFor(t, "a round after the takeover", 10*time.Second, func() bool {
		return standby.status().Round.Number > before.Round.Number
	})
	after := standby.status()
	if after.Round.Policy != "max_min_fairness" || after.Round.Standby {
		t.Errorf("after the takeover: %+v", after.Round)
	}
	if len(after.Jobs) != 1 || len(before.Jobs) != 1 || after.Jobs[0].Received["v100"] < before.Jobs[0].Received["v100"] {
		t.Errorf("time received lost in the takeover: before %+v after %+v", before.Jobs, after.Jobs)
	}
	if _, body := standby.get("/metrics"); !strings.Contains(body, "\ngavel_slurm_active 1\n") {
		t.Errorf("metrics after the takeover lack gavel_slurm_active 1")
	}
	for _, want := range []string{"standby: another daemon holds the state", "configuration reloaded (standby)", "taking over"} {
		if !strings.Contains(standby.logs.String(), want) {
			t.Errorf("standby logs lack %q:\n%s", want, standby.logs.String())
		}
	}
}

// A standby stops cleanly (SIGTERM cancels the daemon's context), and with
// --standby=false a daemon that finds the state held exits with an error
// saying why; the active one is not disturbed either way.
func TestStandbyStopsOrIsRefused(t *testing.T) {
	dir := t.TempDir()
	slurm := fake.New(time.Now)
	slurm.AddNode(bridge.Node{Name: "g1", GPUType: "v100", GPUs: 1, Partitions: []string{"gpu"}})
	active := startOnSharedState(t, dir, slurm, "max_min_fairness_perf")
	active.waitFor(t, "first round", 15*time.Second, func() bool { return active.status().Round.Number >= 1 })
	tests := map[string]struct {
		flags    []string
		stop     bool
		wantRC   int
		wantLogs string
	}{
		"standby stopped":    {stop: true, wantRC: 0, wantLogs: "stopped while standby"},
		"standby turned off": {flags: []string{"--standby=false"}, wantRC: 1, wantLogs: "held by another process: another daemon runs on this state (daemon.standby = true waits for it)"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			second := startOnSharedState(t, dir, slurm, "max_min_fairness_perf", tc.flags...)
			if tc.stop {
				second.waitFor(t, "standby answer", 10*time.Second, func() bool { code, _ := second.get("/healthz"); return code == 503 })
				second.cancel()
			}
			var rc int
			select {
			case rc = <-second.done:
				second.done <- rc
			case <-time.After(10 * time.Second):
				t.Fatalf("daemon did not stop; logs:\n%s", second.logs.String())
			}
			if rc != tc.wantRC || !strings.Contains(second.logs.String(), tc.wantLogs) {
				t.Errorf("rc=%d, want %d with %q; logs:\n%s", rc, tc.wantRC, tc.wantLogs, second.logs.String())
			}
			if strings.Contains(second.logs.String(), `"message":"round"`) {
				t.Errorf("the second daemon ran a round while the first held the state")
			}
		})
	}
	if code, _ := active.get("/healthz"); code != 200 {
		t.Errorf("active /healthz = %d after the second daemons went", code)
	}
	n := active.status().Round.Number
	active.waitFor(t, "rounds going on", 10*time.Second, func() bool { return active.status().Round.Number > n })
}
