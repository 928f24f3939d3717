package main

import (
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/sluicehq/sluice/api"
)

func TestLogs(t *testing.T) {
	s := startStub(t, func(ctx *fasthttp.RequestCtx, r stubReq) {
		if r.path != "/v1/tasks/j12%2F0%2F5%2F1/logs" {
			reply(ctx, 404, api.ErrorResponse{Code: api.CodeNotFound, Error: "no task"})
			return
		}
		ctx.SetContentType("text/plain")
		ctx.SetBodyString("hello\n" + r.query + "\n")
	})
	out, _, code, err := runCmd(t, "logs", "j12/0/5/1", "-f", "--container", "main", "--tail", "5", "--addr", s.url)
	if code != exitOK || out != "hello\ncontainer=main&follow=1&tail=5\n" {
		t.Errorf("exit %d (%v), stdout %q", code, err, out)
	}
	_, _, code, err = runCmd(t, "logs", "j12/0/5/2", "--addr", s.url)
	if code != exitError || err == nil || err.Error() != "no task (HTTP 404, not_found)" {
		t.Errorf("exit %d, err %v", code, err)
	}
}
