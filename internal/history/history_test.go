package history

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// The fixtures in testdata are what scripts/capture-history-fixtures.sh
// captured from the local Slurm of each release: sacct --json, and
// slurmrestd's GET /slurmdb/VERSION/jobs for the same jobs (asked as
// rest.Client.JobHistory asks), one job of each kind the script's header
// lists, named after its kind.
var fixtures = []string{"sacct-24.11.json", "rest-v0.0.42.json", "sacct-26.05.json", "rest-v0.0.45.json"}

// want is what the job of one kind reads as; its ids and times are the
// fixture's own and are checked apart.
type want struct {
	user, account           string
	gpus                    int
	gpuType, requestedType  string
	state                   string
	exitCode, requeues      int
	comment                 string
	eligibleAfterSubmission bool
}

var wantByName = map[string]want{
	"typed":    {user: "root", account: "root", gpus: 1, gpuType: "v100", requestedType: "v100", state: "COMPLETED"},
	"untyped":  {user: "root", account: "root", gpus: 2, state: "COMPLETED"},
	"array":    {user: "root", account: "root", gpus: 1, state: "COMPLETED"},
	"alice":    {user: "alice", account: "physics", gpus: 1, gpuType: "p100", requestedType: "p100", state: "COMPLETED"},
	"bob":      {user: "bob", account: "biology", gpus: 1, gpuType: "k80", requestedType: "k80", state: "COMPLETED"},
	"tagged":   {user: "root", account: "root", gpus: 1, state: "COMPLETED", comment: "gavel: model=resnet50 steps=1000"},
	"fails":    {user: "root", account: "root", gpus: 1, state: "FAILED", exitCode: 1},
	"requeued": {user: "root", account: "root", gpus: 1, state: "COMPLETED", requeues: 1, eligibleAfterSubmission: true},
	"het":      {user: "root", account: "root", gpus: 1, state: "COMPLETED"},
	// The het job's second component asked for a v100.
	"het+1": {user: "root", account: "root", gpus: 1, gpuType: "v100", requestedType: "v100", state: "COMPLETED"},
}

// records maps the job ids of a fixture to their job names.
func records(t *testing.T, data []byte) map[int]string {
	t.Helper()
	var doc struct {
		Jobs []struct {
			JobID int    `json:"job_id"`
			Name  string `json:"name"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	names := map[int]string{}
	for _, j := range doc.Jobs {
		names[j.JobID] = j.Name
	}
	return names
}

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestParseFixtures(t *testing.T) {
	for _, file := range fixtures {
		t.Run(file, func(t *testing.T) {
			data := readFixture(t, file)
			names := records(t, data)
			// Where the site's AccountingStorageTRES lists the GPU types
			// (gres/gpu:v100, ...), slurmdbd records the type of every
			// allocation; elsewhere gres/gpu alone.
			typedTRES := strings.Contains(string(data), `"name": "gpu:`)
			h, err := Parse(data)
			if err != nil {
				t.Fatal(err)
			}
			seen := map[string]int{}
			for _, j := range h.Jobs {
				key := j.Name
				if j.HetJobOffset > 0 {
					key += fmt.Sprintf("+%d", j.HetJobOffset)
				}
				w, ok := wantByName[key]
				if !ok {
					t.Errorf("job %s (%s) kept", j.ID, j.Name)
					continue
				}
				if typedTRES && w.gpuType == "" {
					// The type it ran on: the local nodes are named
					// after their GPUs' type.
					w.gpuType, _, _ = strings.Cut(j.Nodes, "-")
				}
				seen[j.Name]++
				got := want{user: j.User, account: j.Account, gpus: j.GPUs, gpuType: j.GPUType,
					requestedType: j.RequestedType, state: j.State, exitCode: j.ExitCode, requeues: j.Requeues,
					comment: j.Comment, eligibleAfterSubmission: j.Eligible.After(j.Submit)}
				if got != w {
					t.Errorf("job %s (%s) reads as\n%+v, want\n%+v", j.ID, j.Name, got, w)
				}
				if j.Partition != "gpu" || j.QOS != "normal" || j.TimeLimit != 5*time.Minute || j.Priority <= 0 ||
					j.Nodes == "" || !strings.Contains(j.SubmitLine, "-J "+j.Name) {
					t.Errorf("job %s: %+v", j.ID, j)
				}
				if j.Submit.IsZero() || j.Start.Before(j.Submit) || j.End.Before(j.Start) || j.Eligible.After(j.Start) {
					t.Errorf("job %s: times submit %v eligible %v start %v end %v", j.ID, j.Submit, j.Eligible, j.Start, j.End)
				}
			}
			// Kinds with several records: the array's three tasks, the
			// het job's two components.
			wantSeen := map[string]int{"array": 3, "het": 2}
			for name := range wantByName {
				if strings.Contains(name, "+") {
					continue
				}
				if seen[name] != max(wantSeen[name], 1) {
					t.Errorf("%d jobs named %s, want %d", seen[name], name, max(wantSeen[name], 1))
				}
			}

			wantSkips := []string{"cancelled: " + ReasonNeverStarted, "cpu: " + ReasonNoGPUs, "running: " + ReasonNotFinished}
			if strings.HasPrefix(file, "rest-") {
				// slurmdbd lists no job that was never eligible in
				// a time window: the held job cancelled.
				wantSkips = slices.DeleteFunc(wantSkips, func(s string) bool { return strings.HasPrefix(s, "cancelled") })
			}
			var skips []string
			for _, s := range h.Skipped {
				var id int
				fmt.Sscan(s.ID, &id)
				skips = append(skips, names[id]+": "+s.Reason)
			}
			slices.Sort(skips)
			slices.Sort(wantSkips)
			if !slices.Equal(skips, wantSkips) {
				t.Errorf("skipped %q, want %q", skips, wantSkips)
			}
		})
	}
}

