package estimate

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/policy"
)

// ModelRates (and so Models.Estimate) keeps its rates within the policies'
// range as Rates does: an extreme speed ratio does not overflow to +Inf.
func TestModelRatesFinite(t *testing.T) {
	e := newTestEstimator(t)
	// Job a: measured on k80 very slow and on a type no table knows very fast.
	for i, m := range []Measurement{
		obs("a", "", 1, "k80", 1e-300, 0),
		obs("a", "", 1, "h100", 1e9, 0),
		obs("b", "", 1, "k80", 1e-300, 0),
		obs("b", "", 1, "h100", 1e9, 0),
		obs("c", "mymodel", 1, "k80", 1e9, time.Minute),
	} {
		if err := e.Observe(m); err != nil {
			t.Fatal(i, err)
		}
	}
	got := e.Rates(JobKey{ID: "c", Model: "mymodel", Scale: 1}, []string{"h100"}, t0.Add(time.Minute))
	if v := got["h100"].StepsPerSecond; math.IsInf(v, 0) || v > policy.MaxThroughput {
		t.Errorf("Rates: h100 %v", v)
	}
	_, pooled := e.ModelRates("mymodel", 1, []string{"h100", "k80"}, t0.Add(time.Minute))
	for typ, x := range pooled {
		if v := x.StepsPerSecond; math.IsInf(v, 0) || math.IsNaN(v) || v > policy.MaxThroughput || v < policy.MinThroughput {
			t.Errorf("ModelRates: %s %v (%s), Rates gives %v", typ, v, x.Detail, got["h100"].StepsPerSecond)
		}
	}
}

// A learned estimate that underflows to 0 is brought up to MinThroughput,
// not taken for the table's 0 ("cannot run").
func TestRatesUnderflowIsNotZero(t *testing.T) {
	e := newTestEstimator(t)
	for _, m := range []Measurement{
		obs("a", "", 1, "k80", 1e9, 0),
		obs("a", "", 1, "h100", 1e-300, 0),
		obs("c", "", 1, "k80", 1e-300, time.Minute),
	} {
		if err := e.Observe(m); err != nil {
			t.Fatal(err)
		}
	}
	got := e.Rates(JobKey{ID: "c", Scale: 1}, []string{"h100"}, t0.Add(time.Minute))
	if v := got["h100"].StepsPerSecond; !(v > 0) {
		t.Errorf("h100: %v (%s %s), want a positive rate", v, got["h100"].Source, got["h100"].Detail)
	}
}

// The same estimator asked twice gives the same figures.
func TestModelRatesDeterministic(t *testing.T) {
	e := newTestEstimator(t)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 40 {
		for _, typ := range []string{"k80", "p100", "v100", "h100"} {
			if err := e.Observe(obs(fmt.Sprint(i), "ResNet50_BS64", 1, typ, 0.1+r.Float64()*100, time.Minute)); err != nil {
				t.Fatal(err)
			}
		}
	}
	types := []string{"k80", "p100", "v100", "h100"}
	_, first := e.ModelRates("ResNet50_BS64", 1, types, t0.Add(time.Minute))
	for n := range 200 {
		_, again := e.ModelRates("ResNet50_BS64", 1, types, t0.Add(time.Minute))
		for _, typ := range types {
			if again[typ].StepsPerSecond != first[typ].StepsPerSecond {
				t.Fatalf("call %d: %s %v then %v", n, typ, first[typ].StepsPerSecond, again[typ].StepsPerSecond)
			}
		}
	}
}

// Options whose outlier window cannot hold the intervals needed to judge
// one would never reject an outlier: they are refused.
func TestOutlierWindowBelowMinSamplesIsRefused(t *testing.T) {
	table := newTestEstimator(t)
	if _, err := newEstimator(table.ref, Options{OutlierWindow: 2}); err == nil {
		t.Error("an outlier window of 2 (3 intervals needed to judge one) is accepted")
	}
}

func randomObservations(r *rand.Rand) []Measurement {
	models := []string{"", "ResNet50_BS64", "ResNet-18 (batch size 32)", "Transformer (batch size 64)", "mystery", "LM (batch size 20)"}
	types := []string{"k80", "p100", "v100", "h100", "a100"}
	var out []Measurement
	n := 1 + r.IntN(30)
	for i := range n {
		id := fmt.Sprint(r.IntN(6))
		rate := math.Exp(r.Float64()*12 - 4)
		if r.IntN(20) == 0 {
			rate = math.Exp(r.Float64()*40 - 20)
		}
		out = append(out, Measurement{JobID: id, Model: models[int(id[0]-'0')%len(models)], Scale: 1 + (int(id[0]-'0')%3)/2,
			Type: types[r.IntN(len(types))], StepsPerSecond: rate, At: t0.Add(time.Duration(i+1) * time.Minute),
			SinceStart: time.Duration(r.IntN(10)) * time.Minute})
	}
	return out
}

func FuzzRatesStayFiniteAndRepeat(f *testing.F) {
	for s := range uint64(20) {
		f.Add(s)
	}
	table := newTestEstimator(f)
	f.Fuzz(func(t *testing.T, seed uint64) {
		r := rand.New(rand.NewPCG(seed, 3))
		ms := randomObservations(r)
		types := []string{"k80", "p100", "v100", "h100", "a100"}
		now := t0.Add(time.Duration(r.IntN(48)) * time.Hour)
		var prev map[string]map[string]Estimate
		for rep := range 3 {
			e, _ := newEstimator(table.ref, Options{})
			for _, m := range ms {
				if err := e.Observe(m); err != nil {
					t.Fatal(err)
				}
			}
			cur := map[string]map[string]Estimate{}
			for id := range 7 {
				sid := fmt.Sprint(id)
				models := []string{"", "ResNet50_BS64", "ResNet-18 (batch size 32)", "Transformer (batch size 64)", "mystery", "LM (batch size 20)"}
				key := JobKey{ID: sid, Model: models[id%len(models)], Scale: 1 + (id%3)/2}
				got := e.Rates(key, types, now)
				cur[sid] = got
				for typ, x := range got {
					v := x.StepsPerSecond
					if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || (v == 0 && x.Source != SourceTable) {
						t.Fatalf("job %s %s: %v %s %s", sid, typ, v, x.Source, x.Detail)
					}
				}
				if rep > 0 {
					for typ := range got {
						if got[typ] != prev[sid][typ] {
							t.Fatalf("rep %d job %s %s: %+v vs %+v", rep, sid, typ, got[typ], prev[sid][typ])
						}
					}
				}
			}
			prev = cur
		}
	})
}

func TestConverges(t *testing.T) {
	table := newTestEstimator(t)
	for seed := range uint64(20000) {
		r := rand.New(rand.NewPCG(seed, 5))
		e, _ := newEstimator(table.ref, Options{})
		i := 0
		for range r.IntN(30) {
			i++
			e.Observe(obs("j", "", 1, "v100", math.Exp(r.Float64()*10-5), time.Duration(i)*time.Minute))
		}
		target := math.Exp(r.Float64()*10 - 5)
		for range 40 {
			i++
			e.Observe(obs("j", "", 1, "v100", target, time.Duration(i)*time.Minute))
		}
		got := e.Rates(JobKey{ID: "j", Scale: 1}, []string{"v100"}, t0.Add(time.Duration(i)*time.Minute))["v100"].StepsPerSecond
		if math.Abs(got/target-1) > 1e-6 && target > policy.MinThroughput {
			t.Fatalf("seed %d: %v, want %v", seed, got, target)
		}
	}
}
