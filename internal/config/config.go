// Package config reads the daemon's TOML configuration
// (/etc/gavel-slurm/gavel-slurm.toml by default), applies command-line
// overrides and validates the result. Every error names the offending key
// so an operator can fix the file without reading code.
//
// The documented example of every key is etc/gavel-slurm.toml.
package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/internal/duration"
	"github.com/gavel-slurm/gavel-slurm/internal/siterules"
	"github.com/gavel-slurm/gavel-slurm/rounds"
)

// DefaultPath is where the daemon looks for its configuration.
const DefaultPath = "/etc/gavel-slurm/gavel-slurm.toml"

// Config is the validated configuration of the daemon.
type Config struct {
	Slurm     Slurm
	Cluster   Cluster
	Scheduler Scheduler
	Daemon    Daemon
	// Rules are the site's limits on what a job's tag may set, and where
	// weights and entities come from: the [limits], [entities] and
	// [weights] sections.
	Rules siterules.Rules
	// TrialAndError is the [trial_and_error] section: class=te jobs.
	TrialAndError TrialAndError
}

// TrialAndError configures trial-and-error jobs (FitGpp): a waiting
// class=te job that no free GPUs fit gets room between rounds by the
// preemption of best-effort jobs.
type TrialAndError struct {
	// Enabled turns the class on. Off (the default), class=te jobs are
	// scheduled like any other: a site opts in, and bounds who may use
	// the class with [limits] allowed_classes.
	Enabled bool
	// Weight is FitGpp's s: how much a victim's grace period counts
	// against its size when victims are ranked.
	Weight float64
	// MaxPreemptions spares jobs requeued that many times already (0: no
	// cap).
	MaxPreemptions int
	// MaxPerUser caps how many of one user's TE jobs may hold room made
	// for them at once (0: no cap).
	MaxPerUser int
	// Poll is how often waiting TE jobs are looked for between rounds.
	Poll time.Duration
}

// Slurm says how to reach and drive the Slurm controller.
type Slurm struct {
	// RestURL is slurmrestd's base URL, e.g. http://127.0.0.1:6820.
	RestURL string
	// APIVersion is the slurmrestd data-parser version, e.g. "v0.0.44";
	// empty tries every supported version, newest first.
	APIVersion string
	// TokenFile holds the JWT sent as X-SLURM-USER-TOKEN; read at every
	// request so a rotated token is picked up without a restart.
	TokenFile string
	// User is sent as X-SLURM-USER-NAME; it must be an admin (root or
	// SlurmUser) to change other users' priorities.
	User string
	// Partitions are the partitions whose jobs the daemon manages.
	Partitions []string
	// Scontrol is the scontrol binary, used for requeue where slurmrestd
	// has no requeue endpoint (API before v0.0.45) and for holding or
	// releasing many jobs in one call.
	Scontrol string
	// ReadTimeout bounds one read of the queue (nodes and jobs).
	// slurmrestd answers with every job slurmctld keeps, at about a
	// millisecond each, so large clusters need more than the 10 s an
	// update gets.
	ReadTimeout time.Duration
	// AllowInsecureHTTP accepts a plain http:// RestURL on a host other
	// than this one. The JWT, which acts as an administrator, then
	// crosses the network in clear, so it takes an explicit choice.
	AllowInsecureHTTP bool
	// ReadAccounting reads slurmdbd's QOS and association limits (and
	// fair-share tree) each round through slurmrestd's /slurmdb/
	// endpoints, so that the round keeps the site's caps
	// (docs/limits.md). On by default; without slurmdbd the round works
	// as before and status says why.
	ReadAccounting bool
}

// Cluster describes the GPU types the daemon schedules across.
type Cluster struct {
	// GPUTypes are the gres/gpu type names to schedule across; nodes
	// with other types are ignored. Empty means every type found.
	GPUTypes []string
	// CostPerGPUHour is the optional price of each type, for the cost
	// policies.
	CostPerGPUHour map[string]float64
	// Throughputs names the reference table used when a job's model has
	// no measurement: "simulation" or "physical".
	Throughputs string
}

// Scheduler holds the round mechanism's settings.
type Scheduler struct {
	// Policy is the Gavel policy name, e.g. max_min_fairness_perf.
	Policy string
	// Round is the length of one scheduling round.
	Round time.Duration
	// MinResetInterval is the shortest time between two allocation
	// recomputations: arrivals and completions closer together than this
	// are batched into one reset. With the improved mechanism the
	// allocation follows every event and this is the shortest time
	// between two resets of the time each job received.
	MinResetInterval time.Duration
	// Mechanism is the round mechanism: "restart" (the default: improved,
	// weighing each preemption against the job's restart cost),
	// "improved" or "gavel" (the paper's).
	Mechanism string
	// DefaultRestartCost is what a restart is taken to cost a job until
	// the daemon measures it, unless its tag states restart=: the restart
	// mechanism holds a job for a multiple of it.
	DefaultRestartCost time.Duration
	// RestartHoldMin is the shortest time the restart mechanism keeps a
	// job whose restart costs anything on its GPUs; 0 means 12 rounds
	// (rounds.DefaultRestartHoldRounds).
	RestartHoldMin time.Duration
	// DefaultGrace is how long a running job has between the preemption
	// signal and its requeue, unless its tag asks for another value.
	DefaultGrace time.Duration
	// GraceSignal is the signal sent at the start of the grace period.
	GraceSignal string
	// DefaultPreempt is how a job whose tag names no preempt= mode takes
	// preemption.
	DefaultPreempt bridge.PreemptMode
	// MinRunTime is the least time a job runs before it may be
	// preempted; DeriveMinRunTime (the default) means twice the round
	// (see EffectiveMinRunTime), so that the value follows a --round given
	// on the command line. 0 lets any round stop any job.
	MinRunTime time.Duration
	// RefillPoll is how often the daemon looks between rounds for GPUs
	// that jobs ending mid-round freed, to start the waiting jobs the
	// round would have started there; 0 leaves them idle until the next
	// round.
	RefillPoll time.Duration
	// Lease is how long the jobs the daemon keeps waiting stay waiting
	// if it stops renewing its lease (killed, its host gone, removed):
	// then slurmctld ends the lease job and schedules them itself
	// (bridge/rest/lease.go). DeriveLease (the default) means three
	// rounds (see EffectiveLease); 0 turns the lease off and keeps jobs
	// waiting with Slurm holds, which outlive the daemon.
	Lease time.Duration
	// ShareOffPartitions are managed partitions whose jobs never share a
	// GPU under a packing policy (docs/space-sharing.md); elsewhere jobs
	// are paired on nodes that offer GPU shards.
	ShareOffPartitions []string
	// DryRun logs the actions instead of sending them.
	DryRun bool
}

