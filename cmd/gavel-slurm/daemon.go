package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/rs/zerolog"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/bridge/rest"
	"github.com/gavel-slurm/gavel-slurm/etc"
	"github.com/gavel-slurm/gavel-slurm/internal/api"
	"github.com/gavel-slurm/gavel-slurm/internal/config"
	"github.com/gavel-slurm/gavel-slurm/internal/daemon"
	"github.com/gavel-slurm/gavel-slurm/internal/reports"
	"github.com/gavel-slurm/gavel-slurm/internal/sched"
	"github.com/gavel-slurm/gavel-slurm/internal/store"
	"github.com/gavel-slurm/gavel-slurm/internal/throughputs"
	"github.com/gavel-slurm/gavel-slurm/rounds"
)

func init() {
	register("daemon", subcommand{
		summary: "run the scheduler beside slurmctld (round loop, HTTP API, metrics)",
		run: func(args []string) int {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runDaemon(ctx, args, os.Stderr, nil)
		},
	})
}

// slurmTimeout bounds each update sent to slurmrestd or scontrol; reads of
// the queue have their own bound (slurm.read_timeout).
const slurmTimeout = 10 * time.Second

// daemonFlags maps each override flag to its configuration key.
var daemonFlags = []struct{ flag, key, usage string }{
	{"slurmrestd-url", "slurm.rest_url", "slurmrestd base URL"},
	{"token-file", "slurm.token_file", "file holding the slurmrestd JWT"},
	{"partitions", "slurm.partitions", "comma-separated partitions to schedule"},
	{"policy", "scheduler.policy", "allocation policy (Gavel name)"},
	{"round", "scheduler.round", "round length: seconds (360) or a duration such as 6m or 05:00"},
	{"min-run-time", "scheduler.min_run_time", "least time a job runs before it may be preempted (default twice the round)"},
	{"lease", "scheduler.lease", "how long the jobs the daemon keeps waiting stay waiting once it stops renewing its lease (default three rounds; 0: Slurm holds, which outlive the daemon)"},
	{"default-preempt", "scheduler.default_preempt", "how jobs whose tag names no preempt= mode are stopped: checkpoint, requeue or never"},
	{"state-dir", "daemon.state_dir", "directory of the state database (a relative path is taken from the current directory)"},
	{"listen", "daemon.listen", "API address: host:port or unix:/path"},
	{"collector-listen", "daemon.collector_listen", "address node collectors post reports to (host:port or unix:/path; empty: off)"},
}

// defaultConfigPath is the file read when --config is not given; a
// variable so that tests can point it elsewhere.
var defaultConfigPath = config.DefaultPath

