package rest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// JobHistory reads slurmdbd's records of the jobs of a time window through
// slurmrestd's GET /slurmdb/{version}/jobs, on the API version the client
// negotiated, and returns the reply as slurmrestd wrote it, for
// internal/history.Parse (sacct --json prints the same schema).
//
// slurmdbd answers with every job that was eligible or running at some
// time in [from, to]: the jobs that ended in the window, and those still
// running at its end, which the caller tells apart by their states and end
// times. Held jobs cancelled before they were ever eligible are not
// listed.
//
// Two parameters change slurmrestd's defaults (both releases):
// disable_truncate_usage_time, without which the start and end times of
// jobs that overlap an edge of the window are cut to the window's edges
// and a requeued job's earlier runs are listed beside its last record (as
// sacct -T --duplicates would), and skip_steps, since steps are not jobs
// and make most of the reply's size. A requeued job is then one record, its
// last run, as sacct shows it.
//
// A window longer than HistoryPage is read a page at a time, each request
// bounded by Config.ReadTimeout, so that a month of a large site's jobs is
// many replies slurmdbd and slurmrestd can each make in time rather than
// one that times out; the pages are joined into one reply of the same
// schema, a job listed by two pages (it ran across their edge) once. A
// window of one page comes back as slurmrestd wrote it. A reply other than
// 200, or with errors[], is an error (*ReplyError).
func (c *Client) JobHistory(ctx context.Context, from, to time.Time) ([]byte, error) {
	if from.IsZero() || to.IsZero() || to.Before(from) {
		return nil, fmt.Errorf("job history: the window %s to %s is not a time range", stamp(from), stamp(to))
	}
	a, err := c.adapter(ctx)
	if err != nil {
		return nil, fmt.Errorf("job history: %w", err)
	}
	var pages [][]byte
	for start := from; ; start = start.Add(HistoryPage) {
		end := start.Add(HistoryPage)
		if !end.Before(to) {
			end = to
		}
		body, err := c.historyPage(ctx, a.version(), start, end)
		if err != nil {
			return nil, err
		}
		pages = append(pages, body)
		if !end.Before(to) {
			break
		}
	}
	if len(pages) == 1 {
		return pages[0], nil
	}
	body, err := joinHistoryPages(pages)
	if err != nil {
		return nil, fmt.Errorf("job history %s to %s: %w", stamp(from), stamp(to), err)
	}
	return body, nil
}

// HistoryPage is the longest window JobHistory asks slurmrestd for at once.
const HistoryPage = 24 * time.Hour

func (c *Client) historyPage(ctx context.Context, version string, from, to time.Time) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.ReadTimeout)
	defer cancel()
	body, err := c.getSlurmdbJobs(ctx, version, from, to)
	if err != nil {
		if endpointsMissing(err) {
			err = fmt.Errorf("%s: %w", noSlurmdbEndpoints, err)
		}
		return nil, fmt.Errorf("job history %s to %s: %w", stamp(from), stamp(to), err)
	}
	return body, nil
}

// joinHistoryPages makes one reply of the pages: the first page's fields,
// every page's jobs in order, a record two pages list byte for byte alike
// once, and every page's warnings.
func joinHistoryPages(pages [][]byte) ([]byte, error) {
	var joined map[string]json.RawMessage
	if err := json.Unmarshal(pages[0], &joined); err != nil {
		return nil, fmt.Errorf("page 1: %w", err)
	}
	var jobs, warnings []json.RawMessage
	seen := map[string]bool{}
	for k, page := range pages {
		var reply struct {
			Jobs     []json.RawMessage `json:"jobs"`
			Warnings []json.RawMessage `json:"warnings"`
		}
		if err := json.Unmarshal(page, &reply); err != nil {
			return nil, fmt.Errorf("page %d: %w", k+1, err)
		}
		for _, j := range reply.Jobs {
			if key := string(j); !seen[key] {
				seen[key] = true
				jobs = append(jobs, j)
			}
		}
		warnings = append(warnings, reply.Warnings...)
	}
	var err error
	if joined["jobs"], err = json.Marshal(jobs); err != nil {
		return nil, err
	}
	if warnings == nil {
		warnings = []json.RawMessage{}
	}
	if joined["warnings"], err = json.Marshal(warnings); err != nil {
		return nil, err
	}
	return json.Marshal(joined)
}

// getSlurmdbJobs sends the request: the generated clients decode the
// reply into their own types, and the caller wants it as it came.
func (c *Client) getSlurmdbJobs(ctx context.Context, version string, from, to time.Time) ([]byte, error) {
	q := url.Values{}
	q.Set("start_time", strconv.FormatInt(from.Unix(), 10))
	// slurmdbd takes whole seconds: the second to is in belongs to the
	// window.
	q.Set("end_time", strconv.FormatInt(to.Unix(), 10))
	q.Set("disable_truncate_usage_time", "true")
	q.Set("skip_steps", "true")
	u := strings.TrimRight(c.cfg.URL, "/") + "/slurmdb/" + version + "/jobs?" + q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	if err := c.authenticate(ctx, req); err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	rsp, err := c.cfg.HTTPClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer rsp.Body.Close()
	body, err := io.ReadAll(rsp.Body)
	if err != nil {
		return nil, fmt.Errorf("read the reply: %w", err)
	}
	return body, historyReplyError(rsp.StatusCode, body)
}

// historyReplyError says why a reply is not a job list: its status, its
// errors[], or a body that is not JSON; nil for a good reply.
func historyReplyError(status int, body []byte) error {
	var reply struct {
		Errors []struct {
			Error       string `json:"error"`
			Description string `json:"description"`
			Source      string `json:"source"`
			ErrorNumber int    `json:"error_number"`
		} `json:"errors"`
		Jobs json.RawMessage `json:"jobs"`
	}
	if err := json.Unmarshal(body, &reply); err != nil {
		return statusError(status, body)
	}
	re := &ReplyError{Status: status}
	for _, e := range reply.Errors {
		re.Errors = append(re.Errors, slurmError{Number: e.ErrorNumber, Error: e.Error,
			Description: e.Description, Source: e.Source})
	}
	switch {
	case status != http.StatusOK || len(re.Errors) > 0:
		return re
	case len(reply.Jobs) == 0:
		return errors.New(`slurmrestd replied 200 without a "jobs" list`)
	}
	return nil
}

// stamp writes a window's edge for messages.
func stamp(t time.Time) string {
	if t.IsZero() {
		return "(none)"
	}
	return t.UTC().Format(time.RFC3339)
}
