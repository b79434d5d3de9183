package rounds

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/gavel-slurm/gavel-slurm/policy"
)

// newJobPriorityScale multiplies the allocation of a combination that has
// received no time on a type yet: far above any ratio priority, yet finite
// so that a larger allocation still ranks first.
const newJobPriorityScale = 1e9

// Mechanism holds the round-based scheduling state: the combinations (jobs
// and pairs), the time each received per GPU type since the last reset,
// their deficits and the current allocation. It is not safe for concurrent
// use; one goroutine drives it.
type Mechanism struct {
	opts Options

	// Cluster layout.
	servers     []Server
	serverIndex map[string]int32
	serverType  []int32 // server → type index
	gpuBase     []int32 // server → offset of its first GPU in gpuUsed
	totalGPUs   int
	types       []string // sorted
	typeGPUs    []int
	typeServers [][]int32 // type → its servers in cluster order
	baseOrder   []int32   // type walk order before any shuffle

	// Combinations live in stable slots; free slots are reused.
	combos []combo
	free   []int32
	index  map[string]int32
	jobs   []int32 // slots of single-job combinations in arrival order
	seq    uint64

	// Per (slot, type) state, flattened as slot*len(types)+type.
	received []float64
	deficit  []float64
	alloc    []float64
	// owed is the share × time of the allocations replaced since the last
	// reset (ReallocateOnEvents), for the next fold into the deficits.
	owed   []float64
	prio   []float64
	usable []bool
	// speed is a single job's throughput per type (0 for pairs), what
	// UpgradeIdle compares.
	speed []float64

	// Per-type total of time received since the last reset (one count per
	// combination, not per GPU), the denominator of fractions.
	typeTime []float64

	lastReset float64
	everReset bool
	// allocSince is when the current allocation was installed: the last
	// reset, or a later reallocation (ReallocateOnEvents).
	allocSince float64
	pending    bool
	events     uint32 // bit per Event noted since the last reset

	// limits are the caps set by SetLimits, limitIndex their names →
	// index. Per combination slot, jobLimitNames are a single job's limit
	// names as given (Job.Limits, SetJobLimits) and jobLimits the indexes
	// of those SetLimits defined, each once, so that a round looks nothing
	// up by name. They live apart from combo, which the walk scans for
	// every type each round and which is best kept small.
	limits        []Limit
	limitIndex    map[string]int32
	jobLimitNames [][]string
	jobLimits     [][]int32

	scratch scratch
}

type combo struct {
	key     string
	members [2]int32 // job slots; members[1] < 0 for a single job
	sf      int
	seq     uint64
	alive   bool
	alloced bool // has a row in the current allocation
	class   Class
	single  map[string]float64
	pair    map[string][2]float64
	// restart is a single job's restart cost (seconds) and remaining its
	// steps still to run (0: unknown), for the restart rule (restart.go).
	restart, remaining float64
}

func (c *combo) isPair() bool { return c.members[1] >= 0 }

// New returns a mechanism for the cluster.
func New(cluster Cluster, opts Options) (*Mechanism, error) {
	if !(opts.Credit >= 0) || math.IsInf(opts.Credit, 0) {
		return nil, fmt.Errorf("rounds: credit must be a finite number of seconds ≥ 0, got %v", opts.Credit)
	}
	if opts.MinResetInterval < 0 || math.IsNaN(opts.MinResetInterval) {
		return nil, fmt.Errorf("rounds: minimum reset interval must be ≥ 0, got %v", opts.MinResetInterval)
	}
	if err := checkRestartOptions(opts); err != nil {
		return nil, err
	}
	m := &Mechanism{opts: opts, index: map[string]int32{}, limitIndex: map[string]int32{}}
	if err := m.setCluster(cluster); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *Mechanism) credit() float64 { return m.opts.Credit }

// Types returns the cluster's GPU types in sorted order.
func (m *Mechanism) Types() []string { return slices.Clone(m.types) }

// Len returns the number of active jobs.
func (m *Mechanism) Len() int { return len(m.jobs) }

// SetCluster replaces the cluster (servers added, removed or changed) and
// notes a cluster-change event. Types that appear start with the credit for
// every combination; types that disappear are forgotten.
func (m *Mechanism) SetCluster(cluster Cluster, now float64) error {
	if err := m.setCluster(cluster); err != nil {
		return err
	}
	m.NoteEvent(EventClusterChange)
	return nil
}

