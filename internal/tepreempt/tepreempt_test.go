package tepreempt

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// gpus8 is a node of 8 GPUs and nothing else tracked.
var gpus8 = Resources{GPUs: 8}

func gpuNode(id string, free int) Node {
	return Node{ID: id, Capacity: gpus8, Free: Resources{GPUs: free}}
}

func cand(job, node string, gpus int, grace time.Duration) Candidate {
	return Candidate{Job: job, Node: node, Demand: Resources{GPUs: gpus}, Grace: grace}
}

func victimIDs(c Choice) []string {
	var ids []string
	for _, v := range c.Victims {
		ids = append(ids, v.Job)
	}
	return ids
}

// fitCase: node A has nothing free, node B one GPU; the TE job wants 4.
//
//	job  node GPUs grace  size/max      grace/max
//	a1   A    2    60 s   0.25/0.75=1/3  0.5    never fits (0+2 < 4)
//	b1   B    3    120 s  0.375/0.75=0.5 1      fits (1+3)
//	a2   A    6    30 s   0.75/0.75=1    0.25   fits (0+6)
//
// a1 has the lowest score at any weight but frees too little alone.
func fitCase() Request {
	return Request{
		Job:    "te1",
		Demand: Resources{GPUs: 4},
		Nodes:  []Node{gpuNode("A", 0), gpuNode("B", 1)},
		Candidates: []Candidate{
			cand("a1", "A", 2, 60*time.Second),
			cand("b1", "B", 3, 120*time.Second),
			cand("a2", "A", 6, 30*time.Second),
		},
	}
}

func TestFitGppHandChecked(t *testing.T) {
	capped := func(req Request, job string, n int) Request {
		for i := range req.Candidates {
			if req.Candidates[i].Job == job {
				req.Candidates[i].Preemptions = n
			}
		}
		return req
	}
	cases := []struct {
		name      string
		rule      FitGpp
		req       Request
		victim    string
		node      string
		score     float64
		whichRule string
	}{
		// a2: 1 + 1×0.25 = 1.25 beats b1: 0.5 + 1×1 = 1.5.
		{"weight 1 prefers the short grace", FitGpp{Weight: 1}, fitCase(), "a2", "A", 1.25, RuleFitAlone},
		// Demand alone: b1 at 0.5 beats a2 at 1.
		{"weight 0 is demand alone", FitGpp{Weight: 0}, fitCase(), "b1", "B", 0.5, RuleFitAlone},
		// a2: 1 + 4×0.25 = 2 against b1: 0.5 + 4 = 4.5.
		{"weight 4", FitGpp{Weight: 4}, fitCase(), "a2", "A", 2, RuleFitAlone},
		// a2 preempted once already: b1 at 1.5. The maxima still include
		// a2 (a scale over the eligible jobs only would give b1 2.0).
		{"cap 1 skips a job preempted once", FitGpp{Weight: 1, MaxPreemptions: 1}, capped(fitCase(), "a2", 1), "b1", "B", 1.5, RuleFitAlone},
		{"cap 2 still allows it", FitGpp{Weight: 1, MaxPreemptions: 2}, capped(fitCase(), "a2", 1), "a2", "A", 1.25, RuleFitAlone},
		{"no cap", FitGpp{Weight: 1}, capped(fitCase(), "a2", 5), "a2", "A", 1.25, RuleFitAlone},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.rule.Choose(tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if got.Rule != tc.whichRule || got.Node != tc.node || len(got.Victims) != 1 || got.Victims[0].Job != tc.victim {
				t.Fatalf("got %+v, want %s on %s by %s", got, tc.victim, tc.node, tc.whichRule)
			}
			if math.Abs(got.Victims[0].Score-tc.score) > 1e-12 {
				t.Errorf("score %v, want %v", got.Victims[0].Score, tc.score)
			}
		})
	}
}

