package tesim

import (
	"container/heap"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/gavel-slurm/gavel-slurm/internal/tepreempt"
)

// Cluster is a set of identical nodes.
type Cluster struct {
	Nodes int
	Node  tepreempt.Resources
}

// PaperCluster is the paper's: 84 nodes of 32 CPUs, 256 GB and 8 GPUs.
func PaperCluster() Cluster {
	return Cluster{Nodes: 84, Node: tepreempt.Resources{GPUs: 8, CPUs: 32, MemMB: 256 << 10}}
}

func (c Cluster) valid() error {
	if c.Nodes <= 0 || c.Node.GPUs <= 0 || c.Node.CPUs < 0 || c.Node.MemMB < 0 {
		return fmt.Errorf("cluster %+v: want nodes and GPUs per node > 0", c)
	}
	return nil
}

// Arrivals sets each job's arrival minute so that, scheduled by FIFO, the
// load stays at target: whenever the demand of the jobs in the system
// (queued or running) falls below target × the cluster's capacity, the
// next jobs are submitted. That is the paper's definition (the ratio of
// the total resource demand to the capacity, kept at 2.0 under FIFO);
// with several resources the load is the most loaded one's.
func Arrivals(jobs []Job, c Cluster, target float64) error {
	if target <= 0 {
		return fmt.Errorf("load %v: want > 0", target)
	}
	_, err := run(jobs, c, nil, target)
	return err
}

// Run schedules jobs (with their arrivals set) on c. A nil chooser is
// non-preemptive FIFO: one queue in arrival order, the head blocking the
// rest. With a chooser, waiting TE jobs go first; a TE job that does not
// fit makes room by preemption at once, then starts on the chosen node as
// soon as its victims' grace periods end. Preempted BE jobs go back to the
// head of the BE queue (in arrival order among themselves) and later
// resume where they stopped.
func Run(jobs []Job, c Cluster, chooser tepreempt.Chooser) (Outcome, error) {
	return run(jobs, c, chooser, 0)
}

// Outcome is one run's per-job results and counters.
type Outcome struct {
	// Slowdown per job, by ID: (finish - arrival) / run time.
	Slowdown []float64
	TE       []bool
	// Preempted counts each job's preemptions.
	Preempted []int
	// Intervals are the minutes from each preemption signal to the
	// victim's next start.
	Intervals []float64
	// Rules counts the choosers' answers by rule (tepreempt.Rule*), and
	// "no-room" for requests nothing could satisfy.
	Rules map[string]int
	// End is the minute the last job finished.
	End int
}

type jobState struct {
	Job
	remaining   int // minutes of work left as of the current start
	node        int // -1 when not on a node
	start       int
	preemptions int
	signalled   int
	inGrace     bool
	finish      int
	gen         int // bumped when a pending completion is cancelled
	// TE side of a preemption: the node it waits for and how many of its
	// victims there have yet to leave.
	reserved, waitFor int
	// BE side: the TE job waiting for this job to leave, or -1.
	holdsFor int
}

type nodeState struct {
	used, pledged, grace tepreempt.Resources
	running              []int // job IDs, in start order
}

type event struct {
	at, kind, job, gen int
}

const (
	evGraceEnd = iota // a fixed order within a minute keeps runs repeatable
	evComplete
)

type events []event

func (h events) Len() int { return len(h) }
func (h events) Less(i, j int) bool {
	a, b := h[i], h[j]
	if a.at != b.at {
		return a.at < b.at
	}
	if a.kind != b.kind {
		return a.kind < b.kind
	}
	return a.job < b.job
}
func (h events) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *events) Push(x any)   { *h = append(*h, x.(event)) }
func (h *events) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

type engine struct {
	c       Cluster
	chooser tepreempt.Chooser
	target  float64 // > 0: set arrivals by closed loop
	jobs    []Job   // the caller's, for writing arrivals back
	js      []jobState
	nodes   []nodeState
	ev      events
	next    int // next job to admit
	// Queues. FIFO uses fifo only; the preemptive methods use the others.
	fifo, te, resume, be []int
	reserved             []int // TE jobs waiting for grace periods
	inSystem             tepreempt.Resources
	done                 int
	out                  Outcome
	now                  int
}

func run(jobs []Job, c Cluster, chooser tepreempt.Chooser, target float64) (Outcome, error) {
	if err := c.valid(); err != nil {
		return Outcome{}, err
	}
	e := &engine{c: c, chooser: chooser, target: target, jobs: jobs, nodes: make([]nodeState, c.Nodes)}
	e.js = make([]jobState, len(jobs))
	for i, j := range jobs {
		if j.ID != i {
			return Outcome{}, fmt.Errorf("job at %d has ID %d: want IDs 0..n-1 in order", i, j.ID)
		}
		if !c.Node.Covers(j.Demand) {
			return Outcome{}, fmt.Errorf("job %d wants %v, more than a node has", i, j.Demand)
		}
		if target == 0 && i > 0 && j.Arrival < jobs[i-1].Arrival {
			return Outcome{}, fmt.Errorf("job %d arrives before job %d", i, i-1)
		}
		e.js[i] = jobState{Job: j, remaining: j.Minutes, node: -1, reserved: -1, holdsFor: -1}
	}
	e.out = Outcome{Slowdown: make([]float64, len(jobs)), TE: make([]bool, len(jobs)), Preempted: make([]int, len(jobs)), Rules: map[string]int{}}
	if err := e.loop(); err != nil {
		return Outcome{}, err
	}
	for i, j := range e.js {
		e.out.Slowdown[i] = float64(j.finish-j.Arrival) / float64(j.Minutes)
		e.out.TE[i] = j.TE
		e.out.Preempted[i] = j.preemptions
	}
	return e.out, nil
}

