package sim

import (
	"errors"
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