func (m *Mechanism) setCluster(cluster Cluster) error {
	index := make(map[string]int32, len(cluster.Servers))
	typeSet := map[string]bool{}
	for i, s := range cluster.Servers {
		switch {
		case s.ID == "":
			return fmt.Errorf("rounds: server %d has no ID", i)
		case s.Type == "":
			return fmt.Errorf("rounds: server %q has no GPU type", s.ID)
		case s.GPUs < 1:
			return fmt.Errorf("rounds: server %q has %d GPUs, need at least 1", s.ID, s.GPUs)
		}
		if _, dup := index[s.ID]; dup {
			return fmt.Errorf("rounds: server %q listed twice", s.ID)
		}
		index[s.ID] = int32(i)
		typeSet[s.Type] = true
	}
	types := make([]string, 0, len(typeSet))
	for t := range typeSet {
		types = append(types, t)
	}
	sort.Strings(types)

	oldTypes := m.types
	m.servers = slices.Clone(cluster.Servers)
	m.serverIndex = index
	m.types = types
	m.typeGPUs = make([]int, len(types))
	m.typeServers = make([][]int32, len(types))
	m.serverType = make([]int32, len(m.servers))
	m.gpuBase = make([]int32, len(m.servers))
	m.totalGPUs = 0
	for i, s := range m.servers {
		t := int32(slices.Index(types, s.Type))
		m.serverType[i] = t
		m.gpuBase[i] = int32(m.totalGPUs)
		m.totalGPUs += s.GPUs
		m.typeGPUs[t] += s.GPUs
		m.typeServers[t] = append(m.typeServers[t], int32(i))
	}
	m.baseOrder = m.baseOrder[:0]
	for _, name := range m.opts.TypeOrder {
		if t := slices.Index(types, name); t >= 0 && !slices.Contains(m.baseOrder, int32(t)) {
			m.baseOrder = append(m.baseOrder, int32(t))
		}
	}
	for t := range types {
		if !slices.Contains(m.baseOrder, int32(t)) {
			m.baseOrder = append(m.baseOrder, int32(t))
		}
	}
	if !slices.Equal(oldTypes, types) {
		m.remapTypes(oldTypes)
	}
	return nil
}

// remapTypes rebuilds the per-(combination, type) arrays for a new type
// list, keeping the values of types that stay.
func (m *Mechanism) remapTypes(oldTypes []string) {
	nOld, nNew := len(oldTypes), len(m.types)
	n := len(m.combos)
	received := make([]float64, n*nNew)
	deficit := make([]float64, n*nNew)
	alloc := make([]float64, n*nNew)
	owed := make([]float64, n*nNew)
	typeTime := make([]float64, nNew)
	for t, name := range m.types {
		old := slices.Index(oldTypes, name)
		if old >= 0 {
			typeTime[t] = m.typeTime[old]
		}
		for c := range m.combos {
			if !m.combos[c].alive {
				continue
			}
			if old >= 0 {
				received[c*nNew+t] = m.received[c*nOld+old]
				deficit[c*nNew+t] = m.deficit[c*nOld+old]
				alloc[c*nNew+t] = m.alloc[c*nOld+old]
				owed[c*nNew+t] = m.owed[c*nOld+old]
			} else {
				received[c*nNew+t] = m.credit()
			}
		}
	}
	m.received, m.deficit, m.alloc, m.owed, m.typeTime = received, deficit, alloc, owed, typeTime
	m.prio = make([]float64, n*nNew)
	m.usable = make([]bool, n*nNew)
	m.speed = make([]float64, n*nNew)
	for c := range m.combos {
		if m.combos[c].alive {
			m.refreshUsable(int32(c))
		}
	}
}

// refreshUsable derives which types the combination can run on from its
// throughputs.
func (m *Mechanism) refreshUsable(c int32) {
	cb := &m.combos[c]
	nt := len(m.types)
	for t, name := range m.types {
		ok, speed := false, 0.0
		if cb.isPair() {
			r := cb.pair[name]
			ok = r[0] > 0 && r[1] > 0
		} else {
			speed = cb.single[name]
			ok = speed > 0
		}
		m.usable[int(c)*nt+t] = ok
		m.speed[int(c)*nt+t] = speed
	}
}

