package tepreempt

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"
)

// benchRequest is the paper's cluster with every node full: 84 nodes of
// 8 GPUs, 32 CPUs and 256 GB, each running four BE jobs (336 candidates),
// and a TE job of 4 GPUs that only the 4-GPU jobs, one node in seven, can
// make room for alone.
func benchRequest() Request {
	capacity := Resources{GPUs: 8, CPUs: 32, MemMB: 256 << 10}
	r := rand.New(rand.NewPCG(1, 2))
	req := Request{Job: "te", Demand: Resources{GPUs: 4, CPUs: 8, MemMB: 32 << 10}}
	for n := range 84 {
		id := strconv.Itoa(n)
		req.Nodes = append(req.Nodes, Node{ID: id, Capacity: capacity})
		for k := range 4 {
			gpus := 2
			if n%7 == 0 && k == 0 {
				gpus = 4
			}
			req.Candidates = append(req.Candidates, Candidate{
				Job: id + "." + strconv.Itoa(k), Node: id,
				Demand:      Resources{GPUs: gpus, CPUs: 8, MemMB: 64 << 10},
				Grace:       time.Duration(r.IntN(600)) * time.Second,
				Preemptions: r.IntN(2),
				Remaining:   time.Duration(r.IntN(3600)) * time.Minute,
			})
		}
	}
	return req
}

func BenchmarkChoose(b *testing.B) {
	req := benchRequest()
	for _, c := range []Chooser{FitGpp{Weight: 4, MaxPreemptions: 1}, LRTP{}, Random{Rand: rand.New(rand.NewPCG(3, 4))}} {
		b.Run(c.Name(), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Choose(req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
