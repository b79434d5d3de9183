package siterules

import (
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

// facts is a job in partition gpu of user ana, account labA, QOS normal.
func facts(tag bridge.Tag) JobFacts {
	return JobFacts{Partition: "gpu", User: "ana", Account: "labA", QOS: "normal", Tag: tag}
}

func TestApplyWeight(t *testing.T) {
	tests := map[string]struct {
		rules     Rules
		job       JobFacts
		want      float64
		wantNotes []string
	}{
		"nothing set weighs 1":        {Default(), facts(bridge.Tag{}), 1, nil},
		"tag weight within the limit": {Default(), facts(bridge.Tag{Weight: 2.5}), 2.5, nil},
		"tag weight clamped by the site limit": {Default(), facts(bridge.Tag{Weight: 1e6}), 10,
			[]string{"weight=1000000 clamped to 10 (site max_weight)"}},
		"zero rules clamp by the built-in limit": {Rules{}, facts(bridge.Tag{Weight: 50}), 10,
			[]string{"weight=50 clamped to 10 (default max_weight)"}},
		"tag weight clamped by the partition limit": {
			Rules{Limits: Limits{MaxWeight: 8}, Partitions: map[string]Limits{"gpu": {MaxWeight: 4}}},
			facts(bridge.Tag{Weight: 1e6}), 4, []string{"weight=1000000 clamped to 4 (partition gpu max_weight)"}},
		"another partition's limit does not apply": {
			Rules{Limits: Limits{MaxWeight: 8}, Partitions: map[string]Limits{"long": {MaxWeight: 4}}},
			facts(bridge.Tag{Weight: 6}), 6, nil},
		"partition without max_weight inherits the site's": {
			Rules{Limits: Limits{MaxWeight: 3}, Partitions: map[string]Limits{"gpu": {MaxGrace: time.Minute}}},
			facts(bridge.Tag{Weight: 5}), 3, []string{"weight=5 clamped to 3 (site max_weight)"}},
		"weights below the limit are not raised": {Default(), facts(bridge.Tag{Weight: 0.25}), 0.25, nil},
		"account weight without a tag weight": {
			Rules{AccountWeights: map[string]float64{"labA": 2}}, facts(bridge.Tag{}), 2, nil},
		"account weight wins over the tag": {
			Rules{AccountWeights: map[string]float64{"labA": 2}}, facts(bridge.Tag{Weight: 9}), 2,
			[]string{"weight=9 ignored: account labA has site weight 2"}},
		"same weight in tag and site says nothing": {
			Rules{AccountWeights: map[string]float64{"labA": 2}}, facts(bridge.Tag{Weight: 2}), 2, nil},
		"qos weight wins over the tag": {
			Rules{QOSWeights: map[string]float64{"normal": 0.5}}, facts(bridge.Tag{Weight: 3}), 0.5,
			[]string{"weight=3 ignored: qos normal has site weight 0.5"}},
		"account and qos weights multiply": {
			Rules{AccountWeights: map[string]float64{"labA": 2}, QOSWeights: map[string]float64{"normal": 3}},
			facts(bridge.Tag{Weight: 7}), 6, []string{"weight=7 ignored: account labA and qos normal have site weight 6"}},
		"site weights are not capped by max_weight": {
			Rules{Limits: Limits{MaxWeight: 2}, AccountWeights: map[string]float64{"labA": 5}}, facts(bridge.Tag{}), 5, nil},
		"other accounts' weights do not apply": {
			Rules{AccountWeights: map[string]float64{"labB": 5}}, facts(bridge.Tag{Weight: 3}), 3, nil},
		"allow_tag_weight lets the tag win": {
			Rules{AccountWeights: map[string]float64{"labA": 2}, AllowTagWeight: true}, facts(bridge.Tag{Weight: 3}), 3, nil},
		"allow_tag_weight still clamps": {
			Rules{Limits: Limits{MaxWeight: 4}, AccountWeights: map[string]float64{"labA": 2}, AllowTagWeight: true},
			facts(bridge.Tag{Weight: 100}), 4, []string{"weight=100 clamped to 4 (site max_weight)"}},
		"allow_tag_weight without a tag weight keeps the site's": {
			Rules{AccountWeights: map[string]float64{"labA": 2}, AllowTagWeight: true}, facts(bridge.Tag{}), 2, nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := tc.rules.Apply(tc.job)
			if got.Weight != tc.want || !reflect.DeepEqual(got.Notes, tc.wantNotes) {
				t.Errorf("weight %g notes %q, want %g %q", got.Weight, got.Notes, tc.want, tc.wantNotes)
			}
		})
	}
}