// newSlot returns a fresh combination slot, growing the arrays if needed.
func (m *Mechanism) newSlot() int32 {
	nt := len(m.types)
	if n := len(m.free); n > 0 {
		c := m.free[n-1]
		m.free = m.free[:n-1]
		return c
	}
	m.combos = append(m.combos, combo{})
	m.jobLimitNames = append(m.jobLimitNames, nil)
	m.jobLimits = append(m.jobLimits, nil)
	for range nt {
		m.received = append(m.received, 0)
		m.deficit = append(m.deficit, 0)
		m.alloc = append(m.alloc, 0)
		m.owed = append(m.owed, 0)
		m.prio = append(m.prio, 0)
		m.usable = append(m.usable, false)
		m.speed = append(m.speed, 0)
	}
	return int32(len(m.combos) - 1)
}

func (m *Mechanism) initSlot(c int32, cb combo) {
	m.seq++
	cb.seq = m.seq
	cb.alive = true
	m.combos[c] = cb
	nt := len(m.types)
	for t := range nt {
		i := int(c)*nt + t
		m.received[i] = m.credit()
		m.deficit[i] = 0
		m.alloc[i] = 0
		m.owed[i] = 0
		m.prio[i] = 0
	}
	m.refreshUsable(c)
	m.index[cb.key] = c
}

func checkThroughput(what string, t string, v float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return fmt.Errorf("rounds: %s: throughput on %q is %v, want a finite value ≥ 0", what, t, v)
	}
	return nil
}

// AddJob registers an arriving job. It starts with the credit (Options.Credit)
// of time received on every type and no deficit, has priority 0 until an
// allocation includes it, and notes an arrival event.
func (m *Mechanism) AddJob(j Job, now float64) error {
	switch {
	case j.ID == "":
		return errors.New("rounds: job has no ID")
	case strings.Contains(j.ID, "+"):
		return fmt.Errorf("rounds: job ID %q contains '+', which names pairs", j.ID)
	case j.ScaleFactor < 1:
		return fmt.Errorf("rounds: job %q: scale factor %d, need at least 1", j.ID, j.ScaleFactor)
	}
	if _, dup := m.index[j.ID]; dup {
		return fmt.Errorf("rounds: job %q already added", j.ID)
	}
	for t, v := range j.Throughputs {
		if err := checkThroughput("job "+j.ID, t, v); err != nil {
			return err
		}
	}
	if err := checkRestartCost(j.ID, j.RestartCost); err != nil {
		return err
	}
	if err := checkLimitNames(j.ID, j.Limits); err != nil {
		return err
	}
	c := m.newSlot()
	m.initSlot(c, combo{
		key: j.ID, members: [2]int32{c, -1}, sf: j.ScaleFactor,
		class: j.Class, single: maps.Clone(j.Throughputs), restart: j.RestartCost,
	})
	m.jobLimitNames[c] = slices.Clone(j.Limits)
	m.resolveLimits(c)
	m.jobs = append(m.jobs, c)
	m.NoteEvent(EventArrival)
	return nil
}

// AddPair registers a candidate co-location of two active jobs with equal
// scale factors. It starts like a new job (credit, no deficit).
// Pairs are not reset events: the reference creates them with their jobs.
func (m *Mechanism) AddPair(p Pair, now float64) error {
	key := p.Key()
	a, okA := m.index[p.Jobs[0]]
	b, okB := m.index[p.Jobs[1]]
	switch {
	case !okA || m.combos[a].isPair():
		return fmt.Errorf("rounds: pair %q: unknown job %q", key, p.Jobs[0])
	case !okB || m.combos[b].isPair():
		return fmt.Errorf("rounds: pair %q: unknown job %q", key, p.Jobs[1])
	case a == b:
		return fmt.Errorf("rounds: pair %q pairs a job with itself", key)
	case m.combos[a].sf != m.combos[b].sf:
		return fmt.Errorf("rounds: pair %q: scale factors differ (%d and %d)", key, m.combos[a].sf, m.combos[b].sf)
	}
	if _, dup := m.index[key]; dup {
		return fmt.Errorf("rounds: pair %q already added", key)
	}
	if _, dup := m.index[PairKey(p.Jobs[1], p.Jobs[0])]; dup {
		return fmt.Errorf("rounds: pair %q already added in the other order", key)
	}
	for t, v := range p.Throughputs {
		for _, x := range v {
			if err := checkThroughput("pair "+key, t, x); err != nil {
				return err
			}
		}
	}
	c := m.newSlot()
	m.initSlot(c, combo{
		key: key, members: [2]int32{a, b}, sf: m.combos[a].sf,
		class: m.combos[a].class, pair: maps.Clone(p.Throughputs),
	})
	return nil
}

