package policy

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"sync"
	"testing"

	"github.com/gavel-slurm/gavel-slurm/etc"
)

// Benchmarks of the max-min policies on problems drawn from the reference
// throughput table: 3 GPU types (k80, p100, v100) with jobs/4 GPUs each.

// mmJobType is one row of the reference table: a model at a scale factor.
type mmJobType struct {
	key   string // the table's key, e.g. "('ResNet-18 (batch size 16)', 1)"
	sf    int
	alone map[string]float64               // isolated throughput per GPU type
	with  map[string]map[string][2]float64 // GPU type -> other key -> rates
}

var (
	mmTableOnce  sync.Once
	mmTableTypes []mmJobType
	mmTableErr   error
)

// mmBenchTypes are the GPU types of the reference table the simulator uses.
var mmBenchTypes = []string{"k80", "p100", "v100"}

// mmReferenceTable parses just enough of etc.SimulationThroughputs: the
// isolated ("null") entries and the co-location pairs of every job type.
func mmReferenceTable(tb testing.TB) []mmJobType {
	tb.Helper()
	mmTableOnce.Do(func() {
		var raw map[string]map[string]map[string]json.RawMessage
		if mmTableErr = json.Unmarshal(etc.SimulationThroughputs, &raw); mmTableErr != nil {
			return
		}
		keyRE := regexp.MustCompile(`^\('(.*)', (\d+)\)$`)
		byKey := map[string]*mmJobType{}
		for _, gpu := range mmBenchTypes {
			for key, entries := range raw[gpu] {
				m := keyRE.FindStringSubmatch(key)
				if m == nil {
					mmTableErr = fmt.Errorf("unexpected job type key %q", key)
					return
				}
				jt, ok := byKey[key]
				if !ok {
					sf, _ := strconv.Atoi(m[2])
					jt = &mmJobType{key: key, sf: sf, alone: map[string]float64{}, with: map[string]map[string][2]float64{}}
					byKey[key] = jt
				}
				jt.with[gpu] = map[string][2]float64{}
				for other, v := range entries {
					if other == "null" {
						var x float64
						if mmTableErr = json.Unmarshal(v, &x); mmTableErr != nil {
							return
						}
						jt.alone[gpu] = x
						continue
					}
					var pair [2]float64
					if mmTableErr = json.Unmarshal(v, &pair); mmTableErr != nil {
						return
					}
					jt.with[gpu][other] = pair
				}
			}
		}
		for _, jt := range byKey {
			mmTableTypes = append(mmTableTypes, *jt)
		}
		sort.Slice(mmTableTypes, func(a, b int) bool { return mmTableTypes[a].key < mmTableTypes[b].key })
	})
	if mmTableErr != nil {
		tb.Fatalf("parse reference table: %v", mmTableErr)
	}
	return mmTableTypes
}

// mmTableProblem draws n jobs with a fixed seed: 70% single-GPU, the rest
// 2, 4 or 8 GPUs, each a uniformly drawn job type of that scale factor; the
// cluster has n/4 GPUs of each type. With pairs, every two jobs of the same
// scale factor whose table entry has both rates > 0 on some type become a
// candidate pair.
func mmTableProblem(tb testing.TB, n int, seed int64, pairs bool) (*Problem, []int) {
	tb.Helper()
	table := mmReferenceTable(tb)
	bySF := map[int][]int{}
	for i, jt := range table {
		bySF[jt.sf] = append(bySF[jt.sf], i)
	}
	rng := rand.New(rand.NewSource(seed))
	p := &Problem{GPUs: map[string]int{}}
	for _, t := range mmBenchTypes {
		p.GPUs[t] = max(1, n/4)
	}
	kinds := make([]int, n)
	for i := 0; i < n; i++ {
		sf := 1
		switch u := rng.Float64(); {
		case u < 0.70:
		case u < 0.80:
			sf = 2
		case u < 0.95:
			sf = 4
		default:
			sf = 8
		}
		candidates := bySF[sf]
		k := candidates[rng.Intn(len(candidates))]
		kinds[i] = k
		tput := map[string]float64{}
		for gpu, v := range table[k].alone {
			tput[gpu] = v
		}
		p.Jobs = append(p.Jobs, Job{ID: strconv.Itoa(i), Throughputs: tput, ScaleFactor: sf, Weight: 1, Arrival: float64(i)})
	}
	if pairs {
		for i := 0; i < n; i++ {
			for j := i + 1; j < n; j++ {
				a, b := &table[kinds[i]], &table[kinds[j]]
				if a.sf != b.sf {
					continue
				}
				tput := map[string][2]float64{}
				for _, gpu := range mmBenchTypes {
					if v, ok := a.with[gpu][b.key]; ok && v[0] > 0 && v[1] > 0 {
						tput[gpu] = v
					}
				}
				if len(tput) > 0 {
					p.Pairs = append(p.Pairs, Pair{Jobs: [2]string{p.Jobs[i].ID, p.Jobs[j].ID}, Throughputs: tput})
				}
			}
		}
	}
	return p, kinds
}

