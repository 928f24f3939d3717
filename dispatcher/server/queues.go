package server

import (
	"context"
	"slices"

	"github.com/sluicehq/sluice/api"
	"github.com/valyala/fasthttp"
)

// maxQueueBody bounds the body of POST /v1/queues/{name}: a QueueSettings.
const maxQueueBody = 4 << 10

// listQueues serves GET /v1/queues.
func (h *Handler) listQueues(ctx *fasthttp.RequestCtx, _ Principal, _ []string) *httpError {
	if e := checkQuery(ctx, "consistent"); e != nil {
		return e
	}
	if e := h.consistent(ctx); e != nil {
		return e
	}
	writeJSON(ctx, fasthttp.StatusOK, api.QueueList{Queues: h.cfg.Dispatcher.Queues()})
	return nil
}

// setQueue serves POST /v1/queues/{name}.
func (h *Handler) setQueue(ctx *fasthttp.RequestCtx, _ Principal, args []string) *httpError {
	if e := h.requireLeader(ctx); e != nil {
		return e
	}
	if e := checkQuery(ctx); e != nil {
		return e
	}
	name := args[0]
	var s api.QueueSettings
	if e := h.decodeStrict(ctx, "queue settings", &s); e != nil {
		return e
	}
	var probs []api.Problem
	if err := api.CheckName(name); err != nil {
		probs = append(probs, api.Problem{Item: -1, Path: "name", Message: err.Error()})
	}
	if err := s.Validate(); err != nil {
		probs = append(probs, api.Problem{Item: -1, Message: err.Error()})
	}
	if len(probs) > 0 {
		return invalid(probs, "queue %q: bad settings", clip(name, 80))
	}
	sctx, cancel := context.WithCancel(h.base)
	defer cancel()
	if err := h.cfg.Dispatcher.SetQueue(sctx, name, s); err != nil {
		return h.fromError(ctx, "set queue "+name, err)
	}
	qs := h.cfg.Dispatcher.Queues()
	out := api.QueueStatus{Name: name, EffectiveWeight: 1}
	if i := slices.IndexFunc(qs, func(q api.QueueStatus) bool { return q.Name == name }); i >= 0 {
		out = qs[i]
	}
	writeJSON(ctx, fasthttp.StatusOK, out)
	return nil
}
