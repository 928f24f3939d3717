package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/valyala/fasthttp"
)

// jsonBody reads a request's body, which must be JSON (maybe compressed).
func jsonBody(ctx *fasthttp.RequestCtx) ([]byte, *httpError) {
	if e := checkContentType(ctx, true, "application/json"); e != nil {
		return nil, e
	}
	return readBody(ctx)
}

// decodeStrict reads a JSON body into v: one object, no unknown fields,
// nothing after it.
func decodeStrict(ctx *fasthttp.RequestCtx, what string, v any) *httpError {
	body, e := jsonBody(ctx)
	if e != nil {
		return e
	}
	bad := func(msg string) *httpError {
		return invalid([]api.Problem{{Item: -1, Message: msg}}, "%s: %s", what, msg)
	}
	if len(bytes.TrimSpace(body)) == 0 || bytes.TrimSpace(body)[0] != '{' {
		return bad("want one JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return invalid([]api.Problem{{Item: -1, Path: te.Field, Message: fmt.Sprintf("want %s, got %s", te.Type, te.Value)}},
				"%s: %s: want %s, got %s", what, te.Field, te.Type, te.Value)
		}
		return bad(clip(strings.TrimPrefix(err.Error(), "json: "), 300))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return bad("trailing data after the object")
	}
	return nil
}

// listNodes serves GET /v1/nodes.
func (h *Handler) listNodes(ctx *fasthttp.RequestCtx, _ Principal, _ []string) *httpError {
	if e := checkQuery(ctx, "consistent"); e != nil {
		return e
	}
	if e := h.consistent(ctx); e != nil {
		return e
	}
	ns := h.cfg.FSM.Nodes()
	out := api.NodeList{Nodes: make([]api.NodeInfo, len(ns))}
	for i, n := range ns {
		out.Nodes[i] = api.NodeInfo{Spec: n.Spec, State: n.State, Generation: n.Generation, Used: n.Used, Free: n.Free, Tasks: n.Tasks}
		// Usage is the leader's memory of heartbeats: absent elsewhere.
		if u, at, ok := h.cfg.Dispatcher.NodeUsage(n.Spec.Name); ok {
			out.Nodes[i].Usage, out.Nodes[i].LastHeartbeat = &u, at.UTC()
		}
	}
	writeJSON(ctx, fasthttp.StatusOK, out)
	return nil
}

// register serves POST /v1/nodes.
func (h *Handler) register(ctx *fasthttp.RequestCtx, _ Principal, _ []string) *httpError {
	if e := h.requireLeader(ctx); e != nil {
		return e
	}
	if e := checkQuery(ctx); e != nil {
		return e
	}
	var spec api.NodeSpec
	if e := decodeStrict(ctx, "node spec", &spec); e != nil {
		return e
	}
	if err := spec.Validate(); err != nil {
		return h.fromError(ctx, "node spec", err)
	}
	rctx, cancel := context.WithCancel(h.base)
	defer cancel()
	if err := h.cfg.Dispatcher.Register(rctx, spec); err != nil {
		return h.fromError(ctx, "register "+spec.Name, err)
	}
	writeJSON(ctx, fasthttp.StatusOK, api.RegisterResponse{Name: spec.Name})
	return nil
}

// target serves GET /v1/nodes/{name}/target, the nodelet's long-poll.
func (h *Handler) target(ctx *fasthttp.RequestCtx, _ Principal, args []string) *httpError {
	if e := checkQuery(ctx, "generation", "wait", "diff"); e != nil {
		return e
	}
	diff := false
	if v := ctx.QueryArgs().Peek("diff"); v != nil {
		if string(v) != "1" {
			return badParam("diff", "want 1, got %q", clip(string(v), 40))
		}
		diff = true
	}
	var gen uint64
	if v := ctx.QueryArgs().Peek("generation"); v != nil {
		var err error
		if gen, err = strconv.ParseUint(string(v), 10, 64); err != nil {
			return badParam("generation", "want a non-negative integer, got %q", clip(string(v), 40))
		}
	}
	wait := DefaultTargetWait
	if v := ctx.QueryArgs().Peek("wait"); v != nil {
		d, err := time.ParseDuration(string(v))
		if err != nil || d < 0 || d > MaxTargetWait {
			return badParam("wait", "want a duration from 0s to %v, got %q", MaxTargetWait, clip(string(v), 40))
		}
		wait = d
	}
	if e := h.requireLeader(ctx); e != nil {
		return e
	}
	tctx, cancel := context.WithTimeout(h.base, wait)
	defer cancel()
	get := h.cfg.Dispatcher.Target
	if diff {
		get = h.cfg.Dispatcher.TargetChanges
	}
	t, err := get(tctx, args[0], gen)
	if err != nil {
		if h.base.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			ctx.SetStatusCode(fasthttp.StatusNotModified)
			return nil
		}
		return h.fromError(ctx, "target of "+args[0], err)
	}
	answer := api.NodeTarget{Generation: t.Generation, Base: t.Base, Pods: t.Pods, Removed: t.Removed}
	// Encoded by hand (as encoding/json would): a target is written for
	// every change of a node's pods.
	writeEncoded(ctx, fasthttp.StatusOK, func(b []byte) ([]byte, error) { return api.AppendNodeTarget(b, &answer), nil })
	return nil
}

// reports serves POST /v1/nodes/{name}/reports.
func (h *Handler) reports(ctx *fasthttp.RequestCtx, _ Principal, args []string) *httpError {
	if e := h.requireLeader(ctx); e != nil {
		return e
	}
	if e := checkQuery(ctx); e != nil {
		return e
	}
	body, e := jsonBody(ctx)
	if e != nil {
		return e
	}
	// Every node's heartbeats come here: api's decoder, not reflection.
	req, err := api.DecodeReportRequest(body)
	if err != nil {
		return h.fromError(ctx, "report request", err)
	}
	if len(req.Reports) > api.MaxItemsPerRequest {
		return errorf(fasthttp.StatusRequestEntityTooLarge, api.CodeTooLarge, "more than %d reports in one request", api.MaxItemsPerRequest)
	}
	var ve *api.ValidationError
	if err := req.Validate(); errors.As(err, &ve) && len(ve.Problems) > 0 {
		e := invalid(ve.Problems, "invalid report request, %d problems: %s", ve.Total, ve.Problems[0])
		e.resp.Total = ve.Total
		return e
	}
	if _, ok := h.cfg.FSM.NodeGeneration(args[0]); !ok {
		return errorf(fasthttp.StatusNotFound, api.CodeNotFound, "node %q is not registered", clip(args[0], 80))
	}
	rctx, cancel := context.WithCancel(h.base)
	defer cancel()
	// A heartbeat (usage) is recorded at once; reports wait for their
	// commit. Either counts as a contact, and so does a request with
	// neither.
	if req.Usage != nil {
		if err := h.cfg.Dispatcher.Heartbeat(rctx, args[0], *req.Usage); err != nil {
			return h.fromError(ctx, "heartbeat of "+args[0], err)
		}
	}
	if len(req.Reports) > 0 || req.Usage == nil {
		if err := h.cfg.Dispatcher.Report(rctx, args[0], req.Reports); err != nil {
			return h.fromError(ctx, "reports of "+args[0], err)
		}
	}
	ctx.SetStatusCode(fasthttp.StatusNoContent)
	return nil
}
