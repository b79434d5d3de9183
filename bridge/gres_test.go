package bridge

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseGRESList(t *testing.T) {
	tests := map[string]struct {
		in   string
		want []GRES
	}{
		"empty":            {"", nil},
		"null":             {"(null)", nil},
		"node typed":       {"gpu:v100:4(S:0)", []GRES{{Name: "gpu", Type: "v100", Count: 4, Detail: "S:0"}}},
		"node two sockets": {"gpu:k80:8(S:0-1)", []GRES{{Name: "gpu", Type: "k80", Count: 8, Detail: "S:0-1"}}},
		"used with index list": {
			"gpu:p100:2(IDX:0,2),shard:0(0/8)",
			[]GRES{{Name: "gpu", Type: "p100", Count: 2, Detail: "IDX:0,2"}, {Name: "shard", Count: 0, Detail: "0/8"}},
		},
		"used none":       {"gpu:v100:0(IDX:N/A)", []GRES{{Name: "gpu", Type: "v100", Count: 0, Detail: "IDX:N/A"}}},
		"tres untyped":    {"gres/gpu:2", []GRES{{Name: "gpu", Count: 2}}},
		"tres typed":      {"gres/gpu:v100:2", []GRES{{Name: "gpu", Type: "v100", Count: 2}}},
		"old colon form":  {"gres:gpu:1", []GRES{{Name: "gpu", Count: 1}}},
		"no count":        {"gpu", []GRES{{Name: "gpu", Count: 1}}},
		"type no count":   {"gpu:a100", []GRES{{Name: "gpu", Type: "a100", Count: 1}}},
		"no_consume flag": {"gpu:v100:no_consume:2", []GRES{{Name: "gpu", Type: "v100", Count: 2}}},
		"suffix count":    {"mps:1K", []GRES{{Name: "mps", Count: 1024}}},
		"two entries": {
			"gres/gpu:1,gres/shard:4",
			[]GRES{{Name: "gpu", Count: 1}, {Name: "shard", Count: 4}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseGRESList(tc.in)
			if err != nil {
				t.Fatalf("ParseGRESList(%q): %v", tc.in, err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("ParseGRESList(%q) = %+v, want %+v", tc.in, got, tc.want)
			}
		})
	}
}

func TestParseGRESListErrors(t *testing.T) {
	tests := map[string]struct{ in, wantErr string }{
		"unclosed paren": {"gpu:v100:4(S:0", "unbalanced '('"},
		"stray paren":    {"gpu:v100:4)", "unbalanced ')'"},
		"text after":     {"gpu:v100:4(S:0)x", "text after ')'"},
		"no name":        {":v100:4", "no name"},
		"empty entry":    {"gpu:1,,gpu:2", "no name"},
		"two types":      {"gpu:v100:k80:4", "more than one type"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := ParseGRESList(tc.in)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("ParseGRESList(%q) error %v, want %q", tc.in, err, tc.wantErr)
			}
		})
	}
}

func TestGPUs(t *testing.T) {
	tests := map[string]struct {
		in        string
		wantCount int64
		wantType  string
		wantErr   bool
	}{
		"typed":            {"gpu:v100:4(S:0)", 4, "v100", false},
		"with other gres":  {"shard:8,gpu:k80:2", 2, "k80", false},
		"no gpus":          {"shard:8", 0, "", false},
		"two entries same": {"gpu:v100:2(S:0),gpu:v100:2(S:1)", 4, "v100", false},
		"mixed types":      {"gpu:v100:2,gpu:k80:2", 4, "", true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			list, err := ParseGRESList(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			count, typ, err := GPUs(list)
			if (err != nil) != tc.wantErr || count != tc.wantCount || typ != tc.wantType {
				t.Fatalf("GPUs(%q) = %d, %q, %v; want %d, %q, error %v", tc.in, count, typ, err, tc.wantCount, tc.wantType, tc.wantErr)
			}
		})
	}
}
