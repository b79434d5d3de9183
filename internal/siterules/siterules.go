// Package siterules decides how far a job's gavel: tag is trusted. Any
// user writes their own tag, so left alone a tag could claim weight=1e6,
// an hour of grace, someone else's entity or preempt=never everywhere. The
// site's rules (the [limits], [entities] and [weights] sections of the
// configuration) bound what the tag may ask for, per partition, and take
// weights and entities from Slurm's accounts and QOS instead.
//
// Apply is pure: it reads only the rules and the job's facts, and says in
// Effective.Notes, in words for `gavel-slurm status`, what it clamped or
// ignored.
package siterules

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/internal/duration"
	"github.com/gavel-slurm/gavel-slurm/policy"
)

// Built-in limits, used where the configuration sets none. They are meant
// to be safe on a shared cluster: a tag can tilt its own job's share by at
// most 10× and hold its GPUs for at most 10 minutes after being told to
// stop.
const (
	DefaultMaxWeight = 10
	DefaultMaxGrace  = 10 * time.Minute
	// DefaultMaxRestart caps a job's restart cost, stated or measured: the
	// restart-aware mechanism holds a job's GPUs for a multiple of it, so
	// a job that claims (or sleeps its way to) a long restart would keep
	// its GPUs from the jobs behind it. Ten minutes covers loading the
	// largest models the reference table knows.
	DefaultMaxRestart = 10 * time.Minute
)

// Bounds of any weight a site sets, and of every job's effective weight:
// the policies' own (beyond them the solver's arithmetic loses meaning).
const (
	minWeight = policy.MinWeight
	maxWeight = policy.MaxWeight
)

// Limits bound what a tag may ask for. A zero or nil field is inherited: a
// partition's from the site-wide Limits, the site-wide ones from the
// built-in defaults (DefaultMaxWeight, DefaultMaxGrace, every class, every
// preemption mode). An empty but non-nil list allows nothing, so the tag's
// value is always ignored.
type Limits struct {
	// MaxWeight caps the tag's weight=.
	MaxWeight float64
	// MaxGrace caps the tag's grace=.
	MaxGrace time.Duration
	// MaxRestart caps a job's restart cost: the tag's restart= and the
	// cost the daemon measures.
	MaxRestart time.Duration
	// AllowedClasses are the class= values a tag may set.
	AllowedClasses []bridge.Class
	// AllowedPreempt are the preempt= modes a tag may set.
	AllowedPreempt []bridge.PreemptMode
}

// EntitySource says where a job's entity (the group its share counts
// against) comes from.
type EntitySource string

const (
	// EntitiesFromAccount uses the job's Slurm account, or the entity
	// Rules.AccountEntities maps it to. The zero EntitySource means this.
	EntitiesFromAccount EntitySource = "account"
	// EntitiesFromTag trusts the tag's entity=, falling back to the
	// account's entity when the tag names none.
	EntitiesFromTag EntitySource = "tag"
	// EntitiesFromUser uses the job's user name.
	EntitiesFromUser EntitySource = "user"
	// EntitiesFromFairShare uses the job's Slurm account, as
	// EntitiesFromAccount does, weighted by the account's fair-share
	// shares in slurmdbd (internal/limits.AccountWeights), read each round.
	EntitiesFromFairShare EntitySource = "fairshare"
)

// ParseEntitySource reads entities.from as the configuration writes it.
func ParseEntitySource(s string) (EntitySource, error) {
	switch e := EntitySource(strings.ToLower(s)); e {
	case EntitiesFromAccount, EntitiesFromTag, EntitiesFromUser, EntitiesFromFairShare:
		return e, nil
	}
	return "", fmt.Errorf("must be account, fairshare, tag or user: %q", s)
}

// Rules are the site's rules. The zero Rules are the safe defaults: the
// built-in limits, entities from accounts, no site weights, and no trust
// in the tag's entity= beyond them.
type Rules struct {
	// Limits apply in every partition without its own entry.
	Limits Limits
	// Partitions override Limits field by field, by partition name.
	Partitions map[string]Limits
	// EntitiesFrom chooses the source of a job's entity.
	EntitiesFrom EntitySource
	// AccountEntities maps a Slurm account to the entities its jobs may
	// count against; the first is the account's entity by default.
	AccountEntities map[string][]string
	// AllowTagEntity lets a tag's entity= choose among the entities of
	// the job's account (or the account itself). Ignored with
	// EntitiesFromTag, which trusts the tag outright.
	AllowTagEntity bool
	// AccountWeights and QOSWeights are the site's weights by Slurm
	// account and QOS. A job listed in both gets their product.
	AccountWeights map[string]float64
	QOSWeights     map[string]float64
	// AllowTagWeight lets a tag's weight= (capped by MaxWeight) win over
	// a site weight. Without it a tag's weight counts only for jobs that
	// no site weight covers.
	AllowTagWeight bool
}

