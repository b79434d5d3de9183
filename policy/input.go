package policy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
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
// integers. Unknown fields are errors, so typos do not go unnoticed; field
// names are matched exactly ("Jobs" is not "jobs"), and a key given twice
// in one object is an error too.

type problemInput struct {
	Cluster  map[string]float64     `json:"cluster"`
	Costs    map[string]float64     `json:"costs"`
	Jobs     []jobInput             `json:"jobs"`
	Entities map[string]entityInput `json:"entities"`
	Pairs    []pairInput            `json:"pairs"`
}

type jobInput struct {
	ID             jsontext.Value     `json:"id"`
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
	Jobs        []jsontext.Value     `json:"jobs"`
	Throughputs map[string][]float64 `json:"throughputs"`
}

// DecodeProblem reads one JSON problem from r, fills in the defaults and
// validates it (see Validate). Errors are one line and say where the
// problem is: a line and column and a path such as
// `jobs[3].throughputs["v100"]` for malformed JSON, a path such as
// `jobs[3] (id "7"): throughputs` for bad values.
func DecodeProblem(r io.Reader) (*Problem, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("reading problem: %w", err)
	}
	// The decoder's defaults refuse what would let a problem say one thing
	// and mean another: a member given twice (the last would win), invalid
	// UTF-8 (silently replaced), and, with RejectUnknownMembers, a field
	// misspelled or spelled in another case.
	dec := jsontext.NewDecoder(bytes.NewBuffer(data), json.RejectUnknownMembers(true))
	var in problemInput
	if err := json.UnmarshalDecode(dec, &in); err != nil {
		return nil, describeJSONError(data, err)
	}
	end := dec.InputOffset()
	if _, err := dec.ReadToken(); err != io.EOF {
		next := int64(len(data)) - int64(len(bytes.TrimLeft(data[end:], " \t\r\n")))
		line, col := textPosition(data, next)
		return nil, fmt.Errorf("line %d, column %d: unexpected data after the problem object", line, col)
	}
	if in.Cluster == nil {
		return nil, errors.New("cluster: missing (want an object of GPU type to count)")
	}
	p := &Problem{GPUs: make(map[string]int, len(in.Cluster)), Costs: in.Costs}
	for _, t := range slices.Sorted(maps.Keys(in.Cluster)) {
		n := in.Cluster[t]
		if n < 0 || n != math.Trunc(n) {
			return nil, fmt.Errorf("cluster: %q: count %v is not a non-negative integer", t, n)
		}
		if n > MaxGPUsPerType {
			return nil, fmt.Errorf("cluster: %q: count %v is more than %d", t, n, MaxGPUsPerType)
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
			if sf < 1 || sf != math.Trunc(sf) || sf > MaxGPUsPerType {
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
func decodeID(raw jsontext.Value) (string, error) {
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
		// Objects and arrays may span lines: name them rather than
		// quote them, so that the error stays one line.
		what := string(raw)
		switch {
		case raw[0] == '{':
			what = "a JSON object"
		case raw[0] == '[':
			what = "a JSON array"
		case strings.ContainsFunc(what, func(r rune) bool { return r <= ' ' || r >= utf8.RuneSelf }):
			what = strconv.Quote(what)
		}
		return "", fmt.Errorf("%s is neither a string nor an integer", what)
	}
	return strconv.FormatInt(n, 10), nil
}

// describeJSONError turns a decoding error into one line with a position
// and a path. The decoder's own messages are not used as they are: they
// hold JSON pointers and Go types, and their wording changes between
// releases.
func describeJSONError(data []byte, err error) error {
	var syntax *jsontext.SyntacticError
	var semantic *json.SemanticError
	switch {
	case err == io.EOF:
		return errors.New("empty input: want a JSON problem object")
	case errors.As(err, &syntax):
		where := func(ptr jsontext.Pointer) string {
			line, col := textPosition(data, syntax.ByteOffset)
			return fmt.Sprintf("line %d, column %d: %s", line, col, describeRoot(ptr))
		}
		switch {
		case errors.Is(syntax.Err, io.ErrUnexpectedEOF):
			line, col := textPosition(data, int64(len(data)))
			return fmt.Errorf("line %d, column %d: unexpected end of input", line, col)
		case errors.Is(syntax.Err, jsontext.ErrDuplicateName):
			return fmt.Errorf("%s: duplicate key %q", where(syntax.JSONPointer.Parent()), syntax.JSONPointer.LastToken())
		case syntax.Err != nil:
			return fmt.Errorf("%s: %v", where(syntax.JSONPointer), syntax.Err)
		}
		return fmt.Errorf("%s: malformed JSON", where(syntax.JSONPointer))
	case errors.As(err, &semantic):
		line, col := textPosition(data, semantic.ByteOffset)
		if errors.Is(semantic.Err, json.ErrUnknownName) {
			return fmt.Errorf("line %d, column %d: %s: unknown field %q", line, col, describeRoot(semantic.JSONPointer.Parent()), semantic.JSONPointer.LastToken())
		}
		what := "this value"
		switch semantic.JSONKind {
		case 'n':
			what = "a JSON null"
		case 't', 'f':
			what = "a JSON boolean"
		case '"':
			what = "a JSON string"
		case '0':
			what = "a JSON number"
		case '{', '}':
			what = "a JSON object"
		case '[', ']':
			what = "a JSON array"
		}
		// Only numbers are quoted: a string may hold characters that
		// would forge text in the message.
		if semantic.JSONKind == '0' && len(semantic.JSONValue) > 0 && len(semantic.JSONValue) < 40 {
			what += " " + string(semantic.JSONValue)
		}
		msg := fmt.Sprintf("line %d, column %d: %s: cannot use %s here", line, col, describeRoot(semantic.JSONPointer), what)
		switch want := describeGoType(semantic.GoType); {
		case semantic.Err != nil:
			msg += ": " + semantic.Err.Error()
		case want != "":
			msg += " (want " + want + ")"
		}
		return errors.New(msg)
	}
	return fmt.Errorf("decoding problem: %v", err)
}

// describeRoot is describePointer, with a name for the problem itself.
func describeRoot(ptr jsontext.Pointer) string {
	if p := describePointer(ptr); p != "" {
		return p
	}
	return "the problem"
}

// describePointer writes a JSON pointer as a path in the problem's terms,
// e.g. /jobs/3/throughputs/v100 as jobs[3].throughputs["v100"]: the
// pointer alone does not tell an array index from a map key, or a field
// from a GPU type. Map keys are quoted, so names that hold control
// characters cannot forge text in the message.
func describePointer(ptr jsontext.Pointer) string {
	var b strings.Builder
	t := reflect.TypeFor[problemInput]()
	for tok := range ptr.Tokens() {
		for t != nil && t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t == reflect.TypeFor[jsontext.Value]() {
			t = nil // any JSON value: its shape is not known here
		}
		field, known := reflect.StructField{}, false
		if t != nil && t.Kind() == reflect.Struct {
			for i := range t.NumField() {
				if f := t.Field(i); strings.Split(f.Tag.Get("json"), ",")[0] == tok {
					field, known = f, true
					break
				}
			}
		}
		_, numErr := strconv.ParseUint(tok, 10, 64)
		index := numErr == nil && len(tok) < 20
		switch {
		case known:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(tok)
			t = field.Type
		case t != nil && t.Kind() == reflect.Map:
			fmt.Fprintf(&b, "[%q]", tok)
			t = t.Elem()
		case index && t != nil && t.Kind() == reflect.Slice:
			fmt.Fprintf(&b, "[%s]", tok)
			t = t.Elem()
		case index:
			fmt.Fprintf(&b, "[%s]", tok)
			t = nil
		default:
			fmt.Fprintf(&b, "[%q]", tok)
			t = nil
		}
	}
	return b.String()
}

// describeGoType says in JSON terms what a Go type of the problem format
// takes.
func describeGoType(t reflect.Type) string {
	if t == nil {
		return ""
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Float64, reflect.Float32, reflect.Int, reflect.Int64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return ""
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

// Limits on the numbers of a Problem. The policies' linear programs are
// solved in floating point with absolute tolerances near 1e-7: numbers far
// outside these ranges (a throughput of 1e308, a weight of 1e9, a job
// a million times faster on one type than another) make the solver fail
// or, worse, return an allocation of zeros as if it were optimal. The
// ranges hold every real workload with orders of magnitude to spare: the
// reference throughputs lie between 0.2 and 700 steps/s.
const (
	// MinThroughput and MaxThroughput bound a positive throughput, in
	// steps/s (0 means the job cannot run on the type).
	MinThroughput = 1e-3
	MaxThroughput = 1e5
	// MaxThroughputRatio bounds the ratio of a job's largest positive
	// throughput to its smallest: a type on which the job is slower than
	// that should be given 0.
	MaxThroughputRatio = 1e4
	// MinWeight and MaxWeight bound job and entity weights.
	MinWeight = 1e-3
	MaxWeight = 1e3
	// MinCost and MaxCost bound a positive price per GPU-hour (0 is
	// accepted here, and refused by the cost policies).
	MinCost = 1e-3
	MaxCost = 1e3
	// MaxSteps bounds steps_remaining.
	MaxSteps = 1e10
	// MaxSeconds bounds the durations (time_since_start, isolated_time,
	// slo): about 31 years.
	MaxSeconds = 1e9
	// MaxArrival bounds the magnitude of an arrival time.
	MaxArrival = 1e15
	// MaxGPUsPerType bounds the GPU count of one type, and so scale
	// factors.
	MaxGPUsPerType = 100000
)

// Validate checks that p is well formed, whoever built it: known GPU types
// only, numbers within the ranges above, positive weights, scale factors
// that fit at least one type, unique job ids, names without control or
// bidirectional-text characters, pairs of two distinct known jobs (each
// listed once), entities with a known intra-entity policy. The error names
// the offending item, e.g. `jobs[3] (id "7"): throughputs: unknown GPU type
// "a100"`.
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
		case n > MaxGPUsPerType:
			return fmt.Errorf("cluster: %q: count %d is more than %d", t, n, MaxGPUsPerType)
		}
		if err := checkName(t); err != nil {
			return fmt.Errorf("cluster: GPU type %q: %w", t, err)
		}
		largest = max(largest, n)
	}
	for _, t := range slices.Sorted(maps.Keys(p.Costs)) {
		if _, ok := p.GPUs[t]; !ok {
			return fmt.Errorf("costs: unknown GPU type %q", t)
		}
		if err := checkRange(p.Costs[t], MinCost, MaxCost, true); err != nil {
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
		if err := checkName(j.ID); err != nil {
			return fmt.Errorf("jobs[%d]: id %q: %w", i, j.ID, err)
		}
		if first, dup := firstAt[j.ID]; dup {
			return fmt.Errorf("%s: duplicate id (first used by jobs[%d])", where, first)
		}
		firstAt[j.ID] = i
		if err := validateJob(j, p.GPUs, largest); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(p.Entities)) {
		e := p.Entities[name]
		if err := checkName(name); err != nil {
			return fmt.Errorf("entities: %q: %w", name, err)
		}
		if err := checkRange(e.Weight, MinWeight, MaxWeight, false); err != nil {
			return fmt.Errorf("entities: %q: weight: %w", name, err)
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
		for _, t := range slices.Sorted(maps.Keys(pr.Throughputs)) {
			if _, ok := p.GPUs[t]; !ok {
				return fmt.Errorf("%s: throughputs: unknown GPU type %q", where, t)
			}
			for m, v := range pr.Throughputs[t] {
				if err := checkRange(v, MinThroughput, MaxThroughput, true); err != nil {
					return fmt.Errorf("%s: throughputs: %q[%d]: %w", where, t, m, err)
				}
			}
		}
	}
	return nil
}

// validateJob checks one job's fields against the cluster (gpus, whose
// largest count is largest).
func validateJob(j *Job, gpus map[string]int, largest int) error {
	if j.Entity != "" {
		if err := checkName(j.Entity); err != nil {
			return fmt.Errorf("entity %q: %w", j.Entity, err)
		}
	}
	if len(j.Throughputs) == 0 {
		return errors.New("throughputs: missing")
	}
	lo, hi := math.Inf(1), 0.0
	for _, t := range slices.Sorted(maps.Keys(j.Throughputs)) {
		if _, ok := gpus[t]; !ok {
			return fmt.Errorf("throughputs: unknown GPU type %q", t)
		}
		v := j.Throughputs[t]
		if err := checkRange(v, MinThroughput, MaxThroughput, true); err != nil {
			return fmt.Errorf("throughputs: %q: %w", t, err)
		}
		if v > 0 {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	if hi == 0 {
		return errors.New("throughputs: no positive throughput on any GPU type")
	}
	if hi > lo*MaxThroughputRatio {
		return fmt.Errorf("throughputs: %g and %g differ by more than a factor %g (give 0 for a type the job should not run on)", lo, hi, float64(MaxThroughputRatio))
	}
	if j.ScaleFactor < 1 {
		return fmt.Errorf("scale_factor %d is not a positive integer", j.ScaleFactor)
	}
	if j.ScaleFactor > largest {
		return fmt.Errorf("scale_factor %d exceeds every GPU type's count (largest %d)", j.ScaleFactor, largest)
	}
	if err := checkRange(j.Weight, MinWeight, MaxWeight, false); err != nil {
		return fmt.Errorf("weight: %w", err)
	}
	for _, f := range []struct {
		name string
		v    float64
		hi   float64
	}{
		{"steps_remaining", j.StepsRemaining, MaxSteps},
		{"time_since_start", j.TimeSinceStart, MaxSeconds},
		{"isolated_time", j.IsolatedTime, MaxSeconds},
		{"slo", j.SLO, MaxSeconds},
	} {
		if err := checkRange(f.v, 0, f.hi, true); err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
	}
	if math.IsNaN(j.Arrival) || math.Abs(j.Arrival) > MaxArrival {
		return fmt.Errorf("arrival %v is not a finite number within ±%g", j.Arrival, float64(MaxArrival))
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

// checkRange accepts a finite number in [lo, hi], or 0 when zero is.
func checkRange(v, lo, hi float64, zero bool) error {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return fmt.Errorf("%v is not a finite number", v)
	case v < 0:
		return fmt.Errorf("negative value %v", v)
	case v == 0 && zero:
		return nil
	case v < lo || v > hi:
		if zero {
			return fmt.Errorf("%g is outside [%g, %g] (or 0)", v, lo, hi)
		}
		return fmt.Errorf("%g is outside [%g, %g]", v, lo, hi)
	}
	return nil
}

// checkName refuses names (job ids, GPU types, entities) holding control
// characters, bidirectional-text or other invisible format characters,
// line separators, or invalid UTF-8. They are printed in tables, logs and
// Slurm constraints, where such characters forge or hide text (a newline
// starting a false log line, U+202E reversing what follows).
func checkName(s string) error {
	for i, r := range s {
		switch {
		case r == utf8.RuneError:
			if _, size := utf8.DecodeRuneInString(s[i:]); size <= 1 {
				return errors.New("not valid UTF-8")
			}
			return fmt.Errorf("contains the character %U", r)
		case unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp, unicode.Co, unicode.Cs):
			return fmt.Errorf("contains the control or format character %U (names must be printable)", r)
		}
	}
	return nil
}
