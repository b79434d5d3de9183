package hadar

import (
	"math"
	"slices"
	"testing"

	"github.com/gavel-slurm/gavel-slurm/rounds"
)

// idleOf builds an Idle from "server type idle-count" triples; GPUs are
// numbered from 0.
func idleOf(t *testing.T, servers ...FreeServer) *Idle {
	t.Helper()
	id, err := NewIdle(servers)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func free(id, typ string, n int) FreeServer {
	s := FreeServer{ID: id, Type: typ}
	for g := range n {
		s.GPUs = append(s.GPUs, g)
	}
	return s
}

func TestBest(t *testing.T) {
	rates := map[string]float64{"v100": 10, "p100": 5, "k80": 2}
	tests := []struct {
		name       string
		scale      int
		idle       []FreeServer
		opts       Options
		wantOK     bool
		wantCounts string
		wantRate   float64
		servers    int
	}{
		// The K80 bounds the step whatever the split, so the mix takes as
		// many K80s as it can and leaves the V100s to others.
		{"the paper's case: 3 V100 and 3 K80 free, a 4-GPU job runs on a mix",
			4, []FreeServer{free("v0", "v100", 3), free("k0", "k80", 3)},
			Options{SpanFactor: 0.75}, true, "k80:3,v100:1", 2 * 0.75, 2},
		{"Gavel's rule: the same job waits",
			4, []FreeServer{free("v0", "v100", 3), free("k0", "k80", 3)},
			Options{SpanFactor: 0.75, SingleType: true}, false, "", 0, 0},
		{"a whole fast server beats everything",
			4, []FreeServer{free("v0", "v100", 4), free("p0", "p100", 4), free("k0", "k80", 4)},
			Options{SpanFactor: 1}, true, "v100:4", 10, 1},
		{"fast types with a span beat a slow single server",
			4, []FreeServer{free("v0", "v100", 2), free("p0", "p100", 2), free("k0", "k80", 4)},
			Options{SpanFactor: 0.75}, true, "p100:2,v100:2", 5 * 0.75, 2},
		{"a harsh span penalty keeps the job on one slow server",
			4, []FreeServer{free("v0", "v100", 2), free("p0", "p100", 2), free("k0", "k80", 4)},
			Options{SpanFactor: 0.3}, true, "k80:4", 2, 1},
		{"the bottleneck type is filled first, keeping the fast GPUs free",
			4, []FreeServer{free("v0", "v100", 3), free("p0", "p100", 3), free("p1", "p100", 1)},
			Options{SpanFactor: 0.75}, true, "p100:4", 5 * 0.75, 2},
		{"not enough GPUs in all",
			8, []FreeServer{free("v0", "v100", 3), free("k0", "k80", 4)},
			Options{SpanFactor: 1}, false, "", 0, 0},
		{"a single GPU goes to the fastest type",
			1, []FreeServer{free("k0", "k80", 4), free("v0", "v100", 1)},
			Options{SpanFactor: 0.5}, true, "v100:1", 10, 1},
		{"as few servers as possible",
			8, []FreeServer{free("v0", "v100", 1), free("v1", "v100", 4), free("v2", "v100", 4), free("v3", "v100", 2)},
			Options{SpanFactor: 0.9}, true, "v100:8", 9, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job := Job{ID: "j", Scale: tt.scale, Rates: rates}
			p, ok, err := Best(job, idleOf(t, tt.idle...), nil, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if ok != tt.wantOK {
				t.Fatalf("found %v, want %v (%+v)", ok, tt.wantOK, p)
			}
			if !ok {
				return
			}
			if got := FormatCounts(Counts(p.Parts)); got != tt.wantCounts {
				t.Errorf("counts %s, want %s", got, tt.wantCounts)
			}
			if math.Abs(p.Rate-tt.wantRate) > 1e-12 {
				t.Errorf("rate %v, want %v", p.Rate, tt.wantRate)
			}
			if got := Servers(p.Parts); got != tt.servers {
				t.Errorf("%d servers, want %d", got, tt.servers)
			}
			if len(p.Slots) != tt.scale {
				t.Errorf("%d slots for scale %d", len(p.Slots), tt.scale)
			}
			if r, err := job.Rate(p.Parts, tt.opts.SpanFactor); err != nil || r != p.Rate {
				t.Errorf("placement rate %v disagrees with the model's %v (%v)", p.Rate, r, err)
			}
		})
	}
}

// Best is optimal: no assignment of the job to the idle GPUs is faster.
// Checked by brute force over every count vector on small clusters.
func TestBestIsFastest(t *testing.T) {
	rates := map[string]float64{"v100": 9, "p100": 4, "k80": 3}
	clusters := [][]FreeServer{
		{free("v0", "v100", 1), free("v1", "v100", 2), free("p0", "p100", 3), free("k0", "k80", 4)},
		{free("v0", "v100", 3), free("p0", "p100", 1), free("p1", "p100", 1), free("k0", "k80", 2)},
		{free("v0", "v100", 4), free("k0", "k80", 4), free("k1", "k80", 4)},
	}
	for ci, cl := range clusters {
		for scale := 1; scale <= 8; scale++ {
			for _, span := range []float64{0.2, 0.5, 0.8, 1} {
				job := Job{ID: "j", Scale: scale, Rates: rates}
				p, ok, err := Best(job, idleOf(t, cl...), nil, Options{SpanFactor: span})
				if err != nil {
					t.Fatal(err)
				}
				want := bruteBest(job, cl, span)
				got := 0.0
				if ok {
					got = p.Rate
				}
				if math.Abs(got-want) > 1e-12 {
					t.Errorf("cluster %d scale %d span %v: rate %v, brute force %v", ci, scale, span, got, want)
				}
			}
		}
	}
}

// bruteBest tries every number of GPUs on every server.
func bruteBest(job Job, cl []FreeServer, span float64) float64 {
	best := 0.0
	counts := make([]int, len(cl))
	var walk func(i, left int)
	walk = func(i, left int) {
		if i == len(cl) {
			if left != 0 {
				return
			}
			var parts []Part
			for k, n := range counts {
				if n > 0 {
					parts = append(parts, Part{cl[k].ID, cl[k].Type, n})
				}
			}
			if r, err := job.Rate(parts, span); err == nil {
				best = math.Max(best, r)
			}
			return
		}
		for n := 0; n <= min(left, len(cl[i].GPUs)); n++ {
			counts[i] = n
			walk(i+1, left-n)
		}
		counts[i] = 0
	}
	walk(0, job.Scale)
	return best
}

func TestFill(t *testing.T) {
	rates := map[string]float64{"v100": 10, "k80": 2}
	opts := Options{SpanFactor: 0.8}
	t.Run("in order, later jobs take what is left", func(t *testing.T) {
		idle := idleOf(t, free("v0", "v100", 3), free("k0", "k80", 3))
		reqs := []Request{
			{Job: Job{ID: "a", Scale: 4, Rates: rates}},
			{Job: Job{ID: "b", Scale: 4, Rates: rates}},
			{Job: Job{ID: "c", Scale: 2, Rates: rates}},
		}
		got, err := Fill(reqs, idle, opts)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0].Job != "a" || got[1].Job != "c" {
			t.Fatalf("placed %+v, want a then c", got)
		}
		if FormatCounts(Counts(got[0].Parts)) != "k80:3,v100:1" || FormatCounts(Counts(got[1].Parts)) != "v100:2" {
			t.Errorf("a on %s, c on %s", FormatCounts(Counts(got[0].Parts)), FormatCounts(Counts(got[1].Parts)))
		}
		if idle.Total() != 0 {
			t.Errorf("%d GPUs left idle", idle.Total())
		}
	})
	t.Run("a held placement is kept when still idle and as fast", func(t *testing.T) {
		idle := idleOf(t, free("v0", "v100", 4), free("k0", "k80", 4))
		prev := []rounds.Slot{{Server: "v0", GPU: 1}, {Server: "v0", GPU: 3}, {Server: "k0", GPU: 0}, {Server: "k0", GPU: 2}}
		// The best placement is 4 V100 on one server, faster than the held mix.
		got, err := Fill([]Request{{Job: Job{ID: "a", Scale: 4, Rates: rates}, Previous: prev}}, idle, opts)
		if err != nil {
			t.Fatal(err)
		}
		if got[0].Kept || FormatCounts(Counts(got[0].Parts)) != "v100:4" {
			t.Errorf("got %+v, want a move to 4 V100", got[0])
		}
		// With only the held GPUs' types as good as it, it stays put.
		idle = idleOf(t, free("v0", "v100", 4), free("k0", "k80", 4))
		slow := map[string]float64{"v100": 2, "k80": 2}
		got, err = Fill([]Request{{Job: Job{ID: "a", Scale: 4, Rates: slow}, Previous: prev}}, idle, Options{SpanFactor: 1})
		if err != nil {
			t.Fatal(err)
		}
		if !got[0].Kept || !slices.Equal(got[0].Slots, prev) {
			t.Errorf("got %+v, want the held slots kept", got[0])
		}
	})
}

