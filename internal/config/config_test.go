package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/internal/siterules"
)

func TestParseValues(t *testing.T) {
	tests := map[string]struct {
		toml  string
		check func(t *testing.T, c *Config)
	}{
		"empty file keeps defaults": {
			toml: ``,
			check: func(t *testing.T, c *Config) {
				if c.Scheduler.Round != 6*time.Minute || c.Daemon.Listen != "127.0.0.1:8390" || c.Scheduler.DryRun {
					t.Errorf("defaults changed: %+v", c)
				}
				if !c.Daemon.Standby {
					t.Error("standby is off by default: a second daemon on the same state would exit instead of waiting")
				}
				if c.Scheduler.RefillPoll != 30*time.Second {
					t.Errorf("refill_poll = %s, want 30s", c.Scheduler.RefillPoll)
				}
				if c.Scheduler.DefaultPreempt != bridge.PreemptNever {
					t.Errorf("default_preempt = %q, want never", c.Scheduler.DefaultPreempt)
				}
				if c.Scheduler.MinRunTime != DeriveMinRunTime || c.Scheduler.EffectiveMinRunTime() != 12*time.Minute {
					t.Errorf("min_run_time = %s (effective %s), want unset and twice the round",
						c.Scheduler.MinRunTime, c.Scheduler.EffectiveMinRunTime())
				}
			},
		},
		"durations in every accepted form": {
			toml: `
[slurm]
read_timeout = 90
[scheduler]
round = "360"
min_reset_interval = 0.5
default_grace = "01:30"
default_restart_cost = "3m"
restart_hold_min = "1:30:00"
min_run_time = "1-00"
`,
			check: func(t *testing.T, c *Config) {
				got := []time.Duration{c.Slurm.ReadTimeout, c.Scheduler.Round, c.Scheduler.MinResetInterval,
					c.Scheduler.DefaultGrace, c.Scheduler.DefaultRestartCost, c.Scheduler.RestartHoldMin, c.Scheduler.MinRunTime}
				want := []time.Duration{90 * time.Second, 6 * time.Minute, 500 * time.Millisecond, 90 * time.Second, 3 * time.Minute, 90 * time.Minute, 24 * time.Hour}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("durations %v, want %v", got, want)
				}
			},
		},
		"min_run_time follows the round when unset": {
			toml: "[scheduler]\nround = \"20s\"\n",
			check: func(t *testing.T, c *Config) {
				if got := c.Scheduler.EffectiveMinRunTime(); got != 40*time.Second {
					t.Errorf("effective min_run_time = %s, want 40s", got)
				}
			},
		},
		"explicit min_run_time is kept": {
			toml: "[scheduler]\nround = \"20s\"\nmin_run_time = \"5s\"\n",
			check: func(t *testing.T, c *Config) {
				if got := c.Scheduler.EffectiveMinRunTime(); got != 5*time.Second {
					t.Errorf("effective min_run_time = %s, want 5s", got)
				}
			},
		},
		"every section": {
			toml: `
[slurm]
rest_url = "https://ctl.example:6820"
api_version = "v0.0.42"
token_file = "/run/jwt"
user = "root"
partitions = ["gpu", "gpu-long"]
scontrol = "/opt/slurm/bin/scontrol"
read_accounting = false
read_timeout = "2m"
[cluster]
gpu_types = ["k80", "v100"]
throughputs = "physical"
[cluster.cost_per_gpu_hour]
k80 = 0.45
v100 = 2.48
[scheduler]
policy = "finish_time_fairness_perf"
round = "20s"
min_reset_interval = "1m30s"
mechanism = "gavel"
default_grace = "5s"
default_restart_cost = "2m"
grace_signal = "USR2"
default_preempt = "Checkpoint"
min_run_time = "0-00:15"
refill_poll = "45s"
lease = "2m"
dry_run = true
[daemon]
state_dir = "/tmp/gs"
listen = "unix:/run/gavel-slurm.sock"
log_level = "debug"
collector_listen = "0.0.0.0:8391"
collector_token_file = "/etc/gavel-slurm/reports.token"
collector_token_dir = "/etc/gavel-slurm/nodes"
collector_queue_bytes = "32MiB"
collector_node_bytes = 262144
collector_tls_cert = "/etc/gavel-slurm/collector.crt"
collector_tls_key = "/etc/gavel-slurm/collector.key"
collector_warm_up = "45s"
standby = false
[trial_and_error]
enabled = true
weight = 2.5
max_preemptions = 0
poll = "3s"
`,
			check: func(t *testing.T, c *Config) {
				want := Config{
					Slurm: Slurm{RestURL: "https://ctl.example:6820", APIVersion: "v0.0.42", TokenFile: "/run/jwt", User: "root",
						Partitions: []string{"gpu", "gpu-long"}, Scontrol: "/opt/slurm/bin/scontrol", ReadTimeout: 2 * time.Minute},
					Cluster: Cluster{GPUTypes: []string{"k80", "v100"}, CostPerGPUHour: map[string]float64{"k80": 0.45, "v100": 2.48}, Throughputs: "physical"},
					Scheduler: Scheduler{Policy: "finish_time_fairness_perf", Round: 20 * time.Second, MinResetInterval: 90 * time.Second, Mechanism: "gavel",
						DefaultGrace: 5 * time.Second, DefaultRestartCost: 2 * time.Minute, GraceSignal: "USR2", DefaultPreempt: bridge.PreemptCheckpoint,
						MinRunTime: 15 * time.Minute, RefillPoll: 45 * time.Second, Lease: 2 * time.Minute, DryRun: true},
					Daemon: Daemon{StateDir: "/tmp/gs", Listen: "unix:/run/gavel-slurm.sock", LogLevel: "debug",
						CollectorListen: "0.0.0.0:8391", CollectorTokenFile: "/etc/gavel-slurm/reports.token",
						CollectorTokenDir: "/etc/gavel-slurm/nodes", CollectorQueueBytes: 32 << 20, CollectorNodeBytes: 256 << 10,
						CollectorTLSCert: "/etc/gavel-slurm/collector.crt", CollectorTLSKey: "/etc/gavel-slurm/collector.key",
						CollectorWarmUp: 45 * time.Second, Standby: false},
					Rules:         siterules.Default(),
					TrialAndError: TrialAndError{Enabled: true, Weight: 2.5, MaxPreemptions: 0, Poll: 3 * time.Second},
				}
				if !reflect.DeepEqual(*c, want) {
					t.Errorf("got  %+v\nwant %+v", *c, want)
				}
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c, err := Parse([]byte(tc.toml))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			tc.check(t, c)
		})
	}
}