// PairOf returns the key of the registered pair of jobs a and b, in
// whichever order it was added; false when they form none.
func (m *Mechanism) PairOf(a, b string) (string, bool) {
	for _, key := range [2]string{PairKey(a, b), PairKey(b, a)} {
		if c, ok := m.index[key]; ok && m.combos[c].alive && m.combos[c].isPair() {
			return key, true
		}
	}
	return "", false
}

// Pairs lists the registered pairs for the policy's problem, in the
// mechanism's storage order (the same for the same calls).
func (m *Mechanism) Pairs() []Pair {
	var out []Pair
	for c := range m.combos {
		cb := &m.combos[c]
		if !cb.alive || !cb.isPair() {
			continue
		}
		out = append(out, Pair{Jobs: [2]string{m.combos[cb.members[0]].key, m.combos[cb.members[1]].key},
			Throughputs: maps.Clone(cb.pair)})
	}
	return out
}

// SetPairThroughputs replaces a registered pair's rates while sharing
// (new estimates). Like SetThroughputs it notes no event.
func (m *Mechanism) SetPairThroughputs(key string, throughputs map[string][2]float64) error {
	c, ok := m.index[key]
	if !ok || !m.combos[c].isPair() {
		return fmt.Errorf("rounds: unknown pair %q", key)
	}
	for t, v := range throughputs {
		for _, x := range v {
			if err := checkThroughput("pair "+key, t, x); err != nil {
				return err
			}
		}
	}
	m.combos[c].pair = maps.Clone(throughputs)
	m.refreshUsable(c)
	return nil
}

// RemovePair forgets a registered pair whose members stay (it no longer
// gains from sharing). Its time received stays counted in its types'
// totals, as a removed job's does; the allocation's row for it, until the
// next one, is ignored.
func (m *Mechanism) RemovePair(key string) error {
	c, ok := m.index[key]
	if !ok || !m.combos[c].isPair() {
		return fmt.Errorf("rounds: unknown pair %q", key)
	}
	m.release(c)
	return nil
}

// SetThroughputs replaces a job's per-type throughputs (new estimates).
// It does not note an event; call NoteEvent(EventThroughputChange) when the
// allocation should follow.
func (m *Mechanism) SetThroughputs(id string, throughputs map[string]float64) error {
	c, ok := m.index[id]
	if !ok || m.combos[c].isPair() {
		return fmt.Errorf("rounds: unknown job %q", id)
	}
	for t, v := range throughputs {
		if err := checkThroughput("job "+id, t, v); err != nil {
			return err
		}
	}
	m.combos[c].single = maps.Clone(throughputs)
	m.refreshUsable(c)
	return nil
}

// RemoveJob forgets a job (completed or cancelled) and every pair it
// belongs to, and notes a completion event. Time received by the job stays
// counted in its types' totals, as the reference does.
func (m *Mechanism) RemoveJob(id string, now float64) error {
	c, ok := m.index[id]
	if !ok || m.combos[c].isPair() {
		return fmt.Errorf("rounds: unknown job %q", id)
	}
	for p := range m.combos {
		cb := &m.combos[p]
		if cb.alive && cb.isPair() && (cb.members[0] == c || cb.members[1] == c) {
			m.release(int32(p))
		}
	}
	m.release(c)
	if i := slices.Index(m.jobs, c); i >= 0 {
		m.jobs = slices.Delete(m.jobs, i, i+1)
	}
	m.NoteEvent(EventCompletion)
	return nil
}

func (m *Mechanism) release(c int32) {
	delete(m.index, m.combos[c].key)
	m.combos[c] = combo{}
	// The slot's index buffer is kept for the next job that takes it.
	m.jobLimitNames[c], m.jobLimits[c] = nil, m.jobLimits[c][:0]
	m.free = append(m.free, c)
}

