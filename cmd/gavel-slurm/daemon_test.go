package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/bridge/fake"
	"github.com/gavel-slurm/gavel-slurm/internal/api"
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
		"bad flag value names flag and key": {args: []string{"--config", path, "--round", "soon"}, wantErr: "--round: scheduler.round"},
		"invalid after flags":               {args: []string{"--config", path, "--listen", "nowhere"}, wantErr: "daemon.listen"},
		"missing file":                      {args: []string{"--config", filepath.Join(t.TempDir(), "none.toml")}, wantErr: "none.toml"},
		"stray argument":                    {args: []string{"--config", path, "extra"}, wantErr: `unexpected argument "extra"`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var stderr bytes.Buffer
			cfg, err := loadDaemonConfig(tc.args, &stderr)
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
