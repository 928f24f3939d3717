package server_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
)

// TestHeartbeat posts a node's usage to the reports endpoint: the leader's
// node list shows it with the time it arrived; bad heartbeats are refused.
func TestHeartbeat(t *testing.T) {
	s := openOne(t, nil)
	base := s.Addr()
	for _, n := range []string{"n1", "n2"} {
		if r := do(t, req{method: "POST", url: base + api.PathNodes, body: []byte(nodeJSON(n, ""))}); r.status != 200 {
			t.Fatalf("register %s: %s", n, r)
		}
	}
	usage := api.NodeUsage{
		Total:   api.Usage{CPU: 1500, Memory: 3 << 30},
		Online:  api.Usage{CPU: 1000, Memory: 2 << 30},
		Offline: api.Usage{CPU: 500, Memory: 1 << 30},
	}
	body, err := json.Marshal(api.ReportRequest{Usage: &usage})
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	if r := do(t, req{method: "POST", url: base + api.PathNode + "n1/reports", body: body}); r.status != 204 {
		t.Fatalf("heartbeat: %s", r)
	}
	after := time.Now()

	list := decode[api.NodeList](t, do(t, req{method: "GET", url: base + api.PathNodes}), 200)
	byName := map[string]api.NodeInfo{}
	for _, n := range list.Nodes {
		byName[n.Spec.Name] = n
	}
	n1, n2 := byName["n1"], byName["n2"]
	if n1.Usage == nil || !reflect.DeepEqual(*n1.Usage, usage) {
		t.Errorf("n1's usage %+v, want %+v", n1.Usage, usage)
	}
	if n1.LastHeartbeat.Before(before.Add(-time.Second)) || n1.LastHeartbeat.After(after.Add(time.Second)) {
		t.Errorf("n1's last heartbeat %v, want between %v and %v", n1.LastHeartbeat, before, after)
	}
	if n2.Usage != nil || !n2.LastHeartbeat.IsZero() {
		t.Errorf("n2 sent no heartbeat but has usage %+v at %v", n2.Usage, n2.LastHeartbeat)
	}
	// The JSON of a node without usage has neither field.
	var raw struct {
		Nodes []map[string]json.RawMessage `json:"nodes"`
	}
	r := do(t, req{method: "GET", url: base + api.PathNodes})
	if err := json.Unmarshal(r.body, &raw); err != nil || len(raw.Nodes) != 2 {
		t.Fatalf("node list %s: %v", r.body, err)
	}
	for _, n := range raw.Nodes {
		var spec api.NodeSpec
		if err := json.Unmarshal(n["spec"], &spec); err != nil {
			t.Fatal(err)
		}
		_, hasUsage := n["usage"]
		_, hasTime := n["last_heartbeat"]
		if want := spec.Name == "n1"; hasUsage != want || hasTime != want {
			t.Errorf("node %s: usage %v, last_heartbeat %v in the JSON; want %v", spec.Name, hasUsage, hasTime, want)
		}
	}

	// A newer heartbeat with a report replaces the usage; reports alone
	// and an empty list (a bare contact) are still accepted.
	usage.Offline.CPU, usage.Total.CPU = 700, 1700
	both := `{"reports":[],"usage":{"total":{"cpu":1700,"memory":3221225472},"online":{"cpu":1000,"memory":2147483648},"offline":{"cpu":700,"memory":1073741824}}}`
	for _, b := range []string{both, `{"reports":[]}`, `{}`} {
		if r := do(t, req{method: "POST", url: base + api.PathNode + "n1/reports", body: []byte(b)}); r.status != 204 {
			t.Fatalf("POST %s: %s", b, r)
		}
	}
	list = decode[api.NodeList](t, do(t, req{method: "GET", url: base + api.PathNodes}), 200)
	for _, n := range list.Nodes {
		if n.Spec.Name == "n1" && (n.Usage == nil || !reflect.DeepEqual(*n.Usage, usage)) {
			t.Errorf("n1's usage %+v after the second heartbeat, want %+v", n.Usage, usage)
		}
	}

	for _, c := range []struct {
		name         string
		node, body   string
		status       int
		code, string string
	}{
		{"unknown node", "n9", string(body), 404, api.CodeNotFound, "n9"},
		{"negative usage", "n1", `{"usage":{"total":{"cpu":-1,"memory":0},"online":{"cpu":0,"memory":0},"offline":{"cpu":0,"memory":-2}}}`, 400, api.CodeInvalid, "usage.total.cpu"},
		{"usage not an object", "n1", `{"usage":7}`, 400, api.CodeInvalid, "usage"},
		{"unknown usage field", "n1", `{"usage":{"gpus":1}}`, 400, api.CodeInvalid, "gpus"},
		{"empty body", "n1", ``, 400, api.CodeInvalid, "object"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := do(t, req{method: "POST", url: base + api.PathNode + c.node + "/reports", body: []byte(c.body),
				header: map[string]string{"Content-Type": "application/json"}})
			e := errorReply(t, r, c.status, c.code, c.string)
			if c.name == "negative usage" && (len(e.Problems) != 2 || e.Problems[1].Path != "usage.offline.memory" || e.Total != 2) {
				t.Errorf("problems %+v (total %d)", e.Problems, e.Total)
			}
		})
	}
}

