package workload

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const sampleTrace = "ResNet-18 (batch size 64)\tpython3 main.py --data_dir=%s/cifar10\timage_classification/cifar10\t--num_steps\t1\t2000\t1\t1.0\t-1\t0.0\n" +
	"\n" +
	"LM (batch size 20)\tpython main.py --data=%s/wikitext2\tlanguage_modeling\t--steps\t0\t50000\t4\t5\t7200\t12.5\n"

func TestParseTrace(t *testing.T) {
	jobs, err := ParseTrace(strings.NewReader(sampleTrace), referenceTable(t))
	if err != nil {
		t.Fatal(err)
	}
	want := []Job{
		{Model: "ResNet-18 (batch size 64)", ScaleFactor: 1, TotalSteps: 2000, Priority: 1, Arrival: 0,
			Command: "python3 main.py --data_dir=%s/cifar10", WorkingDir: "image_classification/cifar10", NumStepsArg: "--num_steps", NeedsDataDir: true},
		{Model: "LM (batch size 20)", ScaleFactor: 4, TotalSteps: 50000, Priority: 5, SLO: 7200, Arrival: 12.5,
			Command: "python main.py --data=%s/wikitext2", WorkingDir: "language_modeling", NumStepsArg: "--steps"},
	}
	if len(jobs) != len(want) {
		t.Fatalf("%d jobs, want %d", len(jobs), len(want))
	}
	for i := range want {
		if jobs[i] != want[i] {
			t.Errorf("job %d = %+v\nwant    %+v", i, jobs[i], want[i])
		}
	}
}

func TestParseTraceErrors(t *testing.T) {
	good := "A3C\tcmd\tdir\t--n\t0\t100\t1\t1\t-1\t5\n"
	cases := map[string]struct{ trace, wantErr string }{
		"too few fields":     {"A3C\tcmd\n", "line 1: 2 tab-separated fields, want 10"},
		"bad steps":          {"A3C\tcmd\tdir\t--n\t0\tmany\t1\t1\t-1\t0\n", "line 1: total steps \"many\""},
		"fractional steps":   {"A3C\tcmd\tdir\t--n\t0\t10.5\t1\t1\t-1\t0\n", "total steps"},
		"zero scale":         {"A3C\tcmd\tdir\t--n\t0\t10\t0\t1\t-1\t0\n", "scale factor \"0\""},
		"bad data flag":      {"A3C\tcmd\tdir\t--n\tyes\t10\t1\t1\t-1\t0\n", "needs data dir"},
		"bad priority":       {"A3C\tcmd\tdir\t--n\t0\t10\t1\t0\t-1\t0\n", "priority weight \"0\""},
		"bad slo":            {"A3C\tcmd\tdir\t--n\t0\t10\t1\t1\t-5\t0\n", "SLO \"-5\""},
		"nan arrival":        {"A3C\tcmd\tdir\t--n\t0\t10\t1\t1\t-1\tNaN\n", "arrival time \"NaN\""},
		"decreasing arrival": {good + "A3C\tcmd\tdir\t--n\t0\t100\t1\t1\t-1\t4\n", "line 2: arrival time 4 is before"},
		"unknown model":      {"GPT\tcmd\tdir\t--n\t0\t10\t1\t1\t-1\t0\n", "line 1: job type \"GPT\" at scale factor 1 is not in the throughput table"},
		"unknown scale":      {good + "\nA3C\tcmd\tdir\t--n\t0\t100\t2\t1\t-1\t6\n", "line 3: job type \"A3C\" at scale factor 2"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ParseTrace(strings.NewReader(c.trace), referenceTable(t))
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("error = %v, want one containing %q", err, c.wantErr)
			}
		})
	}
}

func TestTraceRoundTrip(t *testing.T) {
	g, err := NewGenerator(referenceTable(t), GeneratorOptions{Rate: 3, Jobs: 50, Seed: 7, MultiGPU: true, MultiPriority: true})
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := g.All()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteTrace(&buf, jobs); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "trace.tsv")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	back, err := ReadTraceFile(path, referenceTable(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != len(jobs) {
		t.Fatalf("%d jobs read back, want %d", len(back), len(jobs))
	}
	for i := range jobs {
		a, b := jobs[i], back[i]
		if a.Model != b.Model || a.ScaleFactor != b.ScaleFactor || a.Priority != b.Priority || a.Arrival != b.Arrival {
			t.Errorf("job %d changed: %+v -> %+v", i, a, b)
		}
		if b.TotalSteps < a.TotalSteps || b.TotalSteps >= a.TotalSteps+1 {
			t.Errorf("job %d steps %v written as %v, want the next integer", i, a.TotalSteps, b.TotalSteps)
		}
	}
	if _, err := ReadTraceFile(filepath.Join(t.TempDir(), "none"), nil); err == nil || !strings.Contains(err.Error(), "open trace") {
		t.Errorf("missing file: error = %v", err)
	}
}