func (e *engine) loop() error {
	if len(e.js) == 0 {
		return nil
	}
	e.now = 0
	if e.target == 0 {
		e.now = e.js[0].Arrival
	}
	for {
		e.due()
		e.admit()
		for {
			e.startReserved()
			if err := e.schedule(); err != nil {
				return err
			}
			// Grace periods of 0 end this very minute: let their TE
			// jobs start now, not a minute later.
			if len(e.ev) == 0 || e.ev[0].at != e.now {
				break
			}
			e.due()
		}
		if e.done == len(e.js) {
			e.out.End = e.now
			return nil
		}
		next := -1
		if len(e.ev) > 0 {
			next = e.ev[0].at
		}
		if e.target == 0 && e.next < len(e.js) && (next < 0 || e.js[e.next].Arrival < next) {
			next = e.js[e.next].Arrival
		}
		if next < 0 {
			return errors.New("jobs left waiting with nothing running: a job that can never be placed")
		}
		e.now = next
	}
}

// due handles the events of the current minute.
func (e *engine) due() {
	for len(e.ev) > 0 && e.ev[0].at == e.now {
		ev := heap.Pop(&e.ev).(event)
		j := &e.js[ev.job]
		switch {
		case ev.kind == evComplete && ev.gen == j.gen:
			e.leave(ev.job)
			j.finish = e.now
			e.inSystem = e.inSystem.Sub(j.Demand)
			e.done++
		case ev.kind == evGraceEnd:
			n := &e.nodes[j.node]
			n.grace = n.grace.Sub(j.Demand)
			e.leave(ev.job)
			j.inGrace = false
			if j.holdsFor >= 0 {
				e.js[j.holdsFor].waitFor--
				j.holdsFor = -1
			}
			// Back to the head of the BE queue, ahead of jobs that
			// never ran, in arrival order among the preempted.
			k, _ := slices.BinarySearch(e.resume, ev.job)
			e.resume = slices.Insert(e.resume, k, ev.job)
		}
	}
}

// admit submits the jobs arriving now.
func (e *engine) admit() {
	for e.next < len(e.js) {
		j := &e.js[e.next]
		if e.target > 0 {
			if e.load() >= e.target {
				return
			}
			j.Arrival = e.now
			e.jobs[e.next].Arrival = e.now
		} else if j.Arrival != e.now {
			return
		}
		e.inSystem = e.inSystem.Add(j.Demand)
		switch {
		case e.chooser == nil:
			e.fifo = append(e.fifo, e.next)
		case j.TE:
			e.te = append(e.te, e.next)
		default:
			e.be = append(e.be, e.next)
		}
		e.next++
	}
}

// load is the demand in the system over the cluster's capacity, for the
// most loaded resource.
func (e *engine) load() float64 {
	n := float64(e.c.Nodes)
	l := float64(e.inSystem.GPUs) / (n * float64(e.c.Node.GPUs))
	if e.c.Node.CPUs > 0 {
		l = max(l, float64(e.inSystem.CPUs)/(n*float64(e.c.Node.CPUs)))
	}
	if e.c.Node.MemMB > 0 {
		l = max(l, float64(e.inSystem.MemMB)/(n*float64(e.c.Node.MemMB)))
	}
	return l
}

// avail is what a new job may take on node i now: the physically free
// resources, less the part of TE promises that grace periods in flight
// will not cover.
func (e *engine) avail(i int) tepreempt.Resources {
	n := &e.nodes[i]
	short := n.pledged.Sub(n.grace)
	short = tepreempt.Resources{GPUs: max(short.GPUs, 0), CPUs: max(short.CPUs, 0), MemMB: max(short.MemMB, 0)}
	return e.c.Node.Sub(n.used).Sub(short)
}

// afterGrace is what node i will have free once its grace periods end and
// its promises are kept: the chooser's view.
func (e *engine) afterGrace(i int) tepreempt.Resources {
	n := &e.nodes[i]
	return e.c.Node.Sub(n.used).Add(n.grace).Sub(n.pledged)
}