// TestHeartbeatOvercommit: the overcommit status of a node's heartbeat,
// as a nodelet encodes it, shows unchanged under the node's usage in the
// node list and the node's detail; an invalid one is refused and the
// usage before it kept; a heartbeat without one (a node that runs no
// overcommit controller, or an older nodelet) is taken, and its usage
// shows no status, not even as a member of the JSON.
func TestHeartbeatOvercommit(t *testing.T) {
	s := openOne(t, nil)
	base := s.Addr()
	if r := do(t, req{method: "POST", url: base + api.PathNodes, body: []byte(nodeJSON("n1", ""))}); r.status != 200 {
		t.Fatalf("register n1: %s", r)
	}
	beat := func(u api.NodeUsage) reply {
		t.Helper()
		body, err := api.AppendReportRequest(nil, &api.ReportRequest{Reports: []api.TaskReport{}, Usage: &u})
		if err != nil {
			t.Fatal(err)
		}
		return do(t, req{method: "POST", url: base + api.PathNode + "n1/reports", body: body})
	}
	// usages returns n1's usage in the node list and in its detail.
	usages := func() (list, detail *api.NodeUsage) {
		t.Helper()
		for _, n := range decode[api.NodeList](t, do(t, req{method: "GET", url: base + api.PathNodes}), 200).Nodes {
			if n.Spec.Name == "n1" {
				list = n.Usage
			}
		}
		return list, decode[api.NodeDetail](t, do(t, req{method: "GET", url: base + api.PathNode + "n1"}), 200).Usage
	}

	usage := api.NodeUsage{
		Total: api.Usage{CPU: 900, Memory: 1 << 30}, Offline: api.Usage{CPU: 900, Memory: 1 << 30},
		Overcommit: &api.OvercommitStatus{CPUQuota: 1250, CPUMin: 100, CPUMax: 2000, MemoryLimit: 3 << 30, MemoryGuaranteed: 1 << 30,
			Decided: time.Date(2030, 1, 2, 3, 4, 5, 600_000_000, time.UTC)},
	}
	if r := beat(usage); r.status != 204 {
		t.Fatalf("heartbeat: %s", r)
	}
	list, detail := usages()
	for what, u := range map[string]*api.NodeUsage{"list": list, "detail": detail} {
		if u == nil || !reflect.DeepEqual(*u, usage) {
			t.Errorf("n1's usage in the %s: %+v, want %+v with overcommit %+v", what, u, usage, *usage.Overcommit)
		}
	}

	bad := usage
	bad.Overcommit = &api.OvercommitStatus{CPUQuota: 2500, CPUMin: 100, CPUMax: 2000}
	errorReply(t, beat(bad), 400, api.CodeInvalid, "usage.overcommit.cpu_quota")
	if list, _ := usages(); list == nil || !reflect.DeepEqual(*list, usage) {
		t.Errorf("n1's usage after a refused heartbeat: %+v, want %+v", list, usage)
	}

	older := `{"reports":[],"usage":{"total":{"cpu":700,"memory":1073741824},"online":{"cpu":0,"memory":0},"offline":{"cpu":700,"memory":1073741824}}}`
	if r := do(t, req{method: "POST", url: base + api.PathNode + "n1/reports", body: []byte(older)}); r.status != 204 {
		t.Fatalf("heartbeat without an overcommit status: %s", r)
	}
	if list, detail := usages(); list == nil || detail == nil || list.Overcommit != nil || detail.Overcommit != nil || list.Total.CPU != 700 {
		t.Errorf("n1's usage after a heartbeat without a status: list %+v, detail %+v", list, detail)
	}
	for _, path := range []string{api.PathNodes, api.PathNode + "n1"} {
		if r := do(t, req{method: "GET", url: base + path}); r.status != 200 || bytes.Contains(r.body, []byte(`"overcommit"`)) {
			t.Errorf("GET %s after a heartbeat without a status: %s", path, r)
		}
	}
}
