package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSimulatePlotCSVMergesSweeps(t *testing.T) {
	dir := t.TempDir()
	header := "policy,rate_jobs_per_h,seed,saturated,avg_jct_h,p50_jct_h,error\n"
	low := header +
		"aware,1,0,false,10,5,\n" +
		"aware,1,1,false,12,5,\n" +
		"agnostic,1,0,false,20,5,\n" +
		"agnostic,1,1,false,22,5,\n"
	high := header +
		"aware,2,0,false,30,5,\n" +
		"aware,2,1,false,34,5,\n" +
		"agnostic,2,0,true,,,cluster saturated\n" +
		"agnostic,2,1,false,90,5,\n"
	lowPath, highPath := filepath.Join(dir, "low.csv"), filepath.Join(dir, "high.csv")
	for path, text := range map[string]string{lowPath: low, highPath: high} {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, "plot")
	var stdout, stderr bytes.Buffer
	code := runSimulate([]string{"--plot-csv", lowPath + "," + highPath, "--cluster", "v100=4,k80=2", "--window", "10:20", "--out", out}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	svg, err := os.ReadFile(filepath.Join(out, "avg_jct.svg"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(svg)
	// aware has two points (means 11 and 32), agnostic one (21): one seed
	// saturated at rate 2, which is a gap marked with a cross.
	for _, want := range []string{`data-series="2"`, `data-points="3"`, `data-saturated="1"`} {
		if !strings.Contains(text, want) {
			t.Errorf("SVG root lacks %s", want)
		}
	}
	for _, want := range []string{">aware</text>", ">agnostic</text>", ">2 k80, 4 v100; single-GPU; jobs 10-19; mean over seeds 0,1</text>"} {
		if !strings.Contains(text, want) {
			t.Errorf("SVG lacks %q", want)
		}
	}
}

func TestSimulatePlotCSVErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	cases := map[string]struct {
		args    []string
		wantErr string
	}{
		"no out":         {[]string{"--plot-csv", "x.csv"}, "--plot-csv needs --out"},
		"missing file":   {[]string{"--plot-csv", filepath.Join(dir, "none.csv"), "--out", dir}, "no such file"},
		"missing column": {[]string{"--plot-csv", write("a.csv", "policy,seed\np,0\n"), "--out", dir}, `no "rate_jobs_per_h" column`},
		"bad rate": {[]string{"--plot-csv", write("b.csv", "policy,rate_jobs_per_h,seed,saturated,avg_jct_h,error\np,fast,0,false,1,\n"), "--out", dir},
			"line 2: rate"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := runSimulate(c.args, &stdout, &stderr); code == 0 || !strings.Contains(stderr.String(), c.wantErr) {
				t.Errorf("exit %d, stderr %q; want a failure mentioning %q", code, stderr.String(), c.wantErr)
			}
		})
	}
}