// DeriveLease marks a lease the configuration leaves unset: three rounds.
const DeriveLease time.Duration = -1

// EffectiveLease resolves Lease: the configured value, or three rounds
// when none is set, so that one or two rounds that fail (a slurmrestd
// restart, a slow answer) do not let it run out.
func (s Scheduler) EffectiveLease() time.Duration {
	if s.Lease >= 0 {
		return s.Lease
	}
	return 3 * s.Round
}

// EffectiveMinRunTime resolves MinRunTime: the configured value, or twice
// the round when none is set. Two rounds let a job that just started
// amortize its start-up (loading data, restoring a checkpoint) before it
// can be stopped again.
func (s Scheduler) EffectiveMinRunTime() time.Duration {
	if s.MinRunTime >= 0 {
		return s.MinRunTime
	}
	return 2 * s.Round
}

// DeriveMinRunTime marks a minimum run time the configuration leaves
// unset: twice the round.
const DeriveMinRunTime time.Duration = -1

// Daemon holds the process's own settings.
type Daemon struct {
	// StateDir keeps the state database (state.db).
	StateDir string
	// Listen is the API's address: host:port, or unix:/path/to/socket.
	Listen string
	// LogLevel is zerolog's level name: debug, info, warn, error.
	LogLevel string
	// CollectorListen is where node collectors post their reports
	// (host:port or unix:/path), apart from the read-only API; empty
	// turns reports off.
	CollectorListen string
	// CollectorTokenFile holds the secret collectors authenticate with,
	// one for every node (any holder may report in any node's name).
	// Unused when CollectorTokenDir is set.
	CollectorTokenFile string
	// CollectorTokenDir, when set, holds one token file per node, named
	// by its Slurm node name: each collector authenticates with its own
	// node's token and may report only for that node.
	CollectorTokenDir string
	// CollectorQueueBytes bounds what the collector endpoint holds
	// between rounds, and CollectorNodeBytes what one node's reports
	// hold of that (daemon.ReportLimits).
	CollectorQueueBytes int64
	CollectorNodeBytes  int64
	// CollectorTLSCert and CollectorTLSKey, both set, make the collector
	// endpoint serve https with that certificate and key (PEM).
	CollectorTLSCert string
	CollectorTLSKey  string
	// Standby makes a daemon that finds the state held by another one
	// wait for it (serving its read-only API, saying it is standby) and
	// take over when the other stops or dies; false makes it exit.
	Standby bool
	// CollectorWarmUp is how long after a job starts its measured rates
	// are left out: the first minutes of a run load data, compile and
	// restore a checkpoint, and would say the job is slower than it is.
	// It must exceed one collector interval for the first one to be
	// skipped.
	CollectorWarmUp time.Duration
	// AdoptAdminHolds makes the first round take managed jobs held by an
	// admin, which the state store does not know, for the daemon's own
	// holds: recovery after the state directory was lost. Flag only
	// (--adopt-admin-holds), never read from the file: left on, it would
	// release every admin hold on a fresh start.
	AdoptAdminHolds bool
}

