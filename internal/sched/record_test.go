package sched

import (
	"encoding/json"
	"testing"
	"time"
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