// wfHierarchy spreads the jobs of p over entities of different weights and
// internal policies (and leaves some jobs on their own), with a fifth of
// the jobs at weight 2.
func wfHierarchy(p *Problem, seed int64) {
	p.Entities = map[string]Entity{
		"prod":     {Weight: 4, Policy: "fairness"},
		"research": {Weight: 2, Policy: "fifo"},
		"interns":  {Weight: 1, Policy: "fifo"},
		"ops":      {Weight: 3, Policy: "fairness"},
	}
	rng := rand.New(rand.NewSource(seed))
	for i := range p.Jobs {
		switch u := rng.Float64(); {
		case u < 0.40:
			p.Jobs[i].Entity = "prod"
		case u < 0.65:
			p.Jobs[i].Entity = "research"
		case u < 0.80:
			p.Jobs[i].Entity = "interns"
		case u < 0.95:
			p.Jobs[i].Entity = "ops"
		}
		if rng.Float64() < 0.2 {
			p.Jobs[i].Weight = 2
		}
	}
}

// mmBench times one Allocate of a fresh policy value (policies remember
// their last round, which would make every iteration after the first a
// warm start; BenchmarkMaxMinFairnessPerfDistinctNextRound times those).
func mmBench(b *testing.B, policy string, p *Problem) {
	if _, err := New(policy, Options{}); err != nil {
		b.Fatal(err)
	}
	var a *Allocation
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPU()
	for i := 0; i < b.N; i++ {
		pol, _ := New(policy, Options{})
		var err error
		if a, err = pol.Allocate(p); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, cpu)
	b.ReportMetric(float64(a.Stats.LPs), "LPs")
	b.ReportMetric(float64(a.Stats.Classes), "classes")
}

func BenchmarkMaxMinFairnessPerf(b *testing.B) {
	for _, n := range []int{256, 2048, 8192} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			p, _ := mmTableProblem(b, n, 1, false)
			mmBench(b, "max_min_fairness_perf", p)
		})
	}
}

func BenchmarkWaterFillingHierarchical(b *testing.B) {
	b.Run("2048", func(b *testing.B) {
		p, _ := mmTableProblem(b, 2048, 2, false)
		wfHierarchy(p, 3)
		mmBench(b, "max_min_fairness_water_filling_perf", p)
	})
}

func BenchmarkMaxMinFairnessPacked(b *testing.B) {
	for _, n := range []int{512, 1024, 2048} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			p, _ := mmTableProblem(b, n, 4, true)
			mmBench(b, "max_min_fairness_packed", p)
			// After mmBench: resetting the timer drops earlier metrics.
			b.ReportMetric(float64(len(p.Pairs)), "pairs")
		})
	}
}

// ftfHistory gives every job steps left and a history: fresh jobs (no time
// yet), jobs that were treated fairly so far, and jobs that fell behind.
func ftfHistory(p *Problem, seed int64) {
	rng := rand.New(rand.NewSource(seed))
	for i := range p.Jobs {
		j := &p.Jobs[i]
		j.StepsRemaining = 1000 + 1e5*rng.Float64()
		switch rng.Intn(3) {
		case 1:
			j.TimeSinceStart = 36000 * rng.Float64()
			j.IsolatedTime = j.TimeSinceStart * (0.9 + 0.2*rng.Float64())
		case 2:
			j.TimeSinceStart = 36000 * rng.Float64()
			j.IsolatedTime = j.TimeSinceStart * (0.2 + 0.8*rng.Float64())
		}
	}
}

func BenchmarkFinishTimeFairnessPerf(b *testing.B) {
	for _, tc := range []struct {
		name    string
		history bool
	}{{"2048/fresh", false}, {"2048/history", true}} {
		b.Run(tc.name, func(b *testing.B) {
			p, _ := mmTableProblem(b, 2048, 5, false)
			ftfHistory(p, 6)
			if !tc.history {
				for i := range p.Jobs {
					p.Jobs[i].TimeSinceStart, p.Jobs[i].IsolatedTime = 0, 0
				}
			}
			mmBench(b, "finish_time_fairness_perf", p)
		})
	}
}