// TestParseIDs checks the ids of array tasks and het components, and the
// order: by submission, then the array's id, then the task.
func TestParseIDs(t *testing.T) {
	for _, file := range fixtures {
		t.Run(file, func(t *testing.T) {
			h, err := Parse(readFixture(t, file))
			if err != nil {
				t.Fatal(err)
			}
			var array, het []Job
			for _, j := range h.Jobs {
				switch j.Name {
				case "array":
					array = append(array, j)
				case "het":
					het = append(het, j)
				default:
					if j.ID != fmt.Sprint(j.JobID) || j.ArrayJobID != 0 || j.ArrayTaskID != -1 || j.HetJobID != 0 {
						t.Errorf("job %s: ids %+v", j.ID, j)
					}
				}
			}
			if len(array) != 3 || len(het) != 2 {
				t.Fatalf("%d array tasks, %d het components", len(array), len(het))
			}
			// The array's last task keeps the array's id; the others
			// get ids of their own.
			first := array[0].ArrayJobID
			for i, j := range array {
				if j.ArrayJobID != first || j.ArrayTaskID != i || j.ID != fmt.Sprintf("%d_%d", first, i) {
					t.Errorf("array task %d: %+v", i, j)
				}
			}
			if array[2].JobID != first || array[0].JobID == first {
				t.Errorf("array tasks' job ids %d %d %d, array %d", array[0].JobID, array[1].JobID, array[2].JobID, first)
			}
			for i, j := range het {
				if j.HetJobID != het[0].JobID || j.HetJobOffset != i || j.ID != fmt.Sprintf("%d+%d", het[0].JobID, i) {
					t.Errorf("het component %d: %+v", i, j)
				}
			}
			// The second component asked for a v100, the first for any
			// GPU.
			if het[0].RequestedType != "" || het[1].RequestedType != "v100" || het[1].GPUType != "v100" {
				t.Errorf("het components' types %q/%q, %q/%q", het[0].RequestedType, het[0].GPUType,
					het[1].RequestedType, het[1].GPUType)
			}
			if !slices.IsSortedFunc(h.Jobs, func(a, b Job) int { return a.Submit.Compare(b.Submit) }) {
				t.Error("jobs not sorted by submission")
			}
		})
	}
}

