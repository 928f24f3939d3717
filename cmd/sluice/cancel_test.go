package main

import (
	"encoding/json"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/sluicehq/sluice/api"
)

func TestCancel(t *testing.T) {
	s := startStub(t, func(ctx *fasthttp.RequestCtx, r stubReq) {
		if r.method != "DELETE" {
			reply(ctx, 405, api.ErrorResponse{Error: "method"})
			return
		}
		switch r.path {
		case "/v1/jobs/j1":
			reply(ctx, 200, api.CancelResponse{ID: "j1", Stopping: 2, Dropped: 3})
		case "/v1/jobs/j2":
			reply(ctx, 200, api.CancelResponse{ID: "j2"})
		default:
			reply(ctx, 404, api.ErrorResponse{Code: api.CodeNotFound, Error: "no job " + r.path[len(api.PathJob):]})
		}
	})
	out, errOut, code, err := runCmd(t, "cancel", "j1", "nope", "j2", "--addr", s.url)
	if code != exitError || err == nil || err.Error() != "1 of 3 cancels failed: no job nope (HTTP 404, not_found)" {
		t.Errorf("exit %d, err %v", code, err)
	}
	if want := "j1: cancelled (2 tasks stopping, 3 pending dropped)\nj2: cancelled (0 tasks stopping, 0 pending dropped)\n"; out != want {
		t.Errorf("stdout %q", out)
	}
	if errOut != "sluice: cancel nope: no job nope (HTTP 404, not_found)\n" {
		t.Errorf("stderr %q", errOut)
	}

	out, _, code, err = runCmd(t, "cancel", "j1", "--addr", s.url, "-o", "json")
	var got []api.CancelResponse
	if code != exitOK || json.Unmarshal([]byte(out), &got) != nil || len(got) != 1 || got[0].Stopping != 2 {
		t.Errorf("exit %d (%v), stdout %q", code, err, out)
	}
}
