//go:build integration

package rest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/internal/history"
	"github.com/gavel-slurm/gavel-slurm/internal/slurmtest"
)

// Two short jobs, one on a v100 asked by type and one on any two GPUs,
// are found once they end in the history slurmdbd serves, on every API
// version the server offers, with their GPUs, types and the tag of their
// comment; a window that holds only part of their run returns them with
// their times whole.
func TestJobHistory(t *testing.T) {
	env := slurmtest.FromEnv(t)
	env.RequireAccounting(t)
	versions := offeredVersions(t)
	from := time.Now().Add(-time.Second).Truncate(time.Second)
	const script = "#!/bin/sh\nsleep 4\n"
	typed := env.Submit(t, script, "--gres=gpu:v100:1", "-t", "2", "-o", "/dev/null",
		"--comment=gavel: model=resnet50 steps=100")
	untyped := env.Submit(t, script, "--gres=gpu:2", "-t", "2", "-o", "/dev/null")

	// find reads the window until both jobs are in it, ended.
	find := func(t *testing.T, c *Client, from, to func() time.Time) (typedJob, untypedJob history.Job) {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		for {
			body, err := c.JobHistory(context.Background(), from(), to())
			if err != nil {
				t.Fatal(err)
			}
			h, err := history.Parse(body)
			if err != nil {
				t.Fatal(err)
			}
			var found int
			for _, j := range h.Jobs {
				switch j.ID {
				case fmt.Sprint(typed):
					typedJob = j
					found++
				case fmt.Sprint(untyped):
					untypedJob = j
					found++
				}
			}
			if found == 2 {
				return typedJob, untypedJob
			}
			if time.Now().After(deadline) {
				t.Fatalf("jobs %d and %d not both in the history after 90 s: %d jobs, skipped %v",
					typed, untyped, len(h.Jobs), h.Skipped)
			}
			time.Sleep(time.Second)
		}
	}

	for _, version := range versions {
		t.Run(version, func(t *testing.T) {
			c := integrationClient(t, version)
			a, b := find(t, c, func() time.Time { return from }, time.Now)
			if a.GPUs != 1 || a.GPUType != "v100" || a.RequestedType != "v100" || a.State != "COMPLETED" ||
				a.Partition != partition() || a.Comment != "gavel: model=resnet50 steps=100" || a.TimeLimit != 2*time.Minute {
				t.Errorf("typed job %+v", a)
			}
			if b.GPUs != 2 || b.RequestedType != "" || b.State != "COMPLETED" || b.Comment != "" {
				t.Errorf("untyped job %+v", b)
			}
			for _, j := range []history.Job{a, b} {
				if j.Start.Before(from) || !j.End.After(j.Start) || j.End.Sub(j.Start) < 3*time.Second {
					t.Errorf("job %s: start %v end %v (window from %v)", j.ID, j.Start, j.End, from)
				}
			}

			// A window of one second inside both runs: slurmdbd cuts
			// times to the window unless asked not to.
			inside := maxTime(a.Start, b.Start).Add(time.Second)
			if !inside.Before(a.End) || !inside.Before(b.End) {
				t.Fatalf("the jobs ran %v to %v and %v to %v: no second in both runs", a.Start, a.End, b.Start, b.End)
			}
			a2, b2 := find(t, c, func() time.Time { return inside }, func() time.Time { return inside })
			for _, p := range [][2]history.Job{{a, a2}, {b, b2}} {
				if !p[1].Start.Equal(p[0].Start) || !p[1].End.Equal(p[0].End) {
					t.Errorf("in the window %v, job %s ran %v to %v; in the whole, %v to %v",
						inside, p[0].ID, p[1].Start, p[1].End, p[0].Start, p[0].End)
				}
			}
		})
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
