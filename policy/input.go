package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The JSON problem format read by DecodeProblem (the input of
// `gavel-slurm allocate`):
//
//	{"cluster": {"v100": 36, "p100": 36, "k80": 36},
//	 "costs": {"v100": 2.48, ...},
//	 "jobs": [{"id": "1", "throughputs": {"v100": 4.0, ...}, "scale_factor": 1,
//	           "weight": 1, "steps_remaining": 1e5, "time_since_start": 3600,
//	           "isolated_time": 1800, "arrival": 0, "entity": "a", "slo": 86400}],
//	 "entities": {"a": {"weight": 2, "policy": "fifo"}},
//	 "pairs": [{"jobs": ["1", "2"], "throughputs": {"v100": [2.0, 1.5]}}]}
//
// Optional fields take Gavel's defaults: scale_factor 1, weight 1, arrival
// the job's position in the list, steps/times 0, no SLO, no entity; an
// entity's weight 1 and policy "fairness" (entities that jobs name without
// declaring them get these defaults too). Job ids may be JSON strings or
// integers. Unknown fields are errors, so typos do not go unnoticed.

type problemInput struct {
	Cluster  map[string]float64     `json:"cluster"`
	Costs    map[string]float64     `json:"costs"`
	Jobs     []jobInput             `json:"jobs"`
	Entities map[string]entityInput `json:"entities"`
	Pairs    []pairInput            `json:"pairs"`
}

type jobInput struct {
	ID             json.RawMessage    `json:"id"`
	Throughputs    map[string]float64 `json:"throughputs"`
	ScaleFactor    *float64           `json:"scale_factor"`
	Weight         *float64           `json:"weight"`
	StepsRemaining float64            `json:"steps_remaining"`
	TimeSinceStart float64            `json:"time_since_start"`
	IsolatedTime   float64            `json:"isolated_time"`
	Arrival        *float64           `json:"arrival"`
	Entity         string             `json:"entity"`
	SLO            float64            `json:"slo"`
}

type entityInput struct {
	Weight *float64 `json:"weight"`
	Policy string   `json:"policy"`
}

type pairInput struct {
	Jobs        []json.RawMessage    `json:"jobs"`
	Throughputs map[string][]float64 `json:"throughputs"`
}

// DecodeProblem reads one JSON problem from r, fills in the defaults and
// validates it (see Validate). Errors are one line and say where the
// problem is: a line and column for malformed JSON, a path such as
// `jobs[3] (id "7"): throughputs` for bad values.
func DecodeProblem(r io.Reader) (*Problem, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("reading problem: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var in problemInput
	if err := dec.Decode(&in); err != nil {
		return nil, describeJSONError(data, dec.InputOffset(), err)
	}
	if _, err := dec.Token(); err != io.EOF {
		line, col := textPosition(data, dec.InputOffset())
		return nil, fmt.Errorf("line %d, column %d: unexpected data after the problem object", line, col)
	}
	if in.Cluster == nil {
		return nil, errors.New("cluster: missing (want an object of GPU type to count)")
	}
	p := &Problem{GPUs: make(map[string]int, len(in.Cluster)), Costs: in.Costs}
	for t, n := range in.Cluster {
		if n < 0 || n != math.Trunc(n) || n > math.MaxInt32 {
			return nil, fmt.Errorf("cluster: %q: count %v is not a non-negative integer", t, n)
		}
		p.GPUs[t] = int(n)
	}
	for i, ji := range in.Jobs {
		id, err := decodeID(ji.ID)
		if err != nil {
			return nil, fmt.Errorf("jobs[%d]: id: %w", i, err)
		}
		j := Job{
			ID:             id,
			Throughputs:    ji.Throughputs,
			ScaleFactor:    1,
			Weight:         1,
			StepsRemaining: ji.StepsRemaining,
			TimeSinceStart: ji.TimeSinceStart,
			IsolatedTime:   ji.IsolatedTime,
			Arrival:        float64(i),
			Entity:         ji.Entity,
			SLO:            ji.SLO,
		}
		if ji.ScaleFactor != nil {
			sf := *ji.ScaleFactor
			if sf < 1 || sf != math.Trunc(sf) || sf > math.MaxInt32 {
				return nil, fmt.Errorf("jobs[%d] (id %q): scale_factor %v is not a positive integer", i, id, sf)
			}
			j.ScaleFactor = int(sf)
		}
		if ji.Weight != nil {
			j.Weight = *ji.Weight
		}
		if ji.Arrival != nil {
			j.Arrival = *ji.Arrival
		}
		p.Jobs = append(p.Jobs, j)
	}
	if len(in.Entities) > 0 {
		p.Entities = make(map[string]Entity, len(in.Entities))
	}
	for name, e := range in.Entities {
		ent := Entity{Weight: 1, Policy: e.Policy}
		if e.Weight != nil {
			ent.Weight = *e.Weight
		}
		if ent.Policy == "" {
			ent.Policy = "fairness"
		}
		p.Entities[name] = ent
	}
	for _, j := range p.Jobs {
		if _, ok := p.Entities[j.Entity]; j.Entity != "" && !ok {
			if p.Entities == nil {
				p.Entities = map[string]Entity{}
			}
			p.Entities[j.Entity] = Entity{Weight: 1, Policy: "fairness"}
		}
	}
	for k, pi := range in.Pairs {
		if len(pi.Jobs) != 2 {
			return nil, fmt.Errorf("pairs[%d]: jobs: want 2 job ids, got %d", k, len(pi.Jobs))
		}
		var pr Pair
		for m := range pi.Jobs {
			if pr.Jobs[m], err = decodeID(pi.Jobs[m]); err != nil {
				return nil, fmt.Errorf("pairs[%d]: jobs[%d]: %w", k, m, err)
			}
		}
		pr.Throughputs = make(map[string][2]float64, len(pi.Throughputs))
		for t, v := range pi.Throughputs {
			if len(v) != 2 {
				return nil, fmt.Errorf("pairs[%d] (%s+%s): throughputs: %q: want 2 values, got %d", k, pr.Jobs[0], pr.Jobs[1], t, len(v))
			}
			pr.Throughputs[t] = [2]float64{v[0], v[1]}
		}
		p.Pairs = append(p.Pairs, pr)
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return p, nil
}

// decodeID accepts a JSON string or integer as a job id.
func decodeID(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", errors.New("missing")
	}
	// Plain quoted ids (no escapes) are the common case: take them as they
	// are instead of running the decoder once per id.
	if n := len(raw); n > 2 && raw[0] == '"' && raw[n-1] == '"' && bytes.IndexByte(raw[1:n-1], '\\') < 0 && bytes.IndexByte(raw[1:n-1], '"') < 0 && utf8.Valid(raw) {
		return string(raw[1 : n-1]), nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		if s == "" {
			return "", errors.New("empty")
		}
		return s, nil
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return "", fmt.Errorf("%s is neither a string nor an integer", raw)
	}
	return strconv.FormatInt(n, 10), nil
}

// describeJSONError turns a decoding error into one line with a position.
func describeJSONError(data []byte, offset int64, err error) error {
	var syntax *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	switch {
	// Both offsets count the bytes read up to and including the offending
	// token, so step back one to point at its last character.
	case errors.As(err, &syntax):
		offset = syntax.Offset - 1
	case errors.As(err, &typeErr):
		offset = typeErr.Offset - 1
		field := typeErr.Field
		if field == "" {
			field = "problem"
		}
		line, col := textPosition(data, offset)
		return fmt.Errorf("line %d, column %d: %s: cannot use a JSON %s here (want %s)", line, col, field, typeErr.Value, typeErr.Type)
	case errors.Is(err, io.EOF):
		return errors.New("empty input: want a JSON problem object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		line, col := textPosition(data, int64(len(data)))
		return fmt.Errorf("line %d, column %d: unexpected end of input", line, col)
	}
	line, col := textPosition(data, offset)
	return fmt.Errorf("line %d, column %d: %s", line, col, strings.TrimPrefix(err.Error(), "json: "))
}

// textPosition converts a byte offset into a 1-based line and column.
func textPosition(data []byte, offset int64) (line, col int) {
	if offset > int64(len(data)) {
		offset = int64(len(data))
	}
	if offset < 0 {
		offset = 0
	}
	before := data[:offset]
	line = bytes.Count(before, []byte("\n")) + 1
	col = int(offset) - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return line, col
}

// Validate checks that p is well formed, whoever built it: known GPU types
// only, finite non-negative numbers, positive weights, scale factors that
// fit at least one type, unique job ids, pairs of two distinct known jobs
// (each listed once), entities with a known intra-entity policy. The error
// names the offending item, e.g. `jobs[3] (id "7"): throughputs: unknown
// GPU type "a100"`.
func (p *Problem) Validate() error {
	if len(p.GPUs) == 0 {
		return errors.New("cluster: no GPU types")
	}
	largest := 0
	for _, t := range p.Types() {
		n := p.GPUs[t]
		switch {
		case t == "":
			return errors.New("cluster: empty GPU type name")
		case n < 0:
			return fmt.Errorf("cluster: %q: negative count %d", t, n)
		}
		largest = max(largest, n)
	}
	for _, t := range sortedKeys(p.Costs) {
		if _, ok := p.GPUs[t]; !ok {
			return fmt.Errorf("costs: unknown GPU type %q", t)
		}
		if err := checkAmount(p.Costs[t]); err != nil {
			return fmt.Errorf("costs: %q: %w", t, err)
		}
	}
	firstAt := make(map[string]int, len(p.Jobs))
	for i := range p.Jobs {
		j := &p.Jobs[i]
		where := jobPlace{i, j.ID}
		if j.ID == "" {
			return fmt.Errorf("jobs[%d]: id: empty", i)
		}
		if first, dup := firstAt[j.ID]; dup {
			return fmt.Errorf("%s: duplicate id (first used by jobs[%d])", where, first)
		}
		firstAt[j.ID] = i
		if len(j.Throughputs) == 0 {
			return fmt.Errorf("%s: throughputs: missing", where)
		}
		runnable := false
		for _, t := range sortedKeys(j.Throughputs) {
			if _, ok := p.GPUs[t]; !ok {
				return fmt.Errorf("%s: throughputs: unknown GPU type %q", where, t)
			}
			if err := checkAmount(j.Throughputs[t]); err != nil {
				return fmt.Errorf("%s: throughputs: %q: %w", where, t, err)
			}
			runnable = runnable || j.Throughputs[t] > 0
		}
		if !runnable {
			return fmt.Errorf("%s: throughputs: no positive throughput on any GPU type", where)
		}
		if j.ScaleFactor < 1 {
			return fmt.Errorf("%s: scale_factor %d is not a positive integer", where, j.ScaleFactor)
		}
		if j.ScaleFactor > largest {
			return fmt.Errorf("%s: scale_factor %d exceeds every GPU type's count (largest %d)", where, j.ScaleFactor, largest)
		}
		if !(j.Weight > 0) || math.IsInf(j.Weight, 0) {
			return fmt.Errorf("%s: weight %v is not a positive finite number", where, j.Weight)
		}
		for _, f := range []struct {
			name string
			v    float64
		}{{"steps_remaining", j.StepsRemaining}, {"time_since_start", j.TimeSinceStart}, {"isolated_time", j.IsolatedTime}, {"slo", j.SLO}} {
			if err := checkAmount(f.v); err != nil {
				return fmt.Errorf("%s: %s: %w", where, f.name, err)
			}
		}
		if math.IsNaN(j.Arrival) || math.IsInf(j.Arrival, 0) {
			return fmt.Errorf("%s: arrival %v is not finite", where, j.Arrival)
		}
	}
	for _, name := range sortedKeys(p.Entities) {
		e := p.Entities[name]
		if !(e.Weight > 0) || math.IsInf(e.Weight, 0) {
			return fmt.Errorf("entities: %q: weight %v is not a positive finite number", name, e.Weight)
		}
		if e.Policy != "fairness" && e.Policy != "fifo" {
			return fmt.Errorf("entities: %q: policy %q is not \"fairness\" or \"fifo\"", name, e.Policy)
		}
	}
	seen := make(map[[2]string]int, len(p.Pairs))
	for k := range p.Pairs {
		pr := &p.Pairs[k]
		where := pairPlace{k, pr}
		for m, id := range pr.Jobs {
			if _, ok := firstAt[id]; !ok {
				return fmt.Errorf("%s: jobs[%d]: unknown job id %q", where, m, id)
			}
		}
		if pr.Jobs[0] == pr.Jobs[1] {
			return fmt.Errorf("%s: a job cannot be paired with itself", where)
		}
		key := pr.Jobs
		if key[0] > key[1] {
			key[0], key[1] = key[1], key[0]
		}
		if first, dup := seen[key]; dup {
			return fmt.Errorf("%s: duplicate of pairs[%d]", where, first)
		}
		seen[key] = k
		for _, t := range sortedKeys(pr.Throughputs) {
			if _, ok := p.GPUs[t]; !ok {
				return fmt.Errorf("%s: throughputs: unknown GPU type %q", where, t)
			}
			for m, v := range pr.Throughputs[t] {
				if err := checkAmount(v); err != nil {
					return fmt.Errorf("%s: throughputs: %q[%d]: %w", where, t, m, err)
				}
			}
		}
	}
	return nil
}

// jobPlace and pairPlace name an item in error messages. They format only
// when an error is printed: problems may hold a hundred thousand pairs.
type jobPlace struct {
	index int
	id    string
}

func (w jobPlace) String() string { return fmt.Sprintf("jobs[%d] (id %q)", w.index, w.id) }

type pairPlace struct {
	index int
	pair  *Pair
}

func (w pairPlace) String() string {
	return fmt.Sprintf("pairs[%d] (%s+%s)", w.index, w.pair.Jobs[0], w.pair.Jobs[1])
}

// checkAmount accepts finite non-negative numbers.
func checkAmount(v float64) error {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return fmt.Errorf("%v is not a finite number", v)
	case v < 0:
		return fmt.Errorf("negative value %v", v)
	}
	return nil
}

// sortedKeys gives deterministic iteration (and so deterministic errors).
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
