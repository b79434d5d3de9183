package sim

import (
	"reflect"
	"strings"
	"testing"

	"github.com/gavel-slurm/gavel-slurm/internal/throughputs"
	"github.com/gavel-slurm/gavel-slurm/internal/workload"
	"github.com/gavel-slurm/gavel-slurm/policy"
)

// fixedRows is a packing policy (its traits say so, so the simulator
// offers pairs) that gives every job of the problem a zero row and adds the
// same extra rows to every allocation, each with fraction 1 on every type.
// It reports two LPs of 3 rows and 4 columns per call.
type fixedRows struct{ rows [][]string }

func (fixedRows) Name() string { return "fixed_rows" }

func (fixedRows) Traits() policy.Traits {
	return policy.Traits{TypeAware: true, Packs: true, Objective: policy.ObjectiveMinNormalizedThroughput}
}

func (f fixedRows) Allocate(p *policy.Problem) (*policy.Allocation, error) {
	types := p.Types()
	a := &policy.Allocation{Policy: "fixed_rows", Types: types, Stats: policy.Stats{LPs: 2, Rows: 3, Columns: 4}}
	for _, j := range p.Jobs {
		a.Rows = append(a.Rows, policy.Row{Jobs: []string{j.ID}, Fractions: make([]float64, len(types))})
	}
	for _, r := range f.rows {
		row := policy.Row{Jobs: r, Fractions: make([]float64, len(types))}
		for i := range row.Fractions {
			row.Fractions[i] = 1
		}
		a.Rows = append(a.Rows, row)
	}
	return a, nil
}

