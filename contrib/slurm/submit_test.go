package slurmcontrib

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
)

// fields are a job's fields, or a partition's, as slurmctld shows them to
// the script.
type fields map[string]any

// jobCase is one call of slurm_job_submit, or of slurm_job_modify when
// rec (the job as slurmctld has it) is set.
type jobCase struct {
	name     string
	settings fields // changes to the script's settings
	parts    map[string]fields
	desc     fields
	rec      fields
	root     bool // asked by root (uid 0), else by uid 1000
	// What the script must answer.
	rc     int
	msg    string
	writes []string // "field=value", in order
}

// defaultPartitions: "gpu" (the scheduled one in the script's settings)
// and "cpu", the default partition.
var defaultPartitions = map[string]fields{"gpu": {"flag_default": 0}, "cpu": {"flag_default": 1}}

func TestJobSubmit(t *testing.T) {
	const bad = "gavel-slurm: not managed: steps= is not a number: \"x\""
	const noTag = "gavel-slurm: jobs in this partition need a gavel: tag in --comment (see the site's documentation)"
	const requeueOff = "gavel-slurm: requeue=0 refused: the job is scheduled by gavel-slurm, which preempts by requeueing"
	const leaseOff = "gavel-slurm: dependency change refused: it drops afterany:58, which keeps the job waiting for " +
		"gavel-slurm's next round (ask an administrator to change it)"
	cases := []jobCase{
		{name: "valid tag: requeueable, tag copied", desc: fields{"partition": "gpu", "comment": "train; gavel: STEPS=5k model=x"},
			writes: []string{"requeue=1", "admin_comment=gavel: model=x steps=5000"}},
		{name: "malformed tag refused with the daemon's reason", desc: fields{"partition": "gpu", "comment": "gavel: steps=x"},
			rc: -1, msg: bad},
		{name: "no tag: untouched", desc: fields{"partition": "gpu", "comment": "plain job"}},
		{name: "no comment: untouched", desc: fields{"partition": "gpu"}},
		{name: "other partition: untouched even with a malformed tag", desc: fields{"partition": "cpu", "comment": "gavel: steps=x"}},
		{name: "default partition not scheduled", desc: fields{"comment": "gavel: steps=x"}},
		{name: "default partition scheduled", parts: map[string]fields{"gpu": {"flag_default": 1}, "cpu": {"flag_default": 0}},
			desc: fields{"comment": "gavel: steps=x"}, rc: -1, msg: bad},
		{name: "one scheduled partition in a list is enough", desc: fields{"partition": "cpu,gpu", "comment": "gavel: steps=x"},
			rc: -1, msg: bad},
		{name: "partition name must match exactly", desc: fields{"partition": "gpu2", "comment": "gavel: steps=x"}},
		{name: "no partitions listed means all", settings: fields{"partitions": []string{}},
			desc: fields{"partition": "anything", "comment": "gavel: steps=x"}, rc: -1, msg: bad},
		{name: "other partitions listed", settings: fields{"partitions": []string{"a100", "h100"}},
			desc:   fields{"partition": "h100", "comment": "gavel: model=x"},
			writes: []string{"requeue=1", "admin_comment=gavel: model=x"}},
		{name: "admin comment text kept before the tag", desc: fields{"partition": "gpu", "comment": "gavel: model=x", "admin_comment": "audit 42"},
			writes: []string{"requeue=1", "admin_comment=audit 42; gavel: model=x"}},
		{name: "requeue and admin comment can be turned off", settings: fields{"requeue": false, "admin_comment": false},
			desc: fields{"partition": "gpu", "comment": "gavel: model=x"}},
		{name: "empty tag is valid", desc: fields{"partition": "gpu", "comment": "gavel:"},
			writes: []string{"requeue=1", "admin_comment=gavel:"}},
		{name: "'%' in a message is not a format", desc: fields{"partition": "gpu", "comment": "gavel: model=%s%d x"},
			rc: -1, msg: `gavel-slurm: not managed: expected key=value in gavel: tag, got "x"`},

		// Typed requests (off unless untype_gpu_requests).
		{name: "typed request kept by default", desc: fields{"partition": "gpu", "comment": "gavel: model=x", "tres_per_node": "gres/gpu:v100:2"},
			writes: []string{"requeue=1", "admin_comment=gavel: model=x"}},
		{name: "typed request made untyped", settings: fields{"untype_gpu_requests": true},
			desc:   fields{"partition": "gpu", "comment": "gavel: model=x", "tres_per_node": "gres/gpu:v100:2"},
			writes: []string{"requeue=1", "admin_comment=gavel: model=x", "tres_per_node=gres/gpu:2", "features=v100"}},
		{name: "type added to the user's features", settings: fields{"untype_gpu_requests": true},
			desc:   fields{"partition": "gpu", "comment": "gavel:", "tres_per_node": "gres/gpu:k80", "features": "ib&ssd"},
			writes: []string{"requeue=1", "admin_comment=gavel:", "tres_per_node=gres/gpu:1", "features=ib&ssd&k80"}},
		{name: "--gpus=TYPE:N is a per-job request", settings: fields{"untype_gpu_requests": true},
			desc:   fields{"partition": "gpu", "comment": "gavel:", "tres_per_job": "gres/gpu:p100:4"},
			writes: []string{"requeue=1", "admin_comment=gavel:", "tres_per_job=gres/gpu:4", "features=p100"}},
		{name: "other GRES kept beside the rewritten one", settings: fields{"untype_gpu_requests": true},
			desc:   fields{"partition": "gpu", "comment": "gavel:", "tres_per_node": "gres/shard:2,gres/gpu:v100:1"},
			writes: []string{"requeue=1", "admin_comment=gavel:", "tres_per_node=gres/shard:2,gres/gpu:1", "features=v100"}},
		{name: "constraint with | left alone", settings: fields{"untype_gpu_requests": true},
			desc:   fields{"partition": "gpu", "comment": "gavel:", "tres_per_node": "gres/gpu:v100:2", "features": "ib|ssd"},
			writes: []string{"requeue=1", "admin_comment=gavel:"}},
		{name: "type not listed left alone", settings: fields{"untype_gpu_requests": true},
			desc:   fields{"partition": "gpu", "comment": "gavel:", "tres_per_node": "gres/gpu:a100:2"},
			writes: []string{"requeue=1", "admin_comment=gavel:"}},
		{name: "two types left alone", settings: fields{"untype_gpu_requests": true},
			desc:   fields{"partition": "gpu", "comment": "gavel:", "tres_per_node": "gres/gpu:v100:1,gres/gpu:k80:1"},
			writes: []string{"requeue=1", "admin_comment=gavel:"}},
		{name: "untyped request left alone", settings: fields{"untype_gpu_requests": true},
			desc:   fields{"partition": "gpu", "comment": "gavel:", "tres_per_node": "gres/gpu:2"},
			writes: []string{"requeue=1", "admin_comment=gavel:"}},
		{name: "jobs without a tag are not rewritten", settings: fields{"untype_gpu_requests": true},
			desc: fields{"partition": "gpu", "comment": "plain", "tres_per_node": "gres/gpu:v100:2"}},

		// Modifications.
		{name: "modify: the daemon's updates pass", desc: fields{"priority": 4242, "features": "k80"},
			rec: fields{"partition": "gpu", "comment": "gavel: steps=x"}},
		{name: "modify: a malformed new comment is refused", desc: fields{"comment": "gavel: steps=x"},
			rec: fields{"partition": "gpu", "comment": "gavel: model=y"}, rc: -1, msg: bad},
		// Slurm refuses an AdminComment change in a user's update: only
		// root's updates refresh the copy.
		{name: "modify by a user: a valid new comment leaves the copied tag", desc: fields{"comment": "gavel: model=y"},
			rec:    fields{"partition": "gpu", "comment": "gavel: model=x", "admin_comment": "audit; gavel: model=x"},
			writes: []string{"requeue=1"}},
		{name: "modify by root: a valid new comment replaces the copied tag", root: true, desc: fields{"comment": "gavel: model=y"},
			rec:    fields{"partition": "gpu", "comment": "gavel: model=x", "admin_comment": "audit; gavel: model=x"},
			writes: []string{"requeue=1", "admin_comment=audit; gavel: model=y"}},
		{name: "modify by root: same tag, admin comment not rewritten", root: true, desc: fields{"comment": "gavel: model=x; new notes"},
			rec:    fields{"partition": "gpu", "comment": "gavel: model=x", "admin_comment": "gavel: model=x"},
			writes: []string{"requeue=1"}},
		{name: "modify by root: tag removed, copy removed", root: true, desc: fields{"comment": "plain"},
			rec:    fields{"partition": "gpu", "comment": "gavel: model=x", "admin_comment": "gavel: model=x"},
			writes: []string{"admin_comment="}},
		{name: "modify by a user: tag removed, copy kept", desc: fields{"comment": "plain"},
			rec: fields{"partition": "gpu", "comment": "gavel: model=x", "admin_comment": "gavel: model=x"}},
		{name: "modify: moving a malformed tag into a scheduled partition is refused", desc: fields{"partition": "gpu"},
			rec: fields{"partition": "cpu", "comment": "gavel: steps=x"}, rc: -1, msg: bad},
		{name: "modify: moving out of scheduled partitions is fine", desc: fields{"partition": "cpu"},
			rec: fields{"partition": "gpu", "comment": "gavel: steps=x"}},
		// The scheduler preempts by requeueing: a managed job's owner may
		// not turn that off (scontrol update jobid=N requeue=0).
		{name: "modify by a user: requeue=0 on a managed job is refused", desc: fields{"requeue": 0},
			rec: fields{"partition": "gpu", "comment": "gavel: model=x"}, rc: -1, msg: requeueOff},
		{name: "modify by root: requeue=0 passes", root: true, desc: fields{"requeue": 0},
			rec: fields{"partition": "gpu", "comment": "gavel: model=x"}},
		// Nor may they take a managed job off the daemon's lease, which
		// would start it ahead of the allocation.
		{name: "modify by a user: dropping the lease is refused", desc: fields{"dependency": ""},
			rec: fields{"partition": "gpu", "comment": "gavel: model=x", "dependency": "afterany:58(unfulfilled)"}, rc: -1, msg: leaseOff},
		{name: "modify by a user: dropping the lease among others is refused", desc: fields{"dependency": "afterok:12"},
			rec: fields{"partition": "gpu", "comment": "gavel: model=x", "dependency": "afterok:12(unfulfilled),afterany:58(unfulfilled)"},
			rc:  -1, msg: leaseOff},
		{name: "modify by a user: adding a dependency beside the lease passes", desc: fields{"dependency": "afterany:58,afterok:13"},
			rec: fields{"partition": "gpu", "comment": "gavel: model=x", "dependency": "afterany:58(unfulfilled)"}},
		{name: "modify by a user: an unmanaged job's dependency is theirs", desc: fields{"dependency": ""},
			rec: fields{"partition": "cpu", "comment": "gavel: model=x", "dependency": "afterany:58(unfulfilled)"}},
		{name: "modify by root: dropping the lease passes", root: true, desc: fields{"dependency": ""},
			rec: fields{"partition": "gpu", "comment": "gavel: model=x", "dependency": "afterany:58(unfulfilled)"}},
		{name: "modify by the daemon's uid: dropping the lease passes", settings: fields{"daemon_uids": []int{1000}}, desc: fields{"dependency": ""},
			rec: fields{"partition": "gpu", "comment": "gavel: model=x", "dependency": "afterany:58(unfulfilled)"}},
		// A site may require a tag in its scheduled partitions.
		{name: "require_tag: a job without a tag is refused", settings: fields{"require_tag": true},
			desc: fields{"partition": "gpu", "comment": "plain job"}, rc: -1, msg: noTag},
		{name: "require_tag: a job with a tag passes", settings: fields{"require_tag": true},
			desc: fields{"partition": "gpu", "comment": "gavel: model=x"}, writes: []string{"requeue=1", "admin_comment=gavel: model=x"}},
		{name: "require_tag: other partitions are free", settings: fields{"require_tag": true},
			desc: fields{"partition": "cpu", "comment": "plain job"}},
		{name: "require_tag: a user may not remove the tag", settings: fields{"require_tag": true}, desc: fields{"comment": "plain"},
			rec: fields{"partition": "gpu", "comment": "gavel: model=x"}, rc: -1, msg: noTag},
		{name: "require_tag: moving an untagged job into a scheduled partition is refused", settings: fields{"require_tag": true},
			desc: fields{"partition": "gpu"}, rec: fields{"partition": "cpu", "comment": "plain"}, rc: -1, msg: noTag},
		{name: "require_tag: root may remove it", settings: fields{"require_tag": true}, root: true, desc: fields{"comment": "plain"},
			rec: fields{"partition": "gpu", "comment": "gavel: model=x"}},
		{name: "modify: requeue=0 on an unmanaged job passes", desc: fields{"requeue": 0},
			rec: fields{"partition": "gpu", "comment": "plain"}},
		{name: "modify: requeue=0 in another partition passes", desc: fields{"requeue": 0},
			rec: fields{"partition": "cpu", "comment": "gavel: model=x"}},
		{name: "modify: requeue=0 passes where the site does not make jobs requeueable", settings: fields{"requeue": false},
			desc: fields{"requeue": 0}, rec: fields{"partition": "gpu", "comment": "gavel: model=x"}},
	}
	inputs := make([]string, len(cases))
	for i, c := range cases {
		inputs[i] = c.chunk()
	}
	forEachLua(t, func(t *testing.T, lua string) {
		lines := runHarness(t, lua, "jobs", inputs)
		if len(lines) != len(cases) {
			t.Fatalf("%d answers for %d cases", len(lines), len(cases))
		}
		for i, c := range cases {
			f := strings.Split(lines[i], "\t")
			if len(f) != 3 {
				t.Fatalf("harness: unexpected line %q", lines[i])
			}
			rc, msg, writes := f[0], unhex(t, f[1]), unhex(t, f[2])
			var got []string
			if writes != "" {
				got = strings.Split(writes, "\n")
			}
			if rc != fmt.Sprint(c.rc) || msg != c.msg || strings.Join(got, "|") != strings.Join(c.writes, "|") {
				t.Errorf("%s:\n got rc %s, message %q, writes %q\nwant rc %d, message %q, writes %q",
					c.name, rc, msg, got, c.rc, c.msg, c.writes)
			}
		}
	})
}

