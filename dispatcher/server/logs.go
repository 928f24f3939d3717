package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/dispatcher/fsm"
	"github.com/valyala/fasthttp"
)

// logs serves GET /v1/tasks/{id}/logs: it finds the node that runs (or
// ran) the task's current attempt and streams that nodelet's
// api.PathNodeletLogs through.
func (h *Handler) logs(ctx *fasthttp.RequestCtx, p Principal, args []string) *httpError {
	if e := checkQuery(ctx, "container", "follow", "tail"); e != nil {
		return e
	}
	id := args[0]
	q := url.Values{}
	if v := ctx.QueryArgs().Peek("container"); len(v) > 0 {
		if len(v) > api.MaxNameLen {
			return badParam("container", "longer than %d bytes", api.MaxNameLen)
		}
		q.Set("container", string(v))
	}
	if v := ctx.QueryArgs().Peek("follow"); v != nil {
		on, err := parseBool(string(v))
		if err != nil {
			return badParam("follow", "want 1 or 0, got %q", clip(string(v), 40))
		}
		if on {
			q.Set("follow", "1")
		}
	}
	if v := ctx.QueryArgs().Peek("tail"); v != nil {
		n, err := strconv.Atoi(string(v))
		if err != nil || n < 0 {
			return badParam("tail", "want a non-negative number of lines, got %q", clip(string(v), 40))
		}
		q.Set("tail", strconv.Itoa(n))
	}
	owner := id
	if i := strings.LastIndexByte(id, '/'); strings.Count(id, "/") == 4 && i < len(id)-1 {
		owner = id[:i] // a capbox task: its capbox's ID, then its name
	}
	job, ok := taskJob(owner)
	if !ok {
		return errorf(fasthttp.StatusNotFound, api.CodeNotFound, "no task %q (task IDs look like j1/0/0/1, and a capbox task's like j2/0/0/1/name)", clip(id, 80))
	}
	if _, e := h.lookupJob(job, p); e != nil {
		return e
	}
	t, ok := h.cfg.FSM.Task(id)
	if !ok {
		return errorf(fasthttp.StatusNotFound, api.CodeNotFound, "task %q was never placed", clip(id, 80))
	}
	if !q.Has("container") {
		// The pod's first container, named from the spec: the nodelet
		// may no longer have the task in its target to look it up.
		q.Set("container", t.Container)
	}
	var node fsm.NodeInfo
	for _, n := range h.cfg.FSM.Nodes() {
		if n.Spec.Name == t.Node {
			node = n
			break
		}
	}
	addr := node.Spec.Address
	if addr == "" {
		return errorf(fasthttp.StatusBadGateway, "bad_gateway", "node %q of task %s has no log address", t.Node, t.ID)
	}
	// Registration checks addresses; this check holds for those a log
	// written before it carries too. The URL is built from its parts: the
	// address is a host and port, nothing more.
	if err := api.CheckAddress(addr); err != nil {
		return errorf(fasthttp.StatusBadGateway, "bad_gateway", "node %q of task %s has a bad log address: %s", t.Node, t.ID, err)
	}
	q.Set("task", t.ID)
	u := url.URL{Scheme: "http", Host: addr, Path: api.PathNodeletLogs, RawQuery: q.Encode()}
	rctx, cancel := context.WithCancel(h.base)
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, u.String(), nil)
	if err != nil {
		cancel()
		return errorf(fasthttp.StatusBadGateway, "bad_gateway", "node %q: bad log address %q", t.Node, addr)
	}
	if node.Spec.LogToken != "" {
		req.Header.Set("Authorization", "Bearer "+node.Spec.LogToken)
	}
	resp, err := h.cfg.LogClient.Do(req)
	if err != nil {
		cancel()
		return errorf(fasthttp.StatusBadGateway, "bad_gateway", "cannot reach node %q at %s for the logs of %s: %s",
			t.Node, addr, t.ID, clip(unwrapURLError(err), 200))
	}
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		resp.Body.Close()
		cancel()
		// A redirect is not followed (LogClient's CheckRedirect): a node
		// answers for its own logs or not at all.
		status, code := fasthttp.StatusBadGateway, "bad_gateway"
		switch resp.StatusCode {
		case http.StatusNotFound:
			status, code = fasthttp.StatusNotFound, api.CodeNotFound
		case http.StatusBadRequest:
			status, code = fasthttp.StatusBadRequest, api.CodeInvalid
		}
		return errorf(status, code, "node %q answered %d for the logs of %s: %s", t.Node, resp.StatusCode, t.ID,
			clip(strings.TrimSpace(string(msg)), 500))
	}
	ctx.SetStatusCode(fasthttp.StatusOK)
	ct := resp.Header.Get("Content-Type")
	if ct == "" {
		ct = "text/plain; charset=utf-8"
	}
	ctx.SetContentType(ct)
	ctx.Response.Header.Set("X-Sluice-Task", t.ID)
	h.streams.Add(1)
	ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
		defer h.streams.Done()
		defer cancel()
		defer resp.Body.Close()
		buf := make([]byte, 32<<10)
		for {
			n, err := resp.Body.Read(buf)
			if n > 0 {
				if _, werr := w.Write(buf[:n]); werr != nil {
					return
				}
				if w.Flush() != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	})
	return nil
}

// unwrapURLError drops the method and URL net/http prefixes its errors with.
func unwrapURLError(err error) string {
	if ue, ok := err.(*url.Error); ok {
		return fmt.Sprint(ue.Err)
	}
	return err.Error()
}