// loadDaemonConfig reads the file named by --config and applies the flags
// that were given on top of it. It also returns the file it read, or ""
// when the daemon runs on the defaults and flags alone.
func loadDaemonConfig(args []string, stderr io.Writer) (*config.Config, string, error) {
	fs := flag.NewFlagSet("daemon", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", defaultConfigPath, "configuration file (TOML; see etc/gavel-slurm.toml); without this flag a missing default file means the defaults")
	values := map[string]*string{}
	for _, f := range daemonFlags {
		values[f.key] = fs.String(f.flag, "", f.usage+" (overrides "+f.key+")")
	}
	dryRun := fs.Bool("dry-run", false, "decide and log actions without sending them (overrides scheduler.dry_run)")
	standby := fs.Bool("standby", true, "when another daemon holds the state: wait as its standby and take over when it stops; false exits (overrides daemon.standby)")
	adopt := fs.Bool("adopt-admin-holds", false, "after the state directory was lost: take managed jobs held by an admin (JobHeldAdmin) that the state does not know for the daemon's own holds in the first round, so it may release them")
	if err := fs.Parse(args); err != nil {
		return nil, "", err
	}
	if fs.NArg() > 0 {
		return nil, "", fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	cfg, source, err := loadConfigFile(*path, set["config"])
	if err != nil {
		return nil, "", err
	}
	for _, f := range daemonFlags {
		if set[f.flag] {
			value := *values[f.key]
			if f.key == "daemon.state_dir" {
				// The file must name an absolute directory (the daemon's
				// working directory varies), but a path typed in a shell
				// means the shell's current directory.
				if value, err = absPath(value); err != nil {
					return nil, "", fmt.Errorf("--%s: %w", f.flag, err)
				}
			}
			if err := cfg.Set(f.key, value); err != nil {
				return nil, "", fmt.Errorf("--%s: %w", f.flag, err)
			}
		}
	}
	if set["dry-run"] && *dryRun {
		cfg.Scheduler.DryRun = true
	}
	if set["standby"] {
		cfg.Daemon.Standby = *standby
	}
	cfg.Daemon.AdoptAdminHolds = *adopt
	if err := cfg.Validate(); err != nil {
		return nil, "", fmt.Errorf("configuration after flags: %w", err)
	}
	return cfg, source, nil
}

func absPath(p string) (string, error) {
	if p == "" || filepath.IsAbs(p) {
		return p, nil
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", fmt.Errorf("make %q absolute: %w", p, err)
	}
	return abs, nil
}

// loadConfigFile reads path. A missing file is fine only when the path is
// the default one: a site may run on defaults and flags alone, but a file
// named with --config that is not there is a mistake to report.
func loadConfigFile(path string, explicit bool) (*config.Config, string, error) {
	cfg, err := config.Load(path)
	if err == nil {
		return cfg, path, nil
	}
	if explicit || !errors.Is(err, os.ErrNotExist) {
		return nil, "", err
	}
	def := config.Default()
	return &def, "", nil
}

// coreSettings is the part of the configuration the scheduling core uses.
func coreSettings(cfg *config.Config) daemon.Settings {
	return daemon.Settings{
		Policy: cfg.Scheduler.Policy, Partitions: cfg.Slurm.Partitions, GPUTypes: cfg.Cluster.GPUTypes,
		CostPerGPUHour: cfg.Cluster.CostPerGPUHour, Round: cfg.Scheduler.Round,
		MinResetInterval: cfg.Scheduler.MinResetInterval, Mechanism: rounds.Variant(cfg.Scheduler.Mechanism),
		DefaultGrace: cfg.Scheduler.DefaultGrace, DefaultRestart: cfg.Scheduler.DefaultRestartCost,
		RestartHoldMin: cfg.Scheduler.RestartHoldMin,
		GraceSignal:    cfg.Scheduler.GraceSignal, DefaultPreempt: cfg.Scheduler.DefaultPreempt,
		MinRunTime: cfg.Scheduler.EffectiveMinRunTime(), Lease: daemonLease(cfg), RefillPoll: cfg.Scheduler.RefillPoll, AdoptAdminHolds: cfg.Daemon.AdoptAdminHolds,
		ShareOffPartitions: cfg.Scheduler.ShareOffPartitions,
		Rules:              cfg.Rules,
		TrialAndError: sched.TESettings{Enabled: cfg.TrialAndError.Enabled, Weight: cfg.TrialAndError.Weight,
			MaxPreemptions: cfg.TrialAndError.MaxPreemptions, MaxPerUser: cfg.TrialAndError.MaxPerUser, Poll: cfg.TrialAndError.Poll},
	}
}

// runDaemon runs until ctx is done. slurm replaces the slurmrestd client
// (tests); nil builds one from the configuration.
func runDaemon(ctx context.Context, args []string, stderr io.Writer, slurm bridge.Slurm) int {
	cfg, source, err := loadDaemonConfig(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "daemon: %v\n", err)
		return 2
	}
	level, _ := zerolog.ParseLevel(cfg.Daemon.LogLevel)
	log := zerolog.New(stderr).Level(level).With().Timestamp().Str("component", "daemon").Logger()
	if source == "" {
		log.Info().Str("default_path", defaultConfigPath).Msg("no configuration file: running on the defaults and flags")
	} else {
		log.Info().Str("config", source).Msg("configuration read")
	}
	for _, w := range append(cfg.Warnings(), config.CheckTokenFile(cfg.Slurm.TokenFile)...) {
		log.Warn().Msg(w)
	}
	reload := func() (*config.Config, error) {
		c, _, err := loadDaemonConfig(args, io.Discard)
		return c, err
	}
	if err := serveDaemon(ctx, cfg, log, slurm, reload); err != nil {
		log.Error().Err(err).Msg("daemon stopped")
		return 1
	}
	return 0
}

func serveDaemon(ctx context.Context, cfg *config.Config, log zerolog.Logger, slurm bridge.Slurm, reload func() (*config.Config, error)) error {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	shell := &shellParts{board: &api.Board{}, metrics: api.NewMetrics(reg), log: log, slurm: slurm}
	if cfg.Daemon.CollectorListen != "" {
		// One estimator for the process: what it learned outlives a
		// reload.
		table, err := tableOf(cfg)
		if err != nil {
			return err
		}
		if shell.measured, err = daemon.NewMeasuredWarmUp(table, cfg.Daemon.CollectorWarmUp); err != nil {
			return err
		}
	}
	// A configuration that cannot run fails now, not when a standby gets
	// the state hours later.
	if _, _, err := shell.parts(cfg, 0); err != nil {
		return err
	}
	st, err := store.Open(cfg.Daemon.StateDir)
	switch locked := errors.Is(err, store.ErrLocked); {
	case locked && !cfg.Daemon.Standby:
		return fmt.Errorf("%w: another daemon runs on this state (daemon.standby = true waits for it)", err)
	case err != nil && !locked:
		return err
	}
	if st != nil {
		defer st.Close()
	}
	ln, err := api.Listen(cfg.Daemon.Listen)
	if err != nil {
		return fmt.Errorf("daemon.listen: %w", err)
	}

	// SIGHUP is caught, and a standby says so, before the first request
	// is answered: a health check never sees a standby as active.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	if st == nil {
		shell.showStandby(cfg, standbyReason(cfg.Daemon.StateDir))
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	serveErr := make(chan error, 1)
	go func() { serveErr <- api.Serve(ctx, ln, api.Handler(shell.board, reg)) }()
	if shell.measured != nil {
		if err := shell.serveReports(ctx, cfg); err != nil {
			return err
		}
	}
	if st == nil {
		if st, cfg, err = shell.waitAsStandby(ctx, cfg, ln.Addr().String(), hup, reload); err != nil {
			return err
		}
		if st == nil {
			cancel()
			return <-serveErr // stopped while standby
		}
		defer st.Close()
	}
	shell.store = st
	d, err := shell.build(cfg)
	if err != nil {
		return err
	}
	shell.becomeActive(cfg)
	log.Info().Str("listen", ln.Addr().String()).Str("policy", cfg.Scheduler.Policy).
		Dur("round", cfg.Scheduler.Round).Strs("partitions", cfg.Slurm.Partitions).
		Str("default_preempt", string(cfg.Scheduler.DefaultPreempt)).Dur("min_run_time", cfg.Scheduler.EffectiveMinRunTime()).
		Dur("refill_poll", cfg.Scheduler.RefillPoll).
		Bool("dry_run", cfg.Scheduler.DryRun).Str("state", st.Path()).Msg("starting")

	for {
		next, err := runUntilReload(ctx, d, hup, reload, log)
		if err != nil {
			return err
		}
		if next == nil {
			break // ctx done
		}
		// The round in progress has finished and its state is saved: a
		// daemon built on the new configuration carries on from the
		// store, as after a restart. The listener stays (changing
		// daemon.listen needs a restart).
		nd, err := shell.build(next)
		if err != nil {
			log.Error().Err(err).Msg("reload: the new configuration cannot run; keeping the old one")
			if d, err = shell.build(cfg); err != nil {
				return err
			}
			continue
		}
		cfg, d = next, nd
		log.Info().Str("policy", cfg.Scheduler.Policy).Dur("round", cfg.Scheduler.Round).
			Strs("partitions", cfg.Slurm.Partitions).Msg("configuration reloaded")
	}
	cancel()
	return <-serveErr
}

// waitAsStandby waits for the state another daemon holds, serving the API
// meanwhile as a standby, and returns the store once the other daemon has
// stopped or died (the kernel, or the file server, drops its lock). It
// returns a nil store when ctx ends first. SIGHUP re-reads the
// configuration as it does for an active daemon; the one in force at the
// takeover is returned. The takeover then goes the way of a restart after
// a crash: the journal's pending actions are resent only when Slurm does
// not show them done, and a grace signal never.
func (p *shellParts) waitAsStandby(ctx context.Context, cfg *config.Config, listen string, hup <-chan os.Signal,
	reload func() (*config.Config, error)) (*store.Store, *config.Config, error) {
	dir := cfg.Daemon.StateDir
	why := standbyReason(dir)
	p.showStandby(cfg, why)
	p.log.Info().Str("listen", listen).Str("state", filepath.Join(dir, store.FileName)).
		Msg("standby: another daemon holds the state; waiting to take over")
	since := time.Now()
	waitCtx, stop := context.WithCancel(ctx)
	defer stop()
	type opened struct {
		st  *store.Store
		err error
	}
	got := make(chan opened, 1)
	go func() {
		st, err := store.OpenWait(waitCtx, dir)
		got <- opened{st, err}
	}()
	for {
		select {
		case r := <-got:
			switch {
			case r.err == nil:
				p.log.Info().Dur("waited", time.Since(since)).Str("state", r.st.Path()).
					Msg("taking over: the state is free; recovering from it as after a restart")
				return r.st, cfg, nil
			case ctx.Err() != nil:
				p.log.Info().Msg("stopped while standby")
				return nil, cfg, nil
			default:
				return nil, cfg, fmt.Errorf("standby: %w", r.err)
			}
		case <-hup:
			next, err := reload()
			if err == nil {
				_, _, err = p.parts(next, 0)
			}
			if err != nil {
				p.log.Error().Err(err).Msg("reload: configuration refused; running on the old one")
				continue
			}
			if next.Daemon.StateDir != dir {
				p.log.Warn().Str("state_dir", next.Daemon.StateDir).Msg("reload: daemon.state_dir changes at the next restart; still waiting for " + dir)
			}
			cfg = next
			p.showStandby(cfg, why)
			p.log.Info().Str("policy", cfg.Scheduler.Policy).Dur("round", cfg.Scheduler.Round).
				Strs("partitions", cfg.Slurm.Partitions).Msg("configuration reloaded (standby)")
		}
	}
}

// standbyReason is what a standby says of itself.
func standbyReason(stateDir string) string {
	return fmt.Sprintf("another daemon holds the state %s; this one takes over when it stops",
		filepath.Join(stateDir, store.FileName))
}

// showStandby publishes that the daemon is a standby: /healthz answers 503
// with why, status says it in place of a round, gavel_slurm_active is 0
// and collector reports are turned away.
func (p *shellParts) showStandby(cfg *config.Config, why string) {
	p.active.Store(false)
	p.board.SetStandby(why)
	p.metrics.SetActive(false)
	st := configuredStatus(cfg)
	st.Round.Skipped, st.Round.Standby = "standby: "+why, true
	p.board.Publish(st, api.Allocation{})
}

// configuredStatus is the status a daemon shows before its first round:
// the configured policy and round length, and no job yet.
func configuredStatus(cfg *config.Config) api.Status {
	return api.Status{Round: api.Round{Policy: cfg.Scheduler.Policy, LengthSeconds: cfg.Scheduler.Round.Seconds(),
		DryRun: cfg.Scheduler.DryRun}, Jobs: []api.JobStatus{}, Types: []api.TypeSummary{}}
}

// becomeActive publishes that the daemon runs rounds: until its first
// round replaces it, status says the configured policy and round length
// (and no job yet) rather than an empty round 0.
func (p *shellParts) becomeActive(cfg *config.Config) {
	if p.board.Standby() != "" || p.board.Status().Round.Number == 0 {
		p.board.Publish(configuredStatus(cfg), api.Allocation{})
	}
	p.board.SetStandby("")
	p.metrics.SetActive(true)
	p.active.Store(true)
}

// runUntilReload runs d until ctx is done (nil, nil) or a SIGHUP brings a
// configuration that parses (it is returned once the round in progress
// has finished). A configuration that does not parse is logged and the
// daemon runs on.
func runUntilReload(ctx context.Context, d *daemon.Daemon, hup <-chan os.Signal, reload func() (*config.Config, error), log zerolog.Logger) (*config.Config, error) {
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- d.Run(runCtx) }()
	for {
		select {
		case err := <-done:
			return nil, err
		case <-hup:
			next, err := reload()
			if err != nil {
				log.Error().Err(err).Msg("reload: configuration refused; running on the old one")
				continue
			}
			stop()
			if err := <-done; err != nil {
				return nil, err
			}
			return next, nil
		}
	}
}