// pairTable has model "one" at 1 step/s alone on a v100 and 0.75 step/s
// each when two of them share it.
func pairTable(t *testing.T) *throughputs.Table {
	t.Helper()
	table, err := throughputs.Parse([]byte(`{"v100": {"('one', 1)": {"null": 1, "('one', 1)": [0.75, 0.75]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	return table
}

func TestPairRowInEitherMemberOrder(t *testing.T) {
	// Two 1000-step jobs co-located on one v100 at 0.75 step/s each: three
	// rounds of int(0.75·360) = 270 steps (to t = 1080), then the last 190
	// steps in 190/0.75 s. Both finish at 1080 + 253.33 s. The simulator
	// registers the pair as "0+1"; a policy naming it "1+0" (gandiva draws
	// its pairs in random order) must get the same schedule.
	const want = 1080 + 190/0.75
	for _, row := range [][]string{{"0", "1"}, {"1", "0"}} {
		t.Run(strings.Join(row, "+"), func(t *testing.T) {
			cfg := Config{
				GPUs: map[string]int{"v100": 1}, Policy: fixedRows{rows: [][]string{row}}, Table: pairTable(t),
				RoundSeconds: 360, MinResetInterval: 1920,
			}
			res, err := Run(cfg, Jobs{mkjob("one", 1000, 0), mkjob("one", 1000, 0)}.Source())
			if err != nil {
				t.Fatal(err)
			}
			for _, j := range res.Jobs {
				if !near(j.JCT(), want) || j.Start != 0 {
					t.Errorf("job %d: start %v JCT %v, want 0 and %v (co-located throughout)", j.ID, j.Start, j.JCT(), want)
				}
			}
			if res.Preemptions != 0 {
				t.Errorf("%d preemptions, want 0", res.Preemptions)
			}
			// One allocation, when both jobs arrive; none after they finish.
			if res.Allocations != 1 || res.LPs != 2 || res.LargestLP != [2]int{3, 4} || res.PeakActive != 2 {
				t.Errorf("allocations %d, LPs %d, largest %v, peak %d; want 1, 2, [3 4], 2",
					res.Allocations, res.LPs, res.LargestLP, res.PeakActive)
			}
		})
	}
}

func TestRowsMustNameOfferedJobsAndPairs(t *testing.T) {
	cases := map[string]struct {
		rows    [][]string
		wantErr string
	}{
		"unknown job":  {[][]string{{"7"}}, `names job "7", which is not in the system`},
		"unknown pair": {[][]string{{"0", "7"}}, `names pair "0+7", which was not offered`},
		"three jobs":   {[][]string{{"0", "1", "2"}}, "names 3 jobs"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := Config{
				GPUs: map[string]int{"v100": 1}, Policy: fixedRows{rows: c.rows}, Table: pairTable(t),
				RoundSeconds: 360, MinResetInterval: 1920,
			}
			_, err := Run(cfg, Jobs{mkjob("one", 1000, 0), mkjob("one", 1000, 0)}.Source())
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("error = %v, want one containing %q", err, c.wantErr)
			}
		})
	}
}

func TestGandivaStaticMultiGPUCompletes(t *testing.T) {
	// gandiva on a contended cluster pairs jobs while they ask for more
	// GPUs than there are. This run used to stop with "jobs wait but none
	// can be scheduled": the pairs' rows named their members in drawn
	// order, the mechanism dropped them, and the paired jobs were left
	// with zero rows everywhere.
	cfg, err := Defaults()
	if err != nil {
		t.Fatal(err)
	}
	cfg.GPUs = map[string]int{"v100": 8, "p100": 8, "k80": 8}
	cfg.PolicyName = "gandiva"
	gen, err := workload.NewGenerator(cfg.Table, workload.GeneratorOptions{Jobs: 100, Seed: 0, MultiGPU: true})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(cfg, gen)
	if err != nil {
		t.Fatal(err)
	}
	if res.JobsMeasured != 100 {
		t.Errorf("%d jobs finished, want 100", res.JobsMeasured)
	}
}

func TestMatchRows(t *testing.T) {
	// Jobs a, b, c with offered pairs a+b and a+c.
	a, b, c := &job{key: "a"}, &job{key: "b"}, &job{key: "c"}
	s := &simulator{
		byKey:     map[string]*job{"a": a, "b": b, "c": c},
		active:    []*job{a, b, c},
		pairByKey: map[string]*pair{},
	}
	for _, p := range []*pair{{a: a, b: b, key: "a+b"}, {a: a, b: c, key: "a+c"}} {
		s.pairs = append(s.pairs, p)
		s.pairByKey[p.key] = p
	}
	row := func(f float64, jobs ...string) policy.Row {
		return policy.Row{Jobs: jobs, Fractions: []float64{f}}
	}
	singles := []policy.Row{row(0.5, "a"), row(0.5, "b"), row(0.5, "c")}
	with := func(extra ...policy.Row) []policy.Row { return append(append([]policy.Row{}, singles...), extra...) }
	cases := map[string]struct {
		in, want []policy.Row
		wantErr  string
	}{
		"complete":                   {in: with(row(0.2, "a", "b"), row(0.3, "a", "c")), want: with(row(0.2, "a", "b"), row(0.3, "a", "c"))},
		"reversed pair":              {in: with(row(0.2, "b", "a"), row(0.3, "a", "c")), want: with(row(0.2, "a", "b"), row(0.3, "a", "c"))},
		"unused pairs get zero rows": {in: with(row(0.3, "c", "a")), want: with(row(0.3, "a", "c"), row(0, "a", "b"))},
		"no pairs at all":            {in: with(), want: with(row(0, "a", "b"), row(0, "a", "c"))},
		"pair not offered":           {in: with(row(0.2, "b", "c")), wantErr: `pair "b+c", which was not offered`},
		"job unknown":                {in: with(row(0.2, "d")), wantErr: `job "d", which is not in the system`},
		"job missing":                {in: singles[:2], wantErr: `no row for job "c"`},
		"pair twice":                 {in: with(row(0.2, "a", "b"), row(0.2, "b", "a")), wantErr: `two rows for "a+b"`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			in := &policy.Allocation{Types: []string{"v100"}, Rows: c.in}
			before := len(in.Rows)
			lastJobs := append([]string(nil), in.Rows[len(in.Rows)-1].Jobs...)
			got, err := s.matchRows(in)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.Rows, c.want) {
				t.Errorf("rows = %v, want %v", got.Rows, c.want)
			}
			if len(in.Rows) != before || !reflect.DeepEqual(in.Rows[len(in.Rows)-1].Jobs, lastJobs) {
				t.Errorf("the policy's allocation was modified: %v", in.Rows)
			}
		})
	}
}

func TestFinishTimeFairnessPackedStaticCompletes(t *testing.T) {
	// This run used to stop with "2 jobs wait but none can be scheduled":
	// the policy left out the zero row of a pair whose members were the
	// last jobs, and the pair, winning the v100s at priority 0 on its
	// deficit, was held every round with both members.
	cfg, err := Defaults()
	if err != nil {
		t.Fatal(err)
	}
	cfg.GPUs = map[string]int{"v100": 8, "p100": 8, "k80": 8}
	cfg.PolicyName = "finish_time_fairness_packed"
	gen, err := workload.NewGenerator(cfg.Table, workload.GeneratorOptions{Jobs: 40, Seed: 1, MultiGPU: true})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Seed = 1
	res, err := Run(cfg, gen)
	if err != nil {
		t.Fatal(err)
	}
	if res.JobsMeasured != 40 {
		t.Errorf("%d jobs finished, want 40", res.JobsMeasured)
	}
}
