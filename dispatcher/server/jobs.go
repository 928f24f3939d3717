package server

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/dispatcher/fsm"
	"github.com/sluicehq/sluice/dispatcher/placement"
	"github.com/valyala/fasthttp"
)

// jobArenas keep the memory submit handlers read jobs into: a handler's
// jobs are encoded into the submit command before it returns, and its
// arena goes back for the next request, if it read at most
// maxPooledArenaJobs jobs from a body of at most maxPooledBuffer bytes
// (an arena grows with the jobs it read, about 800 bytes each, and keeps
// the body they share until it reads the next).
var jobArenas = sync.Pool{New: func() any { return new(api.JobArena) }}

// maxPooledArenaJobs is the most jobs of a pooled arena: twice the
// loadgen's batches.
const maxPooledArenaJobs = 2048

// submit serves POST /v1/jobs. Nothing is proposed unless every item is
// valid and allowed; the reply is sent once the jobs are committed.
func (h *Handler) submit(ctx *fasthttp.RequestCtx, p Principal, _ []string) *httpError {
	if e := h.requireLeader(ctx); e != nil {
		return e
	}
	if e := checkContentType(ctx, true, "application/json", "application/x-ndjson"); e != nil {
		return e
	}
	key, e := idempotencyKey(ctx)
	if e != nil {
		return e
	}
	body, e := h.readBody(ctx)
	if e != nil {
		return e
	}
	// The dispatcher validates the jobs before it proposes them: read them
	// without validating (a fifth of the reading), unless they fail to read,
	// when every problem, read or invalid, is named at once.
	arena := jobArenas.Get().(*api.JobArena)
	specs, err := arena.DecodeUnvalidated(body)
	if err == nil && len(specs) <= maxPooledArenaJobs && len(body) <= maxPooledBuffer {
		defer jobArenas.Put(arena)
	}
	if err != nil {
		if errors.Is(err, api.ErrInvalid) {
			_, err = api.DecodeJobs(body)
		}
		return h.fromError(ctx, "submit", err)
	}
	var probs []api.Problem
	for i := range specs {
		s := &specs[i]
		if key != "" && s.IdempotencyKey == "" {
			s.IdempotencyKey = key + "/" + strconv.Itoa(i)
			if len(s.IdempotencyKey) > api.MaxIdempotencyKeyLen {
				probs = append(probs, api.Problem{Item: i, Path: fmt.Sprintf("jobs[%d].idempotency_key", i),
					Message: fmt.Sprintf("the key %s header gives it, %q, is longer than %d bytes: shorten the header",
						api.HeaderIdempotencyKey, clip(s.IdempotencyKey, 40), api.MaxIdempotencyKeyLen)})
			}
		}
		if !p.mayQueue(s.Queue) {
			return errorf(fasthttp.StatusForbidden, api.CodeForbidden,
				"jobs[%d]: this token may not submit to queue %q (its queues: %s)", i, s.Queue, strings.Join(p.Queues, ", "))
		}
	}
	if len(probs) > 0 {
		total := len(probs)
		return invalid(probs[:min(total, api.MaxProblems)], "invalid request, %d problems with the idempotency key", total)
	}
	sctx, cancel := context.WithCancel(h.base)
	defer cancel()
	ids, existing, err := h.cfg.Dispatcher.Submit(sctx, specs)
	if err != nil {
		return h.fromError(ctx, "submit", err)
	}
	writeEncoded(ctx, fasthttp.StatusOK, func(b []byte) ([]byte, error) {
		return api.AppendSubmitResponse(b, &api.SubmitResponse{Jobs: ids, Existing: existing}), nil
	})
	return nil
}

// idempotencyKey returns the request's Idempotency-Key header, checked.
func idempotencyKey(ctx *fasthttp.RequestCtx) (string, *httpError) {
	v := ctx.Request.Header.Peek(api.HeaderIdempotencyKey)
	if v == nil {
		return "", nil
	}
	k := string(v)
	bad := func(msg string) (string, *httpError) {
		return "", invalid([]api.Problem{{Item: -1, Path: api.HeaderIdempotencyKey, Message: msg}},
			"header %s: %s", api.HeaderIdempotencyKey, msg)
	}
	switch {
	case k == "":
		return bad("is empty")
	case len(k) > api.MaxIdempotencyKeyLen:
		return bad(fmt.Sprintf("longer than %d bytes", api.MaxIdempotencyKeyLen))
	case strings.ContainsFunc(k, func(r rune) bool { return r <= ' ' || r > '~' }):
		return bad("must be printable ASCII without spaces")
	}
	return k, nil
}

