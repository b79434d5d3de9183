package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/gavel-slurm/gavel-slurm/internal/duration"
	"github.com/gavel-slurm/gavel-slurm/internal/reports"
	"github.com/gavel-slurm/gavel-slurm/nvml"
)

func init() {
	register("collector", subcommand{
		summary: "measure this node's GPUs and jobs' progress and report them to the daemon",
		run: func(args []string) int {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runCollector(ctx, args, os.Stdout, os.Stderr, nvml.NewNVML)
		},
	})
}

// collectorOptions are the collector's flags.
type collectorOptions struct {
	daemonURL, tokenFile, caFile             string
	fakeGPUs, node, typeMap                  string
	jobsDir, progressDir, procRoot, logLevel string
	interval                                 duration.Flag
	once, print                              bool
}

func parseCollectorFlags(args []string, stderr io.Writer) (*collectorOptions, error) {
	o := &collectorOptions{interval: duration.Flag(nvml.DefaultInterval)}
	fs := flag.NewFlagSet("collector", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.daemonURL, "daemon-url", "", "daemon address, http(s)://HOST:PORT (reports go to "+reports.Path+"), or a full URL with a path")
	fs.StringVar(&o.tokenFile, "token-file", "", "file holding the secret the daemon checks, shared or this node's own (mode 0600, owned by root)")
	fs.StringVar(&o.caFile, "ca-file", "", "PEM file of the certificate authorities to trust for an https --daemon-url (default: the system's)")
	fs.StringVar(&o.fakeGPUs, "fake-gpus", "", "run on fake GPUs instead of NVML, e.g. v100:4,k80:4 (types k80 p100 v100 t4 a100 l40s h100 h200, or any NVML product name)")
	fs.Var(&o.interval, "interval", "time between reports: seconds (30) or a duration such as 1m")
	fs.StringVar(&o.node, "node", "", "Slurm node name to report as (default: the short host name)")
	fs.StringVar(&o.jobsDir, "jobs-dir", nvml.DefaultJobsDir, "directory of the per-job GPU files the Prolog writes")
	fs.StringVar(&o.progressDir, "progress-dir", nvml.DefaultProgressDir, "directory of the jobs' progress files (JOBID.progress)")
	fs.StringVar(&o.procRoot, "proc-root", nvml.DefaultProcRoot, "where /proc is mounted (to map GPU processes to jobs by cgroup)")
	fs.StringVar(&o.typeMap, "type-map", "", "file of 'TYPE REGEXP' lines mapping NVML product names to GRES types, tried before the built-in rules")
	fs.BoolVar(&o.once, "once", false, "collect once, send (or print) that report and exit")
	fs.BoolVar(&o.print, "print", false, "print reports as JSON on standard output instead of sending them")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if d := o.interval.Duration(); d < time.Second || d > reports.MaxIntervalS*time.Second {
		return nil, fmt.Errorf("--interval %s: want between 1s and 24h", d)
	}
	if !o.print {
		if o.daemonURL == "" || o.tokenFile == "" {
			return nil, errors.New("--daemon-url and --token-file are needed to send reports (or --print them)")
		}
		if o.caFile != "" && !strings.HasPrefix(o.daemonURL, "https://") {
			return nil, errors.New("--ca-file is for an https:// --daemon-url")
		}
	}
	return o, nil
}

// runCollector runs until ctx is done. realNVML gives the node's NVML
// (tests pass one without a driver).
func runCollector(ctx context.Context, args []string, stdout, stderr io.Writer, realNVML func() nvml.Library) int {
	o, err := parseCollectorFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "collector: %v\n", err)
		return 2
	}
	level, err := zerolog.ParseLevel(o.logLevel)
	if err != nil || level == zerolog.NoLevel {
		fmt.Fprintf(stderr, "collector: --log-level %q: want debug, info, warn or error\n", o.logLevel)
		return 2
	}
	log := zerolog.New(stderr).Level(level).With().Timestamp().Str("component", "collector").Logger()
	if err := runCollectorWith(ctx, o, stdout, log, realNVML); err != nil {
		if errors.Is(err, context.Canceled) {
			return 0
		}
		fmt.Fprintf(stderr, "collector: %v\n", err)
		return 1
	}
	return 0
}

