package rounds

import (
	"fmt"
	"math"
	"slices"
)

// scratch holds per-round buffers so that planning a round allocates
// almost nothing in steady state.
type scratch struct {
	heap     []entry
	order    []int32
	free     []int // per type: GPUs not yet selected
	selected []int // per type: combinations selected

	epoch      uint32
	taken      []uint32 // per job slot: == epoch when scheduled this round
	chosenType []int32  // per combination slot: type selected, or -1
	prev       []int32  // per combination slot: index into running, or -1
	jobPrev    []int32  // per job slot: combination slot that held it, or -1
	jobNew     []int32  // per job slot: combination selected with it, or -1
	held       []bool   // per combination slot: selected but held (no allocation)
	gone       []bool   // per combination slot: some of its running GPUs left the cluster
	pinned     []Pin    // per combination slot: why it must keep its running GPUs

	chosen    []int32 // selected combinations in selection order
	toPlace   []int32
	slotStart []int32 // per combination slot: offset in the plan's slot buffer
	slotLen   []int32
	extended  []bool

	gpuUsed    []bool
	serverFree []int
	byFree     []int32

	// upgrades are the selected jobs UpgradeIdle may move (per round).
	upgrades []upgrade
	// outside are the combinations running outside the mechanism's view
	// (PinOutside): never selected this round.
	outside []int32
	// runType is, with the restart rule on, the type each combination
	// runs on now (-1: it does not run), set by holdRestarts.
	runType []int32
	// since is, per combination slot, when its run on the GPUs it is
	// placed on began (Assignment.Since).
	since []float64

	// limitGPUs and limitJobs are, per limit, what its jobs hold this
	// round: what outside jobs hold plus every selection so far.
	limitGPUs, limitJobs []int
	// stopped is, per job slot, the limit that refused one of its
	// candidates this round (limit -1: none).
	stopped []limitStop
}

// entry is one (combination, type) candidate of the greedy walk.
type entry struct {
	prio, deficit, alloc float64
	seq                  uint64
	rank                 int32 // position of the type in this round's order
	c, t                 int32
}

// better orders candidates: higher priority, then larger deficit, then
// larger allocation; remaining ties go to the type walked first and then
// to the earlier arrival, which is what the reference's stable sort of
// arrival-ordered lists does.
func better(a, b *entry) bool {
	if a.prio != b.prio {
		return a.prio > b.prio
	}
	if a.deficit != b.deficit {
		return a.deficit > b.deficit
	}
	if a.alloc != b.alloc {
		return a.alloc > b.alloc
	}
	if a.rank != b.rank {
		return a.rank < b.rank
	}
	return a.seq < b.seq
}

// Binary max-heap on better; written out because container/heap's
// interface calls cost more than the comparisons in this hot loop.
func heapify(h []entry) {
	for i := len(h)/2 - 1; i >= 0; i-- {
		siftDown(h, i)
	}
}

func siftDown(h []entry, i int) {
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		best := l
		if r := l + 1; r < n && better(&h[r], &h[l]) {
			best = r
		}
		if !better(&h[best], &h[i]) {
			return
		}
		h[i], h[best] = h[best], h[i]
		i = best
	}
}

func pop(h []entry) (entry, []entry) {
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	siftDown(h, 0)
	return top, h
}

// Plan computes the next round at time now. running lists what holds GPUs
// now (typically the previous plan's Assignments, minus nothing: entries of
// jobs removed since are ignored). The returned plan does not alias the
// mechanism's state except for FromSlots, which alias running.
func (m *Mechanism) Plan(now float64, running []Assignment) (*Plan, error) {
	p := &Plan{}
	if err := m.PlanInto(p, now, running); err != nil {
		return nil, err
	}
	return p, nil
}