func TestFitGppTiesGoToTheFirstListed(t *testing.T) {
	twins := []Candidate{cand("x", "A", 4, time.Minute), cand("y", "B", 4, time.Minute)}
	for _, order := range [][]int{{0, 1}, {1, 0}} {
		req := Request{Job: "te", Demand: Resources{GPUs: 4}, Nodes: []Node{gpuNode("A", 0), gpuNode("B", 0)}}
		for _, i := range order {
			req.Candidates = append(req.Candidates, twins[i])
		}
		for range 3 { // the same answer every time
			got, err := FitGpp{Weight: 1}.Choose(req)
			if err != nil {
				t.Fatal(err)
			}
			if want := twins[order[0]].Job; len(got.Victims) != 1 || got.Victims[0].Job != want {
				t.Fatalf("order %v: got %v, want %s", order, victimIDs(got), want)
			}
		}
	}
}

func TestFreeRoomNeedsNoVictim(t *testing.T) {
	// Both B and C can hold 4 GPUs; C leaves less unused.
	req := Request{
		Job: "te", Demand: Resources{GPUs: 4},
		Nodes:      []Node{gpuNode("A", 2), gpuNode("B", 8), gpuNode("C", 5)},
		Candidates: []Candidate{cand("a", "A", 6, 0)},
	}
	for _, c := range []Chooser{FitGpp{Weight: 1}, LRTP{}, Random{Rand: rand.New(rand.NewPCG(1, 2))}} {
		got, err := c.Choose(req)
		if err != nil {
			t.Fatalf("%s: %v", c.Name(), err)
		}
		if got.Rule != RuleFree || got.Node != "C" || len(got.Victims) != 0 {
			t.Errorf("%s: got %+v, want node C without victims", c.Name(), got)
		}
	}
}

func TestNoRoom(t *testing.T) {
	cases := []struct {
		name string
		req  Request
		cap  int
	}{
		{"larger than any node", Request{Job: "te", Demand: Resources{GPUs: 9},
			Nodes: []Node{gpuNode("A", 0)}, Candidates: []Candidate{cand("a", "A", 8, 0)}}, 0},
		{"every candidate at the cap", Request{Job: "te", Demand: Resources{GPUs: 4},
			Nodes: []Node{gpuNode("A", 0)}, Candidates: []Candidate{{Job: "a", Node: "A", Demand: Resources{GPUs: 8}, Preemptions: 1}}}, 1},
		{"nothing running", Request{Job: "te", Demand: Resources{GPUs: 4}, Nodes: []Node{gpuNode("A", 3)}}, 0},
		{"the CPUs never fit", Request{Job: "te", Demand: Resources{GPUs: 1, CPUs: 8},
			Nodes:      []Node{{ID: "A", Capacity: Resources{GPUs: 8, CPUs: 32}, Free: Resources{GPUs: 4, CPUs: 0}}},
			Candidates: []Candidate{{Job: "a", Node: "A", Demand: Resources{GPUs: 4, CPUs: 4}}}}, 0},
	}
	for _, tc := range cases {
		for _, c := range []Chooser{FitGpp{Weight: 1, MaxPreemptions: tc.cap}, LRTP{MaxPreemptions: tc.cap}, Random{MaxPreemptions: tc.cap, Rand: rand.New(rand.NewPCG(3, 4))}} {
			got, err := c.Choose(tc.req)
			if !errors.Is(err, ErrNoRoom) || len(got.Victims) != 0 {
				t.Errorf("%s, %s: got %+v, %v; want no victims and ErrNoRoom", tc.name, c.Name(), got, err)
			}
		}
	}
}

