package daemon

import (
	"context"
	"fmt"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

// HandBackReport is what a hand-back did (gavel-slurm handback).
type HandBackReport struct {
	// Actions are the restores sent (or, in a dry run, that would be).
	Actions []Action
	// Failed are the restores Slurm refused, with why.
	Failed []string
	// LeaseEnded is set when the lease job was cancelled, so that every
	// job still waiting on it became eligible.
	LeaseEnded bool
	// Left is what a fresh look at Slurm shows still to restore.
	Left []string
}

// HandBack puts every job the daemon touched back as its owner submitted
// it, ends the lease, and reads Slurm again to list what is left. It
// takes the place of rounds: run it with no daemon running on the state
// (the store's lock sees to that).
func (d *Daemon) HandBack(ctx context.Context) (HandBackReport, error) {
	var rep HandBackReport
	snap, err := d.Slurm.Snapshot(ctx)
	if err != nil {
		return rep, fmt.Errorf("read Slurm: %w", err)
	}
	rep.Actions = d.Core.HandBackAll(snap)
	if d.DryRun {
		for _, a := range rep.Actions {
			d.Log.Info().Str("action", a.Action.String()).Str("why", a.Why).Bool("dry_run", true).Msg("hand back")
		}
		return rep, nil
	}
	errs := d.sendAll(ctx, rep.Actions)
	for i, err := range errs {
		if err != nil {
			rep.Failed = append(rep.Failed, fmt.Sprintf("%s: %v", rep.Actions[i].Action, err))
		}
	}
	if l, ok := d.Slurm.(bridge.Leaser); ok {
		if err := l.EndLease(ctx); err != nil {
			rep.Failed = append(rep.Failed, "end the lease: "+err.Error())
		} else {
			rep.LeaseEnded = true
		}
	}
	after, err := d.Slurm.Snapshot(ctx)
	if err != nil {
		return rep, fmt.Errorf("read Slurm after handing back: %w", err)
	}
	rep.Left = d.Core.HandBackLeft(after)
	return rep, nil
}

// sendAll sends actions in one batch where Slurm takes batches, one by
// one otherwise, and returns each one's error.
func (d *Daemon) sendAll(ctx context.Context, actions []Action) []error {
	plain := make([]bridge.Action, len(actions))
	for i, a := range actions {
		plain[i] = a.Action
	}
	if b, ok := d.Slurm.(bridge.BatchActuator); ok {
		return b.ApplyBatch(ctx, plain)
	}
	errs := make([]error, len(plain))
	for i, a := range plain {
		errs[i] = d.Slurm.Apply(ctx, a)
	}
	return errs
}