// NoteEvent records a reason to recompute the allocation.
func (m *Mechanism) NoteEvent(e Event) {
	m.pending = true
	m.events |= 1 << e
}

// PendingEvents lists the kinds of events noted since the last reset, for
// logs that say why an allocation is recomputed.
func (m *Mechanism) PendingEvents() []Event {
	var out []Event
	for e := EventArrival; e <= EventOther; e++ {
		if m.events&(1<<e) != 0 {
			out = append(out, e)
		}
	}
	return out
}

// NeedsReset reports whether the caller should compute a new allocation
// now and hand it to SetAllocation. It is true when ResetEveryRound is set,
// or when an event is pending and either no reset happened yet,
// MinResetInterval has passed since the last one, or ReallocateOnEvents is
// set (SetAllocation then decides whether the time received is reset). As in the reference, a
// last reset at time 0 does not start the interval (its clock starts at 0
// and 0 means "never").
func (m *Mechanism) NeedsReset(now float64) bool {
	if m.opts.ResetEveryRound {
		return true
	}
	if !m.pending {
		return false
	}
	if !m.everReset || m.lastReset == 0 || m.opts.ReallocateOnEvents {
		return true
	}
	return m.resetDue(now)
}

// resetDue reports whether MinResetInterval has passed since the last
// reset, or the longer interval the restart rule needs (restart.go).
func (m *Mechanism) resetDue(now float64) bool {
	return now-m.lastReset >= max(m.opts.MinResetInterval, m.restartResetInterval())
}

// LastReset returns the time of the last allocation reset and whether one
// happened.
func (m *Mechanism) LastReset() (float64, bool) { return m.lastReset, m.everReset }

// SetAllocation installs a new allocation at time now. First the time
// received since the last reset is folded into the deficits under the old
// allocation (deficit += old share × elapsed − time received beyond the
// credit) and every time received is reset to the credit (Options.Credit); then
// the new fractions replace the old ones. Rows are matched to jobs and
// pairs by policy.Row.Key; rows for unknown keys (jobs that finished since
// the allocation was computed) and columns for types not in the cluster
// are ignored. Fractions are clipped to [0, 1].
func (m *Mechanism) SetAllocation(a *policy.Allocation, now float64) error {
	if a == nil {
		return errors.New("rounds: nil allocation")
	}
	if math.IsNaN(now) || math.IsInf(now, 0) {
		return fmt.Errorf("rounds: invalid time %v", now)
	}
	cols := make([]int, len(a.Types)) // allocation column → type index or -1
	for i, name := range a.Types {
		cols[i] = slices.Index(m.types, name)
	}
	for r, row := range a.Rows {
		if len(row.Fractions) != len(a.Types) {
			return fmt.Errorf("rounds: allocation row %d (%s) has %d fractions for %d types",
				r, row.Key(), len(row.Fractions), len(a.Types))
		}
		for i, f := range row.Fractions {
			if math.IsNaN(f) || math.IsInf(f, 0) {
				return fmt.Errorf("rounds: allocation row %s: fraction on %s is %v", row.Key(), a.Types[i], f)
			}
		}
	}

	if m.opts.ReallocateOnEvents && m.everReset && m.lastReset != 0 && !m.resetDue(now) {
		m.accrueOwed(now)
	} else {
		m.foldAndReset(now)
	}

	clear(m.alloc)
	for c := range m.combos {
		m.combos[c].alloced = false
	}
	nt := len(m.types)
	for _, row := range a.Rows {
		c, ok := m.index[row.Key()]
		if !ok && len(row.Jobs) == 2 {
			// A pair row's fractions do not depend on the order its
			// members are named in, and AddPair refuses a pair in both
			// orders, so the reversed key is unambiguous.
			c, ok = m.index[PairKey(row.Jobs[1], row.Jobs[0])]
		}
		if !ok {
			continue
		}
		m.combos[c].alloced = true
		for i, f := range row.Fractions {
			if t := cols[i]; t >= 0 {
				m.alloc[int(c)*nt+t] = min(max(f, 0), 1)
			}
		}
	}
	// Policies list only the pairs they use. A registered pair without a
	// row was offered to the policy and given nothing; treating it as a
	// newcomer instead would let it win GPUs at priority 0 on its deficit
	// and hold them idle with both members kept off.
	for c := range m.combos {
		if m.combos[c].alive && m.combos[c].isPair() {
			m.combos[c].alloced = true
		}
	}
	return nil
}

