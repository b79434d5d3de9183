package rounds

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gavel-slurm/gavel-slurm/policy"
)

// servers builds count servers of one type with gpus GPUs each, named
// type-0, type-1, ...
func servers(gpuType string, count, gpus int) []Server {
	out := make([]Server, count)
	for i := range out {
		out[i] = Server{ID: fmt.Sprintf("%s-%d", gpuType, i), Type: gpuType, GPUs: gpus}
	}
	return out
}

func cluster(groups ...[]Server) Cluster {
	var c Cluster
	for _, g := range groups {
		c.Servers = append(c.Servers, g...)
	}
	return c
}

// everywhere gives throughput 1 on every listed type.
func everywhere(types ...string) map[string]float64 {
	m := make(map[string]float64, len(types))
	for _, t := range types {
		m[t] = 1
	}
	return m
}

func mustNew(t testing.TB, c Cluster, o Options) *Mechanism {
	t.Helper()
	m, err := New(c, o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m
}

func mustAdd(t testing.TB, m *Mechanism, j Job) {
	t.Helper()
	if err := m.AddJob(j, 0); err != nil {
		t.Fatalf("AddJob(%s): %v", j.ID, err)
	}
}

// allocation builds a policy.Allocation from {key: fractions} in the order
// of keys.
func allocation(types []string, keys []string, rows map[string][]float64) *policy.Allocation {
	a := &policy.Allocation{Types: types}
	for _, k := range keys {
		jobs := splitKey(k)
		a.Rows = append(a.Rows, policy.Row{Jobs: jobs, Fractions: rows[k]})
	}
	return a
}

func splitKey(k string) []string {
	for i := range k {
		if k[i] == '+' {
			return []string{k[:i], k[i+1:]}
		}
	}
	return []string{k}
}

// runner drives a mechanism round after round the way a simulator does:
// plan, then record every assignment as having run a full round.
type runner struct {
	t       testing.TB
	m       *Mechanism
	now     float64
	round   float64
	plan    *Plan
	onPlan  func(p *Plan)
	seconds map[string]map[string]float64 // key → type → seconds run
}

func newRunner(t testing.TB, m *Mechanism) *runner {
	return &runner{t: t, m: m, round: DefaultRoundSeconds, seconds: map[string]map[string]float64{}}
}

func (r *runner) step() *Plan {
	r.t.Helper()
	var running []Assignment
	if r.plan != nil {
		running = r.plan.Assignments
	}
	p, err := r.m.Plan(r.now, running)
	if err != nil {
		r.t.Fatalf("Plan at %v: %v", r.now, err)
	}
	if r.onPlan != nil {
		r.onPlan(p)
	}
	usage := make([]Usage, 0, len(p.Assignments))
	for _, a := range p.Assignments {
		usage = append(usage, Usage{Key: a.Key, Type: a.Type, Seconds: r.round})
		if r.seconds[a.Key] == nil {
			r.seconds[a.Key] = map[string]float64{}
		}
		r.seconds[a.Key][a.Type] += r.round
	}
	if err := r.m.Record(usage); err != nil {
		r.t.Fatalf("Record: %v", err)
	}
	r.plan = p
	r.now += r.round
	return p
}

func (r *runner) steps(n int) {
	r.t.Helper()
	for range n {
		r.step()
	}
}

// shuffler is a seeded source for tests that shuffle the type order.
func shuffler(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed+1)) }
