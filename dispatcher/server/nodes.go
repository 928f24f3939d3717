package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/dispatcher/fsm"
	"github.com/valyala/fasthttp"
)

// jsonBody reads a request's body, which must be JSON (maybe compressed).
func (h *Handler) jsonBody(ctx *fasthttp.RequestCtx) ([]byte, *httpError) {
	if e := checkContentType(ctx, true, "application/json"); e != nil {
		return nil, e
	}
	return h.readBody(ctx)
}

// decodeStrict reads a JSON body into v: one object, no unknown fields,
// no key twice in an object (as api's decoders), nothing after it.
func (h *Handler) decodeStrict(ctx *fasthttp.RequestCtx, what string, v any) *httpError {
	body, e := h.jsonBody(ctx)
	if e != nil {
		return e
	}
	bad := func(msg string) *httpError {
		return invalid([]api.Problem{{Item: -1, Message: msg}}, "%s: %s", what, msg)
	}
	if len(bytes.TrimSpace(body)) == 0 || bytes.TrimSpace(body)[0] != '{' {
		return bad("want one JSON object")
	}
	if path, dup := duplicateKey(body); dup {
		return invalid([]api.Problem{{Item: -1, Path: path, Message: "repeats a key"}}, "%s: %s repeats a key", what, path)
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

// duplicateKey returns the path of the first member whose key repeats an
// earlier one of its object, such as "labels.zone", and true; false when no
// key repeats or body is not JSON (which decoding then reports).
func duplicateKey(body []byte) (string, bool) {
	type level struct {
		keys   map[string]bool // an object's keys so far; nil in an array
		name   string          // the path to this value
		expect bool            // an object's next string token is a key
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	var stack []level
	join := func(key string) string {
		if n := stack[len(stack)-1].name; n != "" {
			return n + "." + key
		}
		return key
	}
	child := ""
	for {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		var top *level
		if len(stack) > 0 {
			top = &stack[len(stack)-1]
		}
		if top != nil && top.keys != nil && top.expect {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				continue
			}
			key, _ := tok.(string)
			if top.keys[key] {
				return join(key), true
			}
			top.keys[key], top.expect, child = true, false, join(key)
			continue
		}
		if top != nil && top.keys != nil {
			top.expect = true // this token is a member's value
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, level{keys: map[string]bool{}, name: child, expect: true})
		case json.Delim('['):
			stack = append(stack, level{name: child})
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		if len(stack) == 0 {
			return "", false
		}
		if stack[len(stack)-1].keys == nil {
			child = stack[len(stack)-1].name + "[]"
		}
	}
}

// listNodes serves GET /v1/nodes: the nodes by name, those in state
// (when given) after after, limit of them (all without a limit), with
// the name to page on from in Next when more match.
func (h *Handler) listNodes(ctx *fasthttp.RequestCtx, _ Principal, _ []string) *httpError {
	if e := checkQuery(ctx, "state", "after", "limit", "consistent"); e != nil {
		return e
	}
	args := ctx.QueryArgs()
	state := api.NodeState(args.Peek("state"))
	if state != "" && !slices.Contains(api.NodeStates, state) {
		return badParam("state", "want one of %v, got %q", api.NodeStates, clip(string(state), 40))
	}
	after := string(args.Peek("after"))
	limit := 0
	if args.Has("limit") {
		var e *httpError
		if limit, e = limitParam(ctx); e != nil {
			return e
		}
	}
	if e := h.consistent(ctx); e != nil {
		return e
	}
	ns := h.cfg.FSM.Nodes() // by name
	i, _ := slices.BinarySearchFunc(ns, after, func(n fsm.NodeInfo, name string) int { return strings.Compare(n.Spec.Name, name) })
	if i < len(ns) && ns[i].Spec.Name == after {
		i++
	}
	out := api.NodeList{Nodes: []api.NodeInfo{}}
	for ; i < len(ns); i++ {
		n := &ns[i]
		if state != "" && n.State != state {
			continue
		}
		if limit > 0 && len(out.Nodes) == limit {
			out.Next = out.Nodes[limit-1].Spec.Name
			break
		}
		out.Nodes = append(out.Nodes, h.nodeInfo(n))
	}
	writeJSON(ctx, fasthttp.StatusOK, out)
	return nil
}

// nodeInfo is the wire's view of a node, without its secret.
func (h *Handler) nodeInfo(n *fsm.NodeInfo) api.NodeInfo {
	spec := n.Spec
	spec.LogToken = "" // the node's secret, for the dispatcher alone
	out := api.NodeInfo{Spec: spec, State: n.State, Drained: n.Drained, DrainDeadline: n.DrainDeadline,
		Generation: n.Generation, Used: n.Used, Free: n.Free, Tasks: n.Tasks}
	// Usage is the leader's memory of heartbeats: absent elsewhere.
	if u, at, ok := h.cfg.Dispatcher.NodeUsage(n.Spec.Name); ok {
		out.Usage, out.LastHeartbeat = &u, at.UTC()
	}
	return out
}

// notYourNode is the 403 for a nodelet acting for a node not its own; it
// is counted and logged, as a credential used beyond its node is a sign of
// a compromised or misconfigured host.
func (h *Handler) notYourNode(p Principal, what, name string) *httpError {
	h.nodeRefusals.Add(1)
	h.log.Warn("server: a nodelet acted for another node", "credential_node", p.Node, "node", clip(name, 80), "request", what)
	return nodeForbidden(p, what, name)
}

func nodeForbidden(p Principal, what, name string) *httpError {
	return errorf(fasthttp.StatusForbidden, api.CodeForbidden, "the nodelet token of node %s may not %s node %q", p.Node, what, clip(name, 80))
}

// register serves POST /v1/nodes.
func (h *Handler) register(ctx *fasthttp.RequestCtx, p Principal, _ []string) *httpError {
	if e := h.requireLeader(ctx); e != nil {
		return e
	}
	if e := checkQuery(ctx); e != nil {
		return e
	}
	var spec api.NodeSpec
	if e := h.decodeStrict(ctx, "node spec", &spec); e != nil {
		return e
	}
	if err := spec.Validate(); err != nil {
		return h.fromError(ctx, "node spec", err)
	}
	if !p.mayNode(spec.Name) {
		return h.notYourNode(p, "register", spec.Name)
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
	if e := checkQuery(ctx, "generation", "wait", "diff", "identity"); e != nil {
		return e
	}
	diff, e := flagParam(ctx, "diff")
	if e != nil {
		return e
	}
	// A node that does not ask for the pods' identity (a nodelet of the
	// release before, which refuses members it does not know) gets none.
	identity, e := flagParam(ctx, "identity")
	if e != nil {
		return e
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
	if identity && h.cfg.JobKeys != nil {
		// t.Pods is this request's: their tokens are set in place.
		h.cfg.FSM.AppmasterPods(t.Pods, func(i int, job fsm.JobFacts) {
			t.Pods[i].Token = h.cfg.JobKeys.Token(t.Pods[i].Job, job.Submitted)
		})
	}
	answer := api.NodeTarget{Generation: t.Generation, Base: t.Base, Pods: t.Pods, Removed: t.Removed}
	// Encoded by hand (as encoding/json would): a target is written for
	// every change of a node's pods.
	appendTarget := api.AppendNodeTargetBare
	if identity {
		appendTarget = api.AppendNodeTarget
	}
	writeEncoded(ctx, fasthttp.StatusOK, func(b []byte) ([]byte, error) { return appendTarget(b, &answer), nil })
	return nil
}

// flagParam reads the query parameter name, a flag that is either absent
// (false) or 1 (true).
func flagParam(ctx *fasthttp.RequestCtx, name string) (bool, *httpError) {
	v := ctx.QueryArgs().Peek(name)
	if v == nil {
		return false, nil
	}
	if string(v) != "1" {
		return false, badParam(name, "want 1, got %q", clip(string(v), 40))
	}
	return true, nil
}

// reports serves POST /v1/nodes/{name}/reports.
func (h *Handler) reports(ctx *fasthttp.RequestCtx, p Principal, args []string) *httpError {
	if e := h.requireLeader(ctx); e != nil {
		return e
	}
	if e := checkQuery(ctx); e != nil {
		return e
	}
	body, e := h.jsonBody(ctx)
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
	// A node reports only what runs on it: a report naming an attempt
	// placed on another node is refused whole, never applied. Only a
	// node's own credential is held to it; an admin may relay reports.
	if p.Role == RoleNodelet {
		if i, ok := h.cfg.FSM.ForeignReport(args[0], req.Reports); ok {
			h.foreignReports.Add(1)
			h.log.Warn("server: a node reported a task placed on another node", "node", args[0], "task", clip(req.Reports[i].TaskID, 80))
			return &httpError{status: fasthttp.StatusForbidden, resp: api.ErrorResponse{
				Code:     api.CodeForbidden,
				Error:    fmt.Sprintf("node %s may not report task %s: it is placed on another node", args[0], clip(req.Reports[i].TaskID, 80)),
				Problems: []api.Problem{{Item: i, Path: fmt.Sprintf("reports[%d].task_id", i), Message: "placed on another node"}},
				Total:    1,
			}}
		}
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

// drainNode serves POST /v1/nodes/{name}/drain (an api.DrainRequest; an
// empty body is a drain without a deadline).
func (h *Handler) drainNode(ctx *fasthttp.RequestCtx, _ Principal, args []string) *httpError {
	if e := h.requireLeader(ctx); e != nil {
		return e
	}
	if e := checkQuery(ctx); e != nil {
		return e
	}
	var req api.DrainRequest
	if len(ctx.Request.Header.ContentType()) > 0 || ctx.Request.Header.ContentLength() != 0 {
		if e := h.decodeStrict(ctx, "drain request", &req); e != nil {
			return e
		}
	}
	var probs []api.Problem
	if req.Timeout < 0 {
		probs = append(probs, api.Problem{Item: -1, Path: "timeout", Message: "must not be negative"})
	}
	if req.Timeout != 0 && !req.Deadline.IsZero() {
		probs = append(probs, api.Problem{Item: -1, Path: "timeout", Message: "give a deadline or a timeout, not both"})
	}
	if req.Timeout > api.MaxDrainTimeout {
		probs = append(probs, api.Problem{Item: -1, Path: "timeout", Message: fmt.Sprintf("more than %v", api.MaxDrainTimeout)})
	}
	if req.Deadline.After(api.MaxDrainDeadline) {
		probs = append(probs, api.Problem{Item: -1, Path: "deadline", Message: "after " + api.MaxDrainDeadline.Format(time.RFC3339)})
	}
	if len(probs) > 0 {
		return invalid(probs, "drain request: %s", probs[0].Message)
	}
	dctx, cancel := context.WithCancel(h.base)
	defer cancel()
	r, err := h.cfg.Dispatcher.DrainNode(dctx, args[0], req)
	if err != nil {
		return h.fromError(ctx, "drain "+clip(args[0], 80), err)
	}
	writeJSON(ctx, fasthttp.StatusOK, drainResponse(args[0], r))
	return nil
}

// undrainNode serves DELETE /v1/nodes/{name}/drain.
func (h *Handler) undrainNode(ctx *fasthttp.RequestCtx, _ Principal, args []string) *httpError {
	if e := h.requireLeader(ctx); e != nil {
		return e
	}
	if e := checkQuery(ctx); e != nil {
		return e
	}
	dctx, cancel := context.WithCancel(h.base)
	defer cancel()
	r, err := h.cfg.Dispatcher.UndrainNode(dctx, args[0])
	if err != nil {
		return h.fromError(ctx, "undrain "+clip(args[0], 80), err)
	}
	writeJSON(ctx, fasthttp.StatusOK, drainResponse(args[0], r))
	return nil
}

// removeNode serves DELETE /v1/nodes/{name}.
func (h *Handler) removeNode(ctx *fasthttp.RequestCtx, _ Principal, args []string) *httpError {
	if e := h.requireLeader(ctx); e != nil {
		return e
	}
	if e := checkQuery(ctx); e != nil {
		return e
	}
	dctx, cancel := context.WithCancel(h.base)
	defer cancel()
	if err := h.cfg.Dispatcher.RemoveNode(dctx, args[0]); err != nil {
		return h.fromError(ctx, "remove "+clip(args[0], 80), err)
	}
	ctx.SetStatusCode(fasthttp.StatusNoContent)
	return nil
}

func drainResponse(name string, r fsm.DrainResult) api.NodeDrainResponse {
	return api.NodeDrainResponse{Name: name, State: r.State, Drained: r.Drained, DrainDeadline: r.Deadline,
		Tasks: r.Tasks, Stopped: r.Stopped}
}
