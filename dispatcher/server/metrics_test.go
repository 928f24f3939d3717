package server_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/dispatcher/server"
	"github.com/sluicehq/sluice/internal/promtest"
)

// scrape gets base's metrics with token, checks the reply's format, parses
// it with Prometheus' own parser and lints it as promtool does.
func scrape(t testing.TB, base, token string) map[string]*dto.MetricFamily {
	t.Helper()
	r := do(t, req{method: "GET", url: base + api.PathMetrics, token: token})
	if r.status != 200 {
		t.Fatalf("GET /metrics: %s", r)
	}
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("Content-Type %q, want Prometheus' text format", ct)
	}
	mfs := promtest.Parse(t, r.body)
	for name, mf := range mfs {
		if !strings.HasPrefix(name, "sluice_") && !strings.HasPrefix(name, "go_") && !strings.HasPrefix(name, "process_") {
			t.Errorf("metric %s lacks the sluice_ prefix", name)
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if strings.HasPrefix(l.GetValue(), "j") && strings.Contains(l.GetValue(), "-") {
					t.Errorf("%s has label %s=%q, which looks like an ID", name, l.GetName(), l.GetValue())
				}
			}
		}
	}
	return mfs
}

// TestMetrics scrapes a replica that placed the tasks of three jobs on two
// nodes and checks the text against what happened, and that only readers
// (and submitters and admins) may scrape.
func TestMetrics(t *testing.T) {
	s := openOne(t, parseTokens(t, tokenFile))
	base := s.Addr()
	for _, n := range []string{"n1", "n2"} {
		if r := do(t, req{method: "POST", url: base + api.PathNodes, token: "adm", body: []byte(nodeJSON(n, ""))}); r.status != 200 {
			t.Fatalf("register %s: %s", n, r)
		}
	}
	const jobs, each = 3, 10
	for i := range jobs {
		submit(t, base, "sub-any", jobJSON(fmt.Sprintf("m%d", i), "", each), nil)
	}
	waitFor(t, 10*time.Second, "every task placed", func() bool { return s.Dispatcher().Totals().Placed >= jobs*each })

	mfs := scrape(t, base, "rd")
	if v := promtest.Value(t, mfs, "sluice_round_tasks_placed_total"); v < jobs*each {
		t.Errorf("placed %v, want at least %d", v, jobs*each)
	}
	for metric, want := range map[string]float64{
		"sluice_nodes|state=ready":                             2,
		"sluice_nodes|state=down":                              0,
		"sluice_jobs|state=running":                            jobs,
		"sluice_jobs|state=pending":                            0,
		"sluice_tasks|queue=default|qos=offline|state=active":  jobs * each,
		"sluice_tasks|queue=default|qos=offline|state=pending": 0,
		"sluice_raft_is_leader":                                1,
		"sluice_raft_stopped":                                  0,
		"sluice_http_requests_total|route=jobs|code=200":       jobs,
		"sluice_http_request_duration_seconds|route=jobs":      jobs,
		"sluice_http_requests_total|route=nodes|code=200":      2,
	} {
		f := strings.Split(metric, "|")
		if v := promtest.Value(t, mfs, f[0], f[1:]...); v != want {
			t.Errorf("%s = %v, want %v", metric, v, want)
		}
	}
	for _, positive := range []string{"sluice_round_duration_seconds", "sluice_rounds_total", "sluice_raft_term",
		"sluice_raft_commit_index", "sluice_raft_applied_index", "sluice_raft_proposals_total", "sluice_raft_log_sync_duration_seconds",
		"sluice_store_disk_bytes", "sluice_store_wal_bytes_total", "sluice_round_flow_arcs", "go_goroutines"} {
		if v := promtest.Value(t, mfs, positive); v <= 0 {
			t.Errorf("%s = %v, want it positive", positive, v)
		}
	}
	// The leader exports its usage estimates: no node sent usage yet.
	if v := promtest.Value(t, mfs, "sluice_usage_estimate_nodes"); v != 0 {
		t.Errorf("estimates cover %v nodes, want 0", v)
	}
	if v := promtest.Value(t, mfs, "sluice_task_reports_dropped_total"); v != 0 {
		t.Errorf("dropped reports %v", v)
	}
	if v := promtest.Value(t, mfs, "sluice_http_request_body_bytes_total", "route=jobs"); v < float64(jobs*len(jobJSON("m0", "", each))) {
		t.Errorf("request body bytes of jobs %v, want at least the %d jobs' JSON", v, jobs)
	}
	// The scrape counted itself on the next one.
	if v := promtest.Value(t, scrape(t, base, "sub-any"), "sluice_http_requests_total", "route=metrics", "code=200"); v < 1 {
		t.Errorf("metrics requests %v", v)
	}

	// Refusals: no token, an unknown one, a nodelet's; a POST.
	errorReply(t, do(t, req{method: "GET", url: base + api.PathMetrics}), 401, api.CodeUnauthorized, "missing bearer token")
	errorReply(t, do(t, req{method: "GET", url: base + api.PathMetrics, token: "nope"}), 401, api.CodeUnauthorized, "unknown token")
	errorReply(t, do(t, req{method: "GET", url: base + api.PathMetrics, token: "nl"}), 403, api.CodeForbidden, "nodelet")
	if r := do(t, req{method: "POST", url: base + api.PathMetrics, token: "rd", body: []byte("x")}); r.status != 405 {
		t.Errorf("POST /metrics: %s, want 405", r)
	}
	mfs = scrape(t, base, "adm")
	if v := promtest.Value(t, mfs, "sluice_http_requests_total", "route=metrics", "code=403"); v != 1 {
		t.Errorf("refused metrics requests counted %v, want 1", v)
	}
}

// TestMetricsOff checks that a replica with metrics off has no /metrics.
func TestMetricsOff(t *testing.T) {
	s := openOneWith(t, func(c *server.Config) { c.DisableMetrics = true })
	errorReply(t, do(t, req{method: "GET", url: s.Addr() + api.PathMetrics}), 404, api.CodeNotFound, "no such path")
}

// TestMetricsEveryReplica scrapes each replica of three: every one
// serves, and exactly one says it leads, in the term they agree on.
func TestMetricsEveryReplica(t *testing.T) {
	c := openThree(t, nil)
	l := c.leader(t, 0)
	leaders := 0
	for i, base := range c.bases {
		mfs := scrape(t, base, "")
		leaders += int(promtest.Value(t, mfs, "sluice_raft_is_leader"))
		if v := promtest.Value(t, mfs, "sluice_raft_members"); v != 3 {
			t.Errorf("replica %d: members %v", i+1, v)
		}
		if v := promtest.Value(t, mfs, "sluice_raft_term"); v != float64(l.Raft().Status().Term) {
			t.Errorf("replica %d: term %v, leader's %d", i+1, v, l.Raft().Status().Term)
		}
	}
	if leaders != 1 {
		t.Errorf("%d replicas say they lead", leaders)
	}
}