func TestApplyGrace(t *testing.T) {
	tests := map[string]struct {
		rules     Rules
		grace     time.Duration
		want      time.Duration
		wantNotes []string
	}{
		"unset stays the site default": {Default(), 0, 0, nil},
		"within the limit":             {Default(), 5 * time.Minute, 5 * time.Minute, nil},
		"at the limit":                 {Default(), 10 * time.Minute, 10 * time.Minute, nil},
		"clamped by the site limit": {Default(), time.Hour, 10 * time.Minute,
			[]string{"grace=1h clamped to 10m (site max_grace)"}},
		"clamped by the partition limit": {
			Rules{Partitions: map[string]Limits{"gpu": {MaxGrace: 90 * time.Second}}}, 2 * time.Minute, 90 * time.Second,
			[]string{"grace=2m clamped to 90s (partition gpu max_grace)"}},
		"partition may allow more than the site": {
			Rules{Limits: Limits{MaxGrace: time.Minute}, Partitions: map[string]Limits{"gpu": {MaxGrace: time.Hour}}},
			30 * time.Minute, 30 * time.Minute, nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := tc.rules.Apply(facts(bridge.Tag{Grace: tc.grace}))
			if got.Grace != tc.want || !reflect.DeepEqual(got.Notes, tc.wantNotes) {
				t.Errorf("grace %s notes %q, want %s %q", got.Grace, got.Notes, tc.want, tc.wantNotes)
			}
		})
	}
}

func TestApplyRestart(t *testing.T) {
	tests := map[string]struct {
		rules     Rules
		restart   time.Duration
		want      time.Duration
		wantMax   time.Duration
		wantNotes []string
	}{
		"unset stays the site default": {Default(), 0, 0, DefaultMaxRestart, nil},
		"within the limit":             {Default(), 3 * time.Minute, 3 * time.Minute, DefaultMaxRestart, nil},
		"clamped by the default limit": {Default(), time.Hour, DefaultMaxRestart, DefaultMaxRestart,
			[]string{"restart=1h clamped to 10m (default max_restart)"}},
		"clamped by the site limit": {Rules{Limits: Limits{MaxRestart: 2 * time.Minute}}, 5 * time.Minute,
			2 * time.Minute, 2 * time.Minute, []string{"restart=5m clamped to 2m (site max_restart)"}},
		"partition may allow more than the site": {
			Rules{Limits: Limits{MaxRestart: time.Minute}, Partitions: map[string]Limits{"gpu": {MaxRestart: 20 * time.Minute}}},
			15 * time.Minute, 15 * time.Minute, 20 * time.Minute, nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := tc.rules.Apply(facts(bridge.Tag{Restart: tc.restart}))
			if got.Restart != tc.want || got.MaxRestart != tc.wantMax || !reflect.DeepEqual(got.Notes, tc.wantNotes) {
				t.Errorf("restart %s max %s notes %q, want %s %s %q", got.Restart, got.MaxRestart, got.Notes, tc.want, tc.wantMax, tc.wantNotes)
			}
		})
	}
}