// PlanInto is Plan writing into p, reusing its buffers: a simulator keeps
// two plans and alternates, passing the older one's Assignments as running.
// p must not be the plan whose Assignments are passed as running.
func (m *Mechanism) PlanInto(p *Plan, now float64, running []Assignment) error {
	if math.IsNaN(now) || math.IsInf(now, 0) {
		return fmt.Errorf("rounds: invalid time %v", now)
	}
	m.prepareScratch()
	if err := m.readRunning(running); err != nil {
		return err
	}
	m.holdRestarts(now, running)
	m.computePriorities()
	m.walkOrder()
	m.takePinned(running)
	m.selectCombos()
	if m.opts.UpgradeIdle {
		m.upgradeIdle()
	}
	m.resetPlan(p, now)
	m.place(p, running)
	m.decide(p, running)
	return nil
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

func (m *Mechanism) prepareScratch() {
	s := &m.scratch
	n := len(m.combos)
	nt := len(m.types)
	s.epoch++
	if s.epoch == 0 { // wrapped: stale marks could collide
		clear(s.taken)
		s.epoch = 1
	}
	if len(s.taken) < n {
		s.taken = append(s.taken, make([]uint32, n-len(s.taken))...)
	}
	s.chosenType = grow(s.chosenType, n)
	s.prev = grow(s.prev, n)
	s.jobPrev = grow(s.jobPrev, n)
	s.jobNew = grow(s.jobNew, n)
	s.held = grow(s.held, n)
	s.gone = grow(s.gone, n)
	s.pinned = grow(s.pinned, n)
	s.since = grow(s.since, n)
	s.slotStart = grow(s.slotStart, n)
	s.slotLen = grow(s.slotLen, n)
	s.extended = grow(s.extended, n)
	s.stopped = grow(s.stopped, n)
	for i := range n {
		s.chosenType[i], s.prev[i], s.jobPrev[i], s.jobNew[i] = -1, -1, -1, -1
		s.held[i], s.extended[i], s.gone[i] = false, false, false
		s.pinned[i] = NotPinned
		s.slotLen[i] = 0
		s.stopped[i] = limitStop{limit: -1}
	}
	m.startLimits()
	s.free = grow(s.free, nt)
	s.selected = grow(s.selected, nt)
	copy(s.free, m.typeGPUs)
	clear(s.selected)
	s.chosen = s.chosen[:0]
	s.outside = s.outside[:0]
	s.gpuUsed = grow(s.gpuUsed, m.totalGPUs)
	clear(s.gpuUsed)
	s.serverFree = grow(s.serverFree, len(m.servers))
	for i, srv := range m.servers {
		s.serverFree[i] = srv.GPUs
	}
}

// readRunning links what runs now to combinations. Slots on servers that
// left the cluster (or GPUs beyond a shrunken server) are gone: their
// holder cannot keep them and restarts wherever it is selected. A GPU
// claimed twice is an error. GPU marks made here are cleared afterwards.
func (m *Mechanism) readRunning(running []Assignment) error {
	s := &m.scratch
	defer clear(s.gpuUsed)
	for i := range running {
		a := &running[i]
		if a.Pin == PinOutside {
			if c, ok := m.index[a.Key]; ok {
				s.outside = append(s.outside, c)
			}
			continue
		}
		gone := false
		for _, slot := range a.Slots {
			srv, ok := m.serverIndex[slot.Server]
			if !ok || slot.GPU < 0 || slot.GPU >= m.servers[srv].GPUs || m.servers[srv].Type != a.Type {
				gone = true
				continue
			}
			g := m.gpuBase[srv] + int32(slot.GPU)
			if s.gpuUsed[g] {
				return fmt.Errorf("rounds: GPU %d of server %q is held twice (again by %q)", slot.GPU, slot.Server, a.Key)
			}
			s.gpuUsed[g] = true
		}
		c, ok := m.index[a.Key]
		if !ok {
			continue // finished since; its GPUs are free
		}
		if s.prev[c] >= 0 {
			return fmt.Errorf("rounds: %q listed twice as running", a.Key)
		}
		s.prev[c] = int32(i)
		s.gone[c] = gone || len(a.Slots) == 0
		if !s.gone[c] {
			// A job whose GPUs left cannot keep them, pinned or not.
			s.pinned[c] = a.Pin
		}
		cb := &m.combos[c]
		for _, j := range cb.members {
			if j < 0 {
				continue
			}
			if s.jobPrev[j] >= 0 {
				return fmt.Errorf("rounds: job %q runs in both %q and %q",
					m.combos[j].key, m.combos[s.jobPrev[j]].key, a.Key)
			}
			s.jobPrev[j] = c
		}
	}
	return nil
}

func (m *Mechanism) computePriorities() {
	nt := len(m.types)
	for c := range m.combos {
		if !m.combos[c].alive {
			continue
		}
		for t := range nt {
			m.prio[c*nt+t] = m.priority(int32(c), t)
		}
	}
}

// walkOrder fixes this round's type order, shuffled when asked.
func (m *Mechanism) walkOrder() {
	s := &m.scratch
	s.order = append(s.order[:0], m.baseOrder...)
	if m.opts.Shuffle != nil && len(s.order) > 1 {
		m.opts.Shuffle.Shuffle(len(s.order), func(i, j int) { s.order[i], s.order[j] = s.order[j], s.order[i] })
	}
}

// appendCandidates adds the runnable entries of type t to the heap buffer.
func (m *Mechanism) appendCandidates(h []entry, t, rank int32) []entry {
	nt := len(m.types)
	skipZero := m.opts.SkipZeroPriority
	for c := range m.combos {
		cb := &m.combos[c]
		if !cb.alive {
			continue
		}
		i := c*nt + int(t)
		if !m.usable[i] || cb.sf > m.typeGPUs[t] {
			continue
		}
		pr := m.prio[i]
		if skipZero && pr <= 0 {
			continue
		}
		h = append(h, entry{prio: pr, deficit: m.deficit[i], alloc: m.alloc[i], seq: cb.seq, rank: rank, c: int32(c), t: t})
	}
	return h
}

// selectCombos is the greedy walk (Algorithm 1): take candidates in
// priority order, never a job twice (a pair conflicts with its members),
// only when the type still has scale-factor GPUs free; smaller jobs
// further down may still fill the gaps.
func (m *Mechanism) selectCombos() {
	s := &m.scratch
	if m.opts.GlobalOrder {
		h := s.heap[:0]
		for rank, t := range s.order {
			h = m.appendCandidates(h, t, int32(rank))
		}
		heapify(h)
		open := 0
		for _, t := range s.order {
			if s.free[t] > 0 {
				open++
			}
		}
		for len(h) > 0 && open > 0 {
			var e entry
			e, h = pop(h)
			if s.free[e.t] == 0 {
				continue
			}
			if m.take(e) && s.free[e.t] == 0 {
				open--
			}
		}
		s.heap = h
		return
	}
	for rank, t := range s.order {
		h := m.appendCandidates(s.heap[:0], t, int32(rank))
		heapify(h)
		for len(h) > 0 && s.free[t] > 0 {
			var e entry
			e, h = pop(h)
			m.take(e)
		}
		s.heap = h
	}
}

// takePinned selects every pinned running combination on the type it runs
// on before the greedy walk, so the walk fills only the GPUs left and
// place keeps the pinned ones where they are. Pinned and PinOutside
// combinations count in their limits, over the caps or not: they run
// whatever the plan says, so only the walk's selections can be refused.
func (m *Mechanism) takePinned(running []Assignment) {
	s := &m.scratch
	for _, c := range s.outside {
		for _, j := range m.combos[c].members {
			if j >= 0 {
				s.taken[j] = s.epoch
			}
		}
		m.countLimits(c)
	}
	for c := range m.combos {
		if s.pinned[c] == NotPinned || !m.combos[c].alive {
			continue
		}
		t := m.typeIndex(running[s.prev[c]].Type)
		if t < 0 {
			continue
		}
		cb := &m.combos[c]
		for _, j := range cb.members {
			if j >= 0 {
				s.taken[j] = s.epoch
			}
		}
		s.free[t] = max(s.free[t]-cb.sf, 0)
		s.selected[t]++
		s.chosenType[c] = t
		s.chosen = append(s.chosen, int32(c))
		m.countLimits(int32(c))
	}
}

// upgrade is a selected job that would run faster on GPUs left idle.
type upgrade struct {
	gain float64 // best speed on a type with idle GPUs / speed where selected
	c    int32
}

// upgradeIdle moves selected single jobs to faster types whose GPUs the
// walk left idle, the largest speed-ups first, each to the fastest type
// that still has room for it.
func (m *Mechanism) upgradeIdle() {
	s := &m.scratch
	nt := len(m.types)
	s.upgrades = s.upgrades[:0]
	for _, c := range s.chosen {
		cb := &m.combos[c]
		if cb.isPair() || s.held[c] || (s.pinned[c] != NotPinned && !restartPin(s.pinned[c])) {
			continue
		}
		if g := m.bestIdle(c); g.gain > 1 {
			s.upgrades = append(s.upgrades, g)
		}
	}
	if len(s.upgrades) == 0 {
		return
	}
	slices.SortStableFunc(s.upgrades, func(a, b upgrade) int {
		switch {
		case a.gain > b.gain:
			return -1
		case a.gain < b.gain:
			return 1
		}
		return 0
	})
	for _, u := range s.upgrades {
		g := m.bestIdle(u.c)
		if !(g.gain > 1) {
			continue
		}
		cb := &m.combos[u.c]
		from := s.chosenType[u.c]
		to := int32(-1)
		best := m.speed[int(u.c)*nt+int(from)]
		for t := range int32(nt) {
			if v := m.speed[int(u.c)*nt+int(t)]; v > best && s.free[t] >= cb.sf {
				best, to = v, t
			}
		}
		if !m.moveWorthIt(u.c, from, to) {
			continue
		}
		s.free[from] += cb.sf
		s.selected[from]--
		s.free[to] -= cb.sf
		s.selected[to]++
		s.chosenType[u.c] = to
	}
}

// bestIdle is the speed-up combination c would get on the fastest type
// with room for it, over the type it was selected on.
func (m *Mechanism) bestIdle(c int32) upgrade {
	s := &m.scratch
	nt := len(m.types)
	sf := m.combos[c].sf
	cur := m.speed[int(c)*nt+int(s.chosenType[c])]
	u := upgrade{c: c}
	if cur <= 0 {
		return u
	}
	for t := range nt {
		if v := m.speed[int(c)*nt+t]; s.free[t] >= sf && v/cur > u.gain {
			u.gain = v / cur
		}
	}
	return u
}

// typeIndex is the index of GPU type name, or -1.
func (m *Mechanism) typeIndex(name string) int32 {
	for i, t := range m.types {
		if t == name {
			return int32(i)
		}
	}
	return -1
}

// take selects e if its jobs are still unscheduled, it fits and its
// members' limits have room for it. The limits are checked last, so a
// job is noted as stopped by a limit only when nothing else stood in the
// way of that candidate.
func (m *Mechanism) take(e entry) bool {
	s := &m.scratch
	cb := &m.combos[e.c]
	for _, j := range cb.members {
		if j >= 0 && s.taken[j] == s.epoch {
			return false
		}
	}
	if cb.sf > s.free[e.t] {
		return false
	}
	if !m.fitsLimits(e.c) {
		return false
	}
	for _, j := range cb.members {
		if j >= 0 {
			s.taken[j] = s.epoch
		}
	}
	s.free[e.t] -= cb.sf
	s.selected[e.t]++
	s.chosenType[e.c] = e.t
	s.chosen = append(s.chosen, e.c)
	if m.opts.HoldUnallocated && !cb.alloced {
		// Held GPUs idle until the next reset: nothing runs on them to
		// count in a limit.
		s.held[e.c] = true
	} else {
		m.countLimits(e.c)
	}
	return true
}

func (m *Mechanism) resetPlan(p *Plan, now float64) {
	p.Time = now
	p.Decisions = grow(p.Decisions, len(m.jobs))
	p.Assignments = p.Assignments[:0]
	p.Types = m.types
	p.Idle = grow(p.Idle, len(m.types))
	copy(p.Idle, m.typeGPUs)
	p.Order = p.Order[:0]
	for _, t := range m.scratch.order {
		p.Order = append(p.Order, m.types[t])
	}
	// Slots of one round never exceed the cluster's GPUs, so a buffer of
	// that size never reallocates and the Slots sub-slices stay valid.
	if cap(p.slotBuf) < m.totalGPUs {
		p.slotBuf = make([]Slot, 0, m.totalGPUs)
	}
	p.slotBuf = p.slotBuf[:0]
	if need := 2 * len(m.scratch.chosen); cap(p.jobBuf) < need {
		p.jobBuf = make([]string, 0, need)
	}
	p.jobBuf = p.jobBuf[:0]
}

// place gives GPUs to the selected combinations: first every lease that
// can be extended (same combination, same type: it keeps its GPUs), then
// the others from the largest scale factor down, each on as few servers
// as possible.
func (m *Mechanism) place(p *Plan, running []Assignment) {
	s := &m.scratch
	s.toPlace = s.toPlace[:0]
	for _, c := range s.chosen {
		if s.held[c] {
			continue
		}
		t := s.chosenType[c]
		if r := s.prev[c]; r >= 0 && !s.gone[c] && running[r].Type == m.types[t] && m.canKeep(running[r].Slots) {
			start := len(p.slotBuf)
			for _, slot := range running[r].Slots {
				srv := m.serverIndex[slot.Server]
				s.gpuUsed[m.gpuBase[srv]+int32(slot.GPU)] = true
				s.serverFree[srv]--
				p.slotBuf = append(p.slotBuf, slot)
			}
			s.slotStart[c], s.slotLen[c] = int32(start), int32(len(running[r].Slots))
			s.extended[c] = true
			s.since[c] = running[r].Since
			continue
		}
		s.toPlace = append(s.toPlace, c)
	}
	slices.SortStableFunc(s.toPlace, func(a, b int32) int { return m.combos[b].sf - m.combos[a].sf })
	for _, c := range s.toPlace {
		m.placeFresh(p, c, s.chosenType[c])
		s.since[c] = p.Time
	}
	for _, c := range s.chosen {
		if s.held[c] {
			continue
		}
		cb := &m.combos[c]
		t := s.chosenType[c]
		jobsStart := len(p.jobBuf)
		for _, j := range cb.members {
			if j >= 0 {
				p.jobBuf = append(p.jobBuf, m.combos[j].key)
			}
		}
		p.Assignments = append(p.Assignments, Assignment{
			Key:      cb.key,
			Jobs:     p.jobBuf[jobsStart:len(p.jobBuf):len(p.jobBuf)],
			Type:     m.types[t],
			Slots:    m.slotsOf(p, c),
			Extended: s.extended[c],
			Since:    s.since[c],
		})
		p.Idle[t] -= cb.sf
	}
}

// canKeep reports whether the held slots are all still free (the running
// list is validated, so only another extension could have taken them).
func (m *Mechanism) canKeep(slots []Slot) bool {
	for _, slot := range slots {
		srv := m.serverIndex[slot.Server]
		if m.scratch.gpuUsed[m.gpuBase[srv]+int32(slot.GPU)] {
			return false
		}
	}
	return true
}

func (m *Mechanism) slotsOf(p *Plan, c int32) []Slot {
	s := &m.scratch
	start, n := s.slotStart[c], s.slotLen[c]
	if n == 0 {
		return nil
	}
	return p.slotBuf[start : start+n : start+n]
}

// placeFresh puts combination c on type t: on the fullest server that
// still has room for all of it, otherwise across the servers with the most
// free GPUs first, so it spans as few servers as possible.
func (m *Mechanism) placeFresh(p *Plan, c, t int32) {
	s := &m.scratch
	need := m.combos[c].sf
	servers := m.typeServers[t]
	best := int32(-1)
	for _, srv := range servers {
		f := s.serverFree[srv]
		if f >= need && (best < 0 || f < s.serverFree[best]) {
			best = srv
			if f == need {
				break
			}
		}
	}
	start := len(p.slotBuf)
	if best >= 0 {
		m.takeGPUs(p, best, need)
	} else {
		s.byFree = append(s.byFree[:0], servers...)
		slices.SortStableFunc(s.byFree, func(a, b int32) int { return s.serverFree[b] - s.serverFree[a] })
		for _, srv := range s.byFree {
			if need == 0 {
				break
			}
			k := min(need, s.serverFree[srv])
			m.takeGPUs(p, srv, k)
			need -= k
		}
	}
	s.slotStart[c], s.slotLen[c] = int32(start), int32(len(p.slotBuf)-start)
}

// takeGPUs claims the k lowest-numbered free GPUs of a server.
func (m *Mechanism) takeGPUs(p *Plan, srv int32, k int) {
	s := &m.scratch
	base := m.gpuBase[srv]
	for g := 0; g < m.servers[srv].GPUs && k > 0; g++ {
		if s.gpuUsed[base+int32(g)] {
			continue
		}
		s.gpuUsed[base+int32(g)] = true
		p.slotBuf = append(p.slotBuf, Slot{Server: m.servers[srv].ID, GPU: g})
		s.serverFree[srv]--
		k--
	}
}

// decide writes one decision per job, in arrival order.
func (m *Mechanism) decide(p *Plan, running []Assignment) {
	s := &m.scratch
	for _, c := range s.chosen {
		if s.held[c] {
			continue
		}
		for _, j := range m.combos[c].members {
			if j >= 0 {
				s.jobNew[j] = c
			}
		}
	}
	for k, j := range m.jobs {
		d := &p.Decisions[k]
		*d = Decision{Job: m.combos[j].key}
		if pc := s.jobPrev[j]; pc >= 0 {
			r := &running[s.prev[pc]]
			d.FromType, d.FromSlots = r.Type, r.Slots
		}
		nc := s.jobNew[j]
		if nc >= 0 {
			t := s.chosenType[nc]
			d.Type = m.types[t]
			d.Slots = m.slotsOf(p, nc)
			if cb := &m.combos[nc]; cb.isPair() {
				other := cb.members[0]
				if other == j {
					other = cb.members[1]
				}
				d.Partner = m.combos[other].key
			}
			switch {
			case s.jobPrev[j] < 0:
				d.Action = Run
				d.Reason = Reason{Code: ReasonSelected, Type: d.Type, Priority: m.prio[int(nc)*len(m.types)+int(t)]}
			case s.jobPrev[j] == nc && s.extended[nc] && s.pinned[nc] != NotPinned:
				d.Action = Keep
				d.Reason = Reason{Code: ReasonPinned, Type: d.Type, Pin: s.pinned[nc]}
			case s.jobPrev[j] == nc && s.extended[nc]:
				d.Action = Keep
				d.Reason = Reason{Code: ReasonLeaseExtended, Type: d.Type}
			case d.FromType != d.Type:
				d.Action = Preempt
				d.Reason = Reason{Code: ReasonMovedType, Type: d.Type, Preempted: true}
			default:
				d.Action = Preempt
				d.Reason = Reason{Code: ReasonMovedGPUs, Type: d.Type, Preempted: true}
			}
			continue
		}
		if s.jobPrev[j] >= 0 {
			d.Action = Preempt
		}
		d.Reason = m.waitReason(j)
		d.Reason.Preempted = d.Action == Preempt
	}
}

// waitReason explains why job slot j got no GPUs this round.
func (m *Mechanism) waitReason(j int32) Reason {
	s := &m.scratch
	if s.held[j] {
		return Reason{Code: ReasonNoAllocation}
	}
	if s.stopped[j].limit >= 0 {
		return m.limitReason(j)
	}
	nt := len(m.types)
	sf := m.combos[j].sf
	best := int32(-1)
	anyUsable := false
	for _, t := range s.order {
		i := int(j)*nt + int(t)
		if !m.usable[i] || sf > m.typeGPUs[t] {
			continue
		}
		anyUsable = true
		if m.opts.SkipZeroPriority && m.prio[i] <= 0 {
			continue
		}
		if best < 0 || m.prio[i] > m.prio[int(j)*nt+int(best)] {
			best = t
		}
	}
	switch {
	case !anyUsable:
		return Reason{Code: ReasonNoUsableType}
	case best < 0:
		return Reason{Code: ReasonZeroPriority}
	}
	name := m.types[best]
	if free := s.free[best]; free > 0 && free < sf {
		return Reason{Code: ReasonNoFit, Type: name, Needed: sf, Free: free}
	}
	return Reason{Code: ReasonLowPriority, Type: name, Priority: m.prio[int(j)*nt+int(best)], Selected: s.selected[best]}
}
