package slurmtest

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseEnvFile(t *testing.T) {
	tests := map[string]struct {
		input   string
		want    map[string]string
		wantErr string
	}{
		"plain values, comments and blank lines": {
			input: "# header\n\nSLURMRESTD_URL=http://127.0.0.1:16820\nSLURM_USER_NAME=root\n",
			want:  map[string]string{"SLURMRESTD_URL": "http://127.0.0.1:16820", "SLURM_USER_NAME": "root"},
		},
		"backslash-escaped spaces as printf %q writes them": {
			input: `SLURM_GPU_NODES=v100:2:4\ p100:2:4\ k80:2:4`,
			want:  map[string]string{"SLURM_GPU_NODES": "v100:2:4 p100:2:4 k80:2:4"},
		},
		"single-quoted part and empty value": {
			input: "A='x y'z\nB=\n",
			want:  map[string]string{"A": "x yz", "B": ""},
		},
		"later assignment wins": {
			input: "A=1\nA=2\n",
			want:  map[string]string{"A": "2"},
		},
		"expansion is refused": {
			input:   "A=$HOME/x",
			wantErr: "line 1 (A): unsupported shell syntax",
		},
		"unquoted space is refused": {
			input:   "A=x y",
			wantErr: "unsupported shell syntax",
		},
		"unterminated quote": {
			input:   "A='x",
			wantErr: "unterminated single quote",
		},
		"trailing backslash": {
			input:   `A=x\`,
			wantErr: "trailing backslash",
		},
		"not an assignment": {
			input:   "export A\n",
			wantErr: "line 1: not a NAME=value assignment",
		},
		"name starting with a digit": {
			input:   "1A=x\n",
			wantErr: "not a NAME=value assignment",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := parseEnvFile(strings.NewReader(tc.input))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestParseGPUNodes(t *testing.T) {
	tests := map[string]struct {
		spec    string
		want    []ExpectedNode
		wantErr string
	}{
		"default layout": {
			spec: "v100:2:4 k80:1:8",
			want: []ExpectedNode{
				{Name: "v100-1", GPUType: "v100", GPUs: 4},
				{Name: "v100-2", GPUType: "v100", GPUs: 4},
				{Name: "k80-1", GPUType: "k80", GPUs: 8},
			},
		},
		"zero nodes of a type": {
			spec: "v100:0:4 p100:1:2",
			want: []ExpectedNode{{Name: "p100-1", GPUType: "p100", GPUs: 2}},
		},
		"missing field":   {spec: "v100:2", wantErr: `bad node group "v100:2"`},
		"non-numeric":     {spec: "v100:two:4", wantErr: `bad node group "v100:two:4"`},
		"zero GPUs":       {spec: "v100:1:0", wantErr: `bad node group "v100:1:0"`},
		"empty spec":      {spec: "  ", wantErr: "no node groups"},
		"upper-case type": {spec: "V100:1:1", wantErr: `bad node group "V100:1:1"`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseGPUNodes(tc.spec)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
