package daemon

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/internal/estimate"
	"github.com/gavel-slurm/gavel-slurm/internal/reports"
	"github.com/gavel-slurm/gavel-slurm/internal/sched"
)

var queueEpoch = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// ratedReport is node's report at queueEpoch + i intervals of 30 s, with
// jobs first, first+1, ... first+n-1 on v100 at rate.
func ratedReport(node string, i, first, n int, rate float64) reports.Report {
	r := reports.Report{Node: node, Time: queueEpoch.Add(time.Duration(i) * 30 * time.Second), IntervalS: 30}
	for k := range n {
		steps := int64(1000 * (i + 1))
		r.Jobs = append(r.Jobs, reports.Job{JobID: strconv.Itoa(first + k), GPUType: "v100", GPUs: 1, StepsPerS: &rate, Steps: &steps})
	}
	return r
}

func kindOf(err error) string {
	if err == nil {
		return ""
	}
	return reports.KindOf(err)
}

// A newer report for the same node, job and type goes into that job's
// entry: a node that reports the same jobs again and again holds the same
// bytes, however many reports arrive before the round.
func TestReportQueueOneEntryPerNodeAndJob(t *testing.T) {
	var q reportQueue
	for i := range 1000 {
		if err := q.add(ratedReport("gpu1", i, 100, 4, float64(i+1))); err != nil {
			t.Fatalf("report %d: %v", i, err)
		}
	}
	want := nodeCost("gpu1") + 4*entryCost("100", "v100")
	if got := q.held(); got != want {
		t.Errorf("1,000 reports of the same 4 jobs hold %d bytes, want %d", got, want)
	}
	nodes, out, _, superseded := q.drain()
	if len(nodes) != 1 || len(out) != 4*keptIntervals || superseded != 4*(1000-keptIntervals) {
		t.Fatalf("drained %v, %d intervals, %d superseded; want 1 node, %d intervals, %d superseded",
			nodes, len(out), superseded, 4*keptIntervals, 4*(1000-keptIntervals))
	}
	// The latest intervals, in time order.
	for i, iv := range out {
		wantAt := queueEpoch.Add(time.Duration(1000-keptIntervals+i/4) * 30 * time.Second).UnixNano()
		if iv.at != wantAt || iv.rate != float64(1000-keptIntervals+i/4+1) {
			t.Fatalf("interval %d: %+v, want at %d", i, iv, wantAt)
		}
	}
	if q.held() != 0 {
		t.Errorf("drained queue holds %d bytes", q.held())
	}
	// A repeat or an older interval changes nothing.
	q.add(ratedReport("gpu1", 5, 100, 1, 1))
	q.add(ratedReport("gpu1", 5, 100, 1, 2))
	q.add(ratedReport("gpu1", 4, 100, 1, 3))
	if _, out, _, _ := q.drain(); len(out) != 1 || out[0].rate != 1 {
		t.Errorf("repeats kept: %+v", out)
	}
}

// One node's share is bounded: it cannot fill the queue with jobs, and
// others still report while it is refused. A node whose share is full can
// still update the jobs it holds.
func TestReportQueueNodeShare(t *testing.T) {
	var q reportQueue
	q.setLimits(ReportLimits{Bytes: 1 << 20, NodeBytes: 64 << 10})
	per := int((64<<10 - nodeCost("gpu1")) / entryCost("1000", "v100")) // jobs that fit
	if err := q.add(ratedReport("gpu1", 0, 1000, per, 1)); err != nil {
		t.Fatalf("a report of %d jobs that fits: %v", per, err)
	}
	err := q.add(ratedReport("gpu1", 1, 5000, 1, 1))
	if kindOf(err) != reports.KindNodeFull {
		t.Fatalf("one more job on a full node: %v, want %s", err, reports.KindNodeFull)
	}
	t.Logf("refused: %v", err)
	if err := q.add(ratedReport("gpu1", 1, 1000, per, 2)); err != nil {
		t.Errorf("the full node's update of the jobs it holds: %v", err)
	}
	if err := q.add(ratedReport("gpu2", 1, 1000, 10, 1)); err != nil {
		t.Errorf("another node: %v", err)
	}
	// A report that could never fit a node's share is too large, not a
	// matter of waiting for the round.
	if err := q.add(ratedReport("gpu3", 0, 1000, per+1, 1)); kindOf(err) != reports.KindTooLarge {
		t.Errorf("a report larger than a node's share: %v, want %s", err, reports.KindTooLarge)
	}
	q.drain()
	if err := q.add(ratedReport("gpu1", 2, 5000, 1, 1)); err != nil {
		t.Errorf("after the round: %v", err)
	}
}

