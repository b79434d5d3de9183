package rest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"

	api "github.com/SlinkyProject/slurm-client/api/v0045"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

// Requeue through slurmrestd: v0.0.45 (Slurm 26.05) is the first API
// version with GET /slurm/v0.0.45/job/{job_id}/requeue. This file is
// written by hand; adapter_v0045.go is generated from adapter_v0042.go
// like the other versions, since the fields the bridge reads and writes
// have the same names and types in v0.0.42 to v0.0.45 (see
// docs/design-notes.md, "REST client").

// requeueHoldValue is the value sent with the Hold query flag. The
// generated parameter is a string (the spec allows an empty value);
// slurmrestd reads the flag as a boolean, so "true" is sent rather than
// relying on how an empty value is read.
const requeueHoldValue = "true"

// requeue asks slurmrestd to requeue the job it knows by name (a job id,
// or ARRAY_TASK for a task of a job array), and to hold it after the
// requeue when hold is set.
func (a *adapterV0045) requeue(ctx context.Context, name string, hold bool) error {
	params := &api.SlurmV0045GetJobRequeueParams{}
	if hold {
		v := requeueHoldValue
		params.Hold = &v
	}
	rsp, err := a.client.SlurmV0045GetJobRequeue(ctx, name, params)
	if err != nil {
		return err
	}
	// The body is kept so that a reply that does not decode (a proxy's
	// page, a plain-text 401) is still reported with its status.
	body, err := io.ReadAll(rsp.Body)
	_ = rsp.Body.Close()
	if err != nil {
		return err
	}
	rsp.Body = io.NopCloser(bytes.NewReader(body))
	r, err := api.ParseSlurmV0045GetJobRequeueResponse(rsp)
	if err != nil {
		if rsp.StatusCode != http.StatusOK {
			return statusError(rsp.StatusCode, body)
		}
		return fmt.Errorf("slurmrestd's requeue reply does not decode: %w", err)
	}
	if r.JSON200 == nil {
		if r.JSONDefault != nil {
			if err := requeueErrorsV0045(r.StatusCode(), r.JSONDefault); err != nil {
				return err
			}
		}
		return statusError(r.StatusCode(), r.Body)
	}
	return requeueErrorsV0045(r.StatusCode(), r.JSON200)
}

// requeueErrorsV0045 reads a requeue reply: slurmctld's refusal comes in
// errors[] (with the Slurm error number), and a job array's tasks may each
// carry their own in status[].
func requeueErrorsV0045(status int, reply *api.V0045OpenapiJobRequeueResp) error {
	err := errorsV0045(status, reply.Errors)
	var re *ReplyError
	if err != nil {
		var ok bool
		if re, ok = err.(*ReplyError); !ok {
			return err
		}
	}
	for _, s := range reply.Status {
		code := int(deref(s.ErrorCode))
		if code == 0 {
			continue
		}
		if re == nil {
			re = &ReplyError{Status: status}
		}
		re.Errors = append(re.Errors, slurmError{Number: code, Error: deref(s.Error), Description: deref(s.Why)})
	}
	if re == nil {
		return nil
	}
	return re
}

var _ requeuer = (*adapterV0045)(nil)

// requeueFailedJob finds the job in the description slurmrestd gives each
// refused job of POST /jobs/requeue: "Requeue JobId=12 failed".
var requeueFailedJob = regexp.MustCompile(`JobId=(\S+) failed`)

// requeueMany requeues the jobs slurmctld knows by names in one request
// (POST /slurm/v0.0.45/jobs/requeue), holding them when hold is set. A
// job slurmctld refused comes back in errors[] with its id in the
// description; an entry that names no job leaves the whole request's
// outcome unknown (bridge.NoReply).
func (a *adapterV0045) requeueMany(ctx context.Context, names []string, hold bool) (map[string]error, error) {
	body := api.SlurmV0045PostJobsRequeueJSONRequestBody{Jobs: &names}
	if hold {
		body.Flags = &[]api.V0045OpenapiJobsRequeueQueryFlags{api.Hold}
	}
	r, err := a.client.SlurmV0045PostJobsRequeueWithResponse(ctx, body)
	if err != nil {
		return nil, err
	}
	reply := r.JSON200
	if reply == nil {
		reply = r.JSONDefault
	}
	if reply == nil {
		return nil, statusError(r.StatusCode(), r.Body)
	}
	failed := map[string]error{}
	if reply.Errors != nil {
		for _, e := range *reply.Errors {
			m := requeueFailedJob.FindStringSubmatch(deref(e.Description))
			if m == nil {
				// An error that names no job says nothing of which jobs
				// were requeued: some may have been. Their outcome is
				// unknown, for reconciliation to read from Slurm, as for
				// an scontrol list that fails without naming its jobs.
				return nil, bridge.NoReply(errorsV0045(r.StatusCode(), reply.Errors))
			}
			failed[m[1]] = &ReplyError{Status: r.StatusCode(), Errors: []slurmError{{
				Number: int(deref(e.ErrorNumber)), Error: deref(e.Error), Description: deref(e.Description), Source: deref(e.Source)}}}
		}
	}
	for _, list := range reply.Status {
		for _, s := range list {
			if code := deref(s.ErrorCode); code != 0 && s.JobId != nil {
				failed[strconv.Itoa(int(*s.JobId))] = &ReplyError{Status: r.StatusCode(), Errors: []slurmError{{
					Number: int(code), Error: deref(s.Error), Description: deref(s.Why)}}}
			}
		}
	}
	if len(failed) == 0 && r.StatusCode() != http.StatusOK {
		return nil, statusError(r.StatusCode(), r.Body)
	}
	return failed, nil
}

var _ bulkRequeuer = (*adapterV0045)(nil)
