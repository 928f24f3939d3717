package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluicehq/sluice/api"
)

func TestNodeUsageValidate(t *testing.T) {
	ok := api.NodeUsage{Total: api.Usage{CPU: 1500, Memory: 3 << 30}, Online: api.Usage{CPU: 1000, Memory: 2 << 30}, Offline: api.Usage{CPU: 500, Memory: 1 << 30}}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid usage: %v", err)
	}
	if err := (&api.NodeUsage{}).Validate(); err != nil {
		t.Fatalf("zero usage: %v", err)
	}
	ok.Tasks = []api.TaskUsage{{TaskID: "j1/0/0/1", QoS: api.QoSOnline, Usage: api.Usage{CPU: 900, Memory: 1 << 30}}}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid usage with tasks: %v", err)
	}
	bad := api.NodeUsage{Total: api.Usage{CPU: -1}, Offline: api.Usage{Memory: -5}, Tasks: []api.TaskUsage{
		{TaskID: "j1/0/0/1", QoS: api.QoSOffline},
		{QoS: "gold", Usage: api.Usage{CPU: -3}},
	}}
	err := bad.Validate()
	var ve *api.ValidationError
	if !errors.As(err, &ve) || !errors.Is(err, api.ErrInvalid) {
		t.Fatalf("got %v, want a *ValidationError", err)
	}
	if got, want := problemPaths(ve), "total.cpu offline.memory tasks[1].task_id tasks[1].qos tasks[1].cpu"; got != want {
		t.Errorf("problems at %q, want %q", got, want)
	}
	if !strings.Contains(err.Error(), "total.cpu: must not be negative") {
		t.Errorf("error %q does not say what is wrong", err)
	}
}

func TestReportRequestValidate(t *testing.T) {
	report := api.TaskReport{TaskID: "j1/g0/7", State: api.TaskRunning, Reason: api.ReasonStarted, Time: time.Unix(1, 0)}
	for _, ok := range []api.ReportRequest{
		{},
		{Reports: []api.TaskReport{report}},
		{Usage: &api.NodeUsage{Online: api.Usage{CPU: 1}}},
		{Reports: []api.TaskReport{report}, Usage: &api.NodeUsage{}},
	} {
		if err := ok.Validate(); err != nil {
			t.Errorf("%+v: %v", ok, err)
		}
	}
	badReport := report
	badReport.TaskID = ""
	req := api.ReportRequest{
		Reports: []api.TaskReport{report, badReport},
		Usage:   &api.NodeUsage{Online: api.Usage{Memory: -1}},
	}
	var ve *api.ValidationError
	if err := req.Validate(); !errors.As(err, &ve) {
		t.Fatalf("got %v, want a *ValidationError", err)
	}
	if got, want := problemPaths(ve), "reports[1].task_id usage.online.memory"; got != want {
		t.Errorf("problems at %q, want %q", got, want)
	}
	if ve.Total != 2 || ve.Problems[0].Item != 1 || ve.Problems[1].Item != -1 {
		t.Errorf("problems %+v (total %d): want items 1 and -1", ve.Problems, ve.Total)
	}
}

func problemPaths(ve *api.ValidationError) string {
	var paths []string
	for _, p := range ve.Problems {
		paths = append(paths, p.Path)
	}
	return strings.Join(paths, " ")
}

func TestClientHeartbeat(t *testing.T) {
	var mu sync.Mutex
	var got []string
	url := serve(t, func(ctx *fasthttp.RequestCtx) {
		mu.Lock()
		got = append(got, string(ctx.Method())+" "+rawPath(ctx)+" "+string(ctx.PostBody()))
		mu.Unlock()
		switch rawPath(ctx) {
		case "/v1/nodes/n1/reports":
			ctx.SetStatusCode(204)
		default:
			writeJSON(ctx, 404, api.ErrorResponse{Code: api.CodeNotFound, Error: "node n9 is not registered"})
		}
	})
	c := newClient(t, url)
	u := api.NodeUsage{Total: api.Usage{CPU: 1500, Memory: 3 << 30}, Online: api.Usage{CPU: 1000, Memory: 2 << 30}, Offline: api.Usage{CPU: 500, Memory: 1 << 30}}
	if err := c.Heartbeat(context.Background(), "n1", u); err != nil {
		t.Fatalf("Heartbeat: %v", err)
	}
	var ae *api.APIError
	if err := c.Heartbeat(context.Background(), "n9", u); !errors.As(err, &ae) || ae.Code != api.CodeNotFound {
		t.Errorf("Heartbeat of an unknown node: %v, want a not_found *APIError", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 {
		t.Fatalf("requests %q", got)
	}
	method, rest, _ := strings.Cut(got[0], " ")
	path, body, _ := strings.Cut(rest, " ")
	if method != "POST" || path != "/v1/nodes/n1/reports" {
		t.Errorf("request %s %s", method, path)
	}
	var req api.ReportRequest
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || len(req.Reports) != 0 || req.Usage == nil || !reflect.DeepEqual(*req.Usage, u) {
		t.Errorf("body %s: decoded %+v (%v)", body, req, err)
	}
}
