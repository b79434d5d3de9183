package bridge

import (
	"fmt"
	"strconv"
	"strings"
)

// GRES is one generic resource entry as Slurm prints it, such as
// "gpu:v100:4(S:0)" in a node's gres, "gpu:v100:2(IDX:0-1)" in gres_used or
// a job's gres_detail, or "gres/gpu:2" in a job's tres_per_node.
type GRES struct {
	Name  string // "gpu"
	Type  string // "v100"; empty when untyped
	Count int64  // 1 when Slurm leaves the count out
	// Detail is the text in parentheses ("S:0", "IDX:0-1"), if any.
	Detail string
}

// ParseGRESList parses a comma-separated GRES string. Commas inside
// parentheses ("IDX:0,2") belong to the entry. An empty string or "(null)"
// is an empty list.
func ParseGRESList(s string) ([]GRES, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "(null)" {
		return nil, nil
	}
	var out []GRES
	depth, start := 0, 0
	for i := 0; i <= len(s); i++ {
		if i < len(s) {
			switch s[i] {
			case '(':
				depth++
				continue
			case ')':
				depth--
				if depth < 0 {
					return nil, fmt.Errorf("gres %q: unbalanced ')'", s)
				}
				continue
			case ',':
				if depth > 0 {
					continue
				}
			default:
				continue
			}
		} else if depth != 0 {
			return nil, fmt.Errorf("gres %q: unbalanced '('", s)
		}
		g, err := ParseGRES(s[start:i])
		if err != nil {
			return nil, fmt.Errorf("gres %q: %w", s, err)
		}
		out = append(out, g)
		start = i + 1
	}
	return out, nil
}

// ParseGRES parses one entry: [gres/|gres:]name[:type][:count][(detail)].
// A last field that is a number is the count; Slurm's K/M/G suffixes are
// accepted there.
func ParseGRES(s string) (GRES, error) {
	s = strings.TrimSpace(s)
	var g GRES
	if open := strings.IndexByte(s, '('); open >= 0 {
		if !strings.HasSuffix(s, ")") {
			return GRES{}, fmt.Errorf("entry %q: text after ')'", s)
		}
		g.Detail = s[open+1 : len(s)-1]
		s = s[:open]
	}
	s = strings.TrimPrefix(strings.TrimPrefix(s, "gres/"), "gres:")
	fields := strings.Split(s, ":")
	if fields[0] == "" {
		return GRES{}, fmt.Errorf("entry %q: no name", s)
	}
	g.Name, g.Count = fields[0], 1
	fields = fields[1:]
	if n := len(fields); n > 0 {
		if count, ok := parseGRESCount(fields[n-1]); ok {
			g.Count = count
			fields = fields[:n-1]
		}
	}
	// Anything between name and count is the type; flags such as
	// "no_consume" that Slurm may add are not types.
	for _, f := range fields {
		if f == "" || f == "no_consume" {
			continue
		}
		if g.Type != "" {
			return GRES{}, fmt.Errorf("entry %q: more than one type", s)
		}
		g.Type = f
	}
	return g, nil
}

func parseGRESCount(s string) (int64, bool) {
	scale := int64(1)
	if n := len(s); n > 0 {
		switch s[n-1] {
		case 'K', 'k':
			scale, s = 1<<10, s[:n-1]
		case 'M', 'm':
			scale, s = 1<<20, s[:n-1]
		case 'G', 'g':
			scale, s = 1<<30, s[:n-1]
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 || v > (1<<62)/scale {
		return 0, false
	}
	return v * scale, true
}

// GPUs sums the GPU entries of a GRES list and returns their count and
// type. A list mixing several GPU types reports the type "" with an error,
// as the scheduler treats each node as holding one type.
func GPUs(list []GRES) (count int64, gpuType string, err error) {
	types := map[string]bool{}
	for _, g := range list {
		if g.Name != "gpu" {
			continue
		}
		count += g.Count
		types[g.Type] = true
		gpuType = g.Type
	}
	if len(types) > 1 {
		return count, "", fmt.Errorf("several GPU types in one gres list")
	}
	return count, gpuType, nil
}

// GPUShards is how the shards of one GPU are used, from the detail Slurm
// prints after a shard entry: "shard:v100:2(2/2,0/2)" in a node's
// gres_used says GPU 0 has 2 of its 2 shards allocated and GPU 1 none of
// 2; "shard:1(0/2,1/2)" in a job's gres_detail says the job holds 1 shard
// of GPU 1. Slurm 26.05 writes "-/2" for a GPU a job holds whole, whose
// shards no job can get (24.11 writes "0/2").
type GPUShards struct {
	Used  int64 `json:"used"`
	Total int64 `json:"total"`
	// HeldWhole is set for "-/N": the GPU is allocated whole.
	HeldWhole bool `json:"held_whole,omitempty"`
}

// ParseShardDetail parses that detail: one "used/total" per GPU of the
// node, in the order of the node's GPU indices. Slurm gives shards in this
// form only; any other detail ("IDX:0") is an error.
func ParseShardDetail(detail string) ([]GPUShards, error) {
	detail = strings.TrimSpace(detail)
	if detail == "" {
		return nil, nil
	}
	parts := strings.Split(detail, ",")
	out := make([]GPUShards, len(parts))
	for i, part := range parts {
		usedText, totalText, ok := strings.Cut(strings.TrimSpace(part), "/")
		if !ok {
			return nil, fmt.Errorf("shard detail %q: GPU %d: want used/total", detail, i)
		}
		total, okTotal := parseGRESCount(totalText)
		if usedText == "-" && okTotal {
			out[i] = GPUShards{Total: total, HeldWhole: true}
			continue
		}
		used, okUsed := parseGRESCount(usedText)
		if !okUsed || !okTotal || used > total {
			return nil, fmt.Errorf("shard detail %q: GPU %d: %q is not used/total", detail, i, part)
		}
		out[i] = GPUShards{Used: used, Total: total}
	}
	return out, nil
}

// Shards sums the shard entries (gres/shard, Slurm's GPU sharing) of a
// GRES list and returns their count and, when an entry's detail gives it,
// the use of every GPU's shards. Several shard entries (one per GPU type
// on a node of several types) have their GPU lists joined in order.
func Shards(list []GRES) (count int64, perGPU []GPUShards, err error) {
	for _, g := range list {
		if g.Name != "shard" {
			continue
		}
		count += g.Count
		if g.Detail == "" {
			continue
		}
		gpus, err := ParseShardDetail(g.Detail)
		if err != nil {
			return count, nil, err
		}
		perGPU = append(perGPU, gpus...)
	}
	return count, perGPU, nil
}

// SharedGPUs lists the indices of the GPUs whose shards are in use, in
// increasing order: on a node, the GPUs no whole-GPU job can get (Slurm's
// gres_used counts them under shard, not under gpu); for a job, the GPUs
// its shards live on.
func SharedGPUs(perGPU []GPUShards) []int {
	var out []int
	for i, g := range perGPU {
		if g.Used > 0 {
			out = append(out, i)
		}
	}
	return out
}