func TestParseSiteRules(t *testing.T) {
	c, err := Parse([]byte(`
[slurm]
partitions = ["gpu", "gpu-long"]
[limits]
max_weight = 4
max_grace = "5m"
allowed_classes = ["te", "best-effort"]
allowed_preempt = ["checkpoint", "Requeue"]
[limits.partition.gpu-long]
max_grace = "30m"
max_restart = "20m"
allowed_preempt = []
[limits.partition.gpu]
max_weight = 2.5
[entities]
from = "user"
allow_tag_entity = true
[entities.account_map]
labA = "vision"
labB = ["nlp", "speech"]
[weights]
allow_tag_weight = true
[weights.account]
labA = 2
labB = 0.5
[weights.qos]
high = 4
`))
	if err != nil {
		t.Fatal(err)
	}
	want := siterules.Rules{
		Limits: siterules.Limits{MaxWeight: 4, MaxGrace: 5 * time.Minute,
			AllowedClasses: []bridge.Class{bridge.ClassTrialAndError, bridge.ClassBestEffort},
			AllowedPreempt: []bridge.PreemptMode{bridge.PreemptCheckpoint, bridge.PreemptRequeue}},
		Partitions: map[string]siterules.Limits{
			"gpu-long": {MaxGrace: 30 * time.Minute, MaxRestart: 20 * time.Minute, AllowedPreempt: []bridge.PreemptMode{}},
			"gpu":      {MaxWeight: 2.5},
		},
		EntitiesFrom:    siterules.EntitiesFromUser,
		AccountEntities: map[string][]string{"labA": {"vision"}, "labB": {"nlp", "speech"}},
		AllowTagEntity:  true,
		AccountWeights:  map[string]float64{"labA": 2, "labB": 0.5},
		QOSWeights:      map[string]float64{"high": 4},
		AllowTagWeight:  true,
	}
	if !reflect.DeepEqual(c.Rules, want) {
		t.Fatalf("rules\n got  %+v\n want %+v", c.Rules, want)
	}
	// The partition's table overrides only the keys it sets.
	got := c.Rules.Apply(siterules.JobFacts{Partition: "gpu-long", Account: "labB",
		Tag: bridge.Tag{Weight: 9, Grace: 20 * time.Minute, Preempt: bridge.PreemptRequeue}})
	if got.Weight != 4 || got.Grace != 20*time.Minute || got.Preempt != bridge.PreemptUnset || got.Entity != "" {
		t.Errorf("applied in gpu-long: %+v", got)
	}
}