// base is a usable record in the plain-number form, and baseObjects the
// same in the {"set","infinite","number"} form; edit changes fields of it.
const base = `{"job_id": 7, "name": "train", "user": "alice", "account": "physics", "partition": "gpu",
	"qos": "normal", "nodes": "v100-1", "priority": 100, "restart_cnt": 0,
	"array": {"job_id": 0, "task_id": 4294967294}, "het": {"job_id": 0, "job_offset": 4294967294},
	"time": {"submission": 1000, "eligible": 1000, "start": 1010, "end": 1070, "limit": 60},
	"tres": {"allocated": [{"type": "cpu", "name": "", "count": 4}, {"type": "gres", "name": "gpu", "count": 2},
		{"type": "gres", "name": "gpu:v100", "count": 2}],
		"requested": [{"type": "gres", "name": "gpu", "count": 2}]},
	"state": {"current": ["COMPLETED"]}, "exit_code": {"status": ["SUCCESS"], "return_code": 0},
	"comment": {"job": "gavel: model=bert", "administrator": "", "system": ""},
	"submit_line": "sbatch --gres=gpu:2 train.sh"}`

const baseObjects = `{"job_id": 7, "name": "train", "user": "alice", "account": "physics", "partition": "gpu",
	"qos": "normal", "nodes": "v100-1", "priority": {"set": true, "infinite": false, "number": 100}, "restart_cnt": 0,
	"array": {"job_id": 0, "task_id": {"set": false, "infinite": false, "number": 0}, "task": ""},
	"het": {"job_id": 0, "job_offset": {"set": false, "infinite": false, "number": 0}},
	"time": {"submission": 1000, "eligible": 1000, "start": {"set": true, "infinite": false, "number": 1010},
		"end": {"set": true, "infinite": false, "number": 1070}, "limit": {"set": true, "infinite": false, "number": 60}},
	"tres": {"allocated": [{"type": "gres", "name": "gpu", "id": 1001, "count": 2},
		{"type": "gres", "name": "gpu:v100", "id": 1002, "count": 2}],
		"requested": [{"type": "gres", "name": "gpu", "id": 1001, "count": 2}]},
	"state": {"current": ["COMPLETED"], "reason": "None"},
	"exit_code": {"status": ["SUCCESS"], "return_code": {"set": true, "infinite": false, "number": 0}},
	"comment": {"job": "gavel: model=bert", "administrator": "", "system": ""},
	"submit_line": "sbatch --gres=gpu:2 train.sh"}`

// baseJob is what both base records read as.
func baseJob() Job {
	return Job{ID: "7", JobID: 7, ArrayTaskID: -1, Name: "train", User: "alice", Account: "physics",
		Partition: "gpu", QOS: "normal", Submit: time.Unix(1000, 0).UTC(), Eligible: time.Unix(1000, 0).UTC(),
		Start: time.Unix(1010, 0).UTC(), End: time.Unix(1070, 0).UTC(), TimeLimit: time.Hour, GPUs: 2,
		GPUType: "v100", Nodes: "v100-1", State: "COMPLETED", Comment: "gavel: model=bert", Priority: 100,
		SubmitLine: "sbatch --gres=gpu:2 train.sh"}
}

