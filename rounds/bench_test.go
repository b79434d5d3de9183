package rounds

import (
	"fmt"
	"strconv"
	"testing"
)

// benchMechanism builds jobs on 3 types × 100 servers with a Philly-like
// scale-factor mix and an equal-share allocation, then runs a few rounds so
// that leases, priorities and deficits are in steady state.
func benchMechanism(b *testing.B, jobs, gpusPerServer int) (*Mechanism, []Assignment) {
	types := []string{"k80", "p100", "v100"}
	c := cluster(servers("v100", 100, gpusPerServer), servers("p100", 100, gpusPerServer), servers("k80", 100, gpusPerServer))
	m := mustNew(b, c, DefaultOptions())
	mix := []int{1, 1, 1, 1, 1, 1, 1, 2, 4, 4, 4, 8, 1, 1, 1, 1, 1, 1, 2, 4}
	keys := make([]string, jobs)
	totalSF := 0
	for i := range jobs {
		keys[i] = strconv.Itoa(i)
		sf := mix[i%len(mix)]
		totalSF += sf
		tp := map[string]float64{"v100": 3, "p100": 2, "k80": 1}
		if i%7 == 0 {
			tp["k80"] = 0
		}
		mustAdd(b, m, Job{ID: keys[i], ScaleFactor: sf, Throughputs: tp})
	}
	share := float64(100*gpusPerServer) / float64(totalSF)
	rows := map[string][]float64{}
	for _, k := range keys {
		rows[k] = []float64{share, share, share}
	}
	if err := m.SetAllocation(allocation(types, keys, rows), 0); err != nil {
		b.Fatal(err)
	}
	r := newRunner(b, m)
	r.steps(20)
	return m, r.plan.Assignments
}

func BenchmarkPlan(b *testing.B) {
	for _, tc := range []struct{ jobs, gpus int }{{1000, 1}, {2000, 1}, {2000, 4}} {
		b.Run(fmt.Sprintf("jobs=%d,servers=3x100,gpus=%d", tc.jobs, tc.gpus), func(b *testing.B) {
			m, running := benchMechanism(b, tc.jobs, tc.gpus)
			planRounds(b, m, running, nil)
		})
	}
}

// BenchmarkPlanWithLimits is BenchmarkPlan's 2000-job round with every job
// under a per-user cap of 8 GPUs (100 users) and one of 4 accounts' caps
// of 150 GPUs and 200 jobs, set again before every round as a daemon that
// reads the accounting does.
func BenchmarkPlanWithLimits(b *testing.B) {
	const jobs, users, accounts = 2000, 100, 4
	m, running := benchMechanism(b, jobs, 1)
	var limits []Limit
	for u := range users {
		limits = append(limits, Limit{Name: fmt.Sprintf("qos gpu8 user u%d", u), GPUs: 8, Jobs: NoCap})
	}
	for a := range accounts {
		limits = append(limits, Limit{Name: fmt.Sprintf("association a%d", a), GPUs: 150, Jobs: 200, UsedGPUs: 10, UsedJobs: 5})
	}
	for i := range jobs {
		names := []string{limits[i%users].Name, limits[users+i%accounts].Name}
		if err := m.SetJobLimits(strconv.Itoa(i), names); err != nil {
			b.Fatal(err)
		}
	}
	setLimits := func() {
		if err := m.SetLimits(limits); err != nil {
			b.Fatal(err)
		}
	}
	setLimits() // the first call sizes the jobs' buffers
	planRounds(b, m, running, setLimits)
}

// planRounds plans and records rounds until the benchmark is done, each
// after beforeRound (when set).
func planRounds(b *testing.B, m *Mechanism, running []Assignment, beforeRound func()) {
	plans := [2]Plan{}
	// Alternate two plans so each round's running list is the
	// previous plan, as a simulator does.
	plans[1].Assignments = append(plans[1].Assignments, running...)
	usage := make([]Usage, 0, 1200)
	i := 0
	for b.Loop() {
		if beforeRound != nil {
			beforeRound()
		}
		cur, prev := &plans[i%2], &plans[(i+1)%2]
		if err := m.PlanInto(cur, float64(i)*360, prev.Assignments); err != nil {
			b.Fatal(err)
		}
		usage = usage[:0]
		for _, a := range cur.Assignments {
			usage = append(usage, Usage{Key: a.Key, Type: a.Type, Seconds: 360})
		}
		if err := m.Record(usage); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
