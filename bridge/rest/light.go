package rest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Reads sized to the need. A full read of the queue costs slurmctld one
// REQUEST_JOB_INFO that packs every job record under its job read lock,
// and slurmrestd about a millisecond per job to turn them into JSON; the
// nodes cost a REQUEST_NODE_INFO. The client keeps its last full answers
// and asks for less where slurmctld can say that nothing changed:
//
//   - jobs and nodes are read with update_time set to the last answer's
//     last_update: slurmctld answers "no change" without packing
//     anything (slurmrestd renders it as an empty jobs list with a
//     last_update of 0, and as 304 for nodes), and the kept answer is used;
//   - a look between rounds (bridge.AsLook) first asks GET /jobs/state
//     (Slurm 24.05 on): every job's id and state, packed without the
//     records. When every job has the state the kept answer shows, the
//     kept jobs stand (the nodes are still asked with update_time);
//     otherwise the jobs are read as above.
//
// Where an endpoint is missing (404) or answers in a way not understood,
// the client reads in full, and stops asking /jobs/state after a 404.

// jobsReply is one answer to GET /jobs.
type jobsReply struct {
	jobs []rawJob
	// lastUpdate is slurmctld's last_update of the job list (Unix s).
	lastUpdate int64
	// unchanged: nothing changed since the update_time asked (jobs nil).
	unchanged bool
}

// nodesReply is one answer to GET /nodes.
type nodesReply struct {
	nodes      []rawNode
	lastUpdate int64
	unchanged  bool
}

// jobState is one entry of GET /jobs/state.
type jobState struct {
	// ID is the job as slurmctld names it there: "12", "12_3" for a task
	// of a job array (12 being the task's own record), "12_[4-9]" for an
	// array's tasks not started.
	ID    string   `json:"job_id"`
	State []string `json:"state"`
}

// parseJobStates reads a /jobs/state reply by hand: the generated clients
// take it for a full job list, whose job_id is a number where this
// endpoint sends a string.
func parseJobStates(rsp *http.Response) ([]jobState, error) {
	body, err := io.ReadAll(rsp.Body)
	_ = rsp.Body.Close()
	if err != nil {
		return nil, err
	}
	if rsp.StatusCode != http.StatusOK {
		return nil, statusError(rsp.StatusCode, body)
	}
	var reply struct {
		Jobs   *[]jobState `json:"jobs"`
		Errors []struct {
			Description string `json:"description"`
			Number      int    `json:"error_number"`
			Error       string `json:"error"`
		} `json:"errors"`
	}
	if err := json.NewDecoder(bytes.NewReader(body)).Decode(&reply); err != nil {
		return nil, fmt.Errorf("slurmrestd's jobs/state reply does not decode: %w", err)
	}
	if len(reply.Errors) > 0 {
		re := &ReplyError{Status: rsp.StatusCode}
		for _, e := range reply.Errors {
			re.Errors = append(re.Errors, slurmError{Number: e.Number, Error: e.Error, Description: e.Description})
		}
		return nil, re
	}
	if reply.Jobs == nil {
		return nil, fmt.Errorf(`slurmrestd's jobs/state reply has no "jobs" list`)
	}
	return *reply.Jobs, nil
}

// readCache is the last full answers, for reads with update_time and for
// looks.
type readCache struct {
	version string
	jobs    []rawJob
	// jobsUpdate is the update_time to ask jobs with next, 0 when the
	// next read must be full (see safeSince).
	jobsUpdate int64
	nodes      []rawNode
	nodesSince int64
}

// safeSince is the update_time to ask with after an answer whose
// last_update was lastUpdate, read at readAt: slurmctld's times are in
// whole seconds, so a change later in the second of lastUpdate would
// carry the same time and be answered "no change". Only a last_update at
// least a second before the read is used; otherwise the next read is
// full (0). readAt is this host's clock: with slurmctld's ahead of it the
// guard errs towards full reads.
func safeSince(lastUpdate int64, readAt time.Time) int64 {
	if lastUpdate <= 0 || lastUpdate >= readAt.Unix()-1 {
		return 0
	}
	return lastUpdate
}

// sameStates reports whether states shows every job of jobs in the state
// jobs shows, and no other job: then nothing a look acts on changed.
func sameStates(states []jobState, jobs []rawJob) bool {
	if len(states) != len(jobs) {
		return false
	}
	want := make(map[int64]string, len(jobs))
	for _, j := range jobs {
		want[j.ID] = strings.Join(j.States, ",")
	}
	for _, s := range states {
		own, _, _ := strings.Cut(s.ID, "_")
		id, err := strconv.ParseInt(own, 10, 64)
		if err != nil {
			// A het job's "12+1" and any other form: not comparable.
			return false
		}
		state, ok := want[id]
		if !ok || state != strings.Join(s.State, ",") {
			return false
		}
		delete(want, id) // a second entry for one record is a change
	}
	return true
}

func ptrTo[T any](v T) *T { return &v }