// edit returns record with the top-level or nested fields of changes set
// (a path "time.start" reaches into objects); a nil value removes the
// field.
func edit(t *testing.T, record string, changes map[string]any) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(record), &m); err != nil {
		t.Fatal(err)
	}
	for path, v := range changes {
		keys := strings.Split(path, ".")
		obj := m
		for _, k := range keys[:len(keys)-1] {
			obj = obj[k].(map[string]any)
		}
		if v == nil {
			delete(obj, keys[len(keys)-1])
		} else {
			obj[keys[len(keys)-1]] = v
		}
	}
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func TestParseRecords(t *testing.T) {
	obj := func(n int64) map[string]any { return map[string]any{"set": true, "infinite": false, "number": n} }
	gpus := func(entries ...any) []any { return entries }
	gres := func(name string, count any) map[string]any {
		return map[string]any{"type": "gres", "name": name, "count": count}
	}
	tests := []struct {
		name    string
		changes map[string]any
		// reason is the skip's reason; "" means the job is kept and
		// reads as baseJob changed by job.
		reason string
		job    func(*Job)
	}{
		{name: "usable"},
		{name: "array task", changes: map[string]any{"array.job_id": 5, "array.task_id": obj(2)},
			job: func(j *Job) { j.ID, j.ArrayJobID, j.ArrayTaskID = "5_2", 5, 2 }},
		{name: "array task, plain task id", changes: map[string]any{"array.job_id": 5, "array.task_id": 0},
			job: func(j *Job) { j.ID, j.ArrayJobID, j.ArrayTaskID = "5_0", 5, 0 }},
		{name: "tasks not started", changes: map[string]any{"array.job_id": 7, "array.task": "3-5%2",
			"time.start": 0, "state.current": []any{"CANCELLED"}}, reason: ReasonNeverStarted},
		{name: "het component", changes: map[string]any{"het.job_id": 6, "het.job_offset": obj(1)},
			job: func(j *Job) { j.ID, j.HetJobID, j.HetJobOffset = "6+1", 6, 1 }},
		{name: "requeued", changes: map[string]any{"restart_cnt": 2}, job: func(j *Job) { j.Requeues = 2 }},
		{name: "no time limit", changes: map[string]any{"time.limit": map[string]any{"set": false, "infinite": true, "number": 0}},
			job: func(j *Job) { j.TimeLimit = 0 }},
		{name: "infinite plain time limit", changes: map[string]any{"time.limit": 4294967295},
			job: func(j *Job) { j.TimeLimit = 0 }},
		{name: "failed", changes: map[string]any{"state.current": []any{"FAILED"}, "exit_code.return_code": obj(3)},
			job: func(j *Job) { j.State, j.ExitCode = "FAILED", 3 }},
		{name: "killed by a signal", changes: map[string]any{"state.current": []any{"CANCELLED"},
			"exit_code": map[string]any{"status": []any{"SIGNALED"}, "return_code": map[string]any{"set": false},
				"signal": map[string]any{"id": obj(9), "name": "KILL"}}},
			job: func(j *Job) { j.State, j.ExitCode = "CANCELLED", 137 }},
		{name: "state as one string", changes: map[string]any{"state.current": "TIMEOUT"},
			job: func(j *Job) { j.State = "TIMEOUT" }},
		{name: "comment as one string", changes: map[string]any{"comment": "gavel: model=x"},
			job: func(j *Job) { j.Comment = "gavel: model=x" }},
		{name: "comment not stored, tag on the submit line", changes: map[string]any{"comment.job": "",
			"submit_line": "sbatch --comment=gavel: model=bert steps=10 train.sh"},
			job: func(j *Job) {
				j.Comment, j.SubmitLine = "gavel: model=bert steps=10", "sbatch --comment=gavel: model=bert steps=10 train.sh"
			}},
		{name: "untyped allocation, typed request", changes: map[string]any{"tres.allocated": gpus(gres("gpu", 2)),
			"submit_line": "sbatch -G v100:2 train.sh"},
			job: func(j *Job) { j.GPUType, j.RequestedType, j.SubmitLine = "v100", "v100", "sbatch -G v100:2 train.sh" }},
		{name: "typed request TRES", changes: map[string]any{"tres.requested": gpus(gres("gpu", 2), gres("gpu:v100", 2))},
			job: func(j *Job) { j.RequestedType = "v100" }},
		{name: "two types allocated", changes: map[string]any{"tres.allocated": gpus(gres("gpu", 2), gres("gpu:v100", 1), gres("gpu:k80", 1))},
			job: func(j *Job) { j.GPUType = "k80,v100" }},
		{name: "typed TRES alone", changes: map[string]any{"tres.allocated": gpus(gres("gpu:p100", 3))},
			job: func(j *Job) { j.GPUs, j.GPUType = 3, "p100" }},
		{name: "untyped everywhere", changes: map[string]any{"tres.allocated": gpus(gres("gpu", 2))},
			job: func(j *Job) { j.GPUType = "" }},
		{name: "plain null fields", changes: map[string]any{"priority": nil, "array": nil, "het": nil, "exit_code": nil},
			job: func(j *Job) { j.Priority = 0 }},

		{name: "pending", changes: map[string]any{"state.current": []any{"PENDING"}}, reason: ReasonNotFinished},
		{name: "running", changes: map[string]any{"state.current": []any{"RUNNING"}, "time.end": 0}, reason: ReasonNotFinished},
		{name: "earlier run", changes: map[string]any{"state.current": []any{"PENDING", "REQUEUED"}}, reason: ReasonEarlierRun},
		{name: "cancelled pending", changes: map[string]any{"state.current": []any{"CANCELLED"}, "time.start": 4294967294,
			"time.eligible": 0}, reason: ReasonNeverStarted},
		{name: "cpu only", changes: map[string]any{"tres.allocated": []any{map[string]any{"type": "cpu", "name": "", "count": 4}},
			"tres.requested": []any{}}, reason: ReasonNoGPUs},
		{name: "zero GPUs", changes: map[string]any{"tres.allocated": gpus(gres("gpu", 0))}, reason: ReasonNoGPUs},
		{name: "no allocated TRES", changes: map[string]any{"tres.allocated": nil},
			reason: ReasonMalformed + "GPUs requested but no allocated TRES"},
		{name: "negative GPU count", changes: map[string]any{"tres.allocated": gpus(gres("gpu", -1))},
			reason: ReasonMalformed + "allocated TRES: gres/gpu count -1"},
		{name: "GPU count absent", changes: map[string]any{"tres.allocated": gpus(map[string]any{"type": "gres", "name": "gpu"})},
			reason: ReasonMalformed + "allocated TRES: gres/gpu has no count"},
		{name: "GPU count a string", changes: map[string]any{"tres.allocated": gpus(gres("gpu", "two"))},
			reason: ReasonMalformed + `"two" is not a number`},
		{name: "no time block", changes: map[string]any{"time": nil}, reason: ReasonMalformed + "no time block"},
		{name: "no end", changes: map[string]any{"time.end": 0}, reason: ReasonMalformed + "no end time"},
		{name: "start after end", changes: map[string]any{"time.start": 2000}, reason: ReasonMalformed + "start after end"},
		{name: "submitted after start", changes: map[string]any{"time.submission": 1020},
			reason: ReasonMalformed + "submitted after it started"},
		{name: "no submission", changes: map[string]any{"time.submission": nil}, reason: ReasonMalformed + "no submission time"},
		{name: "unknown state", changes: map[string]any{"state.current": []any{"EXPLODED"}},
			reason: ReasonMalformed + `unknown state "EXPLODED"`},
		{name: "state a number", changes: map[string]any{"state.current": 3},
			reason: ReasonMalformed + "state.current is a JSON number, not a list"},
		{name: "no state", changes: map[string]any{"state": nil}, reason: ReasonMalformed + "no state"},
		{name: "empty state", changes: map[string]any{"state.current": []any{}}, reason: ReasonMalformed + "no state"},
		{name: "no job id", changes: map[string]any{"job_id": nil}, reason: ReasonMalformed + "no job id"},
		{name: "name a number", changes: map[string]any{"name": 5},
			reason: ReasonMalformed + "name is a JSON number, not a string"},
		{name: "time block a list", changes: map[string]any{"time": []any{1}},
			reason: ReasonMalformed + "time is a JSON array, not an object"},
	}
	for _, tt := range tests {
		for form, record := range map[string]string{"plain": base, "objects": baseObjects} {
			t.Run(tt.name+"/"+form, func(t *testing.T) {
				doc := `{"jobs": [` + edit(t, record, tt.changes) + `]}`
				h, err := Parse([]byte(doc))
				if err != nil {
					t.Fatal(err)
				}
				if tt.reason != "" {
					wantID := "7"
					if tt.name == "no job id" {
						wantID = "record 1"
					}
					if tt.name == "tasks not started" {
						wantID = "7_[3-5%2]"
					}
					if want := []Skip{{ID: wantID, Reason: tt.reason}}; len(h.Jobs) != 0 || !reflect.DeepEqual(h.Skipped, want) {
						t.Errorf("jobs %+v, skipped %+v; want skipped %+v", h.Jobs, h.Skipped, want)
					}
					return
				}
				want := baseJob()
				if tt.job != nil {
					tt.job(&want)
				}
				if len(h.Skipped) != 0 || len(h.Jobs) != 1 || !reflect.DeepEqual(h.Jobs[0], want) {
					t.Errorf("jobs %+v, skipped %+v; want\n%+v", h.Jobs, h.Skipped, want)
				}
			})
		}
	}
}

