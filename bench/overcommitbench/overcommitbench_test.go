package overcommitbench_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/bench/overcommitbench"
	"github.com/sluicehq/sluice/nodelet/runtime/container"
)

func TestMain(m *testing.M) {
	container.Reexec()
	os.Exit(m.Run())
}

func TestValidateReportsEveryProblem(t *testing.T) {
	err := overcommitbench.Config{
		NodeCPU: -1, OnlineDuty: 1.5, ProbeRate: -3, Loaded: -time.Second, MaxOffline: 5000,
		OfflineMemory: 64 << 20, OfflineTouch: 128 << 20,
	}.Validate()
	if err == nil {
		t.Fatal("Validate = nil, want the problems")
	}
	for _, want := range []string{"NodeCPU", "OnlineDuty", "ProbeRate", "Loaded", "MaxOffline", "OfflineTouch"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v; want it to name %s", err, want)
		}
	}
	if err := (overcommitbench.Config{}).Validate(); err != nil {
		t.Errorf("the zero Config: %v, want valid (defaults)", err)
	}
	if _, err := overcommitbench.Run(context.Background(), overcommitbench.Config{OnlinePods: -1}); err == nil {
		t.Error("Run of an invalid Config = nil error")
	}
}

func TestChecks(t *testing.T) {
	r := overcommitbench.Result{AllocationRatio: 1.42, ProbeP99Ms: 2.1, ProbeP99UnloadedMs: 2.0}
	got := r.Checks()
	if len(got) != 3 || !got[0].Met || !got[1].Met || !got[2].Met {
		t.Errorf("checks of a run within the targets: %+v, want all met", got)
	}
	r = overcommitbench.Result{AllocationRatio: 1.2, ProbeP99Ms: 3, ProbeP99UnloadedMs: 2, OnlineThrottledMs: 5}
	for _, c := range r.Checks() {
		if c.Met {
			t.Errorf("check %+v met, want missed", c)
		}
	}
	if c := (overcommitbench.Result{AllocationRatio: 2}).Checks()[1]; c.Met {
		t.Errorf("probe check without an anchor %+v met, want missed", c)
	}
}

// TestRunShort runs the whole scenario on real containers at a small
// size and checks that offline work was lent capacity beyond what online
// work asks for, that placement refused at the end with a reason, that
// the probe answered in both phases, and that the run left no cgroup or
// bridge behind.
func TestRunShort(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: containers need namespaces and cgroups")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var logger *slog.Logger
	if testing.Verbose() {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	res, err := overcommitbench.Run(ctx, overcommitbench.Config{
		OnlinePods: 1, OfflineCPU: 500, OfflineTouch: 16 << 20, OfflineMemory: 64 << 20, MaxOffline: 16,
		Warmup: 2 * time.Second, Unloaded: 3 * time.Second, Loaded: 3 * time.Second, RefuseWait: 2 * time.Second,
		Timeout: 100 * time.Second, Logger: logger,
	})
	if errors.Is(err, overcommitbench.ErrNoCNI) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("allocation %.2f (online asks %.2f), utilization %.2f, probe p99 %.1f ms against %.1f ms unloaded, throttled %.1f ms, offline %d placed %d pending (%s), killed %d",
		res.AllocationRatio, res.OnlineRequestRatio, res.Utilization, res.ProbeP99Ms, res.ProbeP99UnloadedMs,
		res.OnlineThrottledMs, res.OfflinePlaced, res.OfflinePending, res.RefusedReason, res.OfflineKilled)
	if res.OfflinePlaced < 1 || res.AllocationRatio <= res.OnlineRequestRatio {
		t.Errorf("offline placed %d, allocation %.2f against online's %.2f: want offline lent capacity", res.OfflinePlaced, res.AllocationRatio, res.OnlineRequestRatio)
	}
	if res.AllocationRatio > 2 {
		t.Errorf("allocation %.2f beyond the static bound of both tiers (2)", res.AllocationRatio)
	}
	if res.OfflinePending < 1 || res.RefusedReason == "" {
		t.Errorf("pending %d, reason %q: want the fill to end refused, with a reason", res.OfflinePending, res.RefusedReason)
	}
	if res.ProbeP99UnloadedMs <= 0 || res.ProbeP99Ms <= 0 || res.ProbeRequests == 0 {
		t.Errorf("probe: %d requests, p99 %.1f ms loaded, %.1f unloaded: want both phases answered", res.ProbeRequests, res.ProbeP99Ms, res.ProbeP99UnloadedMs)
	}
	// Each offline pod got its request: none was killed for memory or
	// started again (the offline tier's limit makes room for a pod before
	// it starts).
	if res.OfflineKilled != 0 || res.OfflineRetried != 0 {
		t.Errorf("offline pods killed %d (%v), attempts retried %d: want none", res.OfflineKilled, res.OfflineKilledBy, res.OfflineRetried)
	}
	phases := map[string]bool{}
	for _, s := range res.Series {
		phases[s.Phase] = true
	}
	for _, p := range []string{"unloaded", "fill", "loaded"} {
		if !phases[p] {
			t.Errorf("no sample of phase %s in %d samples", p, len(res.Series))
		}
	}
	// Nothing left: the run's cgroup tree and bridge (named after this
	// process) are gone.
	if dirs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", fmt.Sprintf("sluice-ocbench-%d", os.Getpid()))); len(dirs) > 0 {
		t.Errorf("cgroups left behind: %v", dirs)
	}
	if _, err := net.InterfaceByName(fmt.Sprintf("slocb%d", os.Getpid()%100000000)); err == nil {
		t.Errorf("bridge slocb%d left behind", os.Getpid()%100000000)
	}
}
