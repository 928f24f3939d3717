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

// TestOvercommitStatusValidate: a node's overcommit status has amounts
// within a node's, its quota between its floor and ceiling and its
// guarantee within its limit; the orderings are checked once the amounts
// are valid.
func TestOvercommitStatusValidate(t *testing.T) {
	ok := api.OvercommitStatus{CPUQuota: 1500, CPUMin: 100, CPUMax: 2000, MemoryLimit: 3 << 30, MemoryGuaranteed: 1 << 30, Decided: time.Unix(1, 0)}
	for _, o := range []api.OvercommitStatus{ok, {}, {CPUQuota: 100, CPUMin: 100, CPUMax: 100, MemoryLimit: 5, MemoryGuaranteed: 5}} {
		if err := (&api.NodeUsage{Overcommit: &o}).Validate(); err != nil {
			t.Errorf("%+v: %v", o, err)
		}
	}
	for _, c := range []struct {
		change func(*api.OvercommitStatus)
		paths  string
		says   string
	}{
		{func(o *api.OvercommitStatus) { o.CPUQuota, o.MemoryGuaranteed = -1, -1 },
			"overcommit.cpu_quota overcommit.memory_guaranteed", "overcommit.cpu_quota: must not be negative"},
		{func(o *api.OvercommitStatus) { o.CPUMax, o.MemoryLimit = 1<<41, 1<<61 },
			"overcommit.cpu_max overcommit.memory_limit", "more than the limit"},
		{func(o *api.OvercommitStatus) { o.CPUQuota = 2001 }, "overcommit.cpu_quota", "outside cpu_min..cpu_max, 100..2000"},
		{func(o *api.OvercommitStatus) { o.CPUQuota = 99 }, "overcommit.cpu_quota", "outside"},
		{func(o *api.OvercommitStatus) { o.CPUMin = 2500 }, "overcommit.cpu_min", "above cpu_max"},
		{func(o *api.OvercommitStatus) { o.MemoryGuaranteed = 4 << 30 }, "overcommit.memory_guaranteed", "above memory_limit"},
		// An invalid amount hides the orderings.
		{func(o *api.OvercommitStatus) { o.CPUMin, o.MemoryLimit = 3000, -1 }, "overcommit.memory_limit", "must not be negative"},
	} {
		o := ok
		c.change(&o)
		err := (&api.NodeUsage{Overcommit: &o}).Validate()
		var ve *api.ValidationError
		if !errors.As(err, &ve) {
			t.Errorf("%+v: %v, want a *ValidationError", o, err)
			continue
		}
		if got := problemPaths(ve); got != c.paths || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%+v: %v; want problems at %q saying %q", o, err, c.paths, c.says)
		}
	}
	// A report request names the status under its usage.
	bad := ok
	bad.CPUQuota = -5
	var ve *api.ValidationError
	if err := (&api.ReportRequest{Usage: &api.NodeUsage{Overcommit: &bad}}).Validate(); !errors.As(err, &ve) || problemPaths(ve) != "usage.overcommit.cpu_quota" {
		t.Errorf("report request with a bad status: %v", err)
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
	u := api.NodeUsage{Total: api.Usage{CPU: 1500, Memory: 3 << 30}, Online: api.Usage{CPU: 1000, Memory: 2 << 30}, Offline: api.Usage{CPU: 500, Memory: 1 << 30},
		Overcommit: &api.OvercommitStatus{CPUQuota: 1200, CPUMin: 100, CPUMax: 2000, MemoryLimit: 2 << 30, MemoryGuaranteed: 1 << 30,
			Decided: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}}
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
