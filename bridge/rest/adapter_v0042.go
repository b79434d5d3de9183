package rest

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	api "github.com/SlinkyProject/slurm-client/api/v0042"

	"github.com/gavel-slurm/gavel-slurm/bridge"
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

func (a *adapterV0042) nodes(ctx context.Context, since int64) (nodesReply, error) {
	var params *api.SlurmV0042GetNodesParams
	if since > 0 {
		params = &api.SlurmV0042GetNodesParams{UpdateTime: ptrTo(strconv.FormatInt(since, 10))}
	}
	rsp, err := a.client.SlurmV0042GetNodes(ctx, params)
	if err != nil {
		return nodesReply{}, err
	}
	if since > 0 && rsp.StatusCode == http.StatusNotModified {
		// slurmctld answered "no change since": the reply has no body.
		_ = rsp.Body.Close()
		return nodesReply{unchanged: true}, nil
	}
	r, err := api.ParseSlurmV0042GetNodesResponse(rsp)
	if err != nil {
		return nodesReply{}, err
	}
	if r.JSON200 == nil {
		return nodesReply{}, replyError(r.StatusCode(), r.Body, r.JSONDefault != nil, func() error { return errorsV0042(r.StatusCode(), r.JSONDefault.Errors) })
	}
	if err := errorsV0042(r.StatusCode(), r.JSON200.Errors); err != nil {
		return nodesReply{}, err
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
	lastUpdate, _ := uint64V0042(&r.JSON200.LastUpdate)
	return nodesReply{nodes: out, lastUpdate: lastUpdate}, nil
}

func (a *adapterV0042) jobs(ctx context.Context, since int64) (jobsReply, error) {
	var params *api.SlurmV0042GetJobsParams
	if since > 0 {
		params = &api.SlurmV0042GetJobsParams{UpdateTime: ptrTo(strconv.FormatInt(since, 10))}
	}
	rsp, err := a.client.SlurmV0042GetJobs(ctx, params)
	if err != nil {
		return jobsReply{}, err
	}
	if rsp.StatusCode == http.StatusOK {
		// A success is read job by job as it arrives: at 10,000 jobs the
		// reply is about 100 MB of JSON, which read whole (and then
		// decoded whole into the generated types) made the daemon's
		// memory several times the size of what it keeps.
		defer rsp.Body.Close()
		s, err := streamJobs(rsp.Body, rawJobV0042)
		if err != nil {
			return jobsReply{}, err
		}
		var errs *api.V0042OpenapiErrors
		var lastUpdate api.V0042Uint64NoValStruct
		if err := unmarshalIfSet(s.errors, &errs); err != nil {
			return jobsReply{}, fmt.Errorf("jobs reply: errors: %w", err)
		}
		if err := unmarshalIfSet(s.lastUpdate, &lastUpdate); err != nil {
			return jobsReply{}, fmt.Errorf("jobs reply: last_update: %w", err)
		}
		if err := errorsV0042(rsp.StatusCode, errs); err != nil {
			return jobsReply{}, err
		}
		if since > 0 && s.listed && len(s.jobs) == 0 && deref(lastUpdate.Set) && lastUpdate.Number != nil && *lastUpdate.Number == 0 {
			// slurmctld's "no change since" (SLURM_NO_CHANGE_IN_DATA), as
			// slurmrestd renders it: an empty list and a last_update of 0. A
			// queue that is really empty comes with its true last_update.
			return jobsReply{unchanged: true}, nil
		}
		if !s.listed {
			return jobsReply{}, errNoJobsList
		}
		updated, _ := uint64V0042(&lastUpdate)
		return jobsReply{jobs: s.jobs, lastUpdate: updated}, nil
	}
	r, err := api.ParseSlurmV0042GetJobsResponse(rsp)
	if err != nil {
		return jobsReply{}, err
	}
	if r.JSON200 != nil {
		return jobsReply{}, fmt.Errorf("jobs reply: HTTP %d with a success body", r.StatusCode())
	}
	return jobsReply{}, replyError(r.StatusCode(), r.Body, r.JSONDefault != nil, func() error { return errorsV0042(r.StatusCode(), r.JSONDefault.Errors) })
}

// rawJobV0042 is what the bridge reads of one job record.
func rawJobV0042(j *api.V0042JobInfo) rawJob {
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
		// Required nodes (--nodelist): a job its owner pinned is not the
		// daemon's to move to another node.
		RequiredNodes: deref(j.RequiredNodes),
	}
	raw.NodeCount, _ = uint32V0042(j.NodeCount)
	raw.Priority, raw.PrioritySet = uint32V0042(j.Priority)
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
	return raw
}

// jobStates reads GET /jobs/state: every job's id and state, which
// slurmctld answers without packing the job records.
func (a *adapterV0042) jobStates(ctx context.Context) ([]jobState, error) {
	rsp, err := a.client.SlurmV0042GetJobsState(ctx, nil)
	if err != nil {
		return nil, err
	}
	return parseJobStates(rsp)
}