// Default returns the zero Rules with the built-in values written out, as
// a configuration without the sections gets them.
func Default() Rules {
	return Rules{
		Limits:       Limits{MaxWeight: DefaultMaxWeight, MaxGrace: DefaultMaxGrace},
		EntitiesFrom: EntitiesFromAccount,
	}
}

// JobFacts are what Slurm says about a job, and its parsed tag.
type JobFacts struct {
	Partition, User, Account, QOS string
	Tag                           bridge.Tag
}

// Effective is what the scheduler uses for a job once the rules are
// applied.
type Effective struct {
	// Weight is the job's priority weight, never 0 (1 when nothing sets
	// it).
	Weight float64
	// Grace is the preemption grace period; 0 means the site's default.
	Grace time.Duration
	// Restart is the tag's restart cost within MaxRestart; 0 means the
	// site's default.
	Restart time.Duration
	// MaxRestart is the most a restart cost, stated or measured, may be
	// taken to be for this job.
	MaxRestart time.Duration
	// Class is the job's class; ClassUnset means the site's default.
	Class bridge.Class
	// Entity is the group the job counts against.
	Entity string
	// Preempt is how the job takes preemption; PreemptUnset means the
	// site's default (scheduler.default_preempt).
	Preempt bridge.PreemptMode
	// Notes say, one sentence each, what the rules clamped or ignored.
	Notes []string
}

// Apply decides a job's effective scheduling values from its tag and the
// site's rules.
func (r Rules) Apply(j JobFacts) Effective {
	lim := r.limitsFor(j.Partition)
	var e Effective
	var note string
	e.Weight, note = r.weight(j, lim.maxWeight)
	e.Notes = appendNote(e.Notes, note)
	if w := min(max(e.Weight, minWeight), maxWeight); w != e.Weight {
		// An account's and a QOS's weights multiply; a tag's weight may be
		// smaller than any site weight.
		e.Notes = appendNote(e.Notes, fmt.Sprintf("weight %s clamped to %s (the policies' range)", formatNumber(e.Weight), formatNumber(w)))
		e.Weight = w
	}
	e.Grace, note = grace(j.Tag.Grace, lim.maxGrace)
	e.Notes = appendNote(e.Notes, note)
	e.MaxRestart = lim.maxRestart.value
	e.Restart, note = restart(j.Tag.Restart, lim.maxRestart)
	e.Notes = appendNote(e.Notes, note)
	e.Class, note = class(j.Tag.Class, lim.classes)
	e.Notes = appendNote(e.Notes, note)
	e.Entity, note = r.entity(j)
	e.Notes = appendNote(e.Notes, note)
	e.Preempt, note = preempt(j.Tag.Preempt, lim.preempt)
	e.Notes = appendNote(e.Notes, note)
	return e
}

func appendNote(notes []string, note string) []string {
	if note == "" {
		return notes
	}
	return append(notes, note)
}

// bound is one resolved limit and the words that name where it was set.
type bound[T any] struct {
	value T
	from  string
}

type resolved struct {
	maxWeight  bound[float64]
	maxGrace   bound[time.Duration]
	maxRestart bound[time.Duration]
	classes    bound[[]bridge.Class]
	preempt    bound[[]bridge.PreemptMode]
}