// jobStates maps api job states to the FSM's.
var jobStates = map[api.JobState]fsm.JobState{
	api.JobPending: fsm.JobPending, api.JobRunning: fsm.JobRunning, api.JobSucceeded: fsm.JobSucceeded,
	api.JobFailed: fsm.JobFailed, api.JobCancelled: fsm.JobCancelled,
}

// listValues returns a repeatable, comma-separable query parameter.
func listValues(ctx *fasthttp.RequestCtx, name string) []string {
	var out []string
	for _, v := range ctx.QueryArgs().PeekMulti(name) {
		for s := range strings.SplitSeq(string(v), ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

// limitParam returns the limit query parameter: 1 to MaxLimit, default
// DefaultLimit.
func limitParam(ctx *fasthttp.RequestCtx) (int, *httpError) {
	v := ctx.QueryArgs().Peek("limit")
	if v == nil {
		return DefaultLimit, nil
	}
	n, err := strconv.Atoi(string(v))
	if err != nil || n < 1 || n > MaxLimit {
		return 0, badParam("limit", "want an integer from 1 to %d, got %q", MaxLimit, clip(string(v), 40))
	}
	return n, nil
}

// checkQuery rejects parameters the endpoint does not know, so that a typo
// does not silently select everything.
func checkQuery(ctx *fasthttp.RequestCtx, known ...string) *httpError {
	for k := range ctx.QueryArgs().All() {
		if !slices.Contains(known, string(k)) {
			if len(known) == 0 {
				return badParam(clip(string(k), 40), "unknown parameter (this endpoint takes none)")
			}
			return badParam(clip(string(k), 40), "unknown parameter (known: %s)", strings.Join(known, ", "))
		}
	}
	return nil
}

// validJobID reports whether id has the shape of a job ID: "j" and a
// number without leading zeros.
func validJobID(id string) bool {
	if len(id) < 2 || id[0] != 'j' || id[1] == '0' {
		return false
	}
	_, err := strconv.ParseUint(id[1:], 10, 64)
	return err == nil
}

// taskJob returns the job ID of a task ID "<job>/<group>/<index>/<attempt>".
func taskJob(id string) (string, bool) {
	parts := strings.Split(id, "/")
	if len(parts) != 4 || !validJobID(parts[0]) {
		return "", false
	}
	for _, s := range parts[1:] {
		if _, err := strconv.ParseUint(s, 10, 32); err != nil {
			return "", false
		}
	}
	return parts[0], true
}

type labelFilter struct{ key, value string }

// listJobs serves GET /v1/jobs.
func (h *Handler) listJobs(ctx *fasthttp.RequestCtx, p Principal, _ []string) *httpError {
	if e := checkQuery(ctx, "state", "queue", "label", "history", "after", "limit", "consistent"); e != nil {
		return e
	}
	var filter fsm.JobFilter
	switch v := string(ctx.QueryArgs().Peek("history")); v {
	case "", api.HistoryInclude:
	case api.HistoryExclude:
		filter.History = fsm.NoHistory
	case api.HistoryOnly:
		filter.History = fsm.OnlyHistory
	default:
		return badParam("history", "want %s, %s or %s, got %q", api.HistoryInclude, api.HistoryExclude, api.HistoryOnly, clip(v, 40))
	}
	for _, s := range listValues(ctx, "state") {
		st, ok := jobStates[api.JobState(s)]
		if !ok {
			return badParam("state", "unknown job state %q (want pending, running, succeeded, failed or cancelled)", clip(s, 40))
		}
		if !slices.Contains(filter.States, st) {
			filter.States = append(filter.States, st)
		}
	}
	filter.Queue = string(ctx.QueryArgs().Peek("queue"))
	if filter.Queue != "" && !p.mayQueue(filter.Queue) {
		return errorf(fasthttp.StatusForbidden, api.CodeForbidden, "this token may not read queue %q", filter.Queue)
	}
	var labels []labelFilter
	for _, v := range ctx.QueryArgs().PeekMulti("label") {
		k, val, ok := strings.Cut(string(v), "=")
		if !ok || k == "" {
			return badParam("label", "want key=value, got %q", clip(string(v), 80))
		}
		labels = append(labels, labelFilter{k, val})
	}
	filter.After = string(ctx.QueryArgs().Peek("after"))
	if filter.After != "" && !validJobID(filter.After) {
		return badParam("after", "want a job ID such as j42, got %q", clip(filter.After, 40))
	}
	limit, e := limitParam(ctx)
	if e != nil {
		return e
	}
	if e := h.consistent(ctx); e != nil {
		return e
	}
	match := func(j *fsm.JobStatus) bool {
		if !p.mayQueue(j.Spec.Queue) {
			return false
		}
		for _, l := range labels {
			if v, ok := j.Spec.Labels[l.key]; !ok || v != l.value {
				return false
			}
		}
		return true
	}
	// Fetch pages from the FSM until limit+1 jobs match (the extra one says
	// there is a next page); the FSM filters by queue and state itself.
	out := api.JobList{Jobs: []api.JobStatus{}}
	chunk := limit + 1
	if len(labels) > 0 || p.scoped() {
		chunk = max(chunk, 1000)
	}
	var found []fsm.JobStatus
	for {
		filter.Limit = chunk
		page := h.cfg.FSM.Jobs(filter)
		for i := range page {
			if match(&page[i]) {
				found = append(found, page[i])
			}
		}
		if len(found) > limit || len(page) < chunk {
			break
		}
		filter.After = page[len(page)-1].ID
	}
	if len(found) > limit {
		found = found[:limit]
		out.Next = found[limit-1].ID
	}
	for i := range found {
		out.Jobs = append(out.Jobs, jobStatus(&found[i]))
	}
	writeJSON(ctx, fasthttp.StatusOK, out)
	return nil
}

// jobStatus converts the FSM's view of a job (or of a forgotten job's
// summary) to the wire's.
func jobStatus(j *fsm.JobStatus) api.JobStatus {
	s := api.JobStatus{ID: j.ID, State: api.JobState(j.State.String()), Submitted: j.Submitted, Spec: j.Spec,
		Appmaster: j.Appmaster, Groups: make([]api.GroupStatus, len(j.Groups))}
	if j.History {
		s.History, s.Started, s.Ended = true, j.Started, j.Ended
		t := &j.Totals
		s.Tasks = api.TaskCounts{Total: t.Count, Succeeded: t.Succeeded, Failed: t.Failed, Killed: t.Killed}
		if f := j.FirstFailure; f != nil {
			s.FirstFailure = &api.TaskFailure{Task: f.TaskID, State: f.State, Reason: f.Reason, ExitCode: f.ExitCode, At: f.At}
		}
		return s
	}
	for i, g := range j.Groups {
		s.Groups[i] = api.GroupStatus{Name: g.Name, TaskCounts: api.TaskCounts{
			Total: g.Count, Pending: g.Pending, Retrying: g.Retrying, Active: g.Active,
			Succeeded: g.Succeeded, Failed: g.Failed, Killed: g.Killed,
		}}
		s.Tasks.Add(s.Groups[i].TaskCounts)
	}
	return s
}

// lookupJob finds a job the principal may see: 404 for an unknown job, 403
// for another queue's.
func (h *Handler) lookupJob(id string, p Principal) (fsm.JobStatus, *httpError) {
	j, ok := h.cfg.FSM.Job(id)
	if !ok {
		if _, ok := h.cfg.FSM.Summary(id); ok {
			return j, errorf(fasthttp.StatusNotFound, api.CodeNotFound,
				"job %q has ended and been forgotten (after the dispatcher's --job-retention): only its summary is kept, at GET %s%s", clip(id, 80), api.PathJob, clip(id, 80))
		}
		return j, errorf(fasthttp.StatusNotFound, api.CodeNotFound,
			"no job %q (finished jobs are forgotten after the dispatcher's --job-retention, and their summaries after its --history-retention)", clip(id, 80))
	}
	if !p.mayQueue(j.Spec.Queue) {
		return j, errorf(fasthttp.StatusForbidden, api.CodeForbidden, "job %s is in queue %q, which this token may not use", id, j.Spec.Queue)
	}
	return j, nil
}

// getJob serves GET /v1/jobs/{id}.
func (h *Handler) getJob(ctx *fasthttp.RequestCtx, p Principal, args []string) *httpError {
	if e := checkQuery(ctx, "consistent"); e != nil {
		return e
	}
	if e := h.consistent(ctx); e != nil {
		return e
	}
	j, e := h.lookupJob(args[0], p)
	if e != nil {
		if e.status != fasthttp.StatusNotFound || p.Role == RoleJob {
			return e
		}
		// A forgotten job's summary, while it is kept. A job token
		// reads its job only while it runs.
		sum, found := h.cfg.FSM.Summary(args[0])
		if !found {
			return e
		}
		if !p.mayQueue(sum.Spec.Queue) {
			return errorf(fasthttp.StatusForbidden, api.CodeForbidden, "job %s is in queue %q, which this token may not use", args[0], sum.Spec.Queue)
		}
		writeJSON(ctx, fasthttp.StatusOK, jobStatus(&sum))
		return nil
	}
	s := jobStatus(&j)
	if s.Tasks.Pending > 0 {
		for _, d := range h.cfg.Dispatcher.Diagnosis() {
			if d.Group.Job != j.ID {
				continue
			}
			reason := d.Reason
			if len(d.Rejected) > 0 {
				var parts []string
				for _, f := range slices.Sorted(maps.Keys(d.Rejected)) {
					parts = append(parts, fmt.Sprintf("%s ruled out %d", f, d.Rejected[f]))
				}
				reason += " (nodes: " + strings.Join(parts, ", ") + ")"
			}
			s.Pending = append(s.Pending, api.PendingReason{Group: d.Group.Group, Tasks: d.Count, Reason: reason})
		}
		if len(s.Pending) == 0 && !h.cfg.FSM.HasReadyNode() {
			// The loop does not run placement without a ready node.
			for _, g := range s.Groups {
				if g.Pending > 0 {
					s.Pending = append(s.Pending, api.PendingReason{Group: g.Name, Tasks: g.Pending, Reason: placement.ReasonNoNodes})
				}
			}
		}
	}
	writeJSON(ctx, fasthttp.StatusOK, s)
	return nil
}

// cancelJob serves DELETE /v1/jobs/{id}.
func (h *Handler) cancelJob(ctx *fasthttp.RequestCtx, p Principal, args []string) *httpError {
	if e := h.requireLeader(ctx); e != nil {
		return e
	}
	if e := checkQuery(ctx); e != nil {
		return e
	}
	if _, e := h.lookupJob(args[0], p); e != nil {
		return e
	}
	cctx, cancel := context.WithCancel(h.base)
	defer cancel()
	r, err := h.cfg.Dispatcher.Cancel(cctx, args[0])
	if err != nil {
		return h.fromError(ctx, "cancel "+args[0], err)
	}
	writeJSON(ctx, fasthttp.StatusOK, api.CancelResponse{ID: args[0], Stopping: r.Stopping, Dropped: r.Dropped})
	return nil
}

// listTasks serves GET /v1/jobs/{id}/tasks.
func (h *Handler) listTasks(ctx *fasthttp.RequestCtx, p Principal, args []string) *httpError {
	if e := checkQuery(ctx, "state", "after", "limit", "consistent"); e != nil {
		return e
	}
	id := args[0]
	var states []api.TaskState
	for _, s := range listValues(ctx, "state") {
		st, err := api.ParseTaskState(s)
		if err != nil {
			return badParam("state", "unknown task state %q", clip(s, 40))
		}
		states = append(states, st)
	}
	after := string(ctx.QueryArgs().Peek("after"))
	if after != "" {
		if j, ok := taskJob(after); !ok || j != id {
			return badParam("after", "want the ID of a task of job %s, got %q", clip(id, 40), clip(after, 80))
		}
	}
	limit, e := limitParam(ctx)
	if e != nil {
		return e
	}
	if e := h.consistent(ctx); e != nil {
		return e
	}
	if _, e := h.lookupJob(id, p); e != nil {
		return e
	}
	out := api.TaskList{Tasks: []api.TaskStatus{}}
	chunk := limit + 1
	if len(states) > 0 {
		chunk = max(chunk, 1000)
	}
	var found []fsm.TaskInfo
	for {
		page, ok := h.cfg.FSM.JobTasks(id, after, chunk)
		if !ok {
			return errorf(fasthttp.StatusNotFound, api.CodeNotFound, "no job %q", clip(id, 80))
		}
		for _, t := range page {
			if len(states) == 0 || slices.Contains(states, t.State) {
				found = append(found, t)
			}
		}
		if len(found) > limit || len(page) < chunk {
			break
		}
		after = page[len(page)-1].ID
	}
	if len(found) > limit {
		found = found[:limit]
		out.Next = found[limit-1].ID
	}
	for _, t := range found {
		out.Tasks = append(out.Tasks, api.TaskStatus{ID: t.ID, Group: t.Group, Index: t.Index, Attempt: t.Attempt,
			State: t.State, Node: t.Node, Host: t.Host, Ports: t.Ports, Reason: t.Reason, ExitCode: t.ExitCode, Updated: t.Updated})
	}
	// Encoded by hand (as encoding/json would): pages are read in bulk,
	// by clients following many jobs' tasks.
	writeEncoded(ctx, fasthttp.StatusOK, func(b []byte) ([]byte, error) { return api.AppendTaskList(b, &out) })
	return nil
}
