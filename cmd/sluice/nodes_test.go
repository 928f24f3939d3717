package main

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

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

// TestNodesUsage: USED CPU and USED MEM appear when a node sent its usage,
// with "-" for the nodes that did not; -o json has the usage per tier.
func TestNodesUsage(t *testing.T) {
	c := api.Capacity{CPU: 8000, Memory: 16 << 30}
	beat := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	list := api.NodeList{Nodes: []api.NodeInfo{
		{
			Spec: api.NodeSpec{Name: "n1", Capacity: c, Allocatable: api.Allocatable{Online: c, Offline: c}}, State: api.NodeReady, Tasks: 2,
			Used: api.Allocatable{Online: api.Capacity{CPU: 2000, Memory: 4 << 30}},
			Usage: &api.NodeUsage{
				Total:   api.Usage{CPU: 1750, Memory: 5 << 29},
				Online:  api.Usage{CPU: 1500, Memory: 2 << 30},
				Offline: api.Usage{CPU: 250, Memory: 1 << 29},
			},
			LastHeartbeat: beat,
		},
		{Spec: api.NodeSpec{Name: "n2", Capacity: c, Allocatable: api.Allocatable{Online: c, Offline: c}}, State: api.NodeReady},
	}}
	s := startStub(t, func(ctx *fasthttp.RequestCtx, r stubReq) {
		reply(ctx, 200, list)
	})
	out, _, code, err := runCmd(t, "nodes", "--addr", s.url)
	if code != exitOK {
		t.Fatalf("exit %d: %v", code, err)
	}
	want := "NAME  STATE  POOL  TASKS  CPU ONLINE  CPU OFFLINE  MEM ONLINE  MEM OFFLINE  USED CPU  USED MEM\n" +
		"n1    ready  -     2      2/8         0/8          4Gi/16Gi    0/16Gi       1.75      2.5Gi\n" +
		"n2    ready  -     0      0/8         0/8          0/16Gi      0/16Gi       -         -\n"
	if out != want {
		t.Errorf("stdout\n%s\nwant\n%s", out, want)
	}

	out, _, code, err = runCmd(t, "nodes", "--addr", s.url, "-o", "json")
	var got api.NodeList
	if code != exitOK || json.Unmarshal([]byte(out), &got) != nil || len(got.Nodes) != 2 {
		t.Fatalf("exit %d (%v), stdout %q", code, err, out)
	}
	if u := got.Nodes[0].Usage; u == nil || !reflect.DeepEqual(*u, *list.Nodes[0].Usage) || !got.Nodes[0].LastHeartbeat.Equal(beat) {
		t.Errorf("n1 in JSON: usage %+v at %v", u, got.Nodes[0].LastHeartbeat)
	}
	if got.Nodes[1].Usage != nil || strings.Count(out, `"last_heartbeat"`) != 1 {
		t.Errorf("n2 in JSON has usage: %s", out)
	}
}

func TestCapboxes(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	list := api.CapboxList{Index: 9, Capboxes: []api.CapboxStatus{
		{ID: "j2/0/0/1", Set: "j2", Request: "workers", State: api.CapboxRunning, Node: "n1",
			Resources: api.Resources{CPU: 2000, Memory: 1 << 30}, Updated: at,
			Tasks: []api.CapTaskStatus{{ID: "j2/0/0/1/step-1", Name: "step-1", State: api.TaskSucceeded, Updated: at}}},
		{ID: "j2/0/1/1", Set: "j2", Request: "workers", State: api.CapboxPending, Resources: api.Resources{CPU: 2000, Memory: 1 << 30}, Updated: at},
	}}
	s := startStub(t, func(ctx *fasthttp.RequestCtx, r stubReq) {
		if r.path != api.PathJob+"j1/capboxes" || r.method != "GET" {
			reply(ctx, 404, api.ErrorResponse{Code: api.CodeNotFound, Error: "no job \"j9\""})
			return
		}
		reply(ctx, 200, list)
	})
	out, _, code, err := runCmd(t, "capboxes", "j1", "--addr", s.url)
	if code != exitOK {
		t.Fatalf("exit %d: %v", code, err)
	}
	want := "ID                 REQUEST  STATE      NODE  CPU  MEM\n" +
		"j2/0/0/1           workers  running    n1    2    1Gi\n" +
		"  j2/0/0/1/step-1  task     succeeded  n1    -    -\n" +
		"j2/0/1/1           workers  pending    -     2    1Gi\n"
	if out != want {
		t.Errorf("stdout\n%q\nwant\n%q", out, want)
	}
	out, _, code, err = runCmd(t, "capboxes", "j1", "--addr", s.url, "-o", "json")
	var got api.CapboxList
	if code != exitOK || json.Unmarshal([]byte(out), &got) != nil || !reflect.DeepEqual(got, list) {
		t.Errorf("exit %d (%v), stdout %q", code, err, out)
	}
	if _, _, code, err := runCmd(t, "capboxes", "j9", "--addr", s.url); code == exitOK || err == nil || !strings.Contains(err.Error(), "j9") {
		t.Errorf("unknown job: exit %d, %v", code, err)
	}
	if _, _, code, _ := runCmd(t, "capboxes", "--addr", s.url); code != exitUsage {
		t.Errorf("no job: exit %d, want %d", code, exitUsage)
	}
}