// shellParts are what a reload keeps: the store, the API's board and
// metrics, the log, and a Slurm client given by the caller (tests).
type shellParts struct {
	store   *store.Store
	board   *api.Board
	metrics *api.Metrics
	log     zerolog.Logger
	slurm   bridge.Slurm
	// measured is the learning estimator when collectors report, and
	// current the daemon their reports go to (the newest after a reload).
	measured *daemon.Measured
	current  atomic.Pointer[daemon.Daemon]
	// active is set while the daemon holds the state and runs rounds;
	// a standby turns collector reports away.
	active atomic.Bool
}

// tableOf is the reference throughput table the configuration names.
func tableOf(cfg *config.Config) (*throughputs.Table, error) {
	if cfg.Cluster.Throughputs == "physical" {
		return throughputs.Parse(etc.PhysicalClusterThroughputs)
	}
	return throughputs.Reference()
}

// serveReports listens for collector reports on their own address, with
// the shared secret or the nodes' own (daemon.collector_token_dir), over
// TLS when the configuration names a certificate, until ctx is done.
func (p *shellParts) serveReports(ctx context.Context, cfg *config.Config) error {
	var tlsConfig *tls.Config
	if cfg.Daemon.CollectorTLSCert != "" {
		var err error
		tlsConfig, err = reports.TLSConfig(cfg.Daemon.CollectorTLSCert, cfg.Daemon.CollectorTLSKey, func(err error) {
			p.log.Error().Err(err).Msg("collector endpoint: renewed TLS certificate")
		})
		if err != nil {
			return fmt.Errorf("daemon.collector_tls_cert: %w", err)
		}
	}
	ln, err := api.Listen(cfg.Daemon.CollectorListen)
	if err != nil {
		return fmt.Errorf("daemon.collector_listen: %w", err)
	}
	if tlsConfig != nil {
		ln = tls.NewListener(ln, tlsConfig)
	}
	if cfg.Daemon.CollectorTokenDir == "" {
		for _, w := range config.CheckTokenFile(cfg.Daemon.CollectorTokenFile) {
			p.log.Warn().Msg("collector token: " + w)
		}
	}
	sink := func(r reports.Report) error {
		if d := p.current.Load(); d != nil {
			return d.Receive(r)
		}
		return nil
	}
	h := reports.New(reports.Options{TokenFile: cfg.Daemon.CollectorTokenFile, TokenDir: cfg.Daemon.CollectorTokenDir,
		Sink: sink, Counters: p.metrics})
	mux := http.NewServeMux()
	mux.Handle(reports.Path, p.whenActive(h))
	p.log.Info().Str("listen", ln.Addr().String()).Bool("tls", tlsConfig != nil).
		Bool("node_tokens", cfg.Daemon.CollectorTokenDir != "").Msg("collector reports")
	go func() {
		if err := api.Serve(ctx, ln, mux); err != nil {
			p.log.Error().Err(err).Msg("collector endpoint stopped")
		}
	}()
	return nil
}