func TestFork(t *testing.T) {
	rates := map[string]float64{"v100": 10, "k80": 2}
	idle := idleOf(t, free("v0", "v100", 2), free("v1", "v100", 4), free("k0", "k80", 4))
	reqs := []ForkRequest{
		{Job: Job{ID: "a", Scale: 2, Rates: rates}, Busy: []string{"v1"}, Copies: 5},
		{Job: Job{ID: "b", Scale: 1, Rates: rates}, Busy: []string{"k0"}, Copies: 1},
	}
	got, err := Fork(reqs, idle, Options{SpanFactor: 1, SingleType: true})
	if err != nil {
		t.Fatal(err)
	}
	perJob := map[string][]Placement{}
	for _, p := range got {
		perJob[p.Job] = append(perJob[p.Job], p)
		for _, pt := range p.Parts {
			for _, r := range reqs {
				if r.Job.ID == p.Job && slices.Contains(r.Busy, pt.Server) {
					t.Errorf("copy of %s on %s, which the job already uses", p.Job, pt.Server)
				}
			}
		}
	}
	if len(perJob["b"]) != 1 {
		t.Errorf("b has %d copies, want its one", len(perJob["b"]))
	}
	// a may not use v1 (busy) and copies never share a server: one copy on
	// v0, one on k0 (b took one V100 or one K80 first, in its turn).
	servers := map[string]bool{}
	for _, p := range perJob["a"] {
		for _, pt := range p.Parts {
			if servers[pt.Server] {
				t.Errorf("two copies of a on %s", pt.Server)
			}
			servers[pt.Server] = true
		}
	}
	if len(perJob["a"]) != 2 {
		t.Errorf("a has %d copies, want 2", len(perJob["a"]))
	}
}

// BenchmarkFill fills Hadar's cluster (15 servers of 4, a few GPUs idle on
// each) with 400 waiting jobs of mixed scales, as a busy round would.
func BenchmarkFill(b *testing.B) {
	rates := map[string]float64{"v100": 10, "p100": 5, "k80": 2}
	var servers []FreeServer
	for i, typ := range []string{"v100", "p100", "k80"} {
		for s := range 5 {
			servers = append(servers, free(typ+"-"+string(rune('0'+s)), typ, (i+s)%4))
		}
	}
	reqs := make([]Request, 400)
	for i := range reqs {
		reqs[i] = Request{Job: Job{ID: "j", Scale: []int{8, 4, 2, 1}[i%4], Rates: rates}}
	}
	opts := Options{SpanFactor: 0.75}
	b.ReportAllocs()
	for b.Loop() {
		idle, err := NewIdle(servers)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Fill(reqs, idle, opts); err != nil {
			b.Fatal(err)
		}
	}
}
