package estimate

import (
	"math"
	"slices"
	"time"
)

// cell is the measurement history of one job on one GPU type.
type cell struct {
	// rate is the smoothed rate (steps/s), valid once accepted > 0.
	rate float64
	// accepted counts the intervals that went into rate.
	accepted int
	// outliers counts intervals dropped as too far from the running median.
	outliers int
	// warmUp counts intervals skipped because the job had just started.
	warmUp int
	// window holds the logs of the latest raw intervals, outliers included,
	// oldest first. The median is taken over raw intervals, not accepted
	// ones, so that a lasting change of speed (a new input pipeline, a
	// different node) takes over the median after half a window instead of
	// being rejected forever.
	window []float64
	// last is the time of the latest accepted interval: freshness is
	// judged from it.
	last time.Time
	// seen is the time of the latest interval of any kind; reports at or
	// before it are repeats or arrive out of order and are ignored.
	seen time.Time
}

// verdict says what became of one reported interval.
type verdict int

const (
	verdictAccepted verdict = iota
	verdictWarmUp
	verdictOutlier
	verdictOld
)

// add folds one interval's rate into the cell.
func (c *cell) add(rate float64, at time.Time, sinceStart time.Duration, o Options) verdict {
	if !at.After(c.seen) {
		return verdictOld
	}
	c.seen = at
	if sinceStart < o.WarmUp {
		// The first interval after a (re)start includes loading data and
		// compiling kernels: it says little about the steady rate.
		c.warmUp++
		return verdictWarmUp
	}
	x := math.Log(rate)
	med, ok := median(c.window, o.OutlierMinSamples)
	c.push(x, o.OutlierWindow)
	if ok && math.Abs(x-med) > math.Log(o.OutlierFactor) {
		c.outliers++
		return verdictOutlier
	}
	c.smooth(rate, med, ok, o)
	c.accepted++
	c.last = at
	return verdictAccepted
}

// smooth moves the average towards rate. When the running median has left
// the average far behind (the speed changed for good), the average
// restarts from the median rather than crawling towards it.
func (c *cell) smooth(rate, med float64, haveMedian bool, o Options) {
	switch {
	case c.accepted == 0:
		c.rate = rate
		return
	case haveMedian && math.Abs(math.Log(c.rate)-med) > math.Log(o.OutlierFactor):
		c.rate = math.Exp(med)
	}
	c.rate += o.Alpha * (rate - c.rate)
}

// push appends x to the window, dropping the oldest beyond size.
func (c *cell) push(x float64, size int) {
	c.window = append(c.window, x)
	if over := len(c.window) - size; over > 0 {
		c.window = slices.Delete(c.window, 0, over)
	}
}

// median of xs, or false when there are fewer than min values: a median of
// one or two intervals is not robust enough to reject anything.
func median(xs []float64, min int) (float64, bool) {
	if len(xs) == 0 || len(xs) < min {
		return 0, false
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2], true
	}
	return (s[n/2-1] + s[n/2]) / 2, true
}