// The whole queue is bounded: once full, new nodes and new jobs are
// refused until the round drains it, and what is held keeps updating.
func TestReportQueueTotal(t *testing.T) {
	var q reportQueue
	limit := int64(256 << 10)
	q.setLimits(ReportLimits{Bytes: limit, NodeBytes: 16 << 10})
	jobs := 0
	var err error
	for ; err == nil; jobs++ {
		// New jobs, spread over 50 nodes: no node's share fills first.
		err = q.add(ratedReport(fmt.Sprintf("gpu%02d", jobs%50), 0, 1000+jobs, 1, 1))
	}
	if kindOf(err) != reports.KindQueueFull {
		t.Fatalf("after %d jobs: %v, want %s", jobs, err, reports.KindQueueFull)
	}
	t.Logf("refused after %d jobs: %v", jobs, err)
	if held := q.held(); held > limit || held < limit-entryCost("10000", "v100") {
		t.Errorf("holds %d bytes, want at most %d and within one job of it", held, limit)
	}
	if err := q.add(ratedReport("gpu00", 1, 1000, 1, 2)); err != nil {
		t.Errorf("an update of a held job in a full queue: %v", err)
	}
	if err := q.add(ratedReport("new", 0, 1000, 1, 2)); kindOf(err) != reports.KindQueueFull {
		t.Errorf("a new node in a full queue: %v", err)
	}
	q.drain()
	if err := q.add(ratedReport("new", 0, 1000, 20, 1)); err != nil {
		t.Errorf("after the round: %v", err)
	}
}

// Only rates are held: a job without one, or a node with no job, costs
// nothing (feed does nothing with them but name the node).
func TestReportQueueKeepsOnlyRates(t *testing.T) {
	var q reportQueue
	q.add(reports.Report{Node: "idle", Time: queueEpoch, IntervalS: 30})
	steps := int64(5)
	q.add(reports.Report{Node: "busy", Time: queueEpoch, IntervalS: 30, Jobs: []reports.Job{{JobID: "7", GPUType: "v100", GPUs: 1, Steps: &steps}}})
	if got := q.held(); got != nodeCost("busy") {
		t.Errorf("a node with a job without a rate holds %d bytes, want %d (the node's name only)", got, nodeCost("busy"))
	}
	nodes, out, _, _ := q.drain()
	if len(nodes) != 1 || nodes[0] != "busy" || len(out) != 0 {
		t.Errorf("drained %v and %d intervals, want the busy node only", nodes, len(out))
	}
	// However many jobs without a rate a report lists.
	q.setLimits(ReportLimits{NodeBytes: 4096})
	r := ratedReport("busy", 0, 1000, reports.MaxJobs, 1)
	for k := range r.Jobs {
		r.Jobs[k].StepsPerS = nil
	}
	if err := q.add(r); err != nil {
		t.Errorf("%d jobs without a rate: %v", len(r.Jobs), err)
	}
}

