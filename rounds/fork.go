package rounds

import (
	"maps"
	"slices"
)

// Fork returns an independent copy of the mechanism; where m shuffles its
// type order, the copy shuffles with shuffle (a copy of m's own source, so
// that both draw the same orders). Planning, recording or loading on the
// copy leaves m as it was, so a caller can work out a round on the copy
// and keep it or drop it afterwards. The copy takes over m's working
// buffers (they hold nothing between calls); m allocates new ones when it
// plans again.
func (m *Mechanism) Fork(shuffle Shuffler) *Mechanism {
	f := *m
	f.opts.TypeOrder = slices.Clone(m.opts.TypeOrder)
	if m.opts.Shuffle != nil {
		f.opts.Shuffle = shuffle
	}
	f.servers = slices.Clone(m.servers)
	f.serverIndex = maps.Clone(m.serverIndex)
	f.serverType = slices.Clone(m.serverType)
	f.gpuBase = slices.Clone(m.gpuBase)
	f.types = slices.Clone(m.types)
	f.typeGPUs = slices.Clone(m.typeGPUs)
	f.typeServers = make([][]int32, len(m.typeServers))
	for i, s := range m.typeServers {
		f.typeServers[i] = slices.Clone(s)
	}
	f.baseOrder = slices.Clone(m.baseOrder)
	f.combos = make([]combo, len(m.combos))
	for i, cb := range m.combos {
		cb.single = maps.Clone(cb.single)
		cb.pair = maps.Clone(cb.pair)
		f.combos[i] = cb
	}
	f.free = slices.Clone(m.free)
	f.index = maps.Clone(m.index)
	f.jobs = slices.Clone(m.jobs)
	f.received = slices.Clone(m.received)
	f.deficit = slices.Clone(m.deficit)
	f.alloc = slices.Clone(m.alloc)
	f.owed = slices.Clone(m.owed)
	f.prio = slices.Clone(m.prio)
	f.usable = slices.Clone(m.usable)
	f.speed = slices.Clone(m.speed)
	f.typeTime = slices.Clone(m.typeTime)
	f.limits = slices.Clone(m.limits)
	f.limitIndex = maps.Clone(m.limitIndex)
	f.jobLimitNames = make([][]string, len(m.jobLimitNames))
	for i, names := range m.jobLimitNames {
		f.jobLimitNames[i] = slices.Clone(names)
	}
	f.jobLimits = make([][]int32, len(m.jobLimits))
	for i, l := range m.jobLimits {
		f.jobLimits[i] = slices.Clone(l)
	}
	m.scratch = scratch{}
	return &f
}