// limitsFor resolves every limit for a partition: its own entry, then the
// site-wide Limits, then the built-in default.
func (r Rules) limitsFor(partition string) resolved {
	out := resolved{
		maxWeight:  bound[float64]{DefaultMaxWeight, "default max_weight"},
		maxGrace:   bound[time.Duration]{DefaultMaxGrace, "default max_grace"},
		maxRestart: bound[time.Duration]{DefaultMaxRestart, "default max_restart"},
		classes:    bound[[]bridge.Class]{nil, "allowed_classes"},
		preempt:    bound[[]bridge.PreemptMode]{nil, "allowed_preempt"},
	}
	levels := []struct {
		lim   Limits
		where string
	}{{r.Limits, "site"}}
	if p, ok := r.Partitions[partition]; ok {
		levels = append(levels, struct {
			lim   Limits
			where string
		}{p, "partition " + partition})
	}
	for _, l := range levels {
		if l.lim.MaxWeight != 0 {
			out.maxWeight = bound[float64]{l.lim.MaxWeight, l.where + " max_weight"}
		}
		if l.lim.MaxGrace != 0 {
			out.maxGrace = bound[time.Duration]{l.lim.MaxGrace, l.where + " max_grace"}
		}
		if l.lim.MaxRestart != 0 {
			out.maxRestart = bound[time.Duration]{l.lim.MaxRestart, l.where + " max_restart"}
		}
		if l.lim.AllowedClasses != nil {
			out.classes = bound[[]bridge.Class]{l.lim.AllowedClasses, l.where + " allowed_classes"}
		}
		if l.lim.AllowedPreempt != nil {
			out.preempt = bound[[]bridge.PreemptMode]{l.lim.AllowedPreempt, l.where + " allowed_preempt"}
		}
	}
	return out
}

// weight picks the site's weight for the job's account and QOS, or the
// tag's capped weight where the site has none or allows the tag to win.
func (r Rules) weight(j JobFacts, limit bound[float64]) (float64, string) {
	site, siteFrom := r.siteWeight(j)
	tagWeight := j.Tag.Weight
	if tagWeight == 0 {
		if siteFrom != "" {
			return site, ""
		}
		return 1, ""
	}
	if siteFrom != "" && !r.AllowTagWeight {
		if tagWeight == site {
			return site, ""
		}
		return site, fmt.Sprintf("weight=%s ignored: %s site weight %s", formatNumber(tagWeight), siteFrom, formatNumber(site))
	}
	if tagWeight > limit.value {
		return limit.value, fmt.Sprintf("weight=%s clamped to %s (%s)", formatNumber(tagWeight), formatNumber(limit.value), limit.from)
	}
	return tagWeight, ""
}

// siteWeight returns the product of the account's and the QOS's site
// weights and words naming them, or "" when neither is listed.
func (r Rules) siteWeight(j JobFacts) (float64, string) {
	w := 1.0
	var from []string
	if v, ok := r.AccountWeights[j.Account]; ok && j.Account != "" {
		w *= v
		from = append(from, "account "+j.Account)
	}
	if v, ok := r.QOSWeights[j.QOS]; ok && j.QOS != "" {
		w *= v
		from = append(from, "qos "+j.QOS)
	}
	switch len(from) {
	case 0:
		return 0, ""
	case 1:
		return w, from[0] + " has"
	}
	return w, strings.Join(from, " and ") + " have"
}

func grace(tagGrace time.Duration, limit bound[time.Duration]) (time.Duration, string) {
	if tagGrace > limit.value {
		return limit.value, fmt.Sprintf("grace=%s clamped to %s (%s)", formatDuration(tagGrace), formatDuration(limit.value), limit.from)
	}
	return tagGrace, ""
}

func restart(tagRestart time.Duration, limit bound[time.Duration]) (time.Duration, string) {
	if tagRestart > limit.value {
		return limit.value, fmt.Sprintf("restart=%s clamped to %s (%s)", formatDuration(tagRestart), formatDuration(limit.value), limit.from)
	}
	return tagRestart, ""
}

func class(c bridge.Class, allowed bound[[]bridge.Class]) (bridge.Class, string) {
	if c == bridge.ClassUnset || allowed.value == nil || slices.Contains(allowed.value, c) {
		return c, ""
	}
	return bridge.ClassUnset, fmt.Sprintf("class=%s ignored: not allowed (%s: %s)", c, allowed.from, joinOrNone(allowed.value))
}

func preempt(m bridge.PreemptMode, allowed bound[[]bridge.PreemptMode]) (bridge.PreemptMode, string) {
	if m == bridge.PreemptUnset || allowed.value == nil || slices.Contains(allowed.value, m) {
		return m, ""
	}
	return bridge.PreemptUnset, fmt.Sprintf("preempt=%s ignored, site default used: not allowed (%s: %s)", m, allowed.from, joinOrNone(allowed.value))
}

