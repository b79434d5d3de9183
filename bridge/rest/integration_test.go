//go:build integration

package rest

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

// These tests run against the local Slurm that scripts/slurm-up.sh starts:
//
//	set -a; . .local/slurm/env; set +a; go test -tags integration ./bridge/...
//
// They choose what to check by the API versions the server offers (Slurm
// 24.11: v0.0.40-42; 26.05: v0.0.42-45), so that they pass on either; the
// parts that need slurmrestd's requeue (v0.0.45) skip where it is not
// offered.

func integrationClient(t *testing.T, versions ...string) *Client {
	t.Helper()
	return integrationClientWith(t, nil, versions...)
}

// integrationClientWith is integrationClient with its configuration
// changed by mutate.
func integrationClientWith(t *testing.T, mutate func(*Config), versions ...string) *Client {
	t.Helper()
	url := os.Getenv("SLURMRESTD_URL")
	if url == "" {
		t.Skip("SLURMRESTD_URL is not set: no local Slurm")
	}
	cfg := Config{
		URL:        url,
		UserName:   os.Getenv("SLURM_USER_NAME"),
		TokenFile:  os.Getenv("SLURM_JWT_FILE"),
		Partitions: []string{partition()},
		Scontrol:   os.Getenv("SCONTROL"),
		Versions:   versions,
	}
	if mutate != nil {
		mutate(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// offeredVersions returns the supported API versions the server offers,
// newest first.
func offeredVersions(t *testing.T) []string {
	t.Helper()
	var offered []string
	for _, v := range SupportedVersions() {
		if _, err := integrationClient(t, v).APIVersion(context.Background()); err == nil {
			offered = append(offered, v)
		} else if !strings.Contains(err.Error(), "serves none of") {
			t.Fatalf("asking for %s: %v", v, err)
		}
	}
	if len(offered) == 0 {
		t.Fatalf("slurmrestd offers none of %v", SupportedVersions())
	}
	return offered
}

// requeueVersion is the newest offered API version that serves requeue
// ("" when none does), and scontrolVersion the newest that does not.
func requeueVersions(t *testing.T) (requeueVersion, scontrolVersion string) {
	t.Helper()
	for _, v := range offeredVersions(t) {
		_, serves := integrationClient(t, v).adapters[0].(requeuer)
		switch {
		case serves && requeueVersion == "":
			requeueVersion = v
		case !serves && scontrolVersion == "":
			scontrolVersion = v
		}
	}
	return requeueVersion, scontrolVersion
}

func partition() string {
	if p := os.Getenv("SLURM_PARTITION"); p != "" {
		return p
	}
	return "gpu"
}

// submit starts a sleeping job with the given extra sbatch arguments and
// cancels it when the test ends.
func submit(t *testing.T, args ...string) bridge.JobID {
	t.Helper()
	sbatch := os.Getenv("SBATCH")
	all := append([]string{"--parsable", "-p", partition(), "-t", "10", "-o", "/dev/null", "--wrap", "sleep 300"}, args...)
	out, err := exec.Command(sbatch, all...).CombinedOutput()
	if err != nil {
		t.Fatalf("sbatch %v: %v: %s", all, err, out)
	}
	id, err := strconv.ParseUint(strings.TrimSpace(strings.Split(string(out), ";")[0]), 10, 32)
	if err != nil {
		t.Fatalf("sbatch output %q: %v", out, err)
	}
	t.Cleanup(func() { _ = exec.Command(os.Getenv("SCANCEL"), strconv.FormatUint(id, 10)).Run() })
	return bridge.JobID(id)
}

// waitJob polls the snapshot until the job satisfies ok.
func waitJob(t *testing.T, c *Client, id bridge.JobID, what string, ok func(bridge.Job) bool) bridge.Job {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	var last bridge.Job
	for time.Now().Before(deadline) {
		snap, err := c.Snapshot(ctx)
		if err != nil {
			t.Fatalf("snapshot: %v", err)
		}
		if j, found := snap.Job(id); found {
			last = j
			if ok(j) {
				return j
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("job %d never became %s; last seen %+v", id, what, last)
	return last
}

func TestIntegrationSnapshotSeesTypedGPUs(t *testing.T) {
	offered := offeredVersions(t)
	for _, version := range append([]string{""}, offered...) {
		t.Run("version="+version, func(t *testing.T) {
			var c *Client
			if version == "" {
				c = integrationClient(t)
			} else {
				c = integrationClient(t, version)
			}
			snap, err := c.Snapshot(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if version != "" && snap.APIVersion != version {
				t.Fatalf("API version %s, want %s", snap.APIVersion, version)
			}
			if version == "" && snap.APIVersion != offered[0] {
				t.Fatalf("negotiated %s, want %s (the newest offered)", snap.APIVersion, offered[0])
			}
			types := snap.GPUTypes()
			if len(snap.Nodes) == 0 || len(types) < 2 {
				t.Fatalf("expected typed GPU nodes, got nodes %+v types %v", snap.Nodes, types)
			}
			for _, n := range snap.Nodes {
				if n.GPUType == "" || n.GPUs == 0 {
					t.Errorf("node %s has no typed GPUs: %+v", n.Name, n)
				}
			}
			t.Logf("%s: %d nodes, GPUs %v", snap.APIVersion, len(snap.Nodes), types)
		})
	}
}

func TestIntegrationTaggedJobAndActions(t *testing.T) {
	c := integrationClient(t)
	ctx := context.Background()
	// Held at submission so that it stays pending while we change it.
	id := submit(t, "--hold", "--gres=gpu:1", `--comment=gavel: model="ResNet-50 (batch size 64)" steps=250k weight=2`)
	j := waitJob(t, c, id, "visible", func(bridge.Job) bool { return true })
	if !j.Managed() || j.Tag.Model != "ResNet-50 (batch size 64)" || j.Tag.Steps != 250000 || j.Tag.Weight != 2 {
		t.Fatalf("tag not parsed: %+v (err %v)", j.Tag, j.TagErr)
	}
	if j.GPUs != 1 || j.RequestedGPUType != "" || !j.Held || j.State != bridge.JobPending {
		t.Fatalf("job as seen: %+v", j)
	}

	apply := func(a bridge.Action) {
		t.Helper()
		a.Job = id
		if err := c.Apply(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	apply(bridge.Action{Kind: bridge.ActSetConstraints, Constraints: "k80"})
	waitJob(t, c, id, "constrained to k80", func(j bridge.Job) bool { return j.Constraints == "k80" })

	apply(bridge.Action{Kind: bridge.ActRelease})
	apply(bridge.Action{Kind: bridge.ActSetPriority, Priority: 4242})
	j = waitJob(t, c, id, "running on k80 with priority 4242", func(j bridge.Job) bool {
		return j.State == bridge.JobRunning && j.Priority == 4242
	})
	if j.RunningGPUType != "k80" || len(j.RunningNodes) != 1 {
		t.Fatalf("running job placement: %+v", j)
	}
	snap, err := c.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := snap.Node(j.RunningNodes[0]); n.GPUsUsed < 1 {
		t.Fatalf("node %s shows no GPU in use: %+v", n.Name, n)
	}

	apply(bridge.Action{Kind: bridge.ActSignal, Signal: "USR1"})
	// A running job refuses new constraints; the error names job and action.
	err = c.Apply(ctx, bridge.Action{Kind: bridge.ActSetConstraints, Job: id, Constraints: "v100"})
	if err == nil || !strings.Contains(err.Error(), "set-constraints job "+id.String()) {
		t.Fatalf("constraints on a running job: %v", err)
	}

	apply(bridge.Action{Kind: bridge.ActRequeueHold})
	// Slurm sets the requeue's start delay once the job has stopped (after
	// KillWait), which would undo a begin-now sent earlier: wait for it.
	j = waitJob(t, c, id, "requeued, held and stopped", func(j bridge.Job) bool {
		return j.State == bridge.JobPending && j.Held && j.Restarts == 1 && !slices.Contains(j.StateFlags, "COMPLETING")
	})
	apply(bridge.Action{Kind: bridge.ActSetConstraints, Constraints: "v100"})
	// Release resets the begin time a requeue sets, so begin-now comes last.
	apply(bridge.Action{Kind: bridge.ActRelease})
	apply(bridge.Action{Kind: bridge.ActBeginNow})
	j = waitJob(t, c, id, "running on v100", func(j bridge.Job) bool {
		if j.State == bridge.JobPending && j.Reason == "BeginTime" {
			// The delay came back after all (the daemon rechecks the
			// same way): make it eligible again.
			apply(bridge.Action{Kind: bridge.ActBeginNow})
		}
		return j.State == bridge.JobRunning && j.RunningGPUType == "v100"
	})

	apply(bridge.Action{Kind: bridge.ActRequeue})
	waitJob(t, c, id, "requeued", func(j bridge.Job) bool { return j.Restarts == 2 && j.State == bridge.JobPending })
}

func TestIntegrationUntaggedAndBadTags(t *testing.T) {
	c := integrationClient(t)
	plain := submit(t, "--hold", "--gres=gpu:1", "--comment=just a note")
	bad := submit(t, "--hold", "--gres=gpu:v100:2", "--comment=gavel: steps=lots")
	j := waitJob(t, c, plain, "visible", func(bridge.Job) bool { return true })
	if j.Managed() || j.TagErr.Error() != "no gavel: tag in --comment" {
		t.Fatalf("untagged job: %+v", j)
	}
	j = waitJob(t, c, bad, "visible", func(bridge.Job) bool { return true })
	if j.Managed() || !strings.Contains(j.TagErr.Error(), "steps= is not a number") {
		t.Fatalf("badly tagged job: %+v", j)
	}
	if j.GPUs != 2 || j.RequestedGPUType != "v100" {
		t.Fatalf("typed request read as %d x %q", j.GPUs, j.RequestedGPUType)
	}
}

func TestIntegrationSignalReachesBatchScript(t *testing.T) {
	c := integrationClient(t)
	hostDir, jobDir := os.Getenv("SLURM_SHARED_DIR"), os.Getenv("SLURM_SHARED_DIR_IN_JOB")
	if hostDir == "" || jobDir == "" {
		t.Skip("SLURM_SHARED_DIR is not set: cannot see files that jobs write")
	}
	marker := "signal-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	script := "trap 'echo got > " + jobDir + "/" + marker + "' USR1; while true; do sleep 1; done"
	sbatch := os.Getenv("SBATCH")
	out, err := exec.Command(sbatch, "--parsable", "-p", partition(), "-t", "5", "-o", "/dev/null",
		"--gres=gpu:1", "--comment=gavel: class=te", "--wrap", script).CombinedOutput()
	if err != nil {
		t.Fatalf("sbatch: %v: %s", err, out)
	}
	n, err := strconv.ParseUint(strings.TrimSpace(strings.Split(string(out), ";")[0]), 10, 32)
	if err != nil {
		t.Fatalf("sbatch output %q", out)
	}
	id := bridge.JobID(n)
	t.Cleanup(func() {
		_ = exec.Command(os.Getenv("SCANCEL"), id.String()).Run()
		_ = os.Remove(hostDir + "/" + marker)
	})
	waitJob(t, c, id, "running", func(j bridge.Job) bool { return j.State == bridge.JobRunning })
	time.Sleep(time.Second) // let the script install its trap
	if err := c.Apply(context.Background(), bridge.Action{Kind: bridge.ActSignal, Job: id, Signal: "USR1"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(hostDir + "/" + marker); err == nil {
			return
		}
		time.Sleep(300 * time.Millisecond)
	}
	t.Fatalf("the batch script of job %d never saw SIGUSR1", id)
}

func TestIntegrationRepeatedActionsSucceed(t *testing.T) {
	c := integrationClient(t)
	ctx := context.Background()
	id := submit(t, "--hold", "--gres=gpu:1", "--constraint=k80", "--comment=gavel: steps=1k")
	waitJob(t, c, id, "visible", func(bridge.Job) bool { return true })
	for _, a := range []bridge.Action{
		{Kind: bridge.ActHold}, {Kind: bridge.ActHold},
		{Kind: bridge.ActSetConstraints, Constraints: "p100"}, {Kind: bridge.ActSetConstraints, Constraints: "p100"},
		{Kind: bridge.ActRelease}, {Kind: bridge.ActRelease},
		{Kind: bridge.ActSetPriority, Priority: 10}, {Kind: bridge.ActSetPriority, Priority: 10},
	} {
		a.Job = id
		if err := c.Apply(ctx, a); err != nil {
			t.Errorf("repeating: %v", err)
		}
	}
	// Slurm refuses a priority for a held job (error 2042): the daemon must
	// release before it sets a priority.
	if err := c.Apply(ctx, bridge.Action{Kind: bridge.ActHold, Job: id}); err != nil {
		t.Fatal(err)
	}
	err := c.Apply(ctx, bridge.Action{Kind: bridge.ActSetPriority, Job: id, Priority: 20})
	if err == nil || !strings.Contains(err.Error(), "held") {
		t.Fatalf("priority of a held job: %v", err)
	}
}

// Slurm takes priorities up to 2^32-2; the snapshot must still read every
// job, for each API version the server offers.
func TestIntegrationPriorityAbove2To31(t *testing.T) {
	for _, v := range offeredVersions(t) {
		t.Run(v, func(t *testing.T) {
			c := integrationClient(t, v)
			id := submit(t, "--begin=now+1hour", "--gres=gpu:1", "--comment=gavel: model=a3c")
			out, err := exec.Command(os.Getenv("SCONTROL"), "update", "jobid="+id.String(), "priority=3000000000").CombinedOutput()
			if err != nil {
				t.Fatalf("scontrol update: %v: %s", err, out)
			}
			j := waitJob(t, c, id, "visible", func(bridge.Job) bool { return true })
			if j.Held || !j.Managed() || j.Priority != 3000000000 {
				t.Fatalf("job with priority 3e9 read as %+v", j)
			}
		})
	}
}

// Slurm's "may be requeued" reaches the snapshot: the daemon never
// preempts a job submitted with --no-requeue.
func TestIntegrationNoRequeueIsRead(t *testing.T) {
	c := integrationClient(t)
	fixed := submit(t, "--hold", "--no-requeue", "--gres=gpu:1", "--comment=gavel: model=a3c")
	plain := submit(t, "--hold", "--gres=gpu:1", "--comment=gavel: model=a3c")
	if j := waitJob(t, c, fixed, "visible", func(bridge.Job) bool { return true }); !j.NoRequeue {
		t.Errorf("job submitted with --no-requeue read as requeueable: %+v", j)
	}
	if j := waitJob(t, c, plain, "visible", func(bridge.Job) bool { return true }); j.NoRequeue {
		t.Errorf("ordinary job read as not requeueable: %+v", j)
	}
}

// Jobs of another user than the bridge's: the requeue check needs one.
// bob of the account tree (scripts/slurm/accounts.sh): Slurm 26.05 finds
// no association for nobody (uid 65534).
const otherUID = "5002"

// slurmRoot is the tree the local Slurm's commands run in, read from the
// wrapper scripts that slurm-up.sh writes.
func slurmRoot(t *testing.T) string {
	t.Helper()
	wrapper := filepath.Join(filepath.Dir(os.Getenv("SCONTROL")), "in-slurm-root")
	data, err := os.ReadFile(wrapper)
	if err != nil {
		t.Skipf("no Slurm root to run commands in: %v", err)
	}
	m := regexp.MustCompile(`(?m)^root=(\S+)$`).FindSubmatch(data)
	if m == nil {
		t.Skipf("%s names no root=", wrapper)
	}
	return string(m[1])
}

// asUser writes a wrapper that runs a Slurm command inside the Slurm root
// as user (who must exist there), and returns its path.
func asUser(t *testing.T, command, user string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("running a command as another user needs root")
	}
	root := slurmRoot(t)
	path := filepath.Join(t.TempDir(), command+"-as-"+user)
	script := "#!/bin/sh\nexec env -i PATH=/usr/sbin:/usr/bin:/bin SLURM_CONF=/etc/slurm/slurm.conf " +
		"/usr/sbin/chroot --userspec=" + user + ":" + user + " " + root + " " + command + " \"$@\"\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// heldJobOfAnotherUser submits a job owned by bob, held by an
// administrator (as the daemon holds jobs; the check asks only about
// those), and returns the snapshot that shows it.
func heldJobOfAnotherUser(t *testing.T, c *Client, args ...string) (bridge.JobID, *bridge.Snapshot) {
	t.Helper()
	id := submit(t, append([]string{"--uid=" + otherUID, "--gid=" + otherUID, "--hold"}, args...)...)
	if out, err := exec.Command(os.Getenv("SCONTROL"), "hold", id.String()).CombinedOutput(); err != nil {
		t.Fatalf("scontrol hold %s: %v: %s", id, err, out)
	}
	waitJob(t, c, id, "pending and held by an administrator", func(j bridge.Job) bool {
		return j.State == bridge.JobPending && j.Held && j.Reason == "JobHeldAdmin"
	})
	snap, err := c.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return id, snap
}

// onlyJob is snap with its jobs cut to id, so that the check asks about
// the test's own job and no one else's.
func onlyJob(t *testing.T, snap *bridge.Snapshot, id bridge.JobID) *bridge.Snapshot {
	t.Helper()
	j, ok := snap.Job(id)
	if !ok {
		t.Fatalf("job %d not in the snapshot", id)
	}
	out, err := bridge.NewSnapshot(snap.Taken, snap.APIVersion, snap.Nodes, []bridge.Job{j})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// unchanged checks that the probe left the job as it was.
func unchanged(t *testing.T, c *Client, id bridge.JobID) {
	t.Helper()
	snap, err := c.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	j, ok := snap.Job(id)
	if !ok || j.State != bridge.JobPending || !j.Held || j.Restarts != 0 {
		t.Fatalf("the probe changed job %d: %+v", id, j)
	}
}

// The requeue check passes as root, by the path real requeues take:
// slurmrestd where v0.0.45 is offered, scontrol on every version before.
func TestIntegrationCheckRequeuePassesAsRoot(t *testing.T) {
	requeueVersion, scontrolVersion := requeueVersions(t)
	cases := map[string]struct {
		version, path string
	}{
		"newest offered": {"", ""},
		"scontrol":       {scontrolVersion, "scontrol ("},
		"slurmrestd":     {requeueVersion, "slurmrestd v0.0.45"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if name != "newest offered" && tc.version == "" {
				t.Skip("no offered API version takes this path")
			}
			var c *Client
			if tc.version == "" {
				c = integrationClient(t)
			} else {
				c = integrationClient(t, tc.version)
			}
			plain, _ := heldJobOfAnotherUser(t, c, "--gres=gpu:1")
			fixed, snap := heldJobOfAnotherUser(t, c, "--gres=gpu:1", "--no-requeue")
			// A plain job ("pending") and a --no-requeue one ("disabled").
			for _, id := range []bridge.JobID{plain, fixed} {
				if err := c.CheckRequeue(context.Background(), onlyJob(t, snap, id)); err != nil {
					t.Fatalf("CheckRequeue about job %d: %v", id, err)
				}
				unchanged(t, c, id)
			}
			path := c.RequeuePath()
			want := tc.path
			if want == "" {
				want = "scontrol ("
				if requeueVersion != "" {
					want = "slurmrestd " + requeueVersion
				}
			}
			if !strings.HasPrefix(path, want) {
				t.Errorf("RequeuePath %q, want it to start with %q", path, want)
			}
			t.Logf("%s: requeue path proven: %s", c.current().version(), path)
		})
	}
}

// An scontrol without operator rights fails the check, with the reason.
func TestIntegrationCheckRequeueFailsWithoutOperatorScontrol(t *testing.T) {
	_, scontrolVersion := requeueVersions(t)
	if scontrolVersion == "" {
		t.Skip("every offered API version requeues through slurmrestd")
	}
	scontrol := asUser(t, "scontrol", "slurmrestd")
	c := integrationClientWith(t, func(cfg *Config) { cfg.Scontrol = scontrol }, scontrolVersion)
	id, snap := heldJobOfAnotherUser(t, c, "--gres=gpu:1")
	err := c.CheckRequeue(context.Background(), onlyJob(t, snap, id))
	if err == nil || !strings.Contains(err.Error(), "may not requeue other users' jobs") ||
		!strings.Contains(err.Error(), "Access/permission denied for job "+id.String()) {
		t.Fatalf("CheckRequeue with a non-operator scontrol: %v", err)
	}
	t.Logf("as expected: %v", err)
	unchanged(t, c, id)

	// A missing scontrol is reported before any job is asked about.
	missing := filepath.Join(t.TempDir(), "no-scontrol")
	c = integrationClientWith(t, func(cfg *Config) { cfg.Scontrol = missing }, scontrolVersion)
	err = c.CheckRequeue(context.Background(), onlyJob(t, snap, id))
	if err == nil || !strings.Contains(err.Error(), "not found") || errors.Is(err, bridge.ErrNoRequeueProbe) {
		t.Fatalf("CheckRequeue with no scontrol: %v", err)
	}
}

// A JWT of a non-operator user fails the check through slurmrestd.
func TestIntegrationCheckRequeueFailsForANonOperatorToken(t *testing.T) {
	requeueVersion, _ := requeueVersions(t)
	if requeueVersion == "" {
		t.Skip("slurmrestd offers no API version with requeue (v0.0.45)")
	}
	const user = "slurmrestd"
	out, err := exec.Command(filepath.Join(filepath.Dir(os.Getenv("SCONTROL")), "in-slurm-root"),
		"scontrol", "token", "username="+user, "lifespan=600").CombinedOutput()
	if err != nil {
		t.Fatalf("scontrol token: %v: %s", err, out)
	}
	tokenFile := filepath.Join(t.TempDir(), "jwt")
	if err := os.WriteFile(tokenFile, out, 0o600); err != nil {
		t.Fatal(err)
	}
	root := integrationClient(t, requeueVersion)
	id, snap := heldJobOfAnotherUser(t, root, "--gres=gpu:1")
	c, err := New(Config{URL: os.Getenv("SLURMRESTD_URL"), UserName: user, TokenFile: tokenFile,
		Partitions: []string{partition()}, Versions: []string{requeueVersion}, Scontrol: "/nonexistent/scontrol"})
	if err != nil {
		t.Fatal(err)
	}
	err = c.CheckRequeue(context.Background(), onlyJob(t, snap, id))
	if err == nil || !strings.Contains(err.Error(), "the bridge's user slurmrestd may not requeue other users' jobs") ||
		!strings.Contains(err.Error(), "[slurm error 2002]") {
		t.Fatalf("CheckRequeue with a non-operator token: %v", err)
	}
	t.Logf("as expected: %v", err)
	unchanged(t, root, id)

	// A token that does not belong to the user named is refused.
	c, err = New(Config{URL: os.Getenv("SLURMRESTD_URL"), UserName: "root", TokenFile: tokenFile,
		Partitions: []string{partition()}, Versions: []string{requeueVersion}})
	if err != nil {
		t.Fatal(err)
	}
	err = c.CheckRequeue(context.Background(), onlyJob(t, snap, id))
	if err == nil || !strings.Contains(err.Error(), "rejected the credentials of user root") {
		t.Fatalf("CheckRequeue with another user's token: %v", err)
	}
	t.Logf("as expected: %v", err)
	unchanged(t, root, id)
}

// Requeue and requeue-hold of a running job go through slurmrestd on
// v0.0.45: scontrol is not even there.
func TestIntegrationRequeueThroughREST(t *testing.T) {
	requeueVersion, _ := requeueVersions(t)
	if requeueVersion == "" {
		t.Skip("slurmrestd offers no API version with requeue (v0.0.45)")
	}
	c := integrationClientWith(t, func(cfg *Config) { cfg.Scontrol = "/nonexistent/scontrol" }, requeueVersion)
	if p := c.RequeuePath(); p != "slurmrestd "+requeueVersion {
		t.Fatalf("RequeuePath %q", p)
	}
	ctx := context.Background()
	id := submit(t, "--uid="+otherUID, "--gid="+otherUID, "--gres=gpu:1", "--comment=gavel: model=a3c")
	waitJob(t, c, id, "running", func(j bridge.Job) bool { return j.State == bridge.JobRunning })
	if err := c.Apply(ctx, bridge.Action{Kind: bridge.ActRequeueHold, Job: id}); err != nil {
		t.Fatal(err)
	}
	waitJob(t, c, id, "requeued and held", func(j bridge.Job) bool {
		return j.State == bridge.JobPending && j.Held && j.Restarts == 1 && !slices.Contains(j.StateFlags, "COMPLETING")
	})
	for _, a := range []bridge.Action{{Kind: bridge.ActRelease, Job: id}, {Kind: bridge.ActBeginNow, Job: id}} {
		if err := c.Apply(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	waitJob(t, c, id, "running again", func(j bridge.Job) bool {
		if j.State == bridge.JobPending && j.Reason == "BeginTime" {
			_ = c.Apply(ctx, bridge.Action{Kind: bridge.ActBeginNow, Job: id})
		}
		return j.State == bridge.JobRunning
	})
	if err := c.Apply(ctx, bridge.Action{Kind: bridge.ActRequeue, Job: id}); err != nil {
		t.Fatal(err)
	}
	j := waitJob(t, c, id, "requeued, not held", func(j bridge.Job) bool {
		return j.Restarts == 2 && j.State == bridge.JobPending
	})
	if j.Held {
		t.Errorf("a plain requeue held job %d: %+v", id, j)
	}
	// A pending job is refused with Slurm's error, not requeued.
	err := c.Apply(ctx, bridge.Action{Kind: bridge.ActRequeue, Job: id})
	if err == nil || !strings.Contains(err.Error(), "[slurm error 2024]") {
		t.Fatalf("requeue of a pending job: %v", err)
	}
}

// Without scontrol, holds and releases of a batch go through slurmrestd.
func TestIntegrationApplyBatchWithoutScontrol(t *testing.T) {
	c := integrationClientWith(t, func(cfg *Config) { cfg.Scontrol = "/nonexistent/scontrol" })
	a := submit(t, "--hold", "--gres=gpu:1", "--begin=now+1hour")
	b := submit(t, "--gres=gpu:1", "--begin=now+1hour")
	waitJob(t, c, a, "visible", func(bridge.Job) bool { return true })
	waitJob(t, c, b, "visible", func(bridge.Job) bool { return true })
	errs := c.ApplyBatch(context.Background(), []bridge.Action{{Kind: bridge.ActRelease, Job: a}, {Kind: bridge.ActHold, Job: b}})
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	waitJob(t, c, a, "released", func(j bridge.Job) bool { return !j.Held })
	waitJob(t, c, b, "held", func(j bridge.Job) bool { return j.Held })
}