func runCollectorWith(ctx context.Context, o *collectorOptions, stdout io.Writer, log zerolog.Logger, realNVML func() nvml.Library) error {
	cfg := nvml.Config{Node: o.node, JobsDir: o.jobsDir, ProgressDir: o.progressDir, ProcRoot: o.procRoot,
		Interval: o.interval.Duration(), Log: log}
	if cfg.Node == "" {
		host, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("no --node and no host name: %w", err)
		}
		// Slurm node names are short host names in most clusters.
		cfg.Node, _, _ = strings.Cut(host, ".")
	}
	if o.typeMap != "" {
		m, err := nvml.LoadTypeMap(o.typeMap)
		if err != nil {
			return err
		}
		cfg.Types = m
	}
	var sender *nvml.Sender
	if !o.print {
		url, err := nvml.ReportURL(o.daemonURL)
		if err != nil {
			return err
		}
		sender = nvml.NewSender(url, o.tokenFile, log)
		if o.caFile != "" {
			if err := sender.TrustCAFile(o.caFile); err != nil {
				return err
			}
		}
		// A token that cannot be read now will not be read later either,
		// most likely: say so before measuring anything.
		if _, err := reports.ReadToken(o.tokenFile); err != nil {
			return err
		}
		for _, w := range tokenFileWarnings(o.tokenFile) {
			log.Warn().Msg(w)
		}
		if w := cleartextWarning(url); w != "" {
			log.Warn().Msg(w)
		}
	}

	var lib nvml.Library
	if o.fakeGPUs != "" {
		gpus, err := nvml.ParseFakeGPUs(o.fakeGPUs)
		if err != nil {
			return err
		}
		lib = nvml.NewFake(gpus)
		log.Info().Str("fake_gpus", o.fakeGPUs).Msg("running on fake GPUs")
	} else {
		lib = realNVML()
	}
	c, err := nvml.Open(lib, cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	gpus, skipped, err := c.Inventory()
	if err != nil {
		return err
	}
	for _, g := range gpus {
		log.Info().Int("gpu", g.Index).Str("uuid", g.UUID).Str("product", g.Name).Str("type", g.Type).
			Uint64("memory_bytes", g.MemTotal).Msg("GPU found")
	}
	for _, s := range skipped {
		log.Warn().Err(s.Err).Int("gpu", s.Index).Msg("GPU not readable")
	}

	if o.once {
		rep, err := c.Collect()
		if err != nil {
			return err
		}
		if o.print {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(rep)
		}
		return sender.Send(ctx, rep, 3)
	}
	log.Info().Str("node", cfg.Node).Dur("interval", cfg.Interval).Str("jobs_dir", cfg.JobsDir).
		Str("progress_dir", cfg.ProgressDir).Msg("collecting")
	if o.print {
		enc := json.NewEncoder(stdout)
		return c.Run(ctx, func(rep reports.Report) {
			if err := enc.Encode(rep); err != nil {
				log.Error().Err(err).Msg("print the report")
			}
		})
	}
	senderDone := make(chan struct{})
	go func() {
		defer close(senderDone)
		sender.Run(ctx)
	}()
	err = c.Run(ctx, sender.Enqueue)
	<-senderDone
	st := sender.Stats()
	log.Info().Int("sent", st.Sent).Int("dropped", st.Dropped).Int("refused", st.Refused).
		Int("failed_attempts", st.Failed).Msg("stopped")
	return err
}

// cleartextWarning flags a plain http daemon URL to another host: the
// token crosses the network in clear, and whoever reads it can report in
// this node's name (or, with a shared token, in any node's).
func cleartextWarning(reportURL string) string {
	u, err := url.Parse(reportURL)
	if err != nil || u.Scheme != "http" {
		return ""
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); strings.EqualFold(host, "localhost") || ip != nil && ip.IsLoopback() {
		return ""
	}
	return fmt.Sprintf("daemon URL %s is plain http to another host: the token crosses the network in clear; "+
		"use https:// (daemon.collector_tls_cert, or a TLS proxy in front of the daemon)", reportURL)
}

// tokenFileWarnings flags a token others can read: whoever has it can
// send reports in any node's name and skew the daemon's estimates.
func tokenFileWarnings(path string) []string {
	fi, err := os.Stat(path)
	if err != nil {
		return nil
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return []string{fmt.Sprintf("token file %s has mode %04o: other users can read the secret and send false reports; chmod 600 it", path, perm)}
	}
	return nil
}