func TestParseErrorsNameTheKey(t *testing.T) {
	tests := map[string]struct {
		toml    string
		wantKey string
	}{
		"unknown top-level key":    {`colour = "blue"`, "colour"},
		"unknown key in section":   {"[scheduler]\nrounds = \"20s\"", "scheduler.rounds"},
		"unknown section":          {"[slurmrestd]\nurl = \"x\"", "slurmrestd"},
		"bad duration":             {"[scheduler]\nround = \"twenty\"", "scheduler.round"},
		"zero read timeout":        {"[slurm]\nread_timeout = \"0s\"", "slurm.read_timeout"},
		"duration as table":        {"[scheduler]\nround = {s = 20}", "scheduler.round"},
		"negative number duration": {"[scheduler]\nround = -20", "scheduler.round"},
		"infinite duration":        {"[scheduler]\nround = inf", "scheduler.round"},
		"NaN duration":             {"[scheduler]\ndefault_grace = nan", "scheduler.default_grace"},
		"absurd duration":          {"[scheduler]\nround = \"3651d\"", "scheduler.round"},
		"bad preempt mode":         {"[scheduler]\ndefault_preempt = \"sometimes\"", "scheduler.default_preempt"},
		"bad min run time":         {"[scheduler]\nmin_run_time = \"soon\"", "scheduler.min_run_time"},
		"refill poll too short":    {"[scheduler]\nrefill_poll = \"100ms\"", "scheduler.refill_poll"},
		"lease under two rounds":   {"[scheduler]\nround = \"6m\"\nlease = \"10m\"", "scheduler.lease"},
		"negative min run time":    {"[scheduler]\nmin_run_time = \"-1m\"", "scheduler.min_run_time"},
		"round too short":          {"[scheduler]\nround = \"10ms\"", "scheduler.round"},
		"negative grace":           {"[scheduler]\ndefault_grace = \"-5s\"", "scheduler.default_grace"},
		"negative reset interval":  {"[scheduler]\nmin_reset_interval = \"-1s\"", "scheduler.min_reset_interval"},
		"unknown mechanism":        {"[scheduler]\nmechanism = \"ideal\"", "scheduler.mechanism"},
		"negative TE weight":       {"[trial_and_error]\nweight = -1.0", "trial_and_error.weight"},
		"negative TE cap":          {"[trial_and_error]\nmax_preemptions = -1", "trial_and_error.max_preemptions"},
		"TE poll too short":        {"[trial_and_error]\npoll = \"100ms\"", "trial_and_error.poll"},
		"bad signal":               {"[scheduler]\ngrace_signal = \"KILL\"", "scheduler.grace_signal"},
		"bad policy name":          {"[scheduler]\npolicy = \"Max Min\"", "scheduler.policy"},
		"dry_run not bool":         {"[scheduler]\ndry_run = \"yes\"", "scheduler.dry_run"},
		"url without scheme":       {"[slurm]\nrest_url = \"ctl:6820\"", "slurm.rest_url"},
		"bad api version":          {"[slurm]\napi_version = \"41\"", "slurm.api_version"},
		"no partitions":            {"[slurm]\npartitions = []", "slurm.partitions"},
		"bad partition name":       {"[slurm]\npartitions = [\"gpu one\"]", "slurm.partitions"},
		"duplicate gpu type":       {"[cluster]\ngpu_types = [\"k80\", \"k80\"]", "cluster.gpu_types"},
		"negative cost":            {"[cluster.cost_per_gpu_hour]\nv100 = -1.0", "cluster.cost_per_gpu_hour.v100"},
		"cost for unlisted type":   {"[cluster]\ngpu_types = [\"k80\"]\n[cluster.cost_per_gpu_hour]\nv100 = 1.0", "cluster.cost_per_gpu_hour.v100"},
		"bad throughput table":     {"[cluster]\nthroughputs = \"measured\"", "cluster.throughputs"},
		"listen without port":      {"[daemon]\nlisten = \"localhost\"", "daemon.listen"},
		"relative unix socket":     {"[daemon]\nlisten = \"unix:gs.sock\"", "daemon.listen"},
		"bad log level":            {"[daemon]\nlog_level = \"verbose\"", "daemon.log_level"},
		"empty state dir":          {"[daemon]\nstate_dir = \"\"", "daemon.state_dir"},
		"relative state dir":       {"[daemon]\nstate_dir = \"var/gs\"", "daemon.state_dir"},
		"dot state dir":            {"[daemon]\nstate_dir = \".\"", "daemon.state_dir"},
		"NaN cost":                 {"[cluster.cost_per_gpu_hour]\nv100 = nan", "cluster.cost_per_gpu_hour.v100"},
		"infinite cost":            {"[cluster.cost_per_gpu_hour]\nv100 = inf", "cluster.cost_per_gpu_hour.v100"},
		"negative infinite cost":   {"[cluster.cost_per_gpu_hour]\nv100 = -inf", "cluster.cost_per_gpu_hour.v100"},
		"remote plain http":        {"[slurm]\nrest_url = \"http://ctl.example:6820\"", "allow_insecure_http"},
		"remote plain http by IP":  {"[slurm]\nrest_url = \"http://10.0.0.5:6820\"", "slurm.rest_url"},
		"insecure http not bool":   {"[slurm]\nallow_insecure_http = \"yes\"", "slurm.allow_insecure_http"},
		"max weight too large":     {"[limits]\nmax_weight = 1e9", "limits.max_weight"},
		"max weight zero":          {"[limits]\nmax_weight = 0", "limits.max_weight"},
		"max weight NaN":           {"[limits]\nmax_weight = nan", "limits.max_weight"},
		"max grace zero":           {"[limits]\nmax_grace = \"0s\"", "limits.max_grace"},
		"max restart zero":         {"[limits]\nmax_restart = \"0s\"", "limits.max_restart"},
		"negative restart cost":    {"[scheduler]\ndefault_restart_cost = \"-5s\"", "scheduler.default_restart_cost"},
		"negative hold floor":      {"[scheduler]\nrestart_hold_min = \"-5s\"", "scheduler.restart_hold_min"},
		"max grace bad":            {"[limits]\nmax_grace = \"long\"", "limits.max_grace"},
		"unknown class":            {"[limits]\nallowed_classes = [\"urgent\"]", "limits.allowed_classes"},
		"unknown preempt mode":     {"[limits]\nallowed_preempt = [\"kill\"]", "limits.allowed_preempt"},
		"partition max weight":     {"[limits.partition.gpu]\nmax_weight = -1", "limits.partition.gpu.max_weight"},
		"partition unknown key":    {"[limits.partition.gpu]\nmax_weigth = 2", "limits.partition.gpu.max_weigth"},
		"partition bad class":      {"[limits.partition.gpu]\nallowed_classes = [\"x\"]", "limits.partition.gpu.allowed_classes"},
		"unknown entity source":    {"[entities]\nfrom = \"group\"", "entities.from"},
		"account map number":       {"[entities.account_map]\nlabA = 3", "entities.account_map"},
		"account map empty list":   {"[entities.account_map]\nlabA = []", "entities.account_map.labA"},
		"account map mixed list":   {"[entities.account_map]\nlabA = [\"a\", 2]", "entities.account_map"},
		"account weight zero":      {"[weights.account]\nlabA = 0", "weights.account.labA"},
		"qos weight infinite":      {"[weights.qos]\nhigh = inf", "weights.qos.high"},
		"weight as string":         {"[weights.qos]\nhigh = \"4\"", "weights.qos.high"},
		"unknown weights key":      {"[weights]\nuser = {ana = 2}", "weights.user"},
		"relative token dir":       {"[daemon]\ncollector_token_dir = \"etc/nodes\"", "daemon.collector_token_dir"},
		"queue bytes too small":    {"[daemon]\ncollector_queue_bytes = 100", "daemon.collector_queue_bytes"},
		"queue bytes negative":     {"[daemon]\ncollector_queue_bytes = -1", "daemon.collector_queue_bytes"},
		"queue bytes bad unit":     {"[daemon]\ncollector_queue_bytes = \"64 MB\"", "daemon.collector_queue_bytes"},
		"queue bytes overflow":     {"[daemon]\ncollector_queue_bytes = \"9999999999GiB\"", "daemon.collector_queue_bytes"},
		"queue bytes float":        {"[daemon]\ncollector_queue_bytes = 1.5e6", "daemon.collector_queue_bytes"},
		"node bytes over queue":    {"[daemon]\ncollector_queue_bytes = \"1MiB\"\ncollector_node_bytes = \"2MiB\"", "daemon.collector_node_bytes"},
		"node bytes zero":          {"[daemon]\ncollector_node_bytes = 0", "daemon.collector_node_bytes"},
		"TLS cert without key":     {"[daemon]\ncollector_tls_cert = \"/etc/c.pem\"", "daemon.collector_tls_cert"},
		"TLS key without cert":     {"[daemon]\ncollector_tls_key = \"/etc/k.pem\"", "daemon.collector_tls_cert"},
		"relative TLS key":         {"[daemon]\ncollector_tls_cert = \"/etc/c.pem\"\ncollector_tls_key = \"k.pem\"", "daemon.collector_tls_key"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(tc.toml))
			if err == nil {
				t.Fatal("Parse accepted a bad file")
			}
			if !strings.Contains(err.Error(), tc.wantKey) {
				t.Errorf("error %q does not name %q", err, tc.wantKey)
			}
		})
	}
}

