package reports

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// shape lists the keys an object of the format may have. encoding/json
// alone would take a key twice (the last one wins), match keys in any
// case ("NODE" for "node") and say nothing of a missing one, and a
// collector that sends any of these has a bug worth hearing about.
type shape struct {
	// fields maps each key to the shape of the objects inside its value
	// (nil: a scalar, or nothing to check).
	fields   map[string]*shape
	required []string
	// times are the keys whose value is an RFC 3339 time: checked here,
	// where the key is known, since the error encoding/json gives for a
	// bad time does not say whose it is.
	times map[string]bool
}

var jobShape = &shape{
	fields: map[string]*shape{"job_id": nil, "gpu_type": nil, "gpus": nil, "steps": nil,
		"steps_per_s": nil, "sm_util": nil, "mem_used_bytes": nil, "first_progress": nil},
	required: []string{"job_id", "gpu_type", "gpus", "sm_util", "mem_used_bytes"},
	times:    map[string]bool{"first_progress": true},
}

var reportShape = &shape{
	fields:   map[string]*shape{"node": nil, "time": nil, "interval_s": nil, "jobs": jobShape},
	required: []string{"node", "time", "interval_s", "jobs"},
	times:    map[string]bool{"time": true},
}

// maxDepth bounds nesting; the format needs three levels (report, jobs
// array, job).
const maxDepth = 8

// Decode reads one report of at most maxBytes from r and validates it
// (see Report.Validate) against now and maxAge. Every error is an *Error
// whose Kind says why.
func Decode(r io.Reader, maxBytes int64, now time.Time, maxAge time.Duration) (Report, error) {
	// One byte more than allowed tells an oversized body from one that
	// fills the limit exactly, without reading the rest.
	data, err := io.ReadAll(io.LimitReader(r, maxBytes+1))
	if err != nil {
		// An http.MaxBytesReader in front of Decode reports its limit
		// this way.
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return Report{}, reject(KindTooLarge, "report is larger than %d bytes", mbe.Limit)
		}
		return Report{}, reject(KindMalformed, "read the report: %v", err)
	}
	if int64(len(data)) > maxBytes {
		return Report{}, reject(KindTooLarge, "report is larger than %d bytes", maxBytes)
	}
	if err := checkShape(data); err != nil {
		return Report{}, err
	}
	var rep Report
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		return Report{}, decodeError(err)
	}
	if err := rep.Validate(now, maxAge); err != nil {
		return Report{}, err
	}
	return rep, nil
}

type frame struct {
	object    bool
	shape     *shape // object: its keys; array: the shape of its elements
	expectKey bool
	seen      map[string]bool
	key       string // object: the key just read
	child     *shape // object: shape under the key just read
}

// checkShape walks the tokens of data: one JSON object, nothing after it,
// each key known, given once and in its exact case, the required ones
// present.
func checkShape(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return reject(KindMalformed, "not JSON: %v", syntaxMessage(err))
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return reject(KindMalformed, "not a JSON object")
	}
	stack := []*frame{{object: true, shape: reportShape, expectKey: true, seen: map[string]bool{}}}
	for len(stack) > 0 {
		tok, err := dec.Token()
		if err != nil {
			return reject(KindMalformed, "not JSON: %v", syntaxMessage(err))
		}
		top := stack[len(stack)-1]
		if top.object && top.expectKey {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				if err := checkRequired(top); err != nil {
					return err
				}
				stack = stack[:len(stack)-1]
				continue
			}
			key := tok.(string) // the decoder allows nothing else here
			if err := checkKey(top, key); err != nil {
				return err
			}
			continue
		}
		// A value, in an object after its key or in an array.
		if top.object && top.shape != nil && top.shape.times[top.key] {
			if err := checkTime(top.key, tok); err != nil {
				return err
			}
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{', '[':
				if len(stack) >= maxDepth {
					return reject(KindMalformed, "nested deeper than %d levels", maxDepth)
				}
				inner := top.shape
				if top.object {
					inner = top.child
					top.expectKey = true
				}
				f := &frame{object: d == '{', shape: inner, expectKey: d == '{'}
				if d == '{' {
					f.seen = map[string]bool{}
				}
				stack = append(stack, f)
			case ']':
				stack = stack[:len(stack)-1]
			}
			continue
		}
		if top.object {
			top.expectKey = true
		}
	}
	if _, err := dec.Token(); err != io.EOF {
		return reject(KindMalformed, "data after the report object")
	}
	return nil
}

func checkKey(f *frame, key string) error {
	if f.seen[key] {
		return reject(KindDuplicateField, "key %q given twice", key)
	}
	f.seen[key] = true
	f.expectKey = false
	f.key = key
	f.child = nil
	if f.shape == nil {
		return nil
	}
	child, ok := f.shape.fields[key]
	if !ok {
		return reject(KindUnknownField, "unknown key %q", key)
	}
	f.child = child
	return nil
}

// checkTime accepts an RFC 3339 time with a zone, or null (absent).
func checkTime(key string, tok json.Token) error {
	switch v := tok.(type) {
	case nil:
		return nil
	case string:
		if _, err := time.Parse(time.RFC3339Nano, v); err != nil {
			return reject(KindInvalid, "%s %q is not an RFC 3339 time with a zone", key, v)
		}
		return nil
	}
	return reject(KindInvalid, "%s is not an RFC 3339 time with a zone (a JSON string)", key)
}

func checkRequired(f *frame) error {
	if f.shape == nil {
		return nil
	}
	for _, k := range f.shape.required {
		if !f.seen[k] {
			return reject(KindInvalid, "key %q is missing", k)
		}
	}
	return nil
}

// syntaxMessage drops encoding/json's "invalid character" noise down to
// the offset, which is what an operator needs to find the fault.
func syntaxMessage(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("%v (at byte %d)", se, se.Offset)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "unexpected end of input"
	}
	return err.Error()
}

// decodeError classifies what encoding/json refused once the shape was
// right: a value of the wrong type or out of its Go type's range.
func decodeError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return reject(KindInvalid, "%s: %s is not a valid %s", te.Field, te.Value, te.Type)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return reject(KindMalformed, "not JSON: %v", syntaxMessage(err))
	}
	var pe *time.ParseError
	if errors.As(err, &pe) {
		return reject(KindInvalid, "time %s is not RFC 3339 with a zone", pe.Value)
	}
	return reject(KindInvalid, "%v", err)
}
