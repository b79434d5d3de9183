package sched

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

// Records saved by earlier versions (with throughput estimates and step
// counts, which nothing read back) still decode, field for field.
func TestRecordReadsEarlierLayouts(t *testing.T) {
	const saved = `{"job_id":"17","first_seen":"2025-03-01T09:00:00Z","received":{"v100":360},"steps":1200,
		"estimates":{"v100":{"steps_per_second":9.5,"source":"table"}},"last_decision":"run","reason":"r",
		"grace_start":"2025-03-01T10:00:00Z","grace_target":"k80","grace_phase":"requeued","grace_restarts":2,
		"grace_for_te":"9","preempt":"checkpoint","held_by_daemon":true,"updated_at":"2025-03-01T11:00:00Z"}`
	var r Record
	if err := json.Unmarshal([]byte(saved), &r); err != nil {
		t.Fatal(err)
	}
	at := func(h int) time.Time { return time.Date(2025, 3, 1, h, 0, 0, 0, time.UTC) }
	if r.JobID != "17" || !r.FirstSeen.Equal(at(9)) || r.Received["v100"] != 360 || r.LastDecision != "run" || r.Reason != "r" ||
		!r.GraceStart.Equal(at(10)) || r.GraceTarget != "k80" || r.GracePhase != "requeued" || r.GraceRestarts != 2 ||
		r.GraceForTE != "9" || r.Preempt != "checkpoint" || !r.HeldByDaemon || !r.UpdatedAt.Equal(at(11)) {
		t.Errorf("decoded %+v", r)
	}
}

// A record as the store holds it loads into the core and is written back
// field for field; a record under a name that is no job id is forgotten
// by the first round.
func TestRestoredRecordIsWrittenBackAsSaved(t *testing.T) {
	const saved = `{"job_id":"17","first_seen":"2025-03-01T09:00:00Z","received":{"v100":360},"last_decision":"wait",` +
		`"reason":"r","grace_start":"2025-03-01T10:00:00Z","grace_target":"k80","grace_phase":"requeued","grace_restarts":2,` +
		`"grace_for_te":"9","preempt":"checkpoint","restart_cost_s":45,"held_by_daemon":true,"updated_at":"2025-03-01T11:00:00Z"}`
	var r Record
	if err := json.Unmarshal([]byte(saved), &r); err != nil {
		t.Fatal(err)
	}
	c := newCore(t, settings())
	c.Restore(map[string]Record{"17": r, "not-a-job": {JobID: "not-a-job", FirstSeen: epoch}}, 3)
	if js := c.jobs[keyOf(17)]; js == nil || js.pre.forTE != 9 || js.pre.phase != requeued {
		t.Fatalf("restored job 17: %+v", js)
	}
	records := c.records(time.Date(2025, 3, 1, 11, 0, 0, 0, time.UTC))
	if len(records) != 1 {
		t.Fatalf("records %+v, want job 17's alone", records)
	}
	again, err := json.Marshal(records[0])
	if err != nil {
		t.Fatal(err)
	}
	if string(again) != saved {
		t.Errorf("written back:\n%s\nwant:\n%s", again, saved)
	}
	now := epoch.Add(3 * time.Hour)
	res := step(c, snapshot(t, now, []bridge.Node{node("a1", "v100", 4, 0)}), now, c.Solve)
	if len(res.Forget) != 1 || res.Forget[0] != "not-a-job" {
		t.Errorf("first round forgets %q, want the record that names no job", res.Forget)
	}
}

// The journal spells an action's trial-and-error job as a JSON string, and
// leaves it out when there is none.
func TestJournaledActionKeepsItsLayout(t *testing.T) {
	a := Action{Action: bridge.Action{Kind: bridge.ActSignal, Job: 3, Signal: "USR1"}, Why: "w", Restarts: 1, ForTE: 9}
	data, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"ForTE":"9"`) {
		t.Errorf("journaled as %s, want \"ForTE\":\"9\"", data)
	}
	var back Action
	if err := json.Unmarshal(data, &back); err != nil || back != a {
		t.Errorf("read back %+v (%v), want %+v", back, err, a)
	}
	a.ForTE = 0
	if data, _ := json.Marshal(a); strings.Contains(string(data), "ForTE") {
		t.Errorf("journaled as %s, want no ForTE", data)
	}
}