// bestFit returns the node whose room holds d with the least left over,
// or -1.
func (e *engine) bestFit(d tepreempt.Resources) int {
	best, bestLeft := -1, 0.0
	for i := range e.nodes {
		a := e.avail(i)
		if !a.Covers(d) {
			continue
		}
		left := a.Sub(d)
		l := float64(left.GPUs)/float64(e.c.Node.GPUs) + ratio(left.CPUs, e.c.Node.CPUs) + ratio64(left.MemMB, e.c.Node.MemMB)
		if best < 0 || l < bestLeft {
			best, bestLeft = i, l
		}
	}
	return best
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func ratio64(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func (e *engine) startOn(id, node int) {
	j := &e.js[id]
	n := &e.nodes[node]
	n.used = n.used.Add(j.Demand)
	n.running = append(n.running, id)
	j.node, j.start = node, e.now
	if j.preemptions > 0 {
		e.out.Intervals = append(e.out.Intervals, float64(e.now-j.signalled))
	}
	heap.Push(&e.ev, event{at: e.now + j.remaining, kind: evComplete, job: id, gen: j.gen})
}

// leave takes a job off its node.
func (e *engine) leave(id int) {
	j := &e.js[id]
	n := &e.nodes[j.node]
	n.used = n.used.Sub(j.Demand)
	n.running = slices.DeleteFunc(n.running, func(x int) bool { return x == id })
	j.node = -1
}

// startReserved starts TE jobs whose victims have left, once their node
// has room (another TE job's promise on the node may still be in its way).
func (e *engine) startReserved() {
	e.reserved = slices.DeleteFunc(e.reserved, func(id int) bool {
		j := &e.js[id]
		n := &e.nodes[j.reserved]
		if j.waitFor > 0 || !e.c.Node.Sub(n.used).Covers(j.Demand) {
			return false
		}
		n.pledged = n.pledged.Sub(j.Demand)
		e.startOn(id, j.reserved)
		return true
	})
}

func (e *engine) schedule() error {
	if e.chooser == nil {
		e.fifo = e.headOfLine(e.fifo)
		return nil
	}
	var waiting []int
	for _, id := range e.te {
		if n := e.bestFit(e.js[id].Demand); n >= 0 {
			e.startOn(id, n)
			continue
		}
		ok, err := e.makeRoom(id)
		if err != nil {
			return err
		}
		if !ok {
			waiting = append(waiting, id)
		}
	}
	e.te = waiting
	// The preempted first, then the queue, one line: the first job that
	// does not fit holds back everything behind it, as in FIFO.
	e.resume = e.headOfLine(e.resume)
	if len(e.resume) == 0 {
		e.be = e.headOfLine(e.be)
	}
	return nil
}

// headOfLine starts jobs from the front of q while they fit and returns
// the rest.
func (e *engine) headOfLine(q []int) []int {
	for len(q) > 0 {
		n := e.bestFit(e.js[q[0]].Demand)
		if n < 0 {
			break
		}
		e.startOn(q[0], n)
		q = q[1:]
	}
	return q
}

// makeRoom asks the chooser for room for TE job id and starts the
// preemptions. It reports whether the job now has a node to wait for.
func (e *engine) makeRoom(id int) (bool, error) {
	req := tepreempt.Request{Job: strconv.Itoa(id), Demand: e.js[id].Demand, Nodes: make([]tepreempt.Node, len(e.nodes))}
	for i := range e.nodes {
		req.Nodes[i] = tepreempt.Node{ID: strconv.Itoa(i), Capacity: e.c.Node, Free: e.afterGrace(i)}
		for _, r := range e.nodes[i].running {
			j := &e.js[r]
			if j.TE || j.inGrace {
				continue
			}
			req.Candidates = append(req.Candidates, tepreempt.Candidate{
				Job: strconv.Itoa(r), Node: req.Nodes[i].ID, Demand: j.Demand,
				Grace:       time.Duration(j.Grace) * time.Minute,
				Preemptions: j.preemptions,
				Remaining:   time.Duration(j.remaining-(e.now-j.start)) * time.Minute,
			})
		}
	}
	ch, err := e.chooser.Choose(req)
	if errors.Is(err, tepreempt.ErrNoRoom) {
		e.out.Rules["no-room"]++
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("minute %d: %w", e.now, err)
	}
	e.out.Rules[ch.Rule]++
	node, err := strconv.Atoi(ch.Node)
	if err != nil {
		return false, fmt.Errorf("chooser named node %q: %w", ch.Node, err)
	}
	te := &e.js[id]
	te.reserved = node
	e.nodes[node].pledged = e.nodes[node].pledged.Add(te.Demand)
	for _, v := range ch.Victims {
		vid, err := strconv.Atoi(v.Job)
		if err != nil {
			return false, fmt.Errorf("chooser named job %q: %w", v.Job, err)
		}
		e.preempt(vid)
		if e.js[vid].node == node {
			e.js[vid].holdsFor = id
			te.waitFor++
		}
	}
	e.reserved = append(e.reserved, id)
	return true, nil
}

// preempt signals a running BE job: its work stops now (the grace period
// is for saving it), it keeps its resources until the grace period ends.
func (e *engine) preempt(id int) {
	j := &e.js[id]
	j.remaining -= e.now - j.start
	j.preemptions++
	j.signalled = e.now
	j.inGrace = true
	j.gen++ // its completion event no longer stands
	n := &e.nodes[j.node]
	n.grace = n.grace.Add(j.Demand)
	heap.Push(&e.ev, event{at: e.now + j.Grace, kind: evGraceEnd, job: id})
}