// Default returns the configuration used for keys the file leaves out.
func Default() Config {
	return Config{
		Slurm: Slurm{
			RestURL:        "http://127.0.0.1:6820",
			TokenFile:      "/etc/gavel-slurm/slurm.jwt",
			User:           "slurm",
			Partitions:     []string{"gpu"},
			Scontrol:       "/usr/bin/scontrol",
			ReadAccounting: true,
			ReadTimeout:    time.Minute,
		},
		Cluster:       Cluster{Throughputs: "simulation"},
		TrialAndError: TrialAndError{Weight: 4, MaxPreemptions: 2, Poll: 5 * time.Second},
		Scheduler: Scheduler{
			Policy:           "max_min_fairness_perf",
			Round:            6 * time.Minute,
			MinResetInterval: 0,
			// Weighing each preemption against the job's restart cost
			// loses nothing when restarts are cheap and keeps JCTs near
			// the free-restart ones when they are not (docs/evaluation.md,
			// "Restarts that cost").
			Mechanism:    string(rounds.VariantRestart),
			DefaultGrace: 60 * time.Second,
			// A small model's checkpoint, requeue and reload; measured
			// costs replace it once a job has restarted.
			DefaultRestartCost: 60 * time.Second,
			GraceSignal:        "USR1",
			// Never stopping a running job is the only mode that is safe
			// for jobs that cannot checkpoint; sites opt in to more.
			DefaultPreempt: bridge.PreemptNever,
			MinRunTime:     DeriveMinRunTime,
			// A freed GPU waits on average half of this before a job
			// starts on it; each look reads the queue once.
			RefillPoll: 30 * time.Second,
			Lease:      DeriveLease,
		},
		Daemon: Daemon{
			StateDir: "/var/lib/gavel-slurm",
			Listen:   "127.0.0.1:8390",
			LogLevel: "info",
			// Collectors on other nodes reach the daemon over the
			// network: off until the site sets an address.
			CollectorTokenFile: "/etc/gavel-slurm/collector.token",
			CollectorWarmUp:    2 * time.Minute,
			// Room for 100,000 jobs measured on a node, and for 1,600
			// on one node (daemon.DefaultReportBytes).
			CollectorQueueBytes: 64 << 20,
			CollectorNodeBytes:  1 << 20,
			// A second daemon on a shared state directory is the
			// backup controller: waiting is what it is there for, and
			// the state's lock keeps it from acting while the other
			// lives. Exiting would only have systemd restart it, again
			// and again.
			Standby: true,
		},
		Rules: siterules.Default(),
	}
}

// file mirrors the TOML layout. Pointers tell a key left out from one set
// to its zero value. Durations are duration.Flag, so they take every form
// duration.Parse reads, and a TOML number as seconds.
type file struct {
	Slurm struct {
		RestURL           *string        `toml:"rest_url"`
		APIVersion        *string        `toml:"api_version"`
		TokenFile         *string        `toml:"token_file"`
		User              *string        `toml:"user"`
		Partitions        []string       `toml:"partitions"`
		Scontrol          *string        `toml:"scontrol"`
		ReadTimeout       *duration.Flag `toml:"read_timeout"`
		AllowInsecureHTTP *bool          `toml:"allow_insecure_http"`
		ReadAccounting    *bool          `toml:"read_accounting"`
	} `toml:"slurm"`
	Cluster struct {
		GPUTypes       []string           `toml:"gpu_types"`
		CostPerGPUHour map[string]float64 `toml:"cost_per_gpu_hour"`
		Throughputs    *string            `toml:"throughputs"`
	} `toml:"cluster"`
	Scheduler struct {
		Policy             *string        `toml:"policy"`
		Round              *duration.Flag `toml:"round"`
		MinResetInterval   *duration.Flag `toml:"min_reset_interval"`
		Mechanism          *string        `toml:"mechanism"`
		DefaultGrace       *duration.Flag `toml:"default_grace"`
		DefaultRestart     *duration.Flag `toml:"default_restart_cost"`
		RestartHoldMin     *duration.Flag `toml:"restart_hold_min"`
		GraceSignal        *string        `toml:"grace_signal"`
		DefaultPreempt     *string        `toml:"default_preempt"`
		MinRunTime         *duration.Flag `toml:"min_run_time"`
		RefillPoll         *duration.Flag `toml:"refill_poll"`
		Lease              *duration.Flag `toml:"lease"`
		ShareOffPartitions []string       `toml:"share_off_partitions"`
		DryRun             *bool          `toml:"dry_run"`
	} `toml:"scheduler"`
	Daemon struct {
		StateDir           *string        `toml:"state_dir"`
		Listen             *string        `toml:"listen"`
		LogLevel           *string        `toml:"log_level"`
		CollectorListen    *string        `toml:"collector_listen"`
		CollectorTokenFile *string        `toml:"collector_token_file"`
		CollectorTokenDir  *string        `toml:"collector_token_dir"`
		CollectorQueue     *byteSize      `toml:"collector_queue_bytes"`
		CollectorNode      *byteSize      `toml:"collector_node_bytes"`
		CollectorTLSCert   *string        `toml:"collector_tls_cert"`
		CollectorTLSKey    *string        `toml:"collector_tls_key"`
		CollectorWarmUp    *duration.Flag `toml:"collector_warm_up"`
		Standby            *bool          `toml:"standby"`
	} `toml:"daemon"`
	TrialAndError struct {
		Enabled        *bool          `toml:"enabled"`
		Weight         *float64       `toml:"weight"`
		MaxPreemptions *int           `toml:"max_preemptions"`
		MaxPerUser     *int           `toml:"max_per_user"`
		Poll           *duration.Flag `toml:"poll"`
	} `toml:"trial_and_error"`
	Limits struct {
		limitsFile
		Partition map[string]limitsFile `toml:"partition"`
	} `toml:"limits"`
	Entities struct {
		From           *string               `toml:"from"`
		AccountMap     map[string]entityList `toml:"account_map"`
		AllowTagEntity *bool                 `toml:"allow_tag_entity"`
	} `toml:"entities"`
	Weights struct {
		Account        map[string]float64 `toml:"account"`
		QOS            map[string]float64 `toml:"qos"`
		AllowTagWeight *bool              `toml:"allow_tag_weight"`
	} `toml:"weights"`
}

// limitsFile is one [limits] table: the site-wide one or a partition's.
type limitsFile struct {
	MaxWeight      *float64       `toml:"max_weight"`
	MaxGrace       *duration.Flag `toml:"max_grace"`
	MaxRestart     *duration.Flag `toml:"max_restart"`
	AllowedClasses *[]string      `toml:"allowed_classes"`
	AllowedPreempt *[]string      `toml:"allowed_preempt"`
}