// A first progress is kept from any report that carries it, the
// warm-up's without a rate included (at one entry's cost): the earliest,
// which is the run's when all reports are of one run, and the latest
// report's, which is the new run's when the job started again meanwhile
// (feed keeps the earliest in the run Slurm shows).
func TestReportQueueKeepsFirstProgress(t *testing.T) {
	type sent struct{ at, first int } // seconds after queueEpoch; first 0: absent
	tests := map[string]struct {
		sent []sent
		want []int // seconds after queueEpoch
	}{
		"warm-up alone":                    {[]sent{{30, 12}}, []int{12}},
		"same run: the earliest":           {[]sent{{30, 12}, {60, 12}, {90, 9}, {120, 12}}, []int{9, 12}},
		"absent: none":                     {[]sent{{30, 0}, {60, 0}}, nil},
		"absent in some reports":           {[]sent{{30, 0}, {60, 41}, {90, 0}}, []int{41}},
		"a new run":                        {[]sent{{30, 12}, {60, 12}, {200, 150}, {230, 150}}, []int{12, 150}},
		"an older run's report, late":      {[]sent{{200, 150}, {60, 12}, {230, 150}}, []int{12, 150}},
		"a collector restarted in the run": {[]sent{{30, 12}, {60, 55}, {90, 55}}, []int{12, 55}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var q reportQueue
			for _, r := range tc.sent {
				j := reports.Job{JobID: "7", GPUType: "v100", GPUs: 1}
				if r.first != 0 {
					fp := queueEpoch.Add(time.Duration(r.first) * time.Second)
					j.FirstProgress = &fp
				}
				if err := q.add(reports.Report{Node: "n1", Time: queueEpoch.Add(time.Duration(r.at) * time.Second), IntervalS: 30,
					Jobs: []reports.Job{j}}); err != nil {
					t.Fatal(err)
				}
			}
			wantHeld := nodeCost("n1")
			if tc.want != nil {
				wantHeld += entryCost("7", "v100")
			}
			if got := q.held(); got != wantHeld {
				t.Errorf("holds %d bytes, want %d", got, wantHeld)
			}
			_, out, firsts, _ := q.drain()
			if len(out) != 0 {
				t.Errorf("intervals without a rate drained: %+v", out)
			}
			var got []int
			for _, f := range firsts {
				if f.node != "n1" || f.job != "7" || f.gpuType != "v100" {
					t.Errorf("drained %+v, want node n1, job 7, v100", f)
				}
				got = append(got, int(time.Unix(0, f.at).Sub(queueEpoch)/time.Second))
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("drained first progress %v s, want %v s", got, tc.want)
			}
		})
	}
}

// A job on two nodes is reported by both: the round takes their
// intervals in the order of their times, as they arrived, whatever node
// sent them.
func TestReportQueueDrainsInTimeOrder(t *testing.T) {
	var q reportQueue
	for i := range 6 {
		node := []string{"b", "a"}[i%2]
		if err := q.add(ratedReport(node, i, 42, 1, float64(i))); err != nil {
			t.Fatal(err)
		}
	}
	_, out, _, _ := q.drain()
	if len(out) != 6 {
		t.Fatalf("%d intervals, want 6", len(out))
	}
	for i, iv := range out {
		if iv.rate != float64(i) || iv.node != []string{"b", "a"}[i%2] {
			t.Errorf("interval %d: %+v, want the one node %s sent at %d", i, iv, []string{"b", "a"}[i%2], i)
		}
	}
}

