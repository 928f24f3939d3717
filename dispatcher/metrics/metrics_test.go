package metrics_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/sluicehq/sluice/dispatcher"
	"github.com/sluicehq/sluice/dispatcher/metrics"
)

func TestNewNeedsRoutes(t *testing.T) {
	if _, err := metrics.New(metrics.Config{}); err == nil {
		t.Fatal("New without routes succeeded")
	}
}

// TestRequestsAndRounds checks what Request and ObserveRound record, an
// out-of-range route and code included, and that the text lints.
func TestRequestsAndRounds(t *testing.T) {
	m, err := metrics.New(metrics.Config{Routes: []string{"a", "other"}})
	if err != nil {
		t.Fatal(err)
	}
	m.Request(0, 200, time.Millisecond, 100)
	m.Request(0, 200, time.Millisecond, 0)
	m.Request(7, 404, time.Millisecond, 0)
	m.Request(1, 1000, time.Millisecond, 5)
	m.ObserveRound(dispatcher.RoundStat{Latency: 3 * time.Millisecond, FlowNodes: 10, FlowArcs: 30, Unplaced: 4, Commit: time.Millisecond})
	var buf bytes.Buffer
	if err := m.Write(&buf); err != nil {
		t.Fatal(err)
	}
	text := buf.String()
	for _, want := range []string{
		`sluice_http_requests_total{code="200",route="a"} 2`,
		`sluice_http_requests_total{code="404",route="other"} 1`,
		`sluice_http_requests_total{code="other",route="other"} 1`,
		`sluice_http_request_body_bytes_total{route="a"} 100`,
		`sluice_http_request_body_bytes_total{route="other"} 5`,
		`sluice_http_request_duration_seconds_count{route="a"} 2`,
		`sluice_round_duration_seconds_count 1`,
		`sluice_round_commit_seconds_count 1`,
		`sluice_round_flow_arcs 30`,
		`sluice_round_unscheduled_tasks 4`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("no line %q in:\n%s", want, text)
		}
	}
	probs, err := promlint.New(strings.NewReader(text)).Lint()
	if err != nil || len(probs) > 0 {
		t.Errorf("lint: %v %v", probs, err)
	}
}

// BenchmarkRequest measures counting one request, the cost the metrics
// add to each API request.
func BenchmarkRequest(b *testing.B) {
	m, err := metrics.New(metrics.Config{Routes: []string{"jobs", "node_reports", "node_target", "other"}})
	if err != nil {
		b.Fatal(err)
	}
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			m.Request(i%4, 200, time.Millisecond, 1000)
			i++
		}
	})
}