// minCollectorBytes is the least a collector limit may be: room for a
// few jobs.
const minCollectorBytes = 4096

// byteSize is a number of bytes: an integer, or a string with a binary
// unit ("64MiB", "512 KiB", "1GiB").
type byteSize int64

// UnmarshalTOML accepts an integer or a string with a unit.
func (b *byteSize) UnmarshalTOML(v any) error {
	switch v := v.(type) {
	case int64:
		*b = byteSize(v)
		return nil
	case string:
		n, err := parseByteSize(v)
		*b = byteSize(n)
		return err
	}
	return fmt.Errorf("%v is neither a number of bytes nor a string such as \"64MiB\"", v)
}

func parseByteSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	unit := int64(1)
	for _, u := range []struct {
		suffix string
		n      int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"B", 1}} {
		if rest, ok := strings.CutSuffix(t, u.suffix); ok {
			t, unit = strings.TrimSpace(rest), u.n
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64/unit {
		return 0, fmt.Errorf("%q is not a size such as 67108864, \"64MiB\" or \"512KiB\"", s)
	}
	return n * unit, nil
}

// entityList is an account_map value: one entity name, or a list whose
// first entry is the account's default entity.
type entityList []string

// UnmarshalTOML accepts a string or an array of strings.
func (e *entityList) UnmarshalTOML(v any) error {
	switch v := v.(type) {
	case string:
		*e = entityList{v}
		return nil
	case []any:
		out := make(entityList, 0, len(v))
		for _, item := range v {
			name, ok := item.(string)
			if !ok {
				return fmt.Errorf("entity %v is not a string", item)
			}
			out = append(out, name)
		}
		*e = out
		return nil
	}
	return fmt.Errorf("must be an entity name or a list of them, not %T", v)
}

// Load reads and validates the file at path.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Parse decodes TOML text over the defaults and validates the result.
// Unknown keys are an error: a misspelt key silently ignored would leave
// the daemon running with a value the operator did not choose.
func Parse(data []byte) (*Config, error) {
	var f file
	md, err := toml.Decode(string(data), &f)
	if err != nil {
		return nil, fmt.Errorf("parse config: %w", err)
	}
	if undecoded := md.Undecoded(); len(undecoded) > 0 {
		keys := make([]string, len(undecoded))
		for i, k := range undecoded {
			keys[i] = k.String()
		}
		return nil, fmt.Errorf("unknown key %s", strings.Join(keys, ", "))
	}
	c := Default()
	setString(&c.Slurm.RestURL, f.Slurm.RestURL)
	setString(&c.Slurm.APIVersion, f.Slurm.APIVersion)
	setString(&c.Slurm.TokenFile, f.Slurm.TokenFile)
	setString(&c.Slurm.User, f.Slurm.User)
	if f.Slurm.Partitions != nil {
		c.Slurm.Partitions = f.Slurm.Partitions
	}
	setString(&c.Slurm.Scontrol, f.Slurm.Scontrol)
	if f.Slurm.ReadAccounting != nil {
		c.Slurm.ReadAccounting = *f.Slurm.ReadAccounting
	}
	if f.Slurm.AllowInsecureHTTP != nil {
		c.Slurm.AllowInsecureHTTP = *f.Slurm.AllowInsecureHTTP
	}
	if f.Cluster.GPUTypes != nil {
		c.Cluster.GPUTypes = f.Cluster.GPUTypes
	}
	if f.Cluster.CostPerGPUHour != nil {
		c.Cluster.CostPerGPUHour = f.Cluster.CostPerGPUHour
	}
	setString(&c.Cluster.Throughputs, f.Cluster.Throughputs)
	setString(&c.Scheduler.Policy, f.Scheduler.Policy)
	setDuration(&c.Slurm.ReadTimeout, f.Slurm.ReadTimeout)
	setDuration(&c.Scheduler.Round, f.Scheduler.Round)
	setDuration(&c.Scheduler.MinResetInterval, f.Scheduler.MinResetInterval)
	setString(&c.Scheduler.Mechanism, f.Scheduler.Mechanism)
	setDuration(&c.Scheduler.DefaultGrace, f.Scheduler.DefaultGrace)
	setDuration(&c.Scheduler.DefaultRestartCost, f.Scheduler.DefaultRestart)
	setDuration(&c.Scheduler.RestartHoldMin, f.Scheduler.RestartHoldMin)
	setDuration(&c.Scheduler.MinRunTime, f.Scheduler.MinRunTime)
	setDuration(&c.Scheduler.RefillPoll, f.Scheduler.RefillPoll)
	setDuration(&c.Scheduler.Lease, f.Scheduler.Lease)
	if f.Scheduler.ShareOffPartitions != nil {
		c.Scheduler.ShareOffPartitions = f.Scheduler.ShareOffPartitions
	}
	setString(&c.Scheduler.GraceSignal, f.Scheduler.GraceSignal)
	if f.Scheduler.DefaultPreempt != nil {
		m, err := bridge.ParsePreemptMode(*f.Scheduler.DefaultPreempt)
		if err != nil {
			return nil, fmt.Errorf("scheduler.default_preempt: %w", err)
		}
		c.Scheduler.DefaultPreempt = m
	}
	if f.Scheduler.DryRun != nil {
		c.Scheduler.DryRun = *f.Scheduler.DryRun
	}
	setString(&c.Daemon.StateDir, f.Daemon.StateDir)
	setString(&c.Daemon.Listen, f.Daemon.Listen)
	setString(&c.Daemon.LogLevel, f.Daemon.LogLevel)
	setString(&c.Daemon.CollectorListen, f.Daemon.CollectorListen)
	setString(&c.Daemon.CollectorTokenFile, f.Daemon.CollectorTokenFile)
	setString(&c.Daemon.CollectorTokenDir, f.Daemon.CollectorTokenDir)
	if f.Daemon.CollectorQueue != nil {
		c.Daemon.CollectorQueueBytes = int64(*f.Daemon.CollectorQueue)
	}
	if f.Daemon.CollectorNode != nil {
		c.Daemon.CollectorNodeBytes = int64(*f.Daemon.CollectorNode)
	}
	setString(&c.Daemon.CollectorTLSCert, f.Daemon.CollectorTLSCert)
	setString(&c.Daemon.CollectorTLSKey, f.Daemon.CollectorTLSKey)
	setDuration(&c.Daemon.CollectorWarmUp, f.Daemon.CollectorWarmUp)
	if te := f.TrialAndError; te.Enabled != nil {
		c.TrialAndError.Enabled = *te.Enabled
	}
	if te := f.TrialAndError; te.Weight != nil {
		c.TrialAndError.Weight = *te.Weight
	}
	if te := f.TrialAndError; te.MaxPreemptions != nil {
		c.TrialAndError.MaxPreemptions = *te.MaxPreemptions
	}
	if te := f.TrialAndError; te.MaxPerUser != nil {
		c.TrialAndError.MaxPerUser = *te.MaxPerUser
	}
	setDuration(&c.TrialAndError.Poll, f.TrialAndError.Poll)
	if f.Daemon.Standby != nil {
		c.Daemon.Standby = *f.Daemon.Standby
	}
	if err := f.applyRules(&c.Rules); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// applyRules copies the [limits], [entities] and [weights] sections over
// the default rules. Names (classes, modes, sources) are read here, so
// that an error names its key; ranges are left to Rules.Validate.
func (f *file) applyRules(r *siterules.Rules) error {
	var errs []error
	site, err := f.Limits.limitsFile.limits(r.Limits, "limits.")
	errs = append(errs, err)
	r.Limits = site
	if len(f.Limits.Partition) > 0 {
		r.Partitions = map[string]siterules.Limits{}
		for name, pf := range f.Limits.Partition {
			// A partition's table overrides the site's key by key; what
			// it leaves out stays zero, which Rules reads as inherited.
			l, err := pf.limits(siterules.Limits{}, "limits.partition."+name+".")
			errs = append(errs, err)
			r.Partitions[name] = l
		}
	}
	if f.Entities.From != nil {
		src, err := siterules.ParseEntitySource(*f.Entities.From)
		if err != nil {
			errs = append(errs, fmt.Errorf("entities.from: %w", err))
		}
		r.EntitiesFrom = src
	}
	if f.Entities.AccountMap != nil {
		r.AccountEntities = map[string][]string{}
		for account, entities := range f.Entities.AccountMap {
			r.AccountEntities[account] = entities
		}
	}
	if f.Entities.AllowTagEntity != nil {
		r.AllowTagEntity = *f.Entities.AllowTagEntity
	}
	if f.Weights.Account != nil {
		r.AccountWeights = f.Weights.Account
	}
	if f.Weights.QOS != nil {
		r.QOSWeights = f.Weights.QOS
	}
	if f.Weights.AllowTagWeight != nil {
		r.AllowTagWeight = *f.Weights.AllowTagWeight
	}
	return errors.Join(errs...)
}

// limits copies the keys set in one [limits] table over base. Zero
// limits are refused: in Rules zero means "inherited", so a 0 written in
// the file would silently mean something else.
func (l limitsFile) limits(base siterules.Limits, prefix string) (siterules.Limits, error) {
	var errs []error
	if l.MaxWeight != nil {
		if *l.MaxWeight == 0 {
			errs = append(errs, fmt.Errorf("%smax_weight: must be above 0", prefix))
		}
		base.MaxWeight = *l.MaxWeight
	}
	if l.MaxGrace != nil {
		if l.MaxGrace.Duration() == 0 {
			errs = append(errs, fmt.Errorf("%smax_grace: must be longer than 0 (a tag's grace=0 already means the default)", prefix))
		}
		base.MaxGrace = l.MaxGrace.Duration()
	}
	if l.MaxRestart != nil {
		if l.MaxRestart.Duration() == 0 {
			errs = append(errs, fmt.Errorf("%smax_restart: must be longer than 0 (a tag's restart=0 already means the default)", prefix))
		}
		base.MaxRestart = l.MaxRestart.Duration()
	}
	if l.AllowedClasses != nil {
		base.AllowedClasses = []bridge.Class{}
		for _, name := range *l.AllowedClasses {
			class, err := bridge.ParseClass(name)
			if err != nil {
				errs = append(errs, fmt.Errorf("%sallowed_classes: %w", prefix, err))
				continue
			}
			base.AllowedClasses = append(base.AllowedClasses, class)
		}
	}
	if l.AllowedPreempt != nil {
		base.AllowedPreempt = []bridge.PreemptMode{}
		for _, name := range *l.AllowedPreempt {
			mode, err := bridge.ParsePreemptMode(name)
			if err != nil {
				errs = append(errs, fmt.Errorf("%sallowed_preempt: %w", prefix, err))
				continue
			}
			base.AllowedPreempt = append(base.AllowedPreempt, mode)
		}
	}
	return base, errors.Join(errs...)
}

func setString(dst *string, src *string) {
	if src != nil {
		*dst = *src
	}
}

func setDuration(dst *time.Duration, src *duration.Flag) {
	if src != nil {
		*dst = src.Duration()
	}
}

// Overridable lists the keys Set accepts, with the flag that sets each.
var Overridable = map[string]string{
	"slurm.rest_url":    "slurmrestd-url",
	"slurm.token_file":  "token-file",
	"slurm.partitions":  "partitions",
	"scheduler.policy":  "policy",
	"scheduler.round":   "round",
	"daemon.state_dir":  "state-dir",
	"daemon.listen":     "listen",
	"scheduler.dry_run": "dry-run",

	"scheduler.default_preempt": "default-preempt",
	"scheduler.min_run_time":    "min-run-time",
	"scheduler.lease":           "lease",
	"daemon.collector_listen":   "collector-listen",
	"daemon.standby":            "standby",
}

// Set overrides one key with a command-line value. Call Validate after the
// last override.
func (c *Config) Set(key, value string) error {
	switch key {
	case "slurm.rest_url":
		c.Slurm.RestURL = value
	case "slurm.token_file":
		c.Slurm.TokenFile = value
	case "slurm.partitions":
		c.Slurm.Partitions = splitList(value)
	case "scheduler.share_off_partitions":
		c.Scheduler.ShareOffPartitions = splitList(value)
	case "scheduler.policy":
		c.Scheduler.Policy = value
	case "scheduler.round":
		return setDurationText(key, value, &c.Scheduler.Round)
	case "scheduler.min_run_time":
		return setDurationText(key, value, &c.Scheduler.MinRunTime)
	case "scheduler.lease":
		return setDurationText(key, value, &c.Scheduler.Lease)
	case "scheduler.default_preempt":
		m, err := bridge.ParsePreemptMode(value)
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		c.Scheduler.DefaultPreempt = m
	case "scheduler.dry_run":
		b, err := strconv.ParseBool(value)
		if err != nil {
			return fmt.Errorf("%s: %q is not a boolean", key, value)
		}
		c.Scheduler.DryRun = b
	case "daemon.state_dir":
		c.Daemon.StateDir = value
	case "daemon.listen":
		c.Daemon.Listen = value
	case "daemon.collector_listen":
		c.Daemon.CollectorListen = value
	case "daemon.standby":
		b, err := strconv.ParseBool(value)
		if err != nil {
			return fmt.Errorf("%s: %q is not a boolean", key, value)
		}
		c.Daemon.Standby = b
	default:
		return fmt.Errorf("%s: not a key that can be overridden", key)
	}
	return nil
}

func setDurationText(key, value string, dst *time.Duration) error {
	d, err := duration.Parse(value)
	if err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	*dst = d
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// namePattern is what Slurm accepts for partition names and gres types.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.\-]*$`)

var signals = map[string]bool{"USR1": true, "USR2": true, "TERM": true, "INT": true, "HUP": true, "CONT": true}

// Validate checks every value and returns all the problems found, each
// named by its key.
func (c *Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
	}

	if u, err := url.Parse(c.Slurm.RestURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		bad("slurm.rest_url", "%q is not an http(s) URL", c.Slurm.RestURL)
	} else if u.Scheme == "http" && !isLoopbackHost(u.Hostname()) && !c.Slurm.AllowInsecureHTTP {
		bad("slurm.rest_url", "%q is plain http to another host: the JWT would cross the network in clear; "+
			"use https, or set slurm.allow_insecure_http = true on a trusted network", c.Slurm.RestURL)
	}
	if c.Slurm.APIVersion != "" && !regexp.MustCompile(`^v\d+\.\d+\.\d+$`).MatchString(c.Slurm.APIVersion) {
		bad("slurm.api_version", "%q is not a slurmrestd version such as v0.0.44", c.Slurm.APIVersion)
	}
	if c.Slurm.TokenFile == "" {
		bad("slurm.token_file", "must not be empty")
	}
	if c.Slurm.User == "" {
		bad("slurm.user", "must not be empty")
	}
	if len(c.Slurm.Partitions) == 0 {
		bad("slurm.partitions", "must name at least one partition")
	}
	for _, p := range c.Slurm.Partitions {
		if !namePattern.MatchString(p) {
			bad("slurm.partitions", "%q is not a partition name", p)
		}
	}
	if c.Slurm.Scontrol == "" {
		bad("slurm.scontrol", "must not be empty")
	}
	if c.Slurm.ReadTimeout <= 0 {
		bad("slurm.read_timeout", "%s is not positive", c.Slurm.ReadTimeout)
	}

	types := map[string]bool{}
	for _, t := range c.Cluster.GPUTypes {
		if !namePattern.MatchString(t) {
			bad("cluster.gpu_types", "%q is not a GPU type name", t)
		}
		if types[t] {
			bad("cluster.gpu_types", "%q is listed twice", t)
		}
		types[t] = true
	}
	costTypes := make([]string, 0, len(c.Cluster.CostPerGPUHour))
	for t := range c.Cluster.CostPerGPUHour {
		costTypes = append(costTypes, t)
	}
	sort.Strings(costTypes)
	for _, t := range costTypes {
		v := c.Cluster.CostPerGPUHour[t]
		if math.IsNaN(v) || math.IsInf(v, 0) {
			bad("cluster.cost_per_gpu_hour."+t, "%g is not a finite number", v)
		} else if v < 0 {
			bad("cluster.cost_per_gpu_hour."+t, "%g is negative", v)
		}
		if len(types) > 0 && !types[t] {
			bad("cluster.cost_per_gpu_hour."+t, "%q is not in cluster.gpu_types", t)
		}
	}
	if c.Cluster.Throughputs != "simulation" && c.Cluster.Throughputs != "physical" {
		bad("cluster.throughputs", "%q is neither \"simulation\" nor \"physical\"", c.Cluster.Throughputs)
	}

	if !regexp.MustCompile(`^[a-z][a-z0-9_]*$`).MatchString(c.Scheduler.Policy) {
		bad("scheduler.policy", "%q is not a policy name such as max_min_fairness_perf", c.Scheduler.Policy)
	}
	if c.Scheduler.Round < time.Second {
		bad("scheduler.round", "%s is shorter than 1s", c.Scheduler.Round)
	}
	if c.Scheduler.MinResetInterval < 0 {
		bad("scheduler.min_reset_interval", "%s is negative", c.Scheduler.MinResetInterval)
	}
	if _, err := rounds.ParseVariant(c.Scheduler.Mechanism); err != nil {
		bad("scheduler.mechanism", "%q is not one of \"improved\", \"restart\", \"gavel\"", c.Scheduler.Mechanism)
	}
	if c.Scheduler.RestartHoldMin < 0 {
		bad("scheduler.restart_hold_min", "%s is negative", c.Scheduler.RestartHoldMin)
	}
	if c.Scheduler.DefaultRestartCost < 0 {
		bad("scheduler.default_restart_cost", "%s is negative", c.Scheduler.DefaultRestartCost)
	}
	if c.Scheduler.DefaultGrace < 0 {
		bad("scheduler.default_grace", "%s is negative", c.Scheduler.DefaultGrace)
	}
	if !signals[c.Scheduler.GraceSignal] {
		bad("scheduler.grace_signal", "%q is not one of USR1, USR2, TERM, INT, HUP, CONT", c.Scheduler.GraceSignal)
	}
	// Exact match: the mode is compared as stored, so "Never" read from
	// the file must not pass here and then fail to match in the core.
	if m, err := bridge.ParsePreemptMode(string(c.Scheduler.DefaultPreempt)); err != nil || m != c.Scheduler.DefaultPreempt {
		bad("scheduler.default_preempt", "%q is not one of checkpoint, requeue, never", c.Scheduler.DefaultPreempt)
	}
	if c.Scheduler.MinRunTime < 0 && c.Scheduler.MinRunTime != DeriveMinRunTime {
		bad("scheduler.min_run_time", "%s is negative", c.Scheduler.MinRunTime)
	}

	if c.Daemon.StateDir == "" {
		bad("daemon.state_dir", "must not be empty")
	} else if !filepath.IsAbs(c.Daemon.StateDir) {
		// Relative to what? The daemon's working directory is / under
		// systemd and anything elsewhere.
		bad("daemon.state_dir", "%q is not an absolute path", c.Daemon.StateDir)
	}
	if err := checkListen(c.Daemon.Listen); err != nil {
		bad("daemon.listen", "%v", err)
	}
	if c.Daemon.CollectorListen != "" {
		if err := checkListen(c.Daemon.CollectorListen); err != nil {
			bad("daemon.collector_listen", "%v", err)
		}
		if c.Daemon.CollectorListen == c.Daemon.Listen {
			bad("daemon.collector_listen", "must differ from daemon.listen (reports are written, the API is read-only)")
		}
		if c.Daemon.CollectorTokenDir == "" && !filepath.IsAbs(c.Daemon.CollectorTokenFile) {
			bad("daemon.collector_token_file", "%q is not an absolute path", c.Daemon.CollectorTokenFile)
		}
	}
	if d := c.Daemon.CollectorTokenDir; d != "" && !filepath.IsAbs(d) {
		bad("daemon.collector_token_dir", "%q is not an absolute path", d)
	}
	if c.Daemon.CollectorQueueBytes < minCollectorBytes {
		bad("daemon.collector_queue_bytes", "%d is under %d bytes", c.Daemon.CollectorQueueBytes, minCollectorBytes)
	}
	if c.Daemon.CollectorNodeBytes < minCollectorBytes {
		bad("daemon.collector_node_bytes", "%d is under %d bytes", c.Daemon.CollectorNodeBytes, minCollectorBytes)
	} else if c.Daemon.CollectorNodeBytes > c.Daemon.CollectorQueueBytes {
		bad("daemon.collector_node_bytes", "%d is more than daemon.collector_queue_bytes (%d)", c.Daemon.CollectorNodeBytes, c.Daemon.CollectorQueueBytes)
	}
	cert, key := c.Daemon.CollectorTLSCert, c.Daemon.CollectorTLSKey
	switch {
	case (cert == "") != (key == ""):
		bad("daemon.collector_tls_cert", "daemon.collector_tls_cert and daemon.collector_tls_key go together")
	case cert != "" && !filepath.IsAbs(cert):
		bad("daemon.collector_tls_cert", "%q is not an absolute path", cert)
	case key != "" && !filepath.IsAbs(key):
		bad("daemon.collector_tls_key", "%q is not an absolute path", key)
	}
	if w := c.TrialAndError.Weight; !(w >= 0) || math.IsInf(w, 0) {
		bad("trial_and_error.weight", "%v is not a number of 0 or more", w)
	}
	if c.TrialAndError.MaxPreemptions < 0 {
		bad("trial_and_error.max_preemptions", "%d is negative", c.TrialAndError.MaxPreemptions)
	}
	if c.TrialAndError.MaxPerUser < 0 {
		bad("trial_and_error.max_per_user", "%d is negative", c.TrialAndError.MaxPerUser)
	}
	for _, p := range c.Scheduler.ShareOffPartitions {
		if !slices.Contains(c.Slurm.Partitions, p) {
			bad("scheduler.share_off_partitions", "%q is not one of slurm.partitions", p)
		}
	}
	if l := c.Scheduler.Lease; l > 0 && l < 2*c.Scheduler.Round {
		bad("scheduler.lease", "%s is shorter than two rounds (%s): one late round would let it run out", l, 2*c.Scheduler.Round)
	} else if l < 0 && l != DeriveLease {
		bad("scheduler.lease", "%s is negative", l)
	}
	if p := c.Scheduler.RefillPoll; p != 0 && p < time.Second {
		bad("scheduler.refill_poll", "%s is under a second (each look reads the whole queue; 0 turns refilling off)", p)
	}
	if c.TrialAndError.Poll < time.Second {
		bad("trial_and_error.poll", "%s is under a second (each look reads the whole queue)", c.TrialAndError.Poll)
	}
	if c.Daemon.CollectorWarmUp < 0 {
		bad("daemon.collector_warm_up", "%s is negative", c.Daemon.CollectorWarmUp)
	}
	switch c.Daemon.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		bad("daemon.log_level", "%q is not one of debug, info, warn, error", c.Daemon.LogLevel)
	}
	if err := c.Rules.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Warnings returns what is valid but risky in the configuration, one
// sentence each, for the daemon to log at start.
func (c *Config) Warnings() []string {
	var out []string
	if host, _, err := net.SplitHostPort(c.Daemon.Listen); err == nil && !strings.HasPrefix(c.Daemon.Listen, "unix:") && !isLoopbackHost(host) {
		where := host
		if host == "" {
			where = "every interface"
		}
		out = append(out, fmt.Sprintf("daemon.listen %q is reachable from other hosts (%s): the API shows every user's jobs, "+
			"like Slurm without PrivateData=jobs, to anyone who can connect; keep it on 127.0.0.1 or a unix socket", c.Daemon.Listen, where))
	}
	if u, err := url.Parse(c.Slurm.RestURL); err == nil && u.Scheme == "http" && !isLoopbackHost(u.Hostname()) {
		out = append(out, fmt.Sprintf("slurm.rest_url %q is plain http to another host (slurm.allow_insecure_http): "+
			"the JWT crosses the network in clear", c.Slurm.RestURL))
	}
	if host, _, err := net.SplitHostPort(c.Daemon.CollectorListen); err == nil && c.Daemon.CollectorTLSCert == "" &&
		!strings.HasPrefix(c.Daemon.CollectorListen, "unix:") && !isLoopbackHost(host) {
		out = append(out, fmt.Sprintf("daemon.collector_listen %q is plain http to other hosts: collector tokens cross the network in clear; "+
			"set daemon.collector_tls_cert and daemon.collector_tls_key, or put a TLS proxy in front and listen on loopback", c.Daemon.CollectorListen))
	}
	names := make([]string, 0, len(c.Rules.Partitions))
	for p := range c.Rules.Partitions {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		if !slices.Contains(c.Slurm.Partitions, p) {
			out = append(out, fmt.Sprintf("limits.partition.%s has no effect: %q is not in slurm.partitions", p, p))
		}
	}
	return out
}

// isLoopbackHost reports whether host (a name or an IP, without brackets
// or port) is this machine. Other names are not resolved: a name that
// happens to resolve to a loopback address today may not tomorrow.
func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// CheckTokenFile returns warnings about the JWT file at path: it grants
// administrator rights over Slurm, so only its owner should read it, and
// that owner should be root or the daemon's own user. A file that cannot
// be read is reported too, since every request would fail.
func CheckTokenFile(path string) []string {
	fi, err := os.Stat(path)
	if err != nil {
		return []string{fmt.Sprintf("slurm.token_file: %v", err)}
	}
	if !fi.Mode().IsRegular() {
		return []string{fmt.Sprintf("slurm.token_file %s is not a regular file", path)}
	}
	var out []string
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		out = append(out, fmt.Sprintf("slurm.token_file %s has mode %04o: group or other users may read or change the token; chmod 600 it",
			path, perm))
	}
	if uid, ok := fileOwner(fi); ok {
		if w := ownerWarning(path, uid, os.Geteuid()); w != "" {
			out = append(out, w)
		}
	}
	return out
}

// ownerWarning warns when the token belongs to a user other than root and
// the daemon's: that user could read the token or replace it with one of
// their own.
func ownerWarning(path string, owner, self int) string {
	if owner == 0 || owner == self {
		return ""
	}
	return fmt.Sprintf("slurm.token_file %s is owned by uid %d, neither root nor the daemon's user (uid %d): that user can read or replace the token",
		path, owner, self)
}

// checkListen accepts host:port or unix:/absolute/path.
func checkListen(addr string) error {
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		if !strings.HasPrefix(path, "/") {
			return fmt.Errorf("%q: a unix socket needs an absolute path", addr)
		}
		return nil
	}
	i := strings.LastIndex(addr, ":")
	if i < 0 {
		return fmt.Errorf("%q is neither host:port nor unix:/path", addr)
	}
	port, err := strconv.Atoi(addr[i+1:])
	if err != nil || port < 0 || port > 65535 {
		return fmt.Errorf("%q has no valid port", addr)
	}
	return nil
}