func TestParseDocuments(t *testing.T) {
	for _, tt := range []struct {
		doc     string
		jobs    int
		skipped []Skip
		err     string
	}{
		{doc: `{"jobs": []}`},
		{doc: `{"jobs": [1, "x", null, [], {"job_id": 3, "state": {"current": ["PENDING"]}}], "errors": []}`,
			skipped: []Skip{{"record 1", ReasonMalformed + "not a JSON object"}, {"record 2", ReasonMalformed + "not a JSON object"},
				{"record 3", ReasonMalformed + "no job id"}, {"record 4", ReasonMalformed + "not a JSON object"},
				{"3", ReasonNotFinished}}},
		{doc: `{"jobs": [{"job_id": 9, "name": 1}]}`, skipped: []Skip{{"9", ReasonMalformed + "name is a JSON number, not a string"}}},
		{doc: ``, err: "not a Slurm job list: unexpected end of JSON input"},
		{doc: `[]`, err: "not a Slurm job list: json: cannot unmarshal array into Go value of type struct"},
		{doc: `{"meta": {}}`, err: `not a Slurm job list: no "jobs" list`},
		{doc: `{"jobs": null}`, err: `not a Slurm job list: no "jobs" list`},
		{doc: `{"jobs": {}}`, err: "not a Slurm job list: json: cannot unmarshal object into Go struct field .jobs of type []json.RawMessage"},
	} {
		h, err := Parse([]byte(tt.doc))
		switch {
		case tt.err != "":
			if err == nil || !strings.HasPrefix(err.Error(), tt.err) {
				t.Errorf("%s: error %v, want %q", tt.doc, err, tt.err)
			}
		case err != nil:
			t.Errorf("%s: %v", tt.doc, err)
		case len(h.Jobs) != tt.jobs || !reflect.DeepEqual(h.Skipped, tt.skipped):
			t.Errorf("%s: jobs %+v, skipped %+v; want %d jobs, skipped %+v", tt.doc, h.Jobs, h.Skipped, tt.jobs, tt.skipped)
		}
	}
}

