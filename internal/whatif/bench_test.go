package whatif

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/internal/history"
	"github.com/gavel-slurm/gavel-slurm/internal/sim"
	"github.com/gavel-slurm/gavel-slurm/rounds"
)

// siteHistory is n finished jobs on 96 GPUs in nodes of 8, submitted
// faster than they run so that a queue builds: 1-8 GPUs, half of them
// typed, 10 minutes to 10 hours each, two accounts.
func siteHistory(n int) (*history.History, Cluster) {
	rng := rand.New(rand.NewPCG(1, 2))
	types := []string{"a100", "v100", "k80"}
	h := &history.History{}
	at := 0.0
	for i := range n {
		at += rng.ExpFloat64() * 300
		gpus := []int{1, 1, 1, 2, 4, 8}[rng.IntN(6)]
		run := 600 + rng.Float64()*36000
		j := hjob(i+1, []string{"physics", "biology"}[i%2], types[rng.IntN(3)], gpus, at, at+1, at+1+run)
		j.TimeLimit = time.Duration(2*run) * time.Second
		j.Priority = rng.IntN(1000)
		if i%2 == 0 {
			j.RequestedType = j.GPUType
		}
		j.ID = strconv.Itoa(i + 1)
		h.Jobs = append(h.Jobs, j)
	}
	return h, Cluster{GPUs: map[string]int{"a100": 32, "v100": 32, "k80": 32}, PerServer: map[string]int{"a100": 8, "v100": 8, "k80": 8}}
}

// The Slurm baseline replay of 5,000 jobs (the queue reaches hundreds).
func BenchmarkReplaySlurm5000(b *testing.B) {
	h, cl := siteHistory(5000)
	w, err := Build(h, cl, Sources{Speed: map[string]float64{"a100": 3, "v100": 2, "k80": 1}}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ReplaySlurm(w); err != nil {
			b.Fatal(err)
		}
	}
}

// A policy replay of the same 5,000 jobs, 6-minute rounds.
func BenchmarkReplayPolicy5000(b *testing.B) {
	h, cl := siteHistory(5000)
	w, err := Build(h, cl, Sources{Speed: map[string]float64{"a100": 3, "v100": 2, "k80": 1}}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	base, err := sim.Defaults()
	if err != nil {
		b.Fatal(err)
	}
	base.Mechanism = rounds.VariantRestart
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ReplayPolicy(w, base, "max_min_fairness_perf", 0); err != nil {
			b.Fatal(err)
		}
	}
}
