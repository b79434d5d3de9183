package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/rs/zerolog"

	"github.com/gavel-slurm/gavel-slurm/bridge/rest"
	"github.com/gavel-slurm/gavel-slurm/internal/api"
	"github.com/gavel-slurm/gavel-slurm/internal/store"
)

func init() {
	register("handback", subcommand{
		summary: "put every job the daemon touched back as its owner submitted it, end its lease (maintenance, removal)",
		run: func(args []string) int {
			return runHandback(args, os.Stdout, os.Stderr)
		},
	})
}

// runHandback hands the managed partitions back to Slurm: every job the
// daemon's state knows, or that waits on its lease, gets its owner's
// request, Slurm's own priority and no hold or lease of the daemon's, and
// each array its own limit; the lease job is cancelled. It lists what it
// could not restore and exits 1 if anything is left. The daemon must be
// stopped first: its state is the record of what it changed.
func runHandback(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("handback", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", defaultConfigPath, "configuration file (TOML), the daemon's")
	stateDir := fs.String("state-dir", "", "the daemon's state directory (overrides daemon.state_dir)")
	partitions := fs.String("partitions", "", "comma-separated managed partitions (overrides slurm.partitions)")
	dryRun := fs.Bool("dry-run", false, "list what would be restored and send nothing")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "handback: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	cfg, _, err := loadConfigFile(*path, set["config"])
	if err == nil && set["state-dir"] {
		var dir string
		if dir, err = absPath(*stateDir); err == nil {
			err = cfg.Set("daemon.state_dir", dir)
		}
	}
	if err == nil && set["partitions"] {
		err = cfg.Set("slurm.partitions", *partitions)
	}
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		fmt.Fprintf(stderr, "handback: %v\n", err)
		return 2
	}
	cfg.Scheduler.DryRun = *dryRun
	st, err := store.Open(cfg.Daemon.StateDir)
	if errors.Is(err, store.ErrLocked) {
		fmt.Fprintf(stderr, "handback: %v: the daemon is running on this state; stop it first (systemctl stop gavel-slurm)\n", err)
		return 1
	}
	if err != nil {
		fmt.Fprintf(stderr, "handback: %v\n", err)
		return 1
	}
	defer st.Close()
	log := zerolog.New(stderr).With().Timestamp().Str("component", "handback").Logger()
	shell := &shellParts{board: &api.Board{}, log: log, store: st}
	d, err := shell.build(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "handback: %v\n", err)
		return 1
	}
	if c, ok := d.Slurm.(*rest.Client); ok && !c.Leasing() {
		// Whatever the daemon runs with now, jobs may still wait on a
		// lease it held before: it is recognised and ended all the same.
		partition := ""
		if len(cfg.Slurm.Partitions) > 0 {
			partition = cfg.Slurm.Partitions[0]
		}
		c.EnableLease(partition)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := d.HandBack(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "handback: %v\n", err)
		return 1
	}
	verb := "sent"
	if *dryRun {
		verb = "would send"
	}
	for _, a := range rep.Actions {
		fmt.Fprintf(stdout, "%s %s: %s\n", verb, a.Action, printable(a.Why))
	}
	if rep.LeaseEnded {
		fmt.Fprintln(stdout, "lease ended: no job waits on the daemon")
	}
	for _, f := range rep.Failed {
		fmt.Fprintln(stdout, "failed: "+printable(f))
	}
	for _, l := range rep.Left {
		fmt.Fprintln(stdout, "left: "+printable(l))
	}
	switch {
	case *dryRun:
		fmt.Fprintf(stdout, "dry run: %d restores to send\n", len(rep.Actions))
		return 0
	case len(rep.Failed) > 0 || len(rep.Left) > 0:
		fmt.Fprintf(stdout, "handed back with %d failures and %d jobs left as the daemon had them (above)\n", len(rep.Failed), len(rep.Left))
		return 1
	}
	fmt.Fprintf(stdout, "handed back: %d restores, every job as its owner submitted it\n", len(rep.Actions))
	return 0
}
