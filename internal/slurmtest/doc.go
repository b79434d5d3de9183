// Package slurmtest gives integration tests access to the local Slurm 24.11
// that scripts/slurm-up.sh starts (slurmctld, six slurmd with fake typed
// GPUs, slurmrestd with JWT).
//
// Integration tests carry the build tag `integration` and start with
//
//	env := slurmtest.FromEnv(t)
//
// which skips the test unless Slurm is up: it reads SLURMRESTD_URL and
// friends from the environment (scripts/integration-test.sh exports them) or
// from .local/slurm/env in the repository. Then:
//
//	id := env.Submit(t, "#!/bin/bash\necho $CUDA_VISIBLE_DEVICES\n", "--gres=gpu:1")
//	job := env.WaitState(t, id, "COMPLETED", 30*time.Second)
//	env.GetJSON(t, "/slurm/v0.0.42/nodes", &nodes)
//	env.Scontrol(t, "requeue", strconv.Itoa(id))
//
// The cluster is shared: `go test ./...` runs several packages at once, and
// people run tests against the same Slurm. Tests must not assume an empty
// queue and must only touch their own jobs; CancelAll cancels the jobs
// submitted through one Env, never anyone else's. Jobs submitted with Submit
// are also cancelled when the test ends.
//
// Job scripts run as root inside the Slurm root, where the host folder
// Env.SharedDir is visible as Env.SharedDirInJob; use it to exchange files
// with jobs (Env.HostPath maps a path seen by a job to the host).
package slurmtest