// TestParseDuplicates keeps, of two records of one job, the one with more
// restarts.
func TestParseDuplicates(t *testing.T) {
	later := edit(t, base, map[string]any{"restart_cnt": 1, "time.submission": 1005})
	for _, doc := range []string{`{"jobs": [` + base + `,` + later + `]}`, `{"jobs": [` + later + `,` + base + `]}`} {
		h, err := Parse([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		if len(h.Jobs) != 1 || h.Jobs[0].Requeues != 1 || !reflect.DeepEqual(h.Skipped, []Skip{{"7", ReasonDuplicate}}) {
			t.Errorf("jobs %+v, skipped %+v", h.Jobs, h.Skipped)
		}
	}
}

func TestCounts(t *testing.T) {
	h := &History{Skipped: []Skip{{"1", ReasonNoGPUs}, {"2", ReasonMalformed + "no state"}, {"3", ReasonMalformed + "no time block"},
		{"4", ReasonNoGPUs}, {"5", ReasonNotFinished}}}
	want := map[string]int{ReasonNoGPUs: 2, ReasonMalformed: 2, ReasonNotFinished: 1}
	if got := h.Counts(); !reflect.DeepEqual(got, want) {
		t.Errorf("Counts() = %v, want %v", got, want)
	}
}

func TestRequestedTypes(t *testing.T) {
	for _, tt := range []struct {
		line string
		want []string
	}{
		{"sbatch --gres=gpu:v100:1 x.sh", []string{"v100"}},
		{"sbatch --gres gpu:a100 x.sh", []string{"a100"}},
		{"sbatch --gres=gpu:2 x.sh", nil},
		{"sbatch --gres=gpu x.sh", nil},
		{"sbatch --gres=shard:v100:2 x.sh", nil},
		{"sbatch --gpus=v100:2 x.sh", []string{"v100"}},
		{"sbatch -G k80:1 x.sh", []string{"k80"}},
		{"sbatch -Gk80:1 x.sh", []string{"k80"}},
		{"sbatch --gpus-per-node=p100:4 x.sh", []string{"p100"}},
		{"sbatch --gpus=4 x.sh", nil},
		{"sbatch --tres-per-task=gres/gpu:v100:1 x.sh", []string{"v100"}},
		{"sbatch --gres=gpu:v100:1,gpu:k80:1 x.sh", []string{"k80", "v100"}},
		{"sbatch --gres", nil},
		{"", nil},
	} {
		if got := requestedTypes(tt.line); !slices.Equal(got, tt.want) {
			t.Errorf("requestedTypes(%q) = %q, want %q", tt.line, got, tt.want)
		}
	}
}

func TestTagFromSubmitLine(t *testing.T) {
	for _, tt := range []struct{ line, want string }{
		{"sbatch --comment gavel: model=resnet50 steps=1000 --wrap sleep 3", "gavel: model=resnet50 steps=1000"},
		{"sbatch --comment=gavel: model=x train.sh", "gavel: model=x"},
		{"sbatch --comment=run 4 gavel: model=x -p gpu train.sh", "gavel: model=x"},
		{"sbatch --comment=just words -p gpu x.sh", ""},
		{"sbatch --comment=x -J gavel: model=y x.sh", ""},
		{"sbatch x.sh", ""},
	} {
		if got := tagFromSubmitLine(tt.line); got != tt.want {
			t.Errorf("tagFromSubmitLine(%q) = %q, want %q", tt.line, got, tt.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	// Whole fixtures (100 kB) slow the fuzzer a thousandfold: each
	// seeds a few of its records, each alone.
	for _, file := range fixtures {
		var doc struct {
			Jobs []json.RawMessage `json:"jobs"`
		}
		if err := json.Unmarshal(readFixture(f, file), &doc); err != nil {
			f.Fatal(err)
		}
		for _, r := range doc.Jobs {
			var rec struct {
				Name string `json:"name"`
			}
			if json.Unmarshal(r, &rec) == nil && slices.Contains([]string{"het", "cancelled", "requeued"}, rec.Name) {
				f.Add([]byte(`{"jobs": [` + string(r) + `]}`))
			}
		}
	}
	f.Add([]byte(`{"jobs": [` + base + `]}`))
	f.Add([]byte(`{"jobs": [` + baseObjects + `]}`))
	f.Add([]byte(`{"jobs": [1, null, {"job_id": {"set": true, "number": 1e300}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := Parse(data)
		if err != nil {
			return
		}
		for _, j := range h.Jobs {
			if j.GPUs <= 0 || j.Start.After(j.End) || j.ID == "" {
				t.Errorf("kept %+v", j)
			}
		}
		for _, s := range h.Skipped {
			if s.ID == "" || s.Reason == "" {
				t.Errorf("skip %+v", s)
			}
		}
	})
}
