package bridge

import (
	"fmt"
	"strings"
	"testing"
)

func TestArrayTaskIDs(t *testing.T) {
	tests := []struct {
		expr      string
		max       int
		wantIDs   string
		wantTotal int
		wantErr   string
	}{
		{expr: "0-7", max: 100, wantIDs: "[0 1 2 3 4 5 6 7]", wantTotal: 8},
		{expr: "4", max: 100, wantIDs: "[4]", wantTotal: 1},
		{expr: "3-4,6-7", max: 100, wantIDs: "[3 4 6 7]", wantTotal: 4},
		{expr: "1,3,5-9:2", max: 100, wantIDs: "[1 3 5 7 9]", wantTotal: 5},
		{expr: "0-10:4", max: 100, wantIDs: "[0 4 8]", wantTotal: 3},
		// Counting does not list: a large array costs max ids.
		{expr: "0-3999999", max: 3, wantIDs: "[0 1 2]", wantTotal: 4_000_000},
		{expr: "2-7", max: 0, wantIDs: "[]", wantTotal: 6},
		{expr: "", wantErr: "empty"},
		{expr: "0-7%2", wantErr: "not a task id"},
		{expr: "7-3", wantErr: "ends before it starts"},
		{expr: "1:2", wantErr: "a step without a range"},
		{expr: "0-9:0", wantErr: "step is not a positive number"},
		{expr: "0-4000001", wantErr: "not a task id"},
		{expr: "-1", wantErr: "not a task id"},
		{expr: "1,,2", wantErr: "not a task id"},
	}
	for _, tc := range tests {
		t.Run(tc.expr, func(t *testing.T) {
			ids, total, err := ArrayTaskIDs(tc.expr, tc.max)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want it to mention %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprint(ids); got != tc.wantIDs || total != tc.wantTotal {
				t.Errorf("ids %s, total %d; want %s, %d", got, total, tc.wantIDs, tc.wantTotal)
			}
		})
	}
}

// Slurm names an array task ARRAY_TASK; the array's own id alone would
// name every task of the array.
func TestSlurmName(t *testing.T) {
	tests := map[string]struct {
		job  Job
		want string
	}{
		"plain job":                        {Job{ID: 42}, "42"},
		"array's own record":               {Job{ID: 130, ArrayJobID: 130, ArrayTasks: "2-7"}, "130"},
		"task with a record of its own":    {Job{ID: 131, ArrayJobID: 130, ArrayTaskID: 0}, "130_0"},
		"last task, on the array's own id": {Job{ID: 130, ArrayJobID: 130, ArrayTaskID: 7}, "130_7"},
		"het job component":                {Job{ID: 140, HetJobID: 139, HetJobOffset: 1}, "140"},
	}
	for name, tc := range tests {
		if got := tc.job.SlurmName(); got != tc.want {
			t.Errorf("%s: %q, want %q", name, got, tc.want)
		}
	}
}