func TestApplyClassAndPreempt(t *testing.T) {
	onlyBE := Rules{Partitions: map[string]Limits{"gpu": {
		AllowedClasses: []bridge.Class{bridge.ClassBestEffort},
		AllowedPreempt: []bridge.PreemptMode{bridge.PreemptCheckpoint, bridge.PreemptRequeue},
	}}}
	none := Rules{Limits: Limits{AllowedClasses: []bridge.Class{}, AllowedPreempt: []bridge.PreemptMode{}}}
	tests := map[string]struct {
		rules       Rules
		tag         bridge.Tag
		wantClass   bridge.Class
		wantPreempt bridge.PreemptMode
		wantNotes   []string
	}{
		"defaults allow every class and mode": {Default(),
			bridge.Tag{Class: bridge.ClassTrialAndError, Preempt: bridge.PreemptNever},
			bridge.ClassTrialAndError, bridge.PreemptNever, nil},
		"allowed values pass": {onlyBE,
			bridge.Tag{Class: bridge.ClassBestEffort, Preempt: bridge.PreemptRequeue},
			bridge.ClassBestEffort, bridge.PreemptRequeue, nil},
		"unset values pass whatever is allowed": {onlyBE, bridge.Tag{}, bridge.ClassUnset, bridge.PreemptUnset, nil},
		"disallowed values fall back to the site default": {onlyBE,
			bridge.Tag{Class: bridge.ClassTrialAndError, Preempt: bridge.PreemptNever},
			bridge.ClassUnset, bridge.PreemptUnset, []string{
				"class=te ignored: not allowed (partition gpu allowed_classes: be)",
				"preempt=never ignored, site default used: not allowed (partition gpu allowed_preempt: checkpoint, requeue)",
			}},
		"empty lists allow nothing": {none,
			bridge.Tag{Class: bridge.ClassBestEffort, Preempt: bridge.PreemptCheckpoint},
			bridge.ClassUnset, bridge.PreemptUnset, []string{
				"class=be ignored: not allowed (site allowed_classes: none)",
				"preempt=checkpoint ignored, site default used: not allowed (site allowed_preempt: none)",
			}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := tc.rules.Apply(facts(tc.tag))
			if got.Class != tc.wantClass || got.Preempt != tc.wantPreempt || !reflect.DeepEqual(got.Notes, tc.wantNotes) {
				t.Errorf("class %q preempt %q notes %q, want %q %q %q",
					got.Class, got.Preempt, got.Notes, tc.wantClass, tc.wantPreempt, tc.wantNotes)
			}
		})
	}
}

func TestApplyEntity(t *testing.T) {
	mapped := map[string][]string{"labA": {"vision", "robotics"}}
	tests := map[string]struct {
		rules     Rules
		job       JobFacts
		want      string
		wantNotes []string
	}{
		"account by default":                   {Rules{}, facts(bridge.Tag{}), "labA", nil},
		"mapped account uses its first entity": {Rules{AccountEntities: mapped}, facts(bridge.Tag{}), "vision", nil},
		"no account falls back to the user": {Rules{},
			JobFacts{Partition: "gpu", User: "ana"}, "ana", nil},
		"tag entity ignored by default": {Default(), facts(bridge.Tag{Entity: "labB"}), "labA",
			[]string{"entity=labB ignored: the site sets entities from the job's account"}},
		"tag entity equal to the result says nothing": {Default(), facts(bridge.Tag{Entity: "labA"}), "labA", nil},
		"allowed tag entity among the account's entities": {
			Rules{AccountEntities: mapped, AllowTagEntity: true}, facts(bridge.Tag{Entity: "robotics"}), "robotics", nil},
		"allowed tag entity equal to the account": {
			Rules{AccountEntities: mapped, AllowTagEntity: true}, facts(bridge.Tag{Entity: "labA"}), "labA", nil},
		"allowed tag entity of another account": {
			Rules{AccountEntities: mapped, AllowTagEntity: true}, facts(bridge.Tag{Entity: "labB"}), "vision",
			[]string{"entity=labB ignored: not an entity of account labA"}},
		"allowed tag entity without an account": {
			Rules{AllowTagEntity: true}, JobFacts{User: "ana", Tag: bridge.Tag{Entity: "labB"}}, "ana",
			[]string{"entity=labB ignored: the job has no account"}},
		"from user": {Rules{EntitiesFrom: EntitiesFromUser}, facts(bridge.Tag{}), "ana", nil},
		"from user ignores the tag": {Rules{EntitiesFrom: EntitiesFromUser}, facts(bridge.Tag{Entity: "labA"}), "ana",
			[]string{"entity=labA ignored: the site sets entities from the job's user"}},
		"from user, tag may pick the account": {Rules{EntitiesFrom: EntitiesFromUser, AllowTagEntity: true},
			facts(bridge.Tag{Entity: "labA"}), "labA", nil},
		"from tag trusts the tag": {Rules{EntitiesFrom: EntitiesFromTag}, facts(bridge.Tag{Entity: "anything"}), "anything", nil},
		"from tag without entity uses the account's": {Rules{EntitiesFrom: EntitiesFromTag, AccountEntities: mapped},
			facts(bridge.Tag{}), "vision", nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := tc.rules.Apply(tc.job)
			if got.Entity != tc.want || !reflect.DeepEqual(got.Notes, tc.wantNotes) {
				t.Errorf("entity %q notes %q, want %q %q", got.Entity, got.Notes, tc.want, tc.wantNotes)
			}
		})
	}
}

