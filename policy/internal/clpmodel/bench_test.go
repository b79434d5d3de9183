package clpmodel

import (
	"math/rand/v2"
	"testing"
)

// The benchmarks time a re-solve of a solved 500 x 800 packing LP from its
// optimal basis after a change that keeps that basis optimal: what a
// probe costs beyond its pivots (CLP's start-up and factorization).

func benchModel(b *testing.B) (*Model, [][]float64) {
	a, p := randomLP(rand.New(rand.NewPCG(5, 6)), 500, 800)
	m, err := Load(p)
	if err != nil {
		b.Fatal(err)
	}
	if err := m.Solve(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(m.Close)
	return m, a
}

func BenchmarkResolveAfterCoefficient(b *testing.B) {
	m, a := benchModel(b)
	c := 0
	for a[0][c] == 0 {
		c++
	}
	for i := 0; b.Loop(); i++ {
		m.SetCoefficient(0, c, a[0][c]*(1+1e-9*float64(i%2)))
		if err := m.Solve(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(m.Iterations()), "pivots")
}

func BenchmarkResolveAfterRowBound(b *testing.B) {
	m, _ := benchModel(b)
	for i := 0; b.Loop(); i++ {
		m.SetRowBounds(0, -1e30, 100+float64(i%2)*1e-6)
		if err := m.Solve(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(m.Iterations()), "pivots")
}

func BenchmarkResolveUnchanged(b *testing.B) {
	m, _ := benchModel(b)
	for b.Loop() {
		if err := m.Solve(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(m.Iterations()), "pivots")
}
