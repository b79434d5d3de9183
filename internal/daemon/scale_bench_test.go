package daemon

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

// BenchmarkRoundsAtScale runs the daemon's rounds over the fake Slurm
// with many jobs, a quarter of the GPUs: the first round (holds), a round
// that changes nothing and one that moves the running jobs. Growth from
// 1,000 to 5,000 jobs shows whether anything on the round path is
// quadratic (slurmctld's own time is not in it).
func BenchmarkRoundsAtScale(b *testing.B) {
	for _, jobs := range []int{1000, 5000} {
		b.Run(fmt.Sprint(jobs), func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				h := newHarness(&testing.T{}, b.TempDir())
				for n := range jobs / 32 {
					typ := []string{"v100", "p100", "k80"}[n%3]
					h.slurm.AddNode(bridge.Node{Name: fmt.Sprintf("%s-%d", typ, n), GPUType: typ, GPUs: 8, Partitions: []string{"gpu"}})
				}
				for range jobs {
					h.submit(resnet, 1)
				}
				b.StartTimer()
				h.d.RunRound(context.Background())
				b.StopTimer()
				h.startChosen() // the harness's, quadratic itself
				b.StartTimer()
				h.clock.now = h.clock.now.Add(20 * time.Second)
				h.d.RunRound(context.Background())
				h.clock.now = h.clock.now.Add(20 * time.Second)
				h.d.RunRound(context.Background())
			}
		})
	}
}