func TestRestURLTransport(t *testing.T) {
	tests := map[string]struct {
		toml   string
		wantOK bool
	}{
		"https anywhere":               {`rest_url = "https://ctl.example:6820"`, true},
		"http to 127.0.0.1":            {`rest_url = "http://127.0.0.1:6820"`, true},
		"http to another loopback":     {`rest_url = "http://127.0.0.2:6820"`, true},
		"http to localhost":            {`rest_url = "http://LOCALHOST:6820"`, true},
		"http to ::1":                  {`rest_url = "http://[::1]:6820"`, true},
		"http to a host":               {`rest_url = "http://ctl.example:6820"`, false},
		"http to a name like loopback": {`rest_url = "http://127.0.0.1.example:6820"`, false},
		"http to a host, allowed":      {"rest_url = \"http://ctl.example:6820\"\nallow_insecure_http = true", true},
		"http to a host, not allowed":  {"rest_url = \"http://ctl.example:6820\"\nallow_insecure_http = false", false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte("[slurm]\n" + tc.toml))
			if (err == nil) != tc.wantOK {
				t.Errorf("err = %v, want accepted %v", err, tc.wantOK)
			}
		})
	}
}

func TestWarnings(t *testing.T) {
	tests := map[string]struct {
		toml string
		want []string // a fragment of each warning, in order
	}{
		"defaults are quiet":    {"", nil},
		"loopback listen":       {"[daemon]\nlisten = \"127.0.0.1:9000\"", nil},
		"localhost listen":      {"[daemon]\nlisten = \"localhost:9000\"", nil},
		"IPv6 loopback listen":  {"[daemon]\nlisten = \"[::1]:9000\"", nil},
		"unix socket":           {"[daemon]\nlisten = \"unix:/run/gs.sock\"", nil},
		"every interface":       {"[daemon]\nlisten = \":9000\"", []string{"every interface"}},
		"wildcard address":      {"[daemon]\nlisten = \"0.0.0.0:9000\"", []string{`daemon.listen "0.0.0.0:9000" is reachable from other hosts`}},
		"host name":             {"[daemon]\nlisten = \"gpu-head:9000\"", []string{"reachable from other hosts (gpu-head)"}},
		"says what is exposed":  {"[daemon]\nlisten = \"10.1.2.3:9000\"", []string{"PrivateData=jobs"}},
		"allowed insecure http": {"[slurm]\nrest_url = \"http://ctl:6820\"\nallow_insecure_http = true", []string{"JWT crosses the network in clear"}},
		"limits of a partition not scheduled": {"[limits.partition.cpu]\nmax_weight = 2",
			[]string{`limits.partition.cpu has no effect: "cpu" is not in slurm.partitions`}},
		"limits of a scheduled partition": {"[limits.partition.gpu]\nmax_weight = 2", nil},
		"https is quiet":                  {"[slurm]\nrest_url = \"https://ctl:6820\"", nil},
		"collector endpoint in clear": {"[daemon]\ncollector_listen = \"0.0.0.0:8391\"",
			[]string{"collector tokens cross the network in clear"}},
		"collector endpoint with TLS":    {"[daemon]\ncollector_listen = \"0.0.0.0:8391\"\ncollector_tls_cert = \"/c.pem\"\ncollector_tls_key = \"/k.pem\"", nil},
		"collector endpoint on loopback": {"[daemon]\ncollector_listen = \"127.0.0.1:8391\"", nil},
		"collector endpoint on a socket": {"[daemon]\ncollector_listen = \"unix:/run/gs-reports.sock\"", nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c, err := Parse([]byte(tc.toml))
			if err != nil {
				t.Fatal(err)
			}
			got := c.Warnings()
			if len(got) != len(tc.want) {
				t.Fatalf("warnings %q, want %d", got, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("warning %q lacks %q", got[i], w)
				}
			}
		})
	}
}

func TestCheckTokenFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, mode os.FileMode) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte("jwt"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		return path
	}
	tests := map[string]struct {
		path string
		want []string
	}{
		"owner only":      {write("ok", 0o600), nil},
		"owner read only": {write("ro", 0o400), nil},
		"group readable":  {write("g", 0o640), []string{"mode 0640"}},
		"world readable":  {write("o", 0o604), []string{"mode 0604"}},
		"group writable":  {write("gw", 0o620), []string{"mode 0620"}},
		"missing":         {filepath.Join(dir, "none"), []string{"no such file"}},
		"directory":       {dir, []string{"is not a regular file"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := CheckTokenFile(tc.path)
			if len(got) != len(tc.want) {
				t.Fatalf("warnings %q, want %d", got, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("warning %q lacks %q", got[i], w)
				}
			}
		})
	}
	if os.Geteuid() == 0 {
		path := write("foreign", 0o600)
		if err := os.Chown(path, 4242, 4242); err != nil {
			t.Fatal(err)
		}
		if got := CheckTokenFile(path); len(got) != 1 || !strings.Contains(got[0], "owned by uid 4242") {
			t.Errorf("foreign owner: warnings %q", got)
		}
	}
}

func TestOwnerWarning(t *testing.T) {
	tests := map[string]struct {
		owner, self int
		warn        bool
	}{
		"root owns it":              {0, 1000, false},
		"the daemon's user":         {1000, 1000, false},
		"another user":              {1001, 1000, true},
		"another user, daemon root": {1001, 0, true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := ownerWarning("/jwt", tc.owner, tc.self); (got != "") != tc.warn {
				t.Errorf("ownerWarning = %q, want a warning %v", got, tc.warn)
			}
		})
	}
}

