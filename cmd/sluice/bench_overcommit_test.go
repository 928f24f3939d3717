package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/bench/overcommitbench"
)

func TestBenchOvercommitRejectsBadFlags(t *testing.T) {
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"bench", "overcommit", "--cpu", "lots", "--offline-memory", "0", "--online-duty", "2"}, &out, &errOut)
	var ue usageError
	if !errors.As(err, &ue) {
		t.Fatalf("err = %v, want a usage error", err)
	}
	for _, want := range []string{"--cpu", "--offline-memory"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v\nwant it to name %q", err, want)
		}
	}
	err = run(context.Background(), []string{"bench", "overcommit", "--online-duty", "2", "--loaded", "-1s"}, &out, &errOut)
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "OnlineDuty") || !strings.Contains(err.Error(), "Loaded") {
		t.Errorf("--online-duty 2 --loaded -1s: err = %v, want a usage error naming both", err)
	}
}

func TestPrintBenchOvercommit(t *testing.T) {
	res := overcommitbench.Result{Mode: "containers", NodeCPU: 2000, NodeMemory: 4 << 30, OnlinePods: 2, OnlineRequestRatio: 0.8,
		OfflinePlaced: 7, OfflinePending: 3, RefusedReason: "no node passes the filters", AllocationRatio: 1.675,
		MemoryAllocationRatio: 0.75, Utilization: 0.81, UtilizationUnloaded: 0.38, ProbeP50Ms: 0.5, ProbeP99Ms: 2.2,
		ProbeP50UnloadedMs: 0.6, ProbeP99UnloadedMs: 2.1, ProbeRequests: 1500, OfflineKilled: 1,
		OfflineKilledBy: map[string]int{"oom_killed": 1}, Series: []overcommitbench.Sample{{T: 1, Phase: "online", Allocation: 0.8}}}
	var b bytes.Buffer
	if err := printBenchOvercommit(&b, res, false); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"node 2000m CPU, 4096 MiB memory; 2 online pods", "7 placed, 3 pending (no node passes the filters)",
		"allocated / capacity (CPU)", "168%", "≥ 130% (Hippo 115%)", "2.2 / 2.1 ms (1.05×)", "81% loaded, 38% unloaded", "map[oom_killed:1]"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	if err := printBenchOvercommit(&b, res, true); err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"allocation_ratio", "utilization", "probe_p99_ms", "probe_p99_unloaded_ms", "online_throttled_ms", "offline_killed", "series"} {
		if _, ok := back[k]; !ok {
			t.Errorf("JSON lacks %s: %s", k, b.String())
		}
	}
}
