package estimate

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Nearest names the reference model that job key computes most like: its
// tagged model when the table has it at the job's GPU count, else the
// table's job type whose rates its measurements fit best. What the table
// knows of that model stands in for the job where nothing else is known
// of it: how it does while sharing a GPU with another job, for one, which
// is what Gavel's estimator fingerprints jobs for. ok is false when
// nothing says which model the job resembles (no measurement of it, and
// no tag the table knows).
//
// Measured on two types or more, the job is matched by shape, the rates'
// ratios between types, as the fingerprint does (an error term per
// shared type after the best common scale; a model of another family or
// GPU count pays a penalty). Measured on one type only, a shape says
// nothing, and it is matched by the rate itself among the models of its
// tag's family, or among all models when the family has none: a model's
// rate on one type says something of its size, little more, which is why
// the detail names the basis.
func (e *Estimator) Nearest(key JobKey) (model, detail string, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	l := e.learn()
	p := e.jobProbe(l, key)
	if p.tagRow >= 0 {
		return p.name, "its tag", true
	}
	var types []string
	for c, y := range p.known {
		if !math.IsNaN(y) && l.inTable[c] {
			types = append(types, l.cols[c])
		}
	}
	if len(types) == 0 {
		return "", "", false
	}
	slices.Sort(types)
	fam := family(key.Model)
	sameFamily := false
	for _, r := range e.ref.rows {
		if r.key.ScaleFactor == key.Scale && fam != "" && family(r.key.Model) == fam {
			sameFamily = true
			break
		}
	}
	best, bestErr := -1, math.Inf(1)
	for i, r := range e.ref.rows {
		if r.key.ScaleFactor != key.Scale {
			continue
		}
		inFamily := fam != "" && family(r.key.Model) == fam
		logs := l.tableLogs(&e.ref, r.rates)
		var err float64
		if len(types) >= minFingerprintOverlap {
			_, fitErr, n := fit(logs, p.known, -1)
			if n < len(types) {
				continue // cannot run where the job ran
			}
			err = fitErr
			if !inFamily {
				err += otherFamilyPenalty
			}
		} else {
			if sameFamily && !inFamily {
				continue
			}
			c := l.col[types[0]]
			if math.IsNaN(logs[c]) {
				continue
			}
			err = math.Abs(p.known[c] - logs[c])
		}
		if err < bestErr {
			best, bestErr = i, err
		}
	}
	if best < 0 {
		return "", "", false
	}
	basis := "its rates on " + strings.Join(types, ", ")
	if len(types) < minFingerprintOverlap {
		basis = "its rate on " + types[0]
		if sameFamily {
			basis += " within its family"
		}
	}
	return e.ref.rows[best].key.Model, fmt.Sprintf("nearest reference model by %s", basis), true
}
