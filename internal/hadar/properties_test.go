package hadar

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gavel-slurm/gavel-slurm/rounds"
)

// randomCase draws a cluster of idle GPUs and a job from seed bytes.
func randomCase(r *rand.Rand) ([]FreeServer, Job, float64) {
	types := []string{"a", "b", "c", "d"}
	rates := map[string]float64{}
	for _, t := range types {
		switch r.IntN(5) {
		case 0:
			rates[t] = 0
		case 1:
			rates[t] = float64(1 + r.IntN(3)) // ties
		default:
			rates[t] = 0.1 + r.Float64()*10
		}
	}
	n := 1 + r.IntN(7)
	var servers []FreeServer
	for i := range n {
		size := 1 + r.IntN(8)
		s := FreeServer{ID: fmt.Sprintf("s%d", i), Type: types[r.IntN(len(types))]}
		for g := range size {
			if r.IntN(3) > 0 {
				s.GPUs = append(s.GPUs, g)
			}
		}
		r.Shuffle(len(s.GPUs), func(a, b int) { s.GPUs[a], s.GPUs[b] = s.GPUs[b], s.GPUs[a] })
		servers = append(servers, s)
	}
	f := []float64{1, 0.75, 0.5, 0.3, 0.9}[r.IntN(5)]
	return servers, Job{ID: "j", Scale: 1 + r.IntN(10), Rates: rates}, f
}

// optimum is the best rate by the model: one whole server, or the
// slowest of the fastest types that hold k GPUs in all, times f.
func optimum(servers []FreeServer, job Job, f float64) float64 {
	best := 0.0
	for _, s := range servers {
		if len(s.GPUs) >= job.Scale && job.Rates[s.Type] > 0 {
			best = math.Max(best, job.Rates[s.Type])
		}
	}
	for _, s := range servers {
		r := job.Rates[s.Type]
		if r <= 0 {
			continue
		}
		total := 0
		for _, o := range servers {
			if job.Rates[o.Type] >= r {
				total += len(o.GPUs)
			}
		}
		if total >= job.Scale {
			best = math.Max(best, f*r)
		}
	}
	return best
}

func checkPlacement(t *testing.T, servers []FreeServer, job Job, f float64, p Placement) {
	t.Helper()
	if len(p.Slots) != job.Scale {
		t.Fatalf("%d slots for scale %d", len(p.Slots), job.Scale)
	}
	seen := map[rounds.Slot]bool{}
	idx := map[string]FreeServer{}
	for _, s := range servers {
		idx[s.ID] = s
	}
	for _, sl := range p.Slots {
		if seen[sl] {
			t.Fatalf("slot %v twice", sl)
		}
		seen[sl] = true
		s, ok := idx[sl.Server]
		if !ok {
			t.Fatalf("unknown server %v", sl)
		}
		found := false
		for _, g := range s.GPUs {
			found = found || g == sl.GPU
		}
		if !found {
			t.Fatalf("slot %v not idle", sl)
		}
	}
	slowest := math.Inf(1)
	for _, pt := range p.Parts {
		slowest = math.Min(slowest, job.Rates[pt.Type])
	}
	if p.Rate > slowest || p.Rate <= 0 {
		t.Fatalf("rate %v, slowest %v", p.Rate, slowest)
	}
	want, _ := job.Rate(p.Parts, f)
	if want != p.Rate {
		t.Fatalf("rate %v, model says %v", p.Rate, want)
	}
}

func TestBestProperties(t *testing.T) {
	for seed := range uint64(200000) {
		r := rand.New(rand.NewPCG(seed, 7))
		servers, job, f := randomCase(r)
		idle, err := NewIdle(servers)
		if err != nil {
			t.Fatal(err)
		}
		p, ok, err := Best(job, idle, nil, Options{SpanFactor: f})
		if err != nil {
			t.Fatal(err)
		}
		opt := optimum(servers, job, f)
		if !ok {
			if opt > 0 {
				t.Fatalf("seed %d: none found, optimum %v", seed, opt)
			}
			continue
		}
		checkPlacement(t, servers, job, f, p)
		if math.Abs(p.Rate-opt) > 1e-12*opt {
			t.Fatalf("seed %d: rate %v, optimum %v (%+v) job %+v servers %+v", seed, p.Rate, opt, p.Parts, job, servers)
		}
		// Single-type: never mixed.
		ps, ok, err := Best(job, idle, nil, Options{SpanFactor: f, SingleType: true})
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			checkPlacement(t, servers, job, f, ps)
			if Mixed(ps.Parts) {
				t.Fatalf("seed %d: single type mixed", seed)
			}
		}
	}
}

// Fill over several random jobs never double-books.
func TestFillProperties(t *testing.T) {
	for seed := range uint64(50000) {
		r := rand.New(rand.NewPCG(seed, 9))
		servers, _, f := randomCase(r)
		var reqs []Request
		for i := range 1 + r.IntN(5) {
			_, job, _ := randomCase(r)
			job.ID = fmt.Sprint(i)
			reqs = append(reqs, Request{Job: job})
		}
		idle, _ := NewIdle(servers)
		out, err := Fill(reqs, idle, Options{SpanFactor: f})
		if err != nil {
			t.Fatal(err)
		}
		noSlotTwice(t, fmt.Sprintf("seed %d", seed), out)
	}
}

// A job's previous GPUs, as given, may list one GPU twice: Fill does not
// keep such a placement (one GPU is not two workers).
func TestFillPreviousDuplicateSlot(t *testing.T) {
	idle := idleOf(t, free("s0", "v100", 2))
	job := Job{ID: "j", Scale: 2, Rates: map[string]float64{"v100": 1}}
	prev := []rounds.Slot{{Server: "s0", GPU: 0}, {Server: "s0", GPU: 0}}
	out, err := Fill([]Request{{Job: job, Previous: prev}, {Job: Job{ID: "other", Scale: 1, Rates: job.Rates}}}, idle, Options{SpanFactor: 1})
	if err != nil {
		t.Fatal(err)
	}
	noSlotTwice(t, "previous slot twice", out)
}

// noSlotTwice fails the test when two placements (or one, twice) hold the
// same GPU.
func noSlotTwice(t *testing.T, what string, out []Placement) {
	t.Helper()
	seen := map[rounds.Slot]string{}
	for _, p := range out {
		for _, sl := range p.Slots {
			if o, dup := seen[sl]; dup {
				t.Fatalf("%s: slot %v booked by %s and %s: %+v", what, sl, o, p.Job, out)
			}
			seen[sl] = p.Job
		}
	}
}