// accrueOwed keeps, before an allocation is replaced without a reset,
// the share × time it owed each combination since it was installed; the
// service counts stay, and the event that asked for the allocation is
// dealt with.
func (m *Mechanism) accrueOwed(now float64) {
	elapsed := now - m.allocSince
	for i, a := range m.alloc {
		m.owed[i] += a * elapsed
	}
	m.allocSince = now
	m.pending = false
	m.events = 0
}

// foldAndReset moves the time received since the last reset into the
// deficits and restarts every combination at the credit (Options.Credit).
// The share owed is the current allocation's since it was installed plus
// what the allocations it replaced owed (both 0 without
// ReallocateOnEvents beyond the current allocation's since the reset).
func (m *Mechanism) foldAndReset(now float64) {
	elapsed := now - m.allocSince
	if !m.everReset {
		elapsed = 0
	}
	credit := m.credit()
	nt := len(m.types)
	alive := 0
	for c := range m.combos {
		if !m.combos[c].alive {
			continue
		}
		alive++
		for t := range nt {
			i := c*nt + t
			if m.owed[i] != 0 {
				m.deficit[i] += m.owed[i]
				m.owed[i] = 0
			}
			m.deficit[i] += m.alloc[i]*elapsed - (m.received[i] - credit)
			m.received[i] = credit
		}
	}
	for t := range nt {
		m.typeTime[t] = credit * float64(alive)
	}
	m.lastReset = now
	m.allocSince = now
	m.everReset = true
	m.pending = false
	m.events = 0
}

// Record accounts for a round that ran: each usage adds its seconds to the
// time the job or pair received on the type, and once to the type's total
// (per combination, not per GPU). Usages of jobs already removed still
// count in the type's total, as in the reference.
func (m *Mechanism) Record(usages []Usage) error {
	nt := len(m.types)
	for _, u := range usages {
		t := slices.Index(m.types, u.Type)
		if t < 0 {
			return fmt.Errorf("rounds: usage of %q on unknown GPU type %q", u.Key, u.Type)
		}
		if math.IsNaN(u.Seconds) || math.IsInf(u.Seconds, 0) || u.Seconds < 0 {
			return fmt.Errorf("rounds: usage of %q on %s: %v seconds", u.Key, u.Type, u.Seconds)
		}
	}
	for _, u := range usages {
		t := slices.Index(m.types, u.Type)
		if c, ok := m.index[u.Key]; ok {
			m.received[int(c)*nt+t] += u.Seconds
		}
		m.typeTime[t] += u.Seconds
	}
	return nil
}

// State is a read-only view of one job or pair on one type, for status
// output and tests.
type State struct {
	// Received is the time received since the last reset, credit included.
	Received float64
	Deficit  float64
	// Allocation is the current allocation's fraction (0 without one).
	Allocation float64
	// Priority as the next Plan would compute it.
	Priority float64
}

// State returns the state of a job or pair (by key) on a GPU type.
func (m *Mechanism) State(key, gpuType string) (State, error) {
	c, ok := m.index[key]
	if !ok {
		return State{}, fmt.Errorf("rounds: unknown job or pair %q", key)
	}
	t := slices.Index(m.types, gpuType)
	if t < 0 {
		return State{}, fmt.Errorf("rounds: unknown GPU type %q", gpuType)
	}
	i := int(c)*len(m.types) + t
	return State{
		Received:   m.received[i],
		Deficit:    m.deficit[i],
		Allocation: m.alloc[i],
		Priority:   m.priority(c, t),
	}, nil
}

// priority of combination c on type t: allocation / fraction of the type's
// time received; allocation × 1e9 before any time counts; 0 without an
// allocation, with a zero share, or where the combination cannot run.
func (m *Mechanism) priority(c int32, t int) float64 {
	if !m.combos[c].alloced {
		return 0
	}
	i := int(c)*len(m.types) + t
	a := m.alloc[i]
	if a == 0 || !m.usable[i] {
		return 0
	}
	fraction := 0.0
	if total := m.typeTime[t]; total != 0 {
		fraction = m.received[i] / total
	}
	if fraction > 0 {
		return a / fraction
	}
	return a * newJobPriorityScale
}