// A tag that asks for everything at once gets every clamp, in a stable
// order, and the untouched values pass through.
func TestApplyEverything(t *testing.T) {
	r := Default()
	r.Partitions = map[string]Limits{"gpu": {MaxWeight: 4, AllowedPreempt: []bridge.PreemptMode{bridge.PreemptCheckpoint}}}
	got := r.Apply(facts(bridge.Tag{Model: "a3c", Weight: 1e6, Grace: 2 * time.Hour, Entity: "labB",
		Class: bridge.ClassTrialAndError, Preempt: bridge.PreemptNever}))
	want := Effective{Weight: 4, Grace: 10 * time.Minute, MaxRestart: DefaultMaxRestart, Class: bridge.ClassTrialAndError, Entity: "labA",
		Preempt: bridge.PreemptUnset, Notes: []string{
			"weight=1000000 clamped to 4 (partition gpu max_weight)",
			"grace=2h clamped to 10m (site max_grace)",
			"entity=labB ignored: the site sets entities from the job's account",
			"preempt=never ignored, site default used: not allowed (partition gpu allowed_preempt: checkpoint)",
		}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
}

func TestValidate(t *testing.T) {
	if err := Default().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	if err := (Rules{}).Validate(); err != nil {
		t.Fatalf("zero rules: %v", err)
	}
	tests := map[string]struct {
		rules   Rules
		wantKey string
	}{
		"max weight too large": {Rules{Limits: Limits{MaxWeight: 1e7}}, "limits.max_weight"},
		"max weight negative":  {Rules{Limits: Limits{MaxWeight: -1}}, "limits.max_weight"},
		"max weight NaN":       {Rules{Limits: Limits{MaxWeight: math.NaN()}}, "limits.max_weight"},
		"negative grace":       {Rules{Limits: Limits{MaxGrace: -time.Second}}, "limits.max_grace"},
		"negative restart":     {Rules{Limits: Limits{MaxRestart: -time.Second}}, "limits.max_restart"},
		"bad class":            {Rules{Limits: Limits{AllowedClasses: []bridge.Class{"urgent"}}}, "limits.allowed_classes"},
		"bad preempt mode":     {Rules{Limits: Limits{AllowedPreempt: []bridge.PreemptMode{"sometimes"}}}, "limits.allowed_preempt"},
		"bad partition limit": {Rules{Partitions: map[string]Limits{"gpu": {MaxWeight: math.Inf(1)}}},
			"limits.partition.gpu.max_weight"},
		"bad entity source":    {Rules{EntitiesFrom: "group"}, "entities.from"},
		"account maps to none": {Rules{AccountEntities: map[string][]string{"labA": {}}}, "entities.account_map.labA"},
		"empty entity name":    {Rules{AccountEntities: map[string][]string{"labA": {" "}}}, "entities.account_map.labA"},
		"zero account weight":  {Rules{AccountWeights: map[string]float64{"labA": 0}}, "weights.account.labA"},
		"infinite qos weight":  {Rules{QOSWeights: map[string]float64{"high": math.Inf(1)}}, "weights.qos.high"},
		"NaN qos weight":       {Rules{QOSWeights: map[string]float64{"high": math.NaN()}}, "weights.qos.high"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := tc.rules.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.wantKey) {
				t.Errorf("err = %v, want one naming %s", err, tc.wantKey)
			}
		})
	}
}

func TestParseEntitySource(t *testing.T) {
	for in, want := range map[string]EntitySource{"account": EntitiesFromAccount, "TAG": EntitiesFromTag, "user": EntitiesFromUser} {
		if got, err := ParseEntitySource(in); err != nil || got != want {
			t.Errorf("ParseEntitySource(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseEntitySource("group"); err == nil {
		t.Error("ParseEntitySource accepted group")
	}
}