func TestFitGppCombinedWhenNoSingleJobFits(t *testing.T) {
	// A: four 2-GPU jobs, nothing free: two victims make 4 GPUs.
	// B: one GPU free, seven 1-GPU jobs with no grace: three victims.
	// Scores (weight 1, max size 0.25, max grace 40 s): a_k = 1 + g/40,
	// b_k = 0.5. B's three cost 1.5 < A's two 2.75, but fewer victims
	// come first: A, with its two shortest grace periods.
	req := Request{Job: "te", Demand: Resources{GPUs: 4}, Nodes: []Node{gpuNode("A", 0), gpuNode("B", 1)}}
	for i, g := range []time.Duration{40, 20, 10, 30} {
		req.Candidates = append(req.Candidates, cand("a"+string(rune('1'+i)), "A", 2, g*time.Second))
	}
	for i := range 7 {
		req.Candidates = append(req.Candidates, cand("b"+string(rune('1'+i)), "B", 1, 0))
	}
	got, err := FitGpp{Weight: 1}.Choose(req)
	if err != nil {
		t.Fatal(err)
	}
	if got.Rule != RuleCombined || got.Node != "A" || !slices.Equal(victimIDs(got), []string{"a3", "a2"}) {
		t.Fatalf("got %+v, want a3 then a2 on A", got)
	}
	if got.Victims[0].Score != 1.25 || got.Victims[1].Score != 1.5 {
		t.Errorf("scores %v, %v; want 1.25, 1.5", got.Victims[0].Score, got.Victims[1].Score)
	}
	// With A capped out, B's three are the only way.
	for i := range 4 {
		req.Candidates[i].Preemptions = 1
	}
	got, err = FitGpp{Weight: 1, MaxPreemptions: 1}.Choose(req)
	if err != nil {
		t.Fatal(err)
	}
	if got.Node != "B" || !slices.Equal(victimIDs(got), []string{"b1", "b2", "b3"}) {
		t.Fatalf("capped: got %+v, want b1..b3 on B", got)
	}
}

func TestFitGppCPUBoundNode(t *testing.T) {
	// The node has GPUs free but no CPUs: x frees CPUs too few for the TE
	// job (8 < 16), y frees enough; the size counts each resource against
	// its own capacity.
	capacity := Resources{GPUs: 8, CPUs: 32, MemMB: 256 << 10}
	req := Request{
		Job: "te", Demand: Resources{GPUs: 1, CPUs: 16, MemMB: 16 << 10},
		Nodes: []Node{{ID: "A", Capacity: capacity, Free: Resources{GPUs: 4, CPUs: 0, MemMB: 128 << 10}}},
		Candidates: []Candidate{
			{Job: "x", Node: "A", Demand: Resources{GPUs: 1, CPUs: 8, MemMB: 32 << 10}},
			{Job: "y", Node: "A", Demand: Resources{GPUs: 3, CPUs: 24, MemMB: 96 << 10}},
		},
	}
	got, err := FitGpp{Weight: 1}.Choose(req)
	if err != nil {
		t.Fatal(err)
	}
	// y: 3/8 + 24/32 + 96/256 = 1.5, the maximum: score 1.
	if len(got.Victims) != 1 || got.Victims[0].Job != "y" || got.Victims[0].Score != 1 {
		t.Fatalf("got %+v, want y with score 1", got)
	}
}

func TestLRTPHandChecked(t *testing.T) {
	hours := func(h int) time.Duration { return time.Duration(h) * time.Hour }
	with := func(c Candidate, rem time.Duration, n int) Candidate { c.Remaining, c.Preemptions = rem, n; return c }
	cases := []struct {
		name    string
		cap     int
		cands   []Candidate
		node    string
		victims []string
	}{
		{"longest first until its node fits", 0, []Candidate{
			with(cand("a1", "A", 4, 0), hours(1), 0),
			with(cand("b1", "B", 2, 0), hours(10), 0),
			with(cand("b2", "B", 2, 0), hours(5), 0),
		}, "B", []string{"b1", "b2"}},
		// a1 is longest but frees only 2 GPUs on A: preempted anyway,
		// then b1 makes room on B.
		{"blind to placement", 0, []Candidate{
			with(cand("a1", "A", 2, 0), hours(20), 0),
			with(cand("b1", "B", 4, 0), hours(10), 0),
		}, "B", []string{"a1", "b1"}},
		{"cap respected", 1, []Candidate{
			with(cand("a1", "A", 2, 0), hours(20), 1),
			with(cand("b1", "B", 4, 0), hours(10), 0),
		}, "B", []string{"b1"}},
		{"ties to the first listed", 0, []Candidate{
			with(cand("a1", "A", 4, 0), hours(3), 0),
			with(cand("b1", "B", 4, 0), hours(3), 0),
		}, "A", []string{"a1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := Request{Job: "te", Demand: Resources{GPUs: 4}, Nodes: []Node{gpuNode("A", 0), gpuNode("B", 0)}, Candidates: tc.cands}
			got, err := LRTP{MaxPreemptions: tc.cap}.Choose(req)
			if err != nil {
				t.Fatal(err)
			}
			if got.Rule != RuleLRTP || got.Node != tc.node || !slices.Equal(victimIDs(got), tc.victims) {
				t.Fatalf("got %s %v by %s, want %s %v", got.Node, victimIDs(got), got.Rule, tc.node, tc.victims)
			}
		})
	}
}

