package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/sluicehq/sluice/api"
)

func TestQueues(t *testing.T) {
	list := api.QueueList{Queues: []api.QueueStatus{
		{Name: "batch", QueueSettings: api.QueueSettings{Weight: 3, Caps: api.QueueCaps{CPU: 64000, Memory: 256 << 30, Tasks: 100}}, EffectiveWeight: 3,
			Running: api.Capacity{CPU: 1500, Memory: 3 << 29}, Tasks: 3, Pending: 7},
		{Name: "default", EffectiveWeight: 1, Running: api.Capacity{CPU: 250, Memory: 1 << 20, GPUs: 1}, Tasks: 1},
	}}
	s := startStub(t, func(ctx *fasthttp.RequestCtx, r stubReq) {
		if r.path != api.PathQueues || r.method != "GET" {
			reply(ctx, 404, api.ErrorResponse{Code: api.CodeNotFound, Error: "no route"})
			return
		}
		reply(ctx, 200, list)
	})
	out, _, code, err := runCmd(t, "queues", "--addr", s.url)
	if code != exitOK {
		t.Fatalf("exit %d: %v", code, err)
	}
	want := "NAME     WEIGHT  CPU     MEM          GPU  TASKS  PENDING\n" +
		"batch    3       1.5/64  1.5Gi/256Gi  0/-  3/100  7\n" +
		"default  1       0.25/-  1Mi/-        1/-  1/-    0\n"
	if out != want {
		t.Errorf("stdout\n%s\nwant\n%s", out, want)
	}
	out, _, code, err = runCmd(t, "queues", "--addr", s.url, "-o", "json")
	var got api.QueueList
	if code != exitOK || json.Unmarshal([]byte(out), &got) != nil || len(got.Queues) != 2 || got.Queues[0].Caps.Tasks != 100 {
		t.Errorf("exit %d (%v), stdout %q", code, err, out)
	}
}

// TestQueuesSet: the flags given replace the queue's values, the others
// keep theirs; 0 and none clear a cap; bad values are usage errors that
// send nothing; a refusal by the dispatcher is an error.
func TestQueuesSet(t *testing.T) {
	current := api.QueueStatus{Name: "batch", QueueSettings: api.QueueSettings{Weight: 3, Caps: api.QueueCaps{CPU: 64000, Memory: 256 << 30, Tasks: 100}}, EffectiveWeight: 3}
	var sent []api.QueueSettings
	s := startStub(t, func(ctx *fasthttp.RequestCtx, r stubReq) {
		switch {
		case r.method == "GET" && r.path == api.PathQueues:
			reply(ctx, 200, api.QueueList{Queues: []api.QueueStatus{current}})
		case r.method == "POST" && r.path == api.PathQueue+"batch" && r.auth == "Bearer adm":
			var st api.QueueSettings
			if err := json.Unmarshal(r.body, &st); err != nil {
				reply(ctx, 400, api.ErrorResponse{Code: api.CodeInvalid, Error: err.Error()})
				return
			}
			sent = append(sent, st)
			reply(ctx, 200, api.QueueStatus{Name: "batch", QueueSettings: st, EffectiveWeight: max(st.Weight, 1)})
		case r.method == "POST":
			reply(ctx, 403, api.ErrorResponse{Code: api.CodeForbidden, Error: "a reader token may not POST /v1/queues/batch"})
		default:
			reply(ctx, 404, api.ErrorResponse{Code: api.CodeNotFound, Error: "no route"})
		}
	})
	out, _, code, err := runCmd(t, "queues", "set", "batch", "--addr", s.url, "--token", "adm", "--memory", "none", "--gpus", "2", "--cpu", "500m", "--tasks", "0")
	if code != exitOK {
		t.Fatalf("exit %d: %v", code, err)
	}
	if want := (api.QueueSettings{Weight: 3, Caps: api.QueueCaps{CPU: 500, GPUs: 2}}); len(sent) != 1 || sent[0] != want {
		t.Fatalf("sent %+v, want %+v", sent, want)
	}
	if !strings.Contains(out, "batch  3       0/0.5  0/-  0/2  0/-    0") {
		t.Errorf("stdout:\n%s", out)
	}
	if _, _, code, _ = runCmd(t, "queues", "set", "batch", "--addr", s.url, "--token", "adm", "--weight", "5"); code != exitOK || sent[1].Weight != 5 || sent[1].Caps != current.Caps {
		t.Errorf("--weight alone: exit %d, sent %+v", code, sent[1])
	}
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"--cpu", "-2"}, "--cpu: \"-2\" is negative"},
		{[]string{"--memory", "4Gx"}, "--memory: \"4Gx\": want bytes with an optional unit"},
		{[]string{"--cpu", "two"}, "--cpu: \"two\": want cores"},
		{[]string{"--gpus", "1.5"}, "--gpus: \"1.5\": want a whole number"},
		{[]string{"--tasks", "-1", "--gpus", "x"}, "--gpus"},
		{[]string{"--weight", "1001"}, "--weight: \"1001\""},
		{nil, "nothing to set"},
	} {
		n := len(sent)
		_, _, code, err := runCmd(t, append([]string{"queues", "set", "batch", "--addr", s.url, "--token", "adm"}, bad.args...)...)
		if code != exitUsage || err == nil || !strings.Contains(err.Error(), bad.want) || len(sent) != n {
			t.Errorf("%v: exit %d, err %v; want a usage error with %q and nothing sent", bad.args, code, err, bad.want)
		}
	}
	if _, _, code, err := runCmd(t, "queues", "set", "bad name", "--addr", s.url, "--tasks", "1"); code != exitUsage {
		t.Errorf("bad name: exit %d, %v", code, err)
	}
	if _, _, code, err := runCmd(t, "queues", "set", "batch", "--addr", s.url, "--token", "rd", "--tasks", "1"); code != exitError || err == nil || !strings.Contains(err.Error(), "may not") {
		t.Errorf("as a reader: exit %d, %v", code, err)
	}
}
