package daemon

import (
	"context"
	"time"

	"github.com/rs/zerolog"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/internal/store"
)

// Journal is the action journal the daemon writes before it sends and
// settles after; *store.Store is the real one, store.MemJournal the step
// simulator's.
type Journal interface {
	Intents(round uint64, specs []store.IntentSpec, now time.Time) ([]store.Entry, error)
	Settle(outcomes []store.Outcome, now time.Time) error
	MarkDone(seq uint64, now time.Time) error
	MarkFailed(seq uint64, why string, now time.Time) error
	MarkResent(seq uint64, now time.Time) error
	Pending() ([]store.Entry, []store.CorruptEntry, error)
}

// The daemon's writes go through one journal and one actuator, chosen
// once in New: the store and Slurm, or, in dry-run mode, a journal that
// keeps nothing and an actuator that only logs. Rounds, the checks
// between rounds and the resends after a crash all take the same path, so
// no write can bypass the dry-run choice.

// dryJournal journals nothing: dry-run mode leaves the store's journal as
// it was (and has nothing to reconcile).
type dryJournal struct{}

func (dryJournal) Intents(round uint64, specs []store.IntentSpec, now time.Time) ([]store.Entry, error) {
	return make([]store.Entry, len(specs)), nil
}
func (dryJournal) Settle([]store.Outcome, time.Time) error               { return nil }
func (dryJournal) MarkDone(uint64, time.Time) error                      { return nil }
func (dryJournal) MarkFailed(uint64, string, time.Time) error            { return nil }
func (dryJournal) MarkResent(uint64, time.Time) error                    { return nil }
func (dryJournal) Pending() ([]store.Entry, []store.CorruptEntry, error) { return nil, nil, nil }

// dryActuator logs each action instead of sending it.
type dryActuator struct{ log zerolog.Logger }

func (d dryActuator) Apply(_ context.Context, a bridge.Action) error {
	d.log.Info().Str("action", a.String()).Bool("dry_run", true).Msg("not sent (dry run)")
	return nil
}