func TestSetOverrides(t *testing.T) {
	tests := map[string]struct {
		key, value string
		check      func(c *Config) bool
		wantErr    string
	}{
		"round":                 {key: "scheduler.round", value: "20s", check: func(c *Config) bool { return c.Scheduler.Round == 20*time.Second }},
		"round in bare seconds": {key: "scheduler.round", value: "360", check: func(c *Config) bool { return c.Scheduler.Round == 6*time.Minute }},
		"round in Slurm form":   {key: "scheduler.round", value: "05:00", check: func(c *Config) bool { return c.Scheduler.Round == 5*time.Minute }},
		"min run time":          {key: "scheduler.min_run_time", value: "0-01", check: func(c *Config) bool { return c.Scheduler.MinRunTime == time.Hour }},
		"default preempt": {key: "scheduler.default_preempt", value: "REQUEUE",
			check: func(c *Config) bool { return c.Scheduler.DefaultPreempt == bridge.PreemptRequeue }},
		"negative round":      {key: "scheduler.round", value: "-5", wantErr: "scheduler.round: is negative"},
		"bad min run time":    {key: "scheduler.min_run_time", value: "later", wantErr: "scheduler.min_run_time"},
		"bad default preempt": {key: "scheduler.default_preempt", value: "maybe", wantErr: "scheduler.default_preempt"},
		"partitions":          {key: "slurm.partitions", value: "a, b,,c", check: func(c *Config) bool { return reflect.DeepEqual(c.Slurm.Partitions, []string{"a", "b", "c"}) }},
		"dry run":             {key: "scheduler.dry_run", value: "true", check: func(c *Config) bool { return c.Scheduler.DryRun }},
		"listen":              {key: "daemon.listen", value: "0.0.0.0:9000", check: func(c *Config) bool { return c.Daemon.Listen == "0.0.0.0:9000" }},
		"bad round":           {key: "scheduler.round", value: "soon", wantErr: "scheduler.round"},
		"bad bool":            {key: "scheduler.dry_run", value: "maybe", wantErr: "scheduler.dry_run"},
		"standby off":         {key: "daemon.standby", value: "false", check: func(c *Config) bool { return !c.Daemon.Standby }},
		"bad standby":         {key: "daemon.standby", value: "backup", wantErr: "daemon.standby"},
		"not overridden":      {key: "slurm.user", value: "x", wantErr: "slurm.user"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := Default()
			err := c.Set(tc.key, tc.value)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(&c) {
				t.Errorf("override not applied: %+v", c)
			}
		})
	}
}

