package daemon

import (
	"context"
	"fmt"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/internal/api"
)

// The lease (bridge/rest/lease.go): the jobs the daemon keeps waiting
// depend on one job of its own whose deadline each round moves forward.
// A round that sends anything renews it first, so that every hold it
// sends lasts as long as the lease; a round that cannot read Slurm does
// not, so a daemon that has lost sight of Slurm for the lease's length
// lets Slurm schedule on its own.

// leaser is the Slurm's lease, when it has one that is on.
func (d *Daemon) leaser() (bridge.Leaser, bool) {
	l, ok := d.Slurm.(bridge.Leaser)
	if !ok || d.LeaseLength <= 0 || d.DryRun || !l.Leasing() {
		return nil, false
	}
	return l, true
}

// renewLease moves the lease's end to LeaseLength from now.
func (d *Daemon) renewLease(ctx context.Context) {
	l, ok := d.leaser()
	if !ok {
		return
	}
	lease, err := l.RenewLease(ctx, d.Clock.Now().Add(d.LeaseLength))
	if err == nil || !lease.Expires.IsZero() {
		d.lease = lease
	}
	d.leaseErr = ""
	if err != nil {
		d.leaseErr = err.Error()
		d.Log.Error().Err(err).Time("expires", d.lease.Expires).
			Msg("lease not renewed: the jobs the daemon keeps waiting become Slurm's when it runs out")
	}
	if d.Metrics != nil {
		d.Metrics.ObserveLease(d.lease.Expires, err == nil)
	}
}

// leaseDoc is the lease for status.
func (d *Daemon) leaseDoc() *api.Lease {
	if _, ok := d.leaser(); !ok {
		return nil
	}
	return &api.Lease{Job: int64(d.lease.Job), Expires: d.lease.Expires, LengthSeconds: d.LeaseLength.Seconds(), Error: d.leaseErr}
}

// tokenWarnWindow is how long before the slurmrestd JWT expires the daemon
// starts warning: long enough to rotate it in a working week.
const tokenWarnWindow = 14 * 24 * time.Hour

// tokenWarnEvery spaces the log's warnings about the JWT.
const tokenWarnEvery = 6 * time.Hour

// tokenExpirer is a Slurm that can say when its JWT expires.
type tokenExpirer interface {
	TokenExpiry() (time.Time, error)
}

// tokenDoc reads the JWT's expiry for status, the metric and the log: an
// expired token makes every round send nothing, so it is warned about
// ahead of time.
func (d *Daemon) tokenDoc() *api.Token {
	te, ok := d.Slurm.(tokenExpirer)
	if !ok {
		return nil
	}
	now := d.Clock.Now()
	exp, err := te.TokenExpiry()
	doc := &api.Token{Expires: exp}
	switch {
	case err != nil:
		doc.Warning = "the slurmrestd JWT cannot be read: " + err.Error()
	case exp.IsZero():
		// No exp claim: it does not expire.
	case !exp.After(now):
		doc.Warning = fmt.Sprintf("the slurmrestd JWT expired at %s: every round sends nothing until it is rotated (README, step 3)",
			exp.UTC().Format(time.RFC3339))
	case exp.Sub(now) < tokenWarnWindow:
		doc.Warning = fmt.Sprintf("the slurmrestd JWT expires at %s, in %s: rotate it (README, step 3) before rounds start sending nothing",
			exp.UTC().Format(time.RFC3339), exp.Sub(now).Round(time.Minute))
	}
	if d.Metrics != nil {
		d.Metrics.ObserveToken(exp)
	}
	if doc.Warning != "" && (d.tokenWarned.IsZero() || now.Sub(d.tokenWarned) >= tokenWarnEvery) {
		d.tokenWarned = now
		d.Log.Warn().Time("expires", exp).Msg(doc.Warning)
	}
	return doc
}
