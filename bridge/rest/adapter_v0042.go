package rest

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	api "github.com/SlinkyProject/slurm-client/api/v0042"
)

// adapterV0042 speaks slurmrestd's v0.0.42 API.
// adapter_v00NN.go files for the other versions are generated from this one
// by gen_adapters.sh: edit this file, then run it.
type adapterV0042 struct {
	client *api.ClientWithResponses
}

func newAdapterV0042(server string, doer api.HttpRequestDoer, auth api.RequestEditorFn) (adapter, error) {
	c, err := api.NewClientWithResponses(server, api.WithHTTPClient(doer), api.WithRequestEditorFn(auth))
	if err != nil {
		return nil, fmt.Errorf("v0.0.42 client: %w", err)
	}
	return &adapterV0042{client: c}, nil
}

func (a *adapterV0042) version() string { return "v0.0.42" }

func (a *adapterV0042) ping(ctx context.Context) (int, error) {
	r, err := a.client.SlurmV0042GetPingWithResponse(ctx)
	if err != nil {
		return 0, err
	}
	if r.JSON200 != nil {
		return r.StatusCode(), errorsV0042(r.StatusCode(), r.JSON200.Errors)
	}
	if r.JSONDefault != nil {
		return r.StatusCode(), errorsV0042(r.StatusCode(), r.JSONDefault.Errors)
	}
	return r.StatusCode(), statusError(r.StatusCode(), r.Body)
}

func (a *adapterV0042) nodes(ctx context.Context) ([]rawNode, error) {
	r, err := a.client.SlurmV0042GetNodesWithResponse(ctx, nil)
	if err != nil {
		return nil, err
	}
	if r.JSON200 == nil {
		return nil, replyError(r.StatusCode(), r.Body, r.JSONDefault != nil, func() error { return errorsV0042(r.StatusCode(), r.JSONDefault.Errors) })
	}
	if err := errorsV0042(r.StatusCode(), r.JSON200.Errors); err != nil {
		return nil, err
	}
	out := make([]rawNode, 0, len(r.JSON200.Nodes))
	for _, n := range r.JSON200.Nodes {
		raw := rawNode{
			Name:     deref(n.Name),
			Gres:     deref(n.Gres),
			GresUsed: deref(n.GresUsed),
		}
		if n.Partitions != nil {
			raw.Partitions = *n.Partitions
		}
		if n.Features != nil {
			raw.Features = *n.Features
		}
		if n.State != nil {
			for _, s := range *n.State {
				raw.States = append(raw.States, string(s))
			}
		}
		out = append(out, raw)
	}
	return out, nil
}

func (a *adapterV0042) jobs(ctx context.Context) ([]rawJob, error) {
	rsp, err := a.client.SlurmV0042GetJobs(ctx, nil)
	if err != nil {
		return nil, err
	}
	r, extra, err := parseJobsReply[api.V0042JobInfo](rsp, api.ParseSlurmV0042GetJobsResponse)
	if err != nil {
		return nil, err
	}
	if r.JSON200 == nil {
		return nil, replyError(r.StatusCode(), r.Body, r.JSONDefault != nil, func() error { return errorsV0042(r.StatusCode(), r.JSONDefault.Errors) })
	}
	if err := errorsV0042(r.StatusCode(), r.JSON200.Errors); err != nil {
		return nil, err
	}
	if r.JSON200.Jobs == nil {
		return nil, errNoJobsList
	}
	out := make([]rawJob, 0, len(r.JSON200.Jobs)+len(extra.unreadable))
	for _, j := range r.JSON200.Jobs {
		raw := rawJob{
			ID:          int64(deref(j.JobId)),
			User:        deref(j.UserName),
			Account:     deref(j.Account),
			QOS:         deref(j.Qos),
			Name:        deref(j.Name),
			Partition:   deref(j.Partition),
			Reason:      deref(j.StateReason),
			TresPerNode: deref(j.TresPerNode),
			TresPerJob:  deref(j.TresPerJob),
			Constraints: deref(j.Features),
			Restarts:    int64(deref(j.RestartCnt)),
			Hold:        j.Hold,
			Requeue:     j.Requeue,
			Comment:     deref(j.Comment),
			Dependency:  deref(j.Dependency),
		}
		raw.NodeCount, _ = uint32V0042(j.NodeCount)
		raw.Priority, raw.PrioritySet = uint32V0042(j.Priority)
		if p, ok := extra.priorities[raw.ID]; ok {
			raw.Priority = p
		}
		raw.ArrayJobID, _ = uint32V0042(j.ArrayJobId)
		raw.ArrayTaskID, raw.ArrayTaskSet = uint32V0042(j.ArrayTaskId)
		raw.ArrayTasks = deref(j.ArrayTaskString)
		raw.ArrayLimit, _ = uint32V0042(j.ArrayMaxTasks)
		raw.HetJobID, _ = uint32V0042(j.HetJobId)
		raw.HetJobOffset, _ = uint32V0042(j.HetJobOffset)
		raw.SubmitTime, _ = uint64V0042(j.SubmitTime)
		raw.StartTime, _ = uint64V0042(j.StartTime)
		raw.EligibleTime, _ = uint64V0042(j.EligibleTime)
		if j.JobState != nil {
			for _, s := range *j.JobState {
				raw.States = append(raw.States, string(s))
			}
		}
		if j.GresDetail != nil {
			raw.GresDetail = *j.GresDetail
		}
		if j.JobResources != nil && j.JobResources.Nodes != nil && j.JobResources.Nodes.Allocation != nil {
			for _, n := range *j.JobResources.Nodes.Allocation {
				raw.AllocNodes = append(raw.AllocNodes, n.Name)
			}
		}
		out = append(out, raw)
	}
	return append(out, extra.unreadable...), nil
}