// mmDistinctProblem is mmTableProblem with every job different, as
// measured throughputs make them: each job takes a single-GPU job type of
// the table, a scale factor from 1 to 8 and a weight from 1 to 2, and its
// rate on every type is the table's times its scale factor times its own
// factor in [0.5, 1.5). No two jobs share an LP class.
func mmDistinctProblem(tb testing.TB, n int, seed int64) *Problem {
	tb.Helper()
	var single []mmJobType
	for _, jt := range mmReferenceTable(tb) {
		if jt.sf == 1 {
			single = append(single, jt)
		}
	}
	rng := rand.New(rand.NewSource(seed))
	p := &Problem{GPUs: map[string]int{}}
	for _, t := range mmBenchTypes {
		p.GPUs[t] = max(1, n/4)
	}
	for i := 0; i < n; i++ {
		jt := single[rng.Intn(len(single))]
		sf := 1 + rng.Intn(8)
		tput := map[string]float64{}
		for _, gpu := range mmBenchTypes {
			tput[gpu] = jt.alone[gpu] * float64(sf) * (0.5 + rng.Float64())
		}
		p.Jobs = append(p.Jobs, Job{ID: strconv.Itoa(i), Throughputs: tput, ScaleFactor: sf, Weight: 1 + rng.Float64(), Arrival: float64(i)})
	}
	return p
}

func BenchmarkMaxMinFairnessPerfDistinct(b *testing.B) {
	for _, n := range []int{2048, 8192} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			mmBench(b, "max_min_fairness_perf", mmDistinctProblem(b, n, 7))
		})
	}
}

func BenchmarkWaterFillingHierarchicalDistinct(b *testing.B) {
	b.Run("2048", func(b *testing.B) {
		p := mmDistinctProblem(b, 2048, 8)
		wfHierarchy(p, 3)
		mmBench(b, "max_min_fairness_water_filling_perf", p)
	})
}

func BenchmarkFinishTimeFairnessPerfDistinct(b *testing.B) {
	b.Run("2048/history", func(b *testing.B) {
		p := mmDistinctProblem(b, 2048, 9)
		ftfHistory(p, 6)
		mmBench(b, "finish_time_fairness_perf", p)
	})
}

// BenchmarkMaxMinFairnessPerfDistinctNextRound times the rounds after the
// first with one policy value, as a daemon or a simulation runs it: every
// round a twentieth of the jobs is replaced by new ones.
func BenchmarkMaxMinFairnessPerfDistinctNextRound(b *testing.B) {
	for _, n := range []int{2048, 8192} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			nextRoundBench(b, "max_min_fairness_perf", distinctRounds(b, n, 10, false))
		})
	}
}

// BenchmarkFinishTimeFairnessPerfDistinctNextRound is the same for
// finish-time fairness, at the sizes a simulation at saturation reaches
// (a few hundred jobs in the system), where each search starts from the
// previous round's basis.
func BenchmarkFinishTimeFairnessPerfDistinctNextRound(b *testing.B) {
	for _, n := range []int{256, 512} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			nextRoundBench(b, "finish_time_fairness_perf", distinctRounds(b, n, 11, true))
		})
	}
}

// distinctRounds is 20 rounds of n distinct jobs each, every round a
// twentieth of the jobs replaced by new ones; with history, each job also
// has steps left and time received, and loses steps from round to round.
func distinctRounds(tb testing.TB, n int, seed int64, history bool) []*Problem {
	pool := mmDistinctProblem(tb, 2*n, seed)
	if history {
		ftfHistory(pool, seed)
	}
	rounds := make([]*Problem, 20)
	for r := range rounds {
		p := &Problem{GPUs: pool.GPUs}
		start := r * n / 20
		p.Jobs = slices.Clone(pool.Jobs[start : start+n])
		if history {
			for i := range p.Jobs {
				j := &p.Jobs[i]
				j.StepsRemaining *= 1 - 0.01*float64(r)
				j.TimeSinceStart += 360 * float64(r)
				j.IsolatedTime += 300 * float64(r)
			}
		}
		rounds[r] = p
	}
	return rounds
}

// nextRoundBench times the allocations of rounds[1:] with one policy value
// that has allocated rounds[0].
func nextRoundBench(b *testing.B, policy string, rounds []*Problem) {
	pol, err := New(policy, Options{})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := pol.Allocate(rounds[0]); err != nil {
		b.Fatal(err)
	}
	var a *Allocation
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if a, err = pol.Allocate(rounds[1+i%(len(rounds)-1)]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(a.Stats.LPs), "LPs")
}
