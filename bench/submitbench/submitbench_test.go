package submitbench

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
)

func TestRunSmall(t *testing.T) {
	for _, enc := range []string{"", "zstd"} {
		res, err := Run(context.Background(), Config{Replicas: 3, Clients: 2, JobsPerRequest: 10, Requests: 4, Encoding: enc, Timeout: time.Minute})
		if err != nil {
			t.Fatalf("encoding %q: %v", enc, err)
		}
		if res.Jobs != 40 || res.JobsPerSec <= 0 || res.P99Ms < res.P50Ms {
			t.Errorf("encoding %q: %+v", enc, res)
		}
	}
}

func TestLatencySmall(t *testing.T) {
	res, err := Latency(context.Background(), LatencyConfig{Nodes: 2, Samples: 5, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if res.Samples != 5 || res.P50Ms <= 0 || res.MaxMs < res.P99Ms {
		t.Errorf("%+v", res)
	}
}

func TestConfigsRejectNonsense(t *testing.T) {
	err := Config{Replicas: 9, Clients: 0, JobsPerRequest: api.MaxItemsPerRequest + 1, Requests: 0, Encoding: "lz4", Timeout: -1}.Validate()
	for _, want := range []string{"replicas 9", "clients 0", "jobs per request", "requests 0", `encoding "lz4"`, "timeout"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to name %q", err, want)
		}
	}
	if err := (LatencyConfig{}).Validate(); err == nil || !strings.Contains(err.Error(), "nodes 0") || !strings.Contains(err.Error(), "samples 0") {
		t.Errorf("LatencyConfig{}.Validate() = %v", err)
	}
}

func TestBodyDecodes(t *testing.T) {
	jobs, err := api.DecodeJobs(Body(25))
	if err != nil || len(jobs) != 25 {
		t.Fatalf("Body(25) decodes to %d jobs, %v", len(jobs), err)
	}
}