// entity picks the job's entity from the configured source, and the tag's
// entity= where the rules let it choose.
func (r Rules) entity(j JobFacts) (string, string) {
	mapped := r.AccountEntities[j.Account]
	accountEntity := j.Account
	if len(mapped) > 0 {
		accountEntity = mapped[0]
	}
	if j.Account == "" {
		// No accounting: the user is the only group Slurm knows.
		accountEntity = j.User
	}
	tagEntity := j.Tag.Entity
	var base string
	switch r.EntitiesFrom {
	case EntitiesFromTag:
		if tagEntity != "" {
			return tagEntity, ""
		}
		return accountEntity, ""
	case EntitiesFromUser:
		base = j.User
	default:
		base = accountEntity
	}
	if tagEntity == "" || tagEntity == base {
		return base, ""
	}
	if !r.AllowTagEntity {
		return base, fmt.Sprintf("entity=%s ignored: the site sets entities from the job's %s", tagEntity, r.source())
	}
	if (j.Account != "" && tagEntity == j.Account) || slices.Contains(mapped, tagEntity) {
		return tagEntity, ""
	}
	if j.Account == "" {
		return base, fmt.Sprintf("entity=%s ignored: the job has no account", tagEntity)
	}
	return base, fmt.Sprintf("entity=%s ignored: not an entity of account %s", tagEntity, j.Account)
}

func (r Rules) source() EntitySource {
	if r.EntitiesFrom == "" {
		return EntitiesFromAccount
	}
	return r.EntitiesFrom
}

func joinOrNone[T ~string](values []T) string {
	if len(values) == 0 {
		return "none"
	}
	parts := make([]string, len(values))
	for i, v := range values {
		parts[i] = string(v)
	}
	return strings.Join(parts, ", ")
}

// formatNumber writes a weight without an exponent, as users type them.
func formatNumber(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// formatDuration writes d in its largest whole unit, as the tag's
// canonical form does, so a note repeats what the user wrote.
func formatDuration(d time.Duration) string {
	for _, u := range []struct {
		name string
		size time.Duration
	}{{"w", 7 * 24 * time.Hour}, {"d", 24 * time.Hour}, {"h", time.Hour}, {"m", time.Minute}, {"s", time.Second}} {
		if d >= u.size && d%u.size == 0 {
			return strconv.FormatInt(int64(d/u.size), 10) + u.name
		}
	}
	return d.String()
}

// Validate checks every rule and returns all the problems found, each
// named by its configuration key.
func (r Rules) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
	}
	checkLimits := func(prefix string, l Limits) {
		if l.MaxWeight != 0 && !(l.MaxWeight >= minWeight && l.MaxWeight <= maxWeight) {
			bad(prefix+"max_weight", "%g is not between %g and %g", l.MaxWeight, minWeight, maxWeight)
		}
		if l.MaxGrace < 0 || l.MaxGrace > duration.Max {
			bad(prefix+"max_grace", "%s is not between 0s and %s", l.MaxGrace, duration.Max)
		}
		if l.MaxRestart < 0 || l.MaxRestart > duration.Max {
			bad(prefix+"max_restart", "%s is not between 0s and %s", l.MaxRestart, duration.Max)
		}
		for _, c := range l.AllowedClasses {
			if _, err := bridge.ParseClass(string(c)); err != nil || c == bridge.ClassUnset {
				bad(prefix+"allowed_classes", "%q is not a class (te or be)", c)
			}
		}
		for _, m := range l.AllowedPreempt {
			if _, err := bridge.ParsePreemptMode(string(m)); err != nil {
				bad(prefix+"allowed_preempt", "%q is not a preemption mode (checkpoint, requeue or never)", m)
			}
		}
	}
	checkLimits("limits.", r.Limits)
	for _, p := range slices.Sorted(maps.Keys(r.Partitions)) {
		checkLimits("limits.partition."+p+".", r.Partitions[p])
	}
	if r.EntitiesFrom != "" {
		if _, err := ParseEntitySource(string(r.EntitiesFrom)); err != nil {
			bad("entities.from", "%v", err)
		}
	}
	for _, a := range slices.Sorted(maps.Keys(r.AccountEntities)) {
		if len(r.AccountEntities[a]) == 0 {
			bad("entities.account_map."+a, "names no entity")
		}
		for _, e := range r.AccountEntities[a] {
			if strings.TrimSpace(e) == "" {
				bad("entities.account_map."+a, "has an empty entity name")
			}
		}
	}
	checkWeights := func(prefix string, m map[string]float64) {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if v := m[k]; !(v >= minWeight && v <= maxWeight) {
				bad(prefix+k, "%g is not between %g and %g", v, minWeight, maxWeight)
			}
		}
	}
	checkWeights("weights.account.", r.AccountWeights)
	checkWeights("weights.qos.", r.QOSWeights)
	return errors.Join(errs...)
}