// chunk writes the case as the Lua chunk the harness loads.
func (c jobCase) chunk() string {
	parts := c.parts
	if parts == nil {
		parts = defaultPartitions
	}
	var b strings.Builder
	b.WriteString("return {")
	fmt.Fprintf(&b, "settings = %s, ", luaValue(c.settings))
	b.WriteString("part_list = {")
	for _, name := range slices.Sorted(maps.Keys(parts)) {
		fmt.Fprintf(&b, "[%s] = %s, ", luaValue(name), luaValue(parts[name]))
	}
	b.WriteString("}, ")
	fmt.Fprintf(&b, "job_desc = %s, ", luaValue(c.desc))
	uid := 1000
	if c.root {
		uid = 0
	}
	fmt.Fprintf(&b, "uid = %d, ", uid)
	if c.rec != nil {
		fmt.Fprintf(&b, "job_rec = %s, ", luaValue(c.rec))
	}
	b.WriteString("}")
	return b.String()
}

// luaValue writes v as a Lua literal; strings byte by byte, in decimal
// escapes, so that any byte survives.
func luaValue(v any) string {
	switch v := v.(type) {
	case nil:
		return "{}"
	case string:
		var b strings.Builder
		b.WriteByte('"')
		for i := 0; i < len(v); i++ {
			fmt.Fprintf(&b, "\\%03d", v[i])
		}
		b.WriteByte('"')
		return b.String()
	case int:
		return fmt.Sprint(v)
	case bool:
		return fmt.Sprint(v)
	case []int:
		items := make([]string, len(v))
		for i, n := range v {
			items[i] = fmt.Sprint(n)
		}
		return "{" + strings.Join(items, ", ") + "}"
	case []string:
		items := make([]string, len(v))
		for i, s := range v {
			items[i] = luaValue(s)
		}
		return "{" + strings.Join(items, ", ") + "}"
	case fields:
		var b strings.Builder
		b.WriteByte('{')
		for _, k := range slices.Sorted(maps.Keys(v)) {
			fmt.Fprintf(&b, "[%s] = %s, ", luaValue(k), luaValue(v[k]))
		}
		b.WriteByte('}')
		return b.String()
	}
	panic(fmt.Sprintf("luaValue: %T", v))
}