func (a *adapterV0042) update(ctx context.Context, job int64, u jobUpdate) error {
	var desc api.V0042JobDescMsg
	if u.Priority != nil {
		set, number := true, int32(*u.Priority)
		desc.Priority = &api.V0042Uint32NoValStruct{Set: &set, Number: &number}
	}
	desc.Hold = u.Hold
	desc.Constraints = u.Constraints
	desc.MinimumNodes, desc.MaximumNodes = u.Nodes, u.Nodes
	desc.TresPerNode, desc.TresPerJob = u.TresPerNode, u.TresPerJob
	desc.Array = u.ArrayLimit
	if u.BeginTime != nil {
		set, number := true, *u.BeginTime
		desc.BeginTime = &api.V0042Uint64NoValStruct{Set: &set, Number: &number}
	}
	r, err := a.client.SlurmV0042PostJobWithResponse(ctx, strconv.FormatInt(job, 10), desc)
	if err != nil {
		return err
	}
	if r.JSON200 == nil {
		return replyError(r.StatusCode(), r.Body, r.JSONDefault != nil, func() error { return errorsV0042(r.StatusCode(), r.JSONDefault.Errors) })
	}
	return errorsV0042(r.StatusCode(), r.JSON200.Errors)
}

func (a *adapterV0042) signal(ctx context.Context, name string, signal string) error {
	flags := api.SlurmV0042DeleteJobParamsFlags("FULL_JOB")
	params := &api.SlurmV0042DeleteJobParams{Signal: &signal, Flags: &flags}
	r, err := a.client.SlurmV0042DeleteJobWithResponse(ctx, name, params)
	if err != nil {
		return err
	}
	if r.JSON200 == nil {
		return replyError(r.StatusCode(), r.Body, r.JSONDefault != nil, func() error { return errorsV0042(r.StatusCode(), r.JSONDefault.Errors) })
	}
	return errorsV0042(r.StatusCode(), r.JSON200.Errors)
}

// errorsV0042 turns a reply's errors[] into one error; Slurm fills it on
// HTTP 200 for some failures and on 500 for others.
func errorsV0042(status int, list *api.V0042OpenapiErrors) error {
	var msgs []slurmError
	if list != nil {
		for _, e := range *list {
			msgs = append(msgs, slurmError{
				Number:      int(deref(e.ErrorNumber)),
				Error:       deref(e.Error),
				Description: deref(e.Description),
				Source:      deref(e.Source),
			})
		}
	}
	if len(msgs) == 0 && status == http.StatusOK {
		return nil
	}
	return &ReplyError{Status: status, Errors: msgs}
}

func uint32V0042(v *api.V0042Uint32NoValStruct) (int64, bool) {
	if v == nil || !deref(v.Set) || deref(v.Infinite) || v.Number == nil {
		return 0, false
	}
	return int64(*v.Number), true
}

func uint64V0042(v *api.V0042Uint64NoValStruct) (int64, bool) {
	if v == nil || !deref(v.Set) || deref(v.Infinite) || v.Number == nil {
		return 0, false
	}
	return *v.Number, true
}