func TestRandomIsSeededAndMakesRoom(t *testing.T) {
	req := Request{Job: "te", Demand: Resources{GPUs: 4}}
	for n := range 4 {
		id := string(rune('A' + n))
		req.Nodes = append(req.Nodes, gpuNode(id, 1))
		for k := range 4 {
			req.Candidates = append(req.Candidates, cand(id+string(rune('1'+k)), id, 1+k%2, 0))
		}
	}
	firsts := map[string]bool{}
	for seed := range uint64(30) {
		choose := func() Choice {
			got, err := Random{Rand: rand.New(rand.NewPCG(seed, 99))}.Choose(req)
			if err != nil {
				t.Fatal(err)
			}
			return got
		}
		got := choose()
		if again := choose(); !slices.Equal(victimIDs(got), victimIDs(again)) {
			t.Fatalf("seed %d: %v then %v", seed, victimIDs(got), victimIDs(again))
		}
		freed := 1 // the node's free GPU
		for _, v := range got.Victims {
			if v.Node == got.Node {
				freed += req.Candidates[slices.IndexFunc(req.Candidates, func(c Candidate) bool { return c.Job == v.Job })].Demand.GPUs
			}
		}
		if freed < 4 || got.Rule != RuleRandom {
			t.Fatalf("seed %d: %v leaves node %s with %d GPUs", seed, victimIDs(got), got.Node, freed)
		}
		firsts[got.Victims[0].Job] = true
	}
	if len(firsts) < 4 {
		t.Errorf("30 seeds drew only %d distinct first victims", len(firsts))
	}
	if _, err := (Random{}).Choose(req); err == nil || errors.Is(err, ErrNoRoom) {
		t.Errorf("no generator: got %v", err)
	}
}

func TestReasons(t *testing.T) {
	got, err := FitGpp{Weight: 1}.Choose(fitCase())
	if err != nil {
		t.Fatal(err)
	}
	if r := got.Victims[0].Reason; !strings.Contains(r, "preempted for TE job te1 on node A, grace 30 s") {
		t.Errorf("reason %q", r)
	}
}

func TestMalformedRequests(t *testing.T) {
	cases := []struct {
		name string
		req  Request
	}{
		{"unknown node", Request{Job: "te", Nodes: []Node{gpuNode("A", 0)}, Candidates: []Candidate{cand("a", "Z", 1, 0)}}},
		{"node twice", Request{Job: "te", Nodes: []Node{gpuNode("A", 0), gpuNode("A", 0)}}},
		{"candidate twice", Request{Job: "te", Nodes: []Node{gpuNode("A", 0)}, Candidates: []Candidate{cand("a", "A", 1, 0), cand("a", "A", 1, 0)}}},
		{"negative grace", Request{Job: "te", Nodes: []Node{gpuNode("A", 0)}, Candidates: []Candidate{cand("a", "A", 1, -time.Second)}}},
		{"negative demand", Request{Job: "te", Demand: Resources{GPUs: -1}}},
	}
	for _, tc := range cases {
		for _, c := range []Chooser{FitGpp{}, LRTP{}, Random{Rand: rand.New(rand.NewPCG(1, 1))}} {
			if _, err := c.Choose(tc.req); err == nil || errors.Is(err, ErrNoRoom) {
				t.Errorf("%s, %s: got %v, want a request error", tc.name, c.Name(), err)
			}
		}
	}
}
