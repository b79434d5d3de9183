package clpmodel

import (
	"math/rand/v2"
	"testing"
)

func benchModel(b *testing.B) (*Model, [][]float64) {
	a, p := randomLP(rand.New(rand.NewPCG(5, 6)), 500, 800)
	m, err := Load(p)
	if err != nil {
		b.Fatal(err)
	}
	if err := m.Solve(); err != nil {
		b.Fatal(err)
	}
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
		m.Solve()
	}
	b.ReportMetric(float64(m.Iterations()), "iters")
}

func BenchmarkResolveAfterRowBound(b *testing.B) {
	m, _ := benchModel(b)
	for i := 0; b.Loop(); i++ {
		m.SetRowBounds(0, -1e30, 100+float64(i%2)*1e-6)
		m.Solve()
	}
	b.ReportMetric(float64(m.Iterations()), "iters")
}

func BenchmarkResolveUnchanged(b *testing.B) {
	m, _ := benchModel(b)
	for b.Loop() {
		m.Solve()
	}
}
