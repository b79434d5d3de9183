package rest

import (
	"context"
	"io"
	"net/http"
	"testing"
)

// A jobs reply without its "jobs" list (a reply of another shape, cut
// before the list, or a proxy's empty JSON object) is not an empty queue:
// taken for one, every managed job vanishes and, read twice, is forgotten.
func TestSnapshotRefusesAJobsReplyWithoutItsList(t *testing.T) {
	for name, body := range map[string]string{
		"no jobs key":  `{"errors":[],"warnings":[]}`,
		"empty object": `{}`,
		"jobs is null": `{"jobs":null}`,
	} {
		t.Run(name, func(t *testing.T) {
			f := &fakeRestd{t: t, handler: func(w http.ResponseWriter, r *http.Request) bool {
				if r.URL.Path != "/slurm/v0.0.42/jobs" {
					return false
				}
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, body)
				return true
			}}
			c, _ := newTestClient(t, f)
			snap, err := c.Snapshot(context.Background())
			if err == nil {
				t.Fatalf("reply %s read as a queue of %d jobs, without an error", body, len(snap.Jobs))
			}
		})
	}
}
