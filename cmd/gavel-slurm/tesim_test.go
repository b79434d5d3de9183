package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestSimulateTEJSON(t *testing.T) {
	var out, errOut bytes.Buffer
	code := runSimulateTE([]string{"--nodes", "8", "--jobs", "1500", "--workloads", "1", "--repeats", "1", "--json"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var got []struct {
		Method   string
		Settings struct {
			Weight float64
			Cap    int
		}
		TE, BE struct{ P50, P95, P99 float64 }
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out.String())
	}
	byName := map[string]int{}
	for i, r := range got {
		byName[r.Method] = i
	}
	if len(got) != 4 || len(byName) != 4 {
		t.Fatalf("methods %v", byName)
	}
	fifo, fit := got[byName["fifo"]], got[byName["fitgpp"]]
	if fit.Settings.Cap != 1 || got[byName["lrtp"]].Settings.Cap != 0 || fit.Settings.Weight != 4 {
		t.Errorf("default settings: %+v", got)
	}
	if !(fit.TE.P95 < fifo.TE.P95) || fit.TE.P50 < 1 || fifo.BE.P50 < 1 {
		t.Errorf("fifo %+v fitgpp %+v", fifo, fit)
	}
}

func TestSimulateTETable(t *testing.T) {
	var out, errOut bytes.Buffer
	code := runSimulateTE([]string{"--policy", "fifo,fitgpp", "--nodes", "4", "--jobs", "300", "--workloads", "1", "--weight", "2", "--cap", "3"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	s := out.String()
	if !strings.Contains(s, "4 nodes x 8 GPUs, 30% TE, load 2.0") || !strings.Contains(s, "fitgpp (s=2)") || strings.Contains(s, "lrtp") {
		t.Errorf("output:\n%s", s)
	}
}

func TestSimulateTEBadFlags(t *testing.T) {
	for _, args := range [][]string{{"--policy", "sjf"}, {"--nodes", "0"}, {"--cap", "-2"}, {"extra"}} {
		var out, errOut bytes.Buffer
		if code := runSimulateTE(args, &out, &errOut); code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, errOut.String())
		}
	}
}
