package server

import (
	"context"

	"github.com/sluicehq/sluice/api"
	"github.com/valyala/fasthttp"
)

// appmasterBody checks a write to an appmaster's collection (the leader
// serves it, no query, a JSON or NDJSON body, a job the principal may
// use) and returns the body, decompressed.
func (h *Handler) appmasterBody(ctx *fasthttp.RequestCtx, p Principal, job string) ([]byte, *httpError) {
	if e := h.requireLeader(ctx); e != nil {
		return nil, e
	}
	if e := checkQuery(ctx); e != nil {
		return nil, e
	}
	if e := checkContentType(ctx, true, "application/json", "application/x-ndjson"); e != nil {
		return nil, e
	}
	if _, e := h.lookupJob(job, p); e != nil {
		return nil, e
	}
	return h.readBody(ctx)
}

// appmasterIDs checks a DELETE of members of an appmaster's collection
// (the leader serves it, one or more id parameters, a job the principal
// may use) and returns the IDs; what names the members.
func (h *Handler) appmasterIDs(ctx *fasthttp.RequestCtx, p Principal, job, what string) ([]string, *httpError) {
	if e := h.requireLeader(ctx); e != nil {
		return nil, e
	}
	if e := checkQuery(ctx, "id"); e != nil {
		return nil, e
	}
	ids := listValues(ctx, "id")
	switch {
	case len(ids) == 0:
		return nil, badParam("id", "name at least one %s", what)
	case len(ids) > api.MaxItemsPerRequest:
		return nil, badParam("id", "%d IDs, more than the limit of %d in one request", len(ids), api.MaxItemsPerRequest)
	}
	if _, e := h.lookupJob(job, p); e != nil {
		return nil, e
	}
	return ids, nil
}

// createCapboxes serves POST /v1/jobs/{id}/capboxes: the body is capbox
// requests as submit takes jobs (one object, an array or NDJSON, maybe
// compressed); nothing is proposed unless every request is valid, and the
// reply is sent once the capbox sets are committed.
func (h *Handler) createCapboxes(ctx *fasthttp.RequestCtx, p Principal, args []string) *httpError {
	body, e := h.appmasterBody(ctx, p, args[0])
	if e != nil {
		return e
	}
	reqs, err := api.DecodeCapboxRequests(body)
	if err != nil {
		return h.fromError(ctx, "create capboxes", err)
	}
	cctx, cancel := context.WithCancel(h.base)
	defer cancel()
	sets, existing, err := h.cfg.Dispatcher.CreateCapboxes(cctx, args[0], reqs)
	if err != nil {
		return h.fromError(ctx, "create capboxes for "+args[0], err)
	}
	writeJSON(ctx, fasthttp.StatusOK, api.CreateCapboxesResponse{Sets: sets, Existing: existing})
	return nil
}

// listCapboxes serves GET /v1/jobs/{id}/capboxes.
func (h *Handler) listCapboxes(ctx *fasthttp.RequestCtx, p Principal, args []string) *httpError {
	if e := checkQuery(ctx, "consistent"); e != nil {
		return e
	}
	if e := h.consistent(ctx); e != nil {
		return e
	}
	if _, e := h.lookupJob(args[0], p); e != nil {
		return e
	}
	boxes, index, _ := h.cfg.FSM.Capboxes(args[0])
	out := api.CapboxList{Capboxes: make([]api.CapboxStatus, len(boxes)), Index: index}
	for i, b := range boxes {
		out.Capboxes[i] = api.CapboxStatus{ID: b.ID, Set: b.Set, Request: b.Request, State: b.State, Node: b.Node,
			Resources: b.Resources, Reason: b.Reason, ExitCode: b.ExitCode, Updated: b.Updated, Tasks: b.Tasks}
	}
	writeJSON(ctx, fasthttp.StatusOK, out)
	return nil
}

// releaseCapboxes serves DELETE /v1/jobs/{id}/capboxes?id=...: every
// capbox named must be the appmaster's, or nothing is released.
func (h *Handler) releaseCapboxes(ctx *fasthttp.RequestCtx, p Principal, args []string) *httpError {
	ids, e := h.appmasterIDs(ctx, p, args[0], "capbox to release")
	if e != nil {
		return e
	}
	cctx, cancel := context.WithCancel(h.base)
	defer cancel()
	r, err := h.cfg.Dispatcher.ReleaseCapboxes(cctx, args[0], ids)
	if err != nil {
		return h.fromError(ctx, "release capboxes of "+args[0], err)
	}
	writeJSON(ctx, fasthttp.StatusOK, api.ReleaseCapboxesResponse{Dropped: r.Dropped, Stopping: r.Stopping})
	return nil
}

// startCapTasks serves POST /v1/jobs/{id}/captasks: tasks to run in the
// appmaster's running capboxes (bodies as submit's), all or none; the
// reply is sent once they are committed.
func (h *Handler) startCapTasks(ctx *fasthttp.RequestCtx, p Principal, args []string) *httpError {
	body, e := h.appmasterBody(ctx, p, args[0])
	if e != nil {
		return e
	}
	specs, err := api.DecodeCapTasks(body)
	if err != nil {
		return h.fromError(ctx, "start capbox tasks", err)
	}
	cctx, cancel := context.WithCancel(h.base)
	defer cancel()
	ids, existing, err := h.cfg.Dispatcher.StartCapTasks(cctx, args[0], specs)
	if err != nil {
		return h.fromError(ctx, "start capbox tasks of "+args[0], err)
	}
	writeJSON(ctx, fasthttp.StatusOK, api.StartCapTasksResponse{Tasks: ids, Existing: existing})
	return nil
}

// stopCapTasks serves DELETE /v1/jobs/{id}/captasks?id=...: every task
// named must be of the appmaster's capboxes, or none is stopped.
func (h *Handler) stopCapTasks(ctx *fasthttp.RequestCtx, p Principal, args []string) *httpError {
	ids, e := h.appmasterIDs(ctx, p, args[0], "capbox task to stop")
	if e != nil {
		return e
	}
	cctx, cancel := context.WithCancel(h.base)
	defer cancel()
	n, err := h.cfg.Dispatcher.StopCapTasks(cctx, args[0], ids)
	if err != nil {
		return h.fromError(ctx, "stop capbox tasks of "+args[0], err)
	}
	writeJSON(ctx, fasthttp.StatusOK, api.StopCapTasksResponse{Stopping: n})
	return nil
}
