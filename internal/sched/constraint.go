package sched

import (
	"maps"
	"slices"
	"strings"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

// The daemon steers a pending job to a GPU type through the job's
// constraint: nodes carry a feature named after their GPU type. A user's
// own features (--constraint=ib) are kept next to it, joined by "&"
// ("ib&v100"); terms that name a GPU type are the daemon's to choose, so a
// job pins its type with a typed request (--gres=gpu:v100:N), not with a
// constraint. Nothing has to be remembered for this to survive a restart:
// the job's own features are whatever its constraint holds besides types.

// constraintOperators are the parts of Slurm's constraint syntax other
// than "&": OR, matching OR, counts, grouping, negation. An expression
// using them cannot be extended by appending "&type" without changing its
// meaning, so such jobs are left to Slurm.
const constraintOperators = "|[]()*,!:"

// ownFeatures returns the terms of constraint c that are not GPU type
// names, or ok=false when c uses operators other than "&".
func ownFeatures(c string, isType func(string) bool) (own []string, ok bool) {
	c = strings.TrimSpace(c)
	if c == "" {
		return nil, true
	}
	if strings.ContainsAny(c, constraintOperators) {
		return nil, false
	}
	for _, term := range strings.Split(c, "&") {
		term = strings.TrimSpace(term)
		if term == "" {
			return nil, false
		}
		if !isType(term) && !slices.Contains(own, term) {
			own = append(own, term)
		}
	}
	return own, true
}

// constraintFor is the constraint that keeps a job's own features and
// places it on GPU type t.
func constraintFor(own []string, t string) string {
	return strings.Join(append(slices.Clone(own), t), "&")
}

// ConstraintType is the GPU type a plain "&" constraint names, if any.
func ConstraintType(c string, isType func(string) bool) string {
	if strings.ContainsAny(c, constraintOperators) {
		return ""
	}
	for _, term := range strings.Split(c, "&") {
		if term = strings.TrimSpace(term); isType(term) {
			return term
		}
	}
	return ""
}

// typeIndex is the GPU types the core knows and their nodes.
type typeIndex struct {
	// gpuTypes are the GPU type names seen on nodes or configured; a
	// constraint term naming one is the daemon's choice.
	gpuTypes map[string]bool
	// typeList is gpuTypes sorted (knownTypes, addTypes).
	typeList []string
	// typeNodes are the latest snapshot's nodes by GPU type.
	typeNodes map[string][]bridge.Node
	// typesSig describes the known types and their nodes' features
	// (refreshRates compares it).
	typesSig string
}

func (x typeIndex) clone() typeIndex {
	nodes := make(map[string][]bridge.Node, len(x.typeNodes))
	for t, n := range x.typeNodes {
		nodes[t] = slices.Clone(n)
	}
	return typeIndex{gpuTypes: maps.Clone(x.gpuTypes), typeList: slices.Clone(x.typeList), typeNodes: nodes, typesSig: x.typesSig}
}

// noteTypes records the GPU type names of the snapshot's nodes (down ones
// included: a constraint naming them is still the daemon's) and of the
// configuration, and the nodes by type. It runs once per trusted snapshot.
func (c *Core) noteTypes(snap *bridge.Snapshot) {
	c.addTypes(c.set.GPUTypes...)
	c.typeNodes = map[string][]bridge.Node{}
	for _, n := range snap.Nodes {
		if n.GPUType != "" {
			c.addTypes(n.GPUType)
			c.typeNodes[n.GPUType] = append(c.typeNodes[n.GPUType], n)
		}
	}
	var sig strings.Builder
	for _, t := range c.typeList {
		sig.WriteString(t + ":")
		var feats []string
		for _, n := range c.typeNodes[t] {
			feats = append(feats, strings.Join(n.Features, ","))
		}
		slices.Sort(feats)
		sig.WriteString(strings.Join(slices.Compact(feats), ";") + "|")
	}
	c.typesSig = sig.String()
}

// addTypes adds GPU type names to the known ones, keeping the sorted list.
func (c *Core) addTypes(types ...string) {
	if c.gpuTypes == nil {
		c.gpuTypes = map[string]bool{}
	}
	for _, t := range types {
		if !c.gpuTypes[t] {
			c.gpuTypes[t] = true
			i, _ := slices.BinarySearch(c.typeList, t)
			c.typeList = slices.Insert(c.typeList, i, t)
		}
	}
}

func (c *Core) isGPUType(s string) bool { return c.gpuTypes[s] }

// knownTypes are the GPU types jobs get estimates for, sorted: the types
// nodes have or the configuration names, whether or not they have free
// GPUs now, so a job can use a type that was busy or down when it arrived.
// (The mechanism's types, those with GPUs free for managed jobs, are among
// them.) Kept by addTypes.
func (c *Core) knownTypes() []string { return c.typeList }

// typesWithFeatures lists the scheduled GPU types that have a node
// carrying every one of the features (all of them when there are none).
func (c *Core) typesWithFeatures(features []string) []string {
	var out []string
	for _, t := range c.knownTypes() {
		if !c.typeManaged(t) {
			continue
		}
		if len(features) == 0 || slices.ContainsFunc(c.typeNodes[t], func(n bridge.Node) bool {
			return !slices.ContainsFunc(features, func(f string) bool { return !slices.Contains(n.Features, f) })
		}) {
			out = append(out, t)
		}
	}
	return out
}
