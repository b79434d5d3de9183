package limits

import (
	"reflect"
	"strings"
	"testing"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

const none = bridge.NoLimit

func qos(name string, gpusPerUser, jobsPerUser, grpGPUs int) bridge.QOSLimits {
	return bridge.QOSLimits{Name: name, MaxGPUsPerUser: gpusPerUser, MaxJobsPerUser: jobsPerUser, GrpGPUs: grpGPUs,
		MaxGPUsPerAccount: none, MaxJobsPerAccount: none, GrpJobs: none, MaxGPUsPerJob: none}
}

func assoc(account, user, parent string) bridge.Association {
	return bridge.Association{Account: account, User: user, ParentAccount: parent, Shares: 1,
		GrpGPUs: none, GrpJobs: none, MaxJobs: none, MaxGPUsPerJob: none}
}

// site is the local Slurm's tree: physics and biology under root, QOS
// normal (no caps) and gpu4 (4 GPUs per user).
func site() *bridge.Accounting {
	return &bridge.Accounting{
		QOS: []bridge.QOSLimits{qos("normal", none, none, none), qos("gpu4", 4, none, none)},
		Associations: []bridge.Association{
			assoc("root", "", ""), assoc("physics", "", "root"), assoc("biology", "", "root"),
			assoc("physics", "alice", "physics"), assoc("biology", "bob", "biology"),
		},
	}
}

func TestPoolsOfAJob(t *testing.T) {
	withGroupCap := site()
	withGroupCap.Associations[2].GrpGPUs = 6 // biology
	withGroupCap.Associations[0].GrpJobs = 20
	withMaxJobs := site()
	withMaxJobs.Associations[1].MaxJobs = 3 // physics: inherited by alice
	withPerJob := site()
	withPerJob.QOS[1].MaxGPUsPerJob = 2
	withAssocPerJob := site()
	withAssocPerJob.Associations[2].MaxGPUsPerJob = 2
	qosJobs := site()
	qosJobs.QOS[1].MaxJobsPerUser = 5
	qosJobs.Associations[1].MaxJobs = 3

	cases := []struct {
		name    string
		acc     *bridge.Accounting
		m       Member
		want    []Pool
		blocked string
	}{
		{"no accounting", nil, Member{User: "alice", Account: "physics", QOS: "gpu4", GPUs: 1}, nil, ""},
		{"uncapped QOS and tree", site(), Member{User: "alice", Account: "physics", QOS: "normal", GPUs: 1}, nil, ""},
		{"QOS per user", site(), Member{User: "alice", Account: "physics", QOS: "gpu4", GPUs: 1},
			[]Pool{{"qos gpu4 user alice", 4, NoCap}}, ""},
		{"group caps at every level up to root", withGroupCap, Member{User: "bob", Account: "biology", QOS: "gpu4", GPUs: 2},
			[]Pool{{"qos gpu4 user bob", 4, NoCap}, {"association biology", 6, NoCap}, {"association root", NoCap, 20}}, ""},
		{"MaxJobs inherited from the account", withMaxJobs, Member{User: "alice", Account: "physics", QOS: "normal", GPUs: 1},
			[]Pool{{"association physics/alice max jobs", NoCap, 3}}, ""},
		{"QOS MaxJobsPerUser comes before association MaxJobs", qosJobs, Member{User: "alice", Account: "physics", QOS: "gpu4", GPUs: 1},
			[]Pool{{"qos gpu4 user alice", 4, 5}}, ""},
		{"QOS per-job cap stops a larger job", withPerJob, Member{User: "alice", Account: "physics", QOS: "gpu4", GPUs: 3},
			nil, "QOS gpu4 allows 2 GPUs per job"},
		{"QOS per-job cap lets a smaller job by", withPerJob, Member{User: "alice", Account: "physics", QOS: "gpu4", GPUs: 2},
			[]Pool{{"qos gpu4 user alice", 4, NoCap}}, ""},
		{"association per-job cap", withAssocPerJob, Member{User: "bob", Account: "biology", QOS: "normal", GPUs: 4},
			nil, "association biology/bob allows 2 GPUs per job"},
		{"user without association", site(), Member{User: "carol", Account: "physics", QOS: "normal", GPUs: 1}, nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tab := New(c.acc)
			names, blocked := tab.Of(c.m)
			if c.blocked != "" || blocked != "" {
				if c.blocked == "" || !strings.Contains(blocked, c.blocked) {
					t.Fatalf("blocked = %q, want %q", blocked, c.blocked)
				}
				return
			}
			var got []Pool
			for _, n := range names {
				for _, p := range tab.Pools() {
					if p.Name == n {
						got = append(got, p)
					}
				}
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("pools = %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestUsageCountsEveryPoolOfEveryRunningJob(t *testing.T) {
	acc := site()
	acc.Associations[1].GrpGPUs = 8 // physics
	tab := New(acc)
	used := tab.Usage([]Member{
		{User: "alice", Account: "physics", QOS: "gpu4", GPUs: 2},
		{User: "alice", Account: "physics", QOS: "normal", GPUs: 3},
		{User: "bob", Account: "biology", QOS: "gpu4", GPUs: 1},
	})
	want := map[string]Used{
		"qos gpu4 user alice": {2, 1},
		"qos gpu4 user bob":   {1, 1},
		"association physics": {5, 2},
	}
	if !reflect.DeepEqual(used, want) {
		t.Fatalf("usage = %+v, want %+v", used, want)
	}
}

func TestABrokenTreeEnds(t *testing.T) {
	acc := site()
	acc.Associations[1].ParentAccount = "physics" // physics above itself
	acc.Associations[1].GrpJobs = 2
	names, _ := New(acc).Of(Member{User: "alice", Account: "physics", QOS: "normal", GPUs: 1})
	if !reflect.DeepEqual(names, []string{"association physics"}) {
		t.Fatalf("names = %v", names)
	}
}
