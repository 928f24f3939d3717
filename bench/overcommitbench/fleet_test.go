package overcommitbench_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/bench/overcommitbench"
)

// TestRunFleetSmall runs the fleet mode on a few nodes with fast
// heartbeats and short phases: offline work takes more than the capacity
// off the online peak, less at it, the estimates follow the configured
// usage, and the shifts are found and followed.
func TestRunFleetSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster and a fleet for ten seconds")
	}
	cfg := overcommitbench.FleetConfig{
		Nodes: 20, HeartbeatPeriod: 100 * time.Millisecond,
		Period: 4 * time.Second, PeakLength: 2 * time.Second, Duration: 9 * time.Second, Warmup: time.Second,
		OfflineRunTime: time.Second, OfflineArray: 20, Backlog: 200, SampleEvery: 100 * time.Millisecond,
		SettleBand: 0.05, Dir: t.TempDir(), Timeout: time.Minute,
	}
	res, err := overcommitbench.RunFleet(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(res)
	t.Logf("result: %s", strings.ReplaceAll(string(b), `},{"t"`, "},\n{\"t\""))
	// Off the peak the online tasks use a quarter of the half of each node
	// they ask for: offline work may take the rest but that quarter and
	// its headroom, 136% in all; at the peak, 109%.
	if res.AllocationRatioOffPeak < 1.2 || res.AllocationRatioOffPeak > 1.40 {
		t.Errorf("off-peak allocation %.3f, want about 1.3", res.AllocationRatioOffPeak)
	}
	if res.AllocationRatioPeak < 1.0 || res.AllocationRatioPeak > 1.15 {
		t.Errorf("peak allocation %.3f, want about 1.09", res.AllocationRatioPeak)
	}
	if res.AllocationRatio <= 1 || res.Utilization <= 0 || res.Utilization >= res.AllocationRatio {
		t.Errorf("allocation %.3f and utilization %.3f: want overcommit, and less used than allocated", res.AllocationRatio, res.Utilization)
	}
	if r := res.EstimateOverConfiguredPeak; r < 0.95 || r > 1.05 {
		t.Errorf("estimate over configured at the peak %.3f, want about 1 (an estimate rises with its first sample)", r)
	}
	if res.FollowUpSeconds <= 0 || res.FollowDownSeconds <= 0 {
		t.Errorf("follow times up %.1f s and down %.1f s: want both settled", res.FollowUpSeconds, res.FollowDownSeconds)
	}
	if len(res.Shifts) < 4 || res.OnlineTasks != 40 || res.OfflinePlaced == 0 || res.SubmitErrors != 0 {
		t.Errorf("%d shifts, %d online tasks, %d offline placed, %d submit errors", len(res.Shifts), res.OnlineTasks, res.OfflinePlaced, res.SubmitErrors)
	}
}

// TestFleetConfigRefusals: Validate names every problem at once.
func TestFleetConfigRefusals(t *testing.T) {
	err := overcommitbench.FleetConfig{
		Replicas: 9, Nodes: -1, OnlineShare: 1.5, OnlineBase: 0.9, OnlinePeak: 0.5,
		Period: time.Minute, PeakLength: time.Minute, FleetProcs: 2, SettleBand: -0.1,
	}.Validate()
	if err == nil {
		t.Fatal("Validate accepted a bad config")
	}
	for _, want := range []string{"Replicas 9", "Nodes -1", "OnlineShare 1.5", "FleetProcs 2", "SettleBand -0.1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("no problem about %q in %v", want, err)
		}
	}
	// The checks of defaulted values come once the fields are sane.
	err = overcommitbench.FleetConfig{OnlineBase: 0.9, OnlinePeak: 0.5, Period: time.Minute, PeakLength: time.Minute,
		Duration: time.Second, Warmup: 2 * time.Second, OfflineCPU: 16000}.Validate()
	for _, want := range []string{"PeakLength 1m0s", "OnlinePeak 0.5", "Warmup 2s", "SampleEvery", "does not fit"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("no problem about %q in %v", want, err)
		}
	}
	if err := (overcommitbench.FleetConfig{}).Validate(); err != nil {
		t.Errorf("the defaults are refused: %v", err)
	}
	if _, err := overcommitbench.RunFleet(context.Background(), overcommitbench.FleetConfig{Nodes: -1}); err == nil {
		t.Error("RunFleet ran a bad config")
	}
}