// The reviewer's case: 4,096-job reports (about 700 KB each), one after
// the other, from ever new node names. What the queue holds on the heap
// stays within its limit, and the estimates of its costs are not below
// what it takes.
func TestReportQueueCostCoversHeap(t *testing.T) {
	if testing.Short() {
		t.Skip("measures the heap")
	}
	d := &Daemon{}
	limit := int64(8 << 20)
	d.SetReportLimits(ReportLimits{Bytes: limit, NodeBytes: 4 << 20})
	big := ratedReport("", 0, 1_000_000_000, reports.MaxJobs, 1.5)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	refused := 0
	for i := range 64 {
		r := big
		r.Node = fmt.Sprintf("node%03d", i)
		// Fresh strings, as the decoder makes for each report.
		r.Jobs = append([]reports.Job(nil), big.Jobs...)
		for k := range r.Jobs {
			r.Jobs[k].JobID = strconv.Itoa(1_000_000_000 + i*reports.MaxJobs + k)
			r.Jobs[k].GPUType = string([]byte("v100"))
		}
		if d.Receive(r) != nil {
			refused++
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	held := d.queue.held()
	t.Logf("64 reports of %d jobs: %d refused, heap grew %d bytes, queue counts %d", reports.MaxJobs, refused, grew, held)
	if refused == 0 || held > limit {
		t.Errorf("queue holds %d bytes, limit %d, %d reports refused", held, limit, refused)
	}
	if grew > held+held/10+(64<<10) {
		t.Errorf("the heap grew by %d bytes, more than the %d the queue counts: its costs are estimated too low", grew, held)
	}
	runtime.KeepAlive(d)

	// Many small nodes: the per-node cost dominates.
	d = &Daemon{}
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range 4000 {
		d.Receive(ratedReport(fmt.Sprintf("n%05d", i), 0, 1000+i, 1, 1))
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	grew = int64(after.HeapAlloc) - int64(before.HeapAlloc)
	held = d.queue.held()
	t.Logf("4,000 one-job nodes: heap grew %d bytes, queue counts %d", grew, held)
	if grew > held+held/10+(64<<10) {
		t.Errorf("the heap grew by %d bytes, more than the %d the queue counts", grew, held)
	}
	runtime.KeepAlive(d)
}

// The queue keeps every interval the estimator would use: with up to
// keptIntervals reports of a job before a round, the estimates are exactly
// those of every interval fed in turn; with more, they stay within a
// fraction of a percent.
func TestReportQueueFeedsWhatTheEstimatorNeeds(t *testing.T) {
	if keptIntervals < estimate.DefaultOptions().OutlierWindow {
		t.Fatalf("keptIntervals %d is shorter than the estimator's median window %d", keptIntervals, estimate.DefaultOptions().OutlierWindow)
	}
	for _, perRound := range []int{12, keptIntervals, 40} {
		t.Run(strconv.Itoa(perRound), func(t *testing.T) {
			h, measured := measuredHarness(t, "a1:v100:1")
			id := h.submit("gavel: model=my-new-transformer steps=1M", 1)
			h.d.RunRound(context.Background())
			h.startChosen()
			j := h.job(id)
			if j.State != bridge.JobRunning {
				t.Fatalf("job not started: %+v", j)
			}
			ref, _ := referenceMeasured(t)
			at := j.StartTime.Add(5 * time.Minute)
			for round := range 3 {
				for i := range perRound {
					at = at.Add(30 * time.Second)
					// Rates that wander, with an outlier now and then.
					rate := 40 + 5*math.Sin(float64(round*perRound+i))
					if i%7 == 3 {
						rate *= 4
					}
					steps := int64(at.Sub(j.StartTime).Seconds() * 40)
					if err := h.d.Receive(reports.Report{Node: "a1", Time: at, IntervalS: 30, Jobs: []reports.Job{
						{JobID: id.String(), GPUType: "v100", GPUs: 1, StepsPerS: &rate, Steps: &steps}}}); err != nil {
						t.Fatal(err)
					}
					ref.Observe(estimate.Measurement{JobID: id.String(), Model: j.Tag.Model, Scale: j.GPUs, Type: "v100",
						StepsPerSecond: rate, At: at, SinceStart: at.Sub(j.StartTime), Steps: steps})
				}
				h.clock.now = at.Add(time.Second)
				h.d.RunRound(context.Background())
			}
			q := sched.JobQuery{ID: id.String(), Model: j.Tag.Model, Scale: 1}
			_, got := measured.Rates(q, []string{"v100"}, h.clock.now)
			_, want := ref.Rates(q, []string{"v100"}, h.clock.now)
			t.Logf("through the queue: %+v; every interval: %+v", got["v100"], want["v100"])
			if got["v100"].Source != "measured" {
				t.Fatalf("not measured: %+v", got["v100"])
			}
			if perRound <= keptIntervals {
				if got["v100"] != want["v100"] {
					t.Errorf("through the queue %+v, every interval %+v", got["v100"], want["v100"])
				}
			} else if d := math.Abs(got["v100"].StepsPerSecond/want["v100"].StepsPerSecond - 1); d > 0.005 {
				t.Errorf("through the queue %.4f steps/s, every interval %.4f: %.2f%% apart",
					got["v100"].StepsPerSecond, want["v100"].StepsPerSecond, 100*d)
			}
			gotDone, _ := measured.StepsDone(id)
			wantDone, _ := ref.StepsDone(id)
			if gotDone != wantDone {
				t.Errorf("steps done %d, want %d", gotDone, wantDone)
			}
		})
	}
}
