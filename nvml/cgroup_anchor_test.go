package nvml

import (
	"testing"
	"time"
)

// A cgroup a user creates in the subtree systemd delegates to them
// (user@UID.service; `systemd-run --user --scope -p Delegate=yes
// --unit=slurmstepd`, then mkdir job_N in it) is not Slurm's, and is not
// taken for job N's.
const cgroupForgedV2 = "0::/user.slice/user-1001.slice/user@1001.service/app.slice/slurmstepd.scope/job_101/x\n"
const cgroupForgedV1 = "4:memory:/user.slice/user-1001.slice/user@1001.service/slurm/uid_0/job_101/x\n"

func TestJobOfCgroupForged(t *testing.T) {
	for _, c := range []string{cgroupForgedV2, cgroupForgedV1} {
		if got := JobOfCgroup(c); got != "" {
			t.Errorf("%q: a user's own cgroup taken for Slurm job %q", c, got)
		}
	}
}

// End to end: user 1001 runs a process on an unallocated k80 (GPU 4) from
// such a cgroup; job 101 (another user's, on v100 0,1 by the Prolog's
// file) keeps its own GPUs and rate only.
func TestCollectForgedCgroup(t *testing.T) {
	n := newNode(t, "v100:4,k80:4", func(g []FakeGPU) {
		g[4].PIDs, g[4].Util, g[4].MemUsed = []uint32{800}, 100, 5000
	})
	n.write(n.jobsDir, "101", "0,1\n")
	n.write(n.procRoot, "800/cgroup", cgroupForgedV2)
	n.write(n.progDir, "101.progress", "0 1699999990\n100 1700000020\n")
	n.collect(30 * time.Second)
	n.write(n.progDir, "101.progress", "400 1700000050\n")
	got := n.collect(30 * time.Second)
	checkJobs(t, got, map[string]string{
		"101/v100": "gpus=2 util=0.00 mem=0 steps=400 rate=10.00",
	})
}
