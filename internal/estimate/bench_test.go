package estimate

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// benchTypes are the table's types and two it lacks.
var benchTypes = []string{"k80", "p100", "v100", "a100", "h100"}

// populated returns an estimator with n jobs drawn from the table, each
// measured on one to three of the five types (with 10% noise), and their
// keys.
func populated(b *testing.B, n int) (*Estimator, []JobKey) {
	e := newTestEstimator(b)
	rng := rand.New(rand.NewPCG(1, 2))
	speedUp := map[string]float64{"a100": 2, "h100": 3.5} // against v100
	keys := make([]JobKey, n)
	for i := range keys {
		r := e.ref.rows[rng.IntN(len(e.ref.rows))]
		keys[i] = JobKey{ID: fmt.Sprint(i), Model: r.key.Model, Scale: r.key.ScaleFactor}
		for _, k := range rng.Perm(len(benchTypes))[:1+rng.IntN(3)] {
			typ := benchTypes[k]
			rate := e.ref.rate(e.ref.byKey[r.key], typ)
			if f, ok := speedUp[typ]; ok {
				rate = f * e.ref.rate(e.ref.byKey[r.key], "v100")
			}
			if rate <= 0 {
				continue
			}
			m := Measurement{JobID: keys[i].ID, Model: keys[i].Model, Scale: keys[i].Scale, Type: typ,
				StepsPerSecond: rate * (0.9 + 0.2*rng.Float64()), At: t0, SinceStart: time.Hour}
			if err := e.Observe(m); err != nil {
				b.Fatal(err)
			}
		}
	}
	return e, keys
}

// BenchmarkRates is one job's question, the learned state being current.
func BenchmarkRates(b *testing.B) {
	e, keys := populated(b, 2000)
	e.Rates(keys[0], benchTypes, t0)
	i := 0
	for b.Loop() {
		e.Rates(keys[i%len(keys)], benchTypes, t0)
		i++
	}
}

// BenchmarkRound is a scheduling round: one new measurement (so the
// learned state is rebuilt), then every job's rates.
func BenchmarkRound(b *testing.B) {
	e, keys := populated(b, 2000)
	at := t0
	for b.Loop() {
		at = at.Add(time.Minute)
		if err := e.Observe(Measurement{JobID: keys[0].ID, Model: keys[0].Model, Scale: keys[0].Scale, Type: "v100", StepsPerSecond: 1 + float64(at.Unix()%7), At: at, SinceStart: time.Hour}); err != nil {
			b.Fatal(err)
		}
		for _, k := range keys {
			e.Rates(k, benchTypes, at)
		}
	}
}