// whenActive hands requests to h while the daemon is active and answers
// 503 while it is a standby: a report it took in would be lost, and the
// collector's error says where to send it instead.
func (p *shellParts) whenActive(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !p.active.Load() {
			http.Error(w, "standby: this daemon does not run rounds; send reports to the active one", http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// build makes a daemon for cfg over the kept parts, restoring its state
// from the store.
func (p *shellParts) build(cfg *config.Config) (*daemon.Daemon, error) {
	instance, err := daemon.Instance(p.store)
	if err != nil {
		return nil, err
	}
	core, slurm, err := p.parts(cfg, instance)
	if err != nil {
		return nil, err
	}
	d, err := daemon.New(daemon.Deps{Core: core, Slurm: slurm, Store: p.store, Board: p.board,
		Metrics: p.metrics, Log: p.log, Clock: daemon.SystemClock{}, DryRun: cfg.Scheduler.DryRun, Measured: p.measured,
		LeaseLength: cfg.Scheduler.EffectiveLease()})
	if err != nil {
		return nil, err
	}
	d.SetReportLimits(daemon.ReportLimits{Bytes: cfg.Daemon.CollectorQueueBytes, NodeBytes: cfg.Daemon.CollectorNodeBytes})
	p.current.Store(d)
	return d, nil
}

// parts makes the scheduling core for cfg, with the instance number the
// state gives, and the Slurm client (the one given by tests, if any).
// Neither touches the state or the network, so a standby checks its
// configuration with them before it waits.
func (p *shellParts) parts(cfg *config.Config, instance int) (*daemon.Core, bridge.Slurm, error) {
	table, err := tableOf(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("cluster.throughputs: %w", err)
	}
	set := coreSettings(cfg)
	set.Instance = instance
	var est sched.Estimator = sched.TableEstimator{Table: table}
	if p.measured != nil {
		est = p.measured
	}
	core, err := daemon.NewCore(set, est)
	if err != nil {
		return nil, nil, err
	}
	slurm := p.slurm
	if slurm == nil {
		rc := rest.Config{URL: cfg.Slurm.RestURL, UserName: cfg.Slurm.User, TokenFile: cfg.Slurm.TokenFile,
			Partitions: cfg.Slurm.Partitions, Scontrol: cfg.Slurm.Scontrol, HTTPClient: daemon.SlurmHTTPClient(),
			Timeout: slurmTimeout, ReadTimeout: cfg.Slurm.ReadTimeout, SkipAccounting: !cfg.Slurm.ReadAccounting}
		if cfg.Slurm.APIVersion != "" {
			rc.Versions = []string{cfg.Slurm.APIVersion}
		}
		client, err := rest.New(rc)
		if err != nil {
			return nil, nil, fmt.Errorf("slurm: %w", err)
		}
		if cfg.Scheduler.EffectiveLease() > 0 && !cfg.Scheduler.DryRun {
			// The lease job goes to the first managed partition, where the
			// daemon's user may submit (Slurm's default partition when
			// every partition is managed).
			partition := ""
			if len(cfg.Slurm.Partitions) > 0 {
				partition = cfg.Slurm.Partitions[0]
			}
			client.EnableLease(partition)
		}
		slurm = client
	}
	return core, slurm, nil
}

// daemonLease is the lease the daemon renews: none in a dry run, which
// sends nothing.
func daemonLease(cfg *config.Config) time.Duration {
	if cfg.Scheduler.DryRun {
		return 0
	}
	return cfg.Scheduler.EffectiveLease()
}