func TestOverridableKeysAreSettable(t *testing.T) {
	samples := map[string]string{"scheduler.round": "1m", "scheduler.dry_run": "false", "daemon.standby": "true",
		"scheduler.min_run_time": "10m", "scheduler.default_preempt": "requeue", "scheduler.lease": "30m"}
	for key := range Overridable {
		c := Default()
		v := samples[key]
		if v == "" {
			v = "x"
		}
		if err := c.Set(key, v); err != nil {
			t.Errorf("Set(%s): %v", key, err)
		}
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "gs.toml")
	if err := os.WriteFile(path, []byte("[scheduler]\nround = \"30s\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.Scheduler.Round != 30*time.Second {
		t.Errorf("round = %s", c.Scheduler.Round)
	}
	if _, err := Load(filepath.Join(dir, "missing.toml")); err == nil || !strings.Contains(err.Error(), "missing.toml") {
		t.Errorf("missing file: err = %v", err)
	}
}

// The shipped example must stay loadable: it documents every key, so a
// key added here without an entry there (or a typo there) fails this test.
func TestShippedExampleParses(t *testing.T) {
	data, err := os.ReadFile("../../etc/gavel-slurm.toml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Parse(data); err != nil {
		t.Fatalf("etc/gavel-slurm.toml: %v", err)
	}
	text := string(data)
	for _, key := range []string{"rest_url", "api_version", "token_file", "user", "partitions", "scontrol",
		"gpu_types", "cost_per_gpu_hour", "throughputs", "policy", "round", "min_reset_interval", "mechanism",
		"default_grace", "grace_signal", "default_preempt", "min_run_time", "dry_run", "state_dir", "listen", "log_level", "standby",
		"allow_insecure_http", "[limits]", "max_weight", "max_grace", "max_restart", "default_restart_cost", "restart_hold_min", "allowed_classes", "allowed_preempt",
		"[limits.partition.", "[entities]", "from", "account_map", "allow_tag_entity", "[weights]", "[weights.account]",
		"[weights.qos]", "allow_tag_weight", "collector_token_dir", "collector_queue_bytes", "collector_node_bytes",
		"collector_tls_cert", "collector_tls_key"} {
		if !strings.Contains(text, key) {
			t.Errorf("etc/gavel-slurm.toml does not document %s", key)
		}
	}
}

// FuzzParse checks that Parse never panics and that whatever it accepts is
// valid: the defaults it starts from and each key's own checks must not
// let an invalid configuration through.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"",
		"[scheduler]\nround = \"20s\"\nmin_run_time = 90\ndefault_preempt = \"requeue\"",
		"[slurm]\nrest_url = \"http://ctl:6820\"\nallow_insecure_http = true",
		"[cluster.cost_per_gpu_hour]\nv100 = nan",
		"[daemon]\nlisten = \"0.0.0.0:1\"\nstate_dir = \"/x\"",
		"[scheduler]\ndefault_grace = \"1-00:00:00\"",
	} {
		f.Add([]byte(seed))
	}
	if data, err := os.ReadFile("../../etc/gavel-slurm.toml"); err == nil {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("Parse accepted %q, which does not validate: %v", data, err)
		}
		c.Warnings()
	})
}

