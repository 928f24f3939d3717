package main

import (
	"encoding/json"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/sluicehq/sluice/api"
)

func TestNodes(t *testing.T) {
	list := api.NodeList{Nodes: []api.NodeInfo{
		{
			Spec: api.NodeSpec{Name: "n1", Pool: "gpu", Capacity: api.Capacity{CPU: 32000, Memory: 128 << 30, GPUs: 4},
				Allocatable: api.Allocatable{
					Online:  api.Capacity{CPU: 16000, Memory: 64 << 30},
					Offline: api.Capacity{CPU: 32000, Memory: 96 << 30},
				}},
			State: api.NodeReady, Tasks: 7,
			Used: api.Allocatable{
				Online:  api.Capacity{CPU: 1500, Memory: 512 << 20, GPUs: 1},
				Offline: api.Capacity{CPU: 250, Memory: 3 << 29},
			},
		},
		{Spec: api.NodeSpec{Name: "n2"}, State: api.NodeDown},
	}}
	s := startStub(t, func(ctx *fasthttp.RequestCtx, r stubReq) {
		if r.path != api.PathNodes || r.method != "GET" {
			reply(ctx, 404, api.ErrorResponse{Code: api.CodeNotFound, Error: "no route"})
			return
		}
		reply(ctx, 200, list)
	})
	out, _, code, err := runCmd(t, "nodes", "--addr", s.url)
	if code != exitOK {
		t.Fatalf("exit %d: %v", code, err)
	}
	want := "NAME  STATE  POOL  TASKS  CPU ONLINE  CPU OFFLINE  MEM ONLINE  MEM OFFLINE  GPU\n" +
		"n1    ready  gpu   7      1.5/16      0.25/32      512Mi/64Gi  1.5Gi/96Gi   1/4\n" +
		"n2    down   -     0      0/0         0/0          0/0         0/0          0/0\n"
	if out != want {
		t.Errorf("stdout\n%s\nwant\n%s", out, want)
	}

	out, _, code, err = runCmd(t, "nodes", "--addr", s.url, "-o", "json")
	var got api.NodeList
	if code != exitOK || json.Unmarshal([]byte(out), &got) != nil || len(got.Nodes) != 2 || got.Nodes[0].Used.Online.GPUs != 1 {
		t.Errorf("exit %d (%v), stdout %q", code, err, out)
	}
}
