package sim

import (
	"errors"
	"fmt"
	"sync"
)

// Point is one run of a sweep.
type Point struct {
	Policy string
	Rate   float64 // jobs per hour
	Seed   int64
}

// Outcome is a point's result. Saturated points have Err wrapping
// ErrSaturated and no Result.
type Outcome struct {
	Point
	Result *Result
	Err    error
}

// Saturated reports whether the point stopped because the cluster could
// not keep up.
func (o *Outcome) Saturated() bool { return errors.Is(o.Err, ErrSaturated) }

// Sweep runs run(point) for every point on workers goroutines and returns
// the outcomes in the order of points. progress, when set, is called after
// each run with the number done so far (from one goroutine at a time).
func Sweep(points []Point, workers int, run func(Point) (*Result, error), progress func(done, total int)) []Outcome {
	out := make([]Outcome, len(points))
	workers = max(1, min(workers, len(points)))
	next := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	done := 0
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				res, err := run(points[i])
				out[i] = Outcome{Point: points[i], Result: res, Err: err}
				mu.Lock()
				done++
				if progress != nil {
					progress(done, len(points))
				}
				mu.Unlock()
			}
		}()
	}
	for i := range points {
		next <- i
	}
	close(next)
	wg.Wait()
	return out
}

// IsolatedPolicy is the policy whose runs finish-time fairness is
// measured against (FTFAgainstIsolated): every job on its 1/n share.
const IsolatedPolicy = "isolated"

// IsolatedPoints returns one run of IsolatedPolicy for every rate and seed
// of points that does not already have one, in the order they first
// appear. One baseline run serves every policy at that rate and seed, as
// the workload depends only on them.
func IsolatedPoints(points []Point) []Point {
	type key struct {
		rate float64
		seed int64
	}
	have := map[key]bool{}
	for _, p := range points {
		if p.Policy == IsolatedPolicy {
			have[key{p.Rate, p.Seed}] = true
		}
	}
	var out []Point
	for _, p := range points {
		k := key{p.Rate, p.Seed}
		if !have[k] {
			have[k] = true
			out = append(out, Point{Policy: IsolatedPolicy, Rate: p.Rate, Seed: p.Seed})
		}
	}
	return out
}

// SetFTFIsolated sets Result.FTFIsolated of every outcome with a result
// from the isolated outcome (among outcomes and baselines) of its rate and
// seed. An outcome whose baseline has no result (it saturated or failed)
// keeps 0: its runs are not comparable job by job.
func SetFTFIsolated(outcomes, baselines []Outcome) error {
	type key struct {
		rate float64
		seed int64
	}
	isolated := map[key]*Result{}
	for _, set := range [][]Outcome{outcomes, baselines} {
		for _, o := range set {
			if o.Policy == IsolatedPolicy && o.Result != nil {
				isolated[key{o.Rate, o.Seed}] = o.Result
			}
		}
	}
	for _, set := range [][]Outcome{outcomes, baselines} {
		for _, o := range set {
			base := isolated[key{o.Rate, o.Seed}]
			if o.Result == nil || base == nil {
				continue
			}
			ftf, err := FTFAgainstIsolated(o.Result, base)
			if err != nil {
				return fmt.Errorf("%s at %v jobs/h, seed %d: %w", o.Policy, o.Rate, o.Seed, err)
			}
			o.Result.FTFIsolated = ftf
		}
	}
	return nil
}