// An explicit 0 turns the minimum run time off; leaving the key out
// derives it from the round.
func TestMinRunTimeZeroMeansNone(t *testing.T) {
	c, err := Parse([]byte("[scheduler]\nround = \"20s\"\nmin_run_time = \"0s\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Scheduler.EffectiveMinRunTime(); got != 0 {
		t.Errorf("min_run_time = 0s gives %v", got)
	}
	c, err = Parse([]byte("[scheduler]\nround = \"20s\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Scheduler.EffectiveMinRunTime(); got != 40*time.Second {
		t.Errorf("unset min_run_time gives %v, want twice the round", got)
	}
}

// Collector limits take a number of bytes or a size with a binary unit;
// a token directory stands in for the shared token file.
func TestCollectorKeys(t *testing.T) {
	sizes := map[string]int64{
		"67108864": 64 << 20, `"64MiB"`: 64 << 20, `"512 KiB"`: 512 << 10, `"1GiB"`: 1 << 30, `"8192B"`: 8192, `"8192"`: 8192,
	}
	for in, want := range sizes {
		c, err := Parse([]byte("[daemon]\ncollector_queue_bytes = " + in + "\ncollector_node_bytes = 4096"))
		if err != nil {
			t.Errorf("%s: %v", in, err)
			continue
		}
		if c.Daemon.CollectorQueueBytes != want {
			t.Errorf("%s: %d bytes, want %d", in, c.Daemon.CollectorQueueBytes, want)
		}
	}
	c := Default()
	if c.Daemon.CollectorQueueBytes != 64<<20 || c.Daemon.CollectorNodeBytes != 1<<20 {
		t.Errorf("defaults %d and %d bytes, want 64 MiB and 1 MiB", c.Daemon.CollectorQueueBytes, c.Daemon.CollectorNodeBytes)
	}
	// With a directory of node tokens, the shared file's path is unused.
	if _, err := Parse([]byte("[daemon]\ncollector_listen = \"127.0.0.1:8391\"\ncollector_token_file = \"rel\"\ncollector_token_dir = \"/etc/gavel-slurm/nodes\"")); err != nil {
		t.Errorf("token dir with an unused relative token file: %v", err)
	}
	if _, err := Parse([]byte("[daemon]\ncollector_listen = \"127.0.0.1:8391\"\ncollector_token_file = \"rel\"")); err == nil {
		t.Errorf("a relative shared token file was accepted")
	}
}

func TestEffectiveLease(t *testing.T) {
	for name, tc := range map[string]struct {
		lease, want time.Duration
	}{
		"unset: three rounds": {DeriveLease, 18 * time.Minute},
		"set":                 {time.Hour, time.Hour},
		"off":                 {0, 0},
	} {
		t.Run(name, func(t *testing.T) {
			s := Scheduler{Round: 6 * time.Minute, Lease: tc.lease}
			if got := s.EffectiveLease(); got != tc.want {
				t.Errorf("EffectiveLease() = %v, want %v", got, tc.want)
			}
		})
	}
}
