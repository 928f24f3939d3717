package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluicehq/sluice/api"
)

// TestNodesDrain: drain, undrain and remove send what they are asked to,
// print the dispatcher's answer, and show its refusals; the node list
// shows a drain and its deadline.
func TestNodesDrain(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	s := startStub(t, func(ctx *fasthttp.RequestCtx, r stubReq) {
		switch {
		case r.auth != "Bearer adm":
			reply(ctx, 403, api.ErrorResponse{Code: api.CodeForbidden, Error: "a reader token may not " + r.method + " " + r.path})
		case r.method == "POST" && r.path == api.PathNode+"n1/drain":
			var req api.DrainRequest
			if r.ctype != "application/json" || json.Unmarshal(r.body, &req) != nil {
				reply(ctx, 400, api.ErrorResponse{Code: api.CodeInvalid, Error: "bad body " + string(r.body)})
				return
			}
			resp := api.NodeDrainResponse{Name: "n1", State: api.NodeDraining, Drained: true, Tasks: 2}
			switch {
			case req.Timeout == api.Duration(30*time.Minute):
				resp.DrainDeadline = at
			case req.Deadline.Equal(at):
				resp.Tasks, resp.Stopped = 0, 2
			case req.Timeout != 0 || !req.Deadline.IsZero():
				reply(ctx, 400, api.ErrorResponse{Code: api.CodeInvalid, Error: "unexpected " + string(r.body)})
				return
			}
			reply(ctx, 200, resp)
		case r.method == "DELETE" && r.path == api.PathNode+"n1/drain":
			reply(ctx, 200, api.NodeDrainResponse{Name: "n1", State: api.NodeReady, Tasks: 2})
		case r.method == "DELETE" && r.path == api.PathNode+"n1":
			reply(ctx, 409, api.ErrorResponse{Code: api.CodeConflict, Error: `remove n1: node busy: node "n1" is ready: drain it first`})
		case r.method == "DELETE" && r.path == api.PathNode+"n2":
			ctx.SetStatusCode(204)
		case r.path == api.PathNodes && r.method == "GET":
			reply(ctx, 200, api.NodeList{Nodes: []api.NodeInfo{
				{Spec: api.NodeSpec{Name: "n1"}, State: api.NodeDraining, Drained: true, DrainDeadline: at, Tasks: 2},
				{Spec: api.NodeSpec{Name: "n2"}, State: api.NodeDown, Drained: true},
				{Spec: api.NodeSpec{Name: "n3"}, State: api.NodeReady},
			}})
		default:
			reply(ctx, 404, api.ErrorResponse{Code: api.CodeNotFound, Error: r.method + " " + r.path + `: not found: node "nx"`})
		}
	})
	for _, c := range []struct {
		args []string
		code int
		out  string // stdout, or the error's text
	}{
		{[]string{"nodes", "drain", "n1"}, exitOK, "n1: draining (2 tasks run to their end)\n"},
		{[]string{"nodes", "drain", "n1", "--deadline", "30m"}, exitOK, "n1: draining (2 tasks stopped and requeued at 2030-01-02T03:04:05Z)\n"},
		{[]string{"nodes", "drain", "n1", "--deadline", "2030-01-02T03:04:05Z"}, exitOK, "n1: draining (2 tasks stopped and requeued)\n"},
		{[]string{"nodes", "drain", "n1", "--deadline", "soon"}, exitUsage, `--deadline "soon": want a duration such as 30m or an RFC 3339 time`},
		{[]string{"nodes", "drain", "n1", "--deadline", "-5m"}, exitUsage, `--deadline "-5m": want a duration such as 30m or an RFC 3339 time`},
		{[]string{"nodes", "drain"}, exitUsage, ""},
		{[]string{"nodes", "drain", "nx"}, exitError, `POST /v1/nodes/nx/drain: not found: node "nx" (HTTP 404, not_found)`},
		{[]string{"nodes", "undrain", "n1"}, exitOK, "n1: ready\n"},
		{[]string{"nodes", "remove", "n1"}, exitError, `remove n1: node busy: node "n1" is ready: drain it first (HTTP 409, conflict)`},
		{[]string{"nodes", "remove", "n2"}, exitOK, "n2: removed\n"},
		{[]string{"nodes", "remove", "n2", "-o", "json"}, exitOK, "{\n  \"name\": \"n2\",\n  \"removed\": true\n}\n"},
		{[]string{"nodes", "remove", "n2", "--token", "rd"}, exitError, "a reader token may not DELETE /v1/nodes/n2 (HTTP 403, forbidden)"},
		{[]string{"nodes"}, exitOK, "NAME  STATE         POOL  TASKS  CPU ONLINE  CPU OFFLINE  MEM ONLINE  MEM OFFLINE  DEADLINE\n" +
			"n1    draining      -     2      0/0         0/0          0/0         0/0          2030-01-02T03:04:05Z\n" +
			"n2    down,drained  -     0      0/0         0/0          0/0         0/0          -\n" +
			"n3    ready         -     0      0/0         0/0          0/0         0/0          -\n"},
	} {
		args := append(c.args, "--addr", s.url)
		if !strings.Contains(strings.Join(args, " "), "--token") {
			args = append(args, "--token", "adm")
		}
		out, _, code, err := runCmd(t, args...)
		got := out
		if err != nil {
			got = err.Error()
		}
		if code != c.code || c.out != "" && got != c.out {
			t.Errorf("sluice %s: exit %d, %q; want exit %d, %q", strings.Join(c.args, " "), code, got, c.code, c.out)
		}
	}
	t.Setenv("SLUICE_DEADLINE", "30m") // as --deadline
	out, _, code, err := runCmd(t, "nodes", "drain", "n1", "-o", "json", "--addr", s.url, "--token", "adm")
	var r api.NodeDrainResponse
	if code != exitOK || json.Unmarshal([]byte(out), &r) != nil || !r.DrainDeadline.Equal(at) || !r.Drained {
		t.Errorf("drain -o json: exit %d (%v), %q", code, err, out)
	}
}