// signalMany sends signal to the jobs slurmctld knows by names in one
// request (DELETE /jobs, slurmctld's kill_jobs): the batch script and
// every step, as signal does for one job.
func (a *adapterV0042) signalMany(ctx context.Context, names []string, signal string) (map[string]error, error) {
	flags := []api.V0042KillJobsMsgFlags{"FULL_JOB"}
	body := api.SlurmV0042DeleteJobsJSONRequestBody{Jobs: &names, Signal: &signal, Flags: &flags}
	r, err := a.client.SlurmV0042DeleteJobsWithResponse(ctx, body)
	if err != nil {
		return nil, err
	}
	if r.JSON200 == nil {
		return nil, replyError(r.StatusCode(), r.Body, r.JSONDefault != nil, func() error { return errorsV0042(r.StatusCode(), r.JSONDefault.Errors) })
	}
	failed := map[string]error{}
	for _, s := range r.JSON200.Status {
		if s.Error == nil || deref(s.Error.Code) == 0 {
			continue
		}
		failed[s.StepId] = &ReplyError{Status: r.StatusCode(), Errors: []slurmError{{
			Number: int(deref(s.Error.Code)), Error: deref(s.Error.String), Description: deref(s.Error.Message)}}}
	}
	if err := errorsV0042(r.StatusCode(), r.JSON200.Errors); err != nil && len(failed) == 0 {
		return nil, err
	}
	return failed, nil
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
	desc.RequiredNodes = u.RequiredNodes
	desc.Dependency, desc.Deadline = u.Dependency, u.Deadline
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

// submit submits the batch job s describes (the lease job, lease.go) and
// returns its id.
func (a *adapterV0042) submit(ctx context.Context, s submission) (int64, error) {
	set, limit := true, int32(s.TimeLimitMinutes)
	env := api.V0042StringArray(s.Environment)
	desc := api.V0042JobDescMsg{
		Name: &s.Name, Comment: &s.Comment, Hold: &s.Hold,
		Deadline: &s.Deadline, CurrentWorkingDirectory: &s.WorkDir, Environment: &env,
		TimeLimit: &api.V0042Uint32NoValStruct{Set: &set, Number: &limit}, Script: &s.Script,
		StandardOutput: &s.Output,
	}
	if s.Partition != "" {
		desc.Partition = &s.Partition
	}
	desc.Requeue = s.Requeue
	r, err := a.client.SlurmV0042PostJobSubmitWithResponse(ctx, api.V0042JobSubmitReq{Job: &desc})
	if err != nil {
		return 0, err
	}
	if r.JSON200 == nil {
		return 0, replyError(r.StatusCode(), r.Body, r.JSONDefault != nil, func() error { return errorsV0042(r.StatusCode(), r.JSONDefault.Errors) })
	}
	if err := errorsV0042(r.StatusCode(), r.JSON200.Errors); err != nil {
		return 0, err
	}
	if r.JSON200.JobId == nil || *r.JSON200.JobId <= 0 {
		return 0, fmt.Errorf("slurmrestd answered the submission without a job id")
	}
	return int64(*r.JSON200.JobId), nil
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

// qos reads GET /slurmdb/v0.0.42/qos: every QOS slurmdbd keeps. The
// paths are those of Slurm's data parser for slurmdb_qos_rec_t, whose
// names differ from sacctmgr's: GrpJobs is limits/max/active_jobs/count,
// MaxJobsPerUser limits/max/jobs/active_jobs/per/user (limits/max/jobs/
// per/user is MaxSubmitJobsPerUser), GrpTRES limits/max/tres/total.
func (a *adapterV0042) qos(ctx context.Context) (qosReply, error) {
	r, err := a.client.SlurmdbV0042GetQosWithResponse(ctx, nil)
	if err != nil {
		return qosReply{}, err
	}
	if r.JSON200 == nil {
		return qosReply{}, replyError(r.StatusCode(), r.Body, r.JSONDefault != nil, func() error { return errorsV0042(r.StatusCode(), r.JSONDefault.Errors) })
	}
	if err := errorsV0042(r.StatusCode(), r.JSON200.Errors); err != nil {
		return qosReply{}, err
	}
	out := qosReply{cluster: clusterV0042(r.JSON200.Meta)}
	for _, q := range r.JSON200.Qos {
		out.qos = append(out.qos, qosLimitsV0042(q))
	}
	return out, nil
}

func qosLimitsV0042(q api.V0042Qos) bridge.QOSLimits {
	out := bridge.QOSLimits{
		Name:           deref(q.Name),
		MaxGPUsPerUser: bridge.NoLimit, MaxGPUsPerAccount: bridge.NoLimit, GrpGPUs: bridge.NoLimit,
		MaxJobsPerUser: bridge.NoLimit, MaxJobsPerAccount: bridge.NoLimit, GrpJobs: bridge.NoLimit,
		MaxGPUsPerJob: bridge.NoLimit,
	}
	if q.Limits == nil || q.Limits.Max == nil {
		return out
	}
	m := q.Limits.Max
	if m.ActiveJobs != nil {
		out.GrpJobs = limitV0042(m.ActiveJobs.Count)
	}
	if m.Jobs != nil && m.Jobs.ActiveJobs != nil && m.Jobs.ActiveJobs.Per != nil {
		out.MaxJobsPerUser = limitV0042(m.Jobs.ActiveJobs.Per.User)
		out.MaxJobsPerAccount = limitV0042(m.Jobs.ActiveJobs.Per.Account)
	}
	if m.Tres != nil {
		out.GrpGPUs = gpusV0042(m.Tres.Total)
		if m.Tres.Per != nil {
			out.MaxGPUsPerUser = gpusV0042(m.Tres.Per.User)
			out.MaxGPUsPerAccount = gpusV0042(m.Tres.Per.Account)
			out.MaxGPUsPerJob = gpusV0042(m.Tres.Per.Job)
		}
	}
	return out
}

// associations reads GET /slurmdb/v0.0.42/associations, of cluster alone
// when it is set. The paths are those of Slurm's data parser for
// slurmdb_assoc_rec_t, whose names differ from sacctmgr's: GrpJobs is
// max/jobs/per/count, MaxJobs max/jobs/active (max/jobs/total is
// MaxSubmitJobs), GrpTRES max/tres/total.
func (a *adapterV0042) associations(ctx context.Context, cluster string) (associationsReply, error) {
	var params *api.SlurmdbV0042GetAssociationsParams
	if cluster != "" {
		params = &api.SlurmdbV0042GetAssociationsParams{Cluster: &cluster}
	}
	r, err := a.client.SlurmdbV0042GetAssociationsWithResponse(ctx, params)
	if err != nil {
		return associationsReply{}, err
	}
	if r.JSON200 == nil {
		return associationsReply{}, replyError(r.StatusCode(), r.Body, r.JSONDefault != nil, func() error { return errorsV0042(r.StatusCode(), r.JSONDefault.Errors) })
	}
	if err := errorsV0042(r.StatusCode(), r.JSON200.Errors); err != nil {
		return associationsReply{}, err
	}
	out := associationsReply{cluster: clusterV0042(r.JSON200.Meta)}
	for _, as := range r.JSON200.Associations {
		out.associations = append(out.associations, associationV0042(as))
	}
	return out, nil
}

func associationV0042(as api.V0042Assoc) rawAssociation {
	out := rawAssociation{Cluster: deref(as.Cluster), Association: bridge.Association{
		Account: deref(as.Account), User: as.User, Partition: deref(as.Partition),
		ParentAccount: deref(as.ParentAccount), Shares: sharesOf(as.SharesRaw),
		GrpGPUs: bridge.NoLimit, GrpJobs: bridge.NoLimit, MaxJobs: bridge.NoLimit, MaxGPUsPerJob: bridge.NoLimit,
	}}
	if as.Qos != nil {
		out.QOS = append([]string(nil), *as.Qos...)
	}
	if as.Default != nil {
		out.DefaultQOS = deref(as.Default.Qos)
	}
	if m := as.Max; m != nil {
		if m.Jobs != nil {
			out.MaxJobs = limitV0042(m.Jobs.Active)
			if m.Jobs.Per != nil {
				out.GrpJobs = limitV0042(m.Jobs.Per.Count)
			}
		}
		if m.Tres != nil {
			out.GrpGPUs = gpusV0042(m.Tres.Total)
			if m.Tres.Per != nil {
				out.MaxGPUsPerJob = gpusV0042(m.Tres.Per.Job)
			}
		}
	}
	return out
}

// limitV0042 reads one cap on jobs: bridge.NoLimit when unset or infinite.
func limitV0042(v *api.V0042Uint32NoValStruct) int {
	return capOf(uint32V0042(v))
}

// gpusV0042 reads the gres/gpu cap of a TRES limit list: bridge.NoLimit
// when the list sets none.
func gpusV0042(list *api.V0042TresList) int {
	if list == nil {
		return bridge.NoLimit
	}
	for _, t := range *list {
		if isGPUTRES(t.Type, deref(t.Name)) {
			return capOf(deref(t.Count), t.Count != nil)
		}
	}
	return bridge.NoLimit
}

// clusterV0042 is the cluster slurmrestd serves, as its reply names it
// ("" when it does not).
func clusterV0042(meta *api.V0042OpenapiMeta) string {
	if meta == nil || meta.Slurm == nil {
		return ""
	}
	return deref(meta.Slurm.Cluster)
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
