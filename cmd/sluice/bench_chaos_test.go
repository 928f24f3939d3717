package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/bench/chaosbench"
)

// TestBenchChaosShort runs a short schedule against three dispatcher
// processes and two fleet processes, all this test binary acting as
// sluice: a leader killed, a follower killed, the leader partitioned, the
// leader's disk filled (as root) or slowed, a fleet process killed and one frozen
// past the node TTL. Nothing acknowledged may be lost or doubled, every
// job must end, no stale pod may run on, no task run twice beyond the
// bound, and the history must be linearizable.
func TestBenchChaosShort(t *testing.T) {
	if testing.Short() {
		t.Skip("starts five processes and injects faults for about 40s")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Skipf("cannot find the test binary to run as sluice: %v", err)
	}
	const seed = 5
	t.Logf("seed %d", seed)
	env := append(childEnvForTest(), testAsMainEnv+"=1")
	var log bytes.Buffer
	cfg := chaosbench.Config{
		Exe: exe, Env: env, Seed: seed, Log: &log,
		Kinds: []chaosbench.Kind{chaosbench.KillLeader, chaosbench.KillFollower, chaosbench.PartitionLeader, chaosbench.DiskFull, chaosbench.SlowDisk, chaosbench.KillFleet, chaosbench.FreezeFleet},
		Gap:   500 * time.Millisecond, Hold: time.Second, Nodes: 10, Rate: 20, Drain: 30 * time.Second, ReadyTimeout: 30 * time.Second,
		TmpfsSize: 64 << 20,
		// An address of its own: a port the bench found free on
		// 127.0.0.1 may be taken by another test's connection before the
		// replica binds it, when many run on this host.
		Host: "127.0.0.2",
	}
	res := runChaos(t, cfg, &log)
	wantFaults := len(cfg.Kinds) - len(res.Skipped)
	if res.Faults != wantFaults || len(res.Sched) != wantFaults {
		t.Errorf("%d faults injected (%d in the schedule), want %d", res.Faults, len(res.Sched), wantFaults)
	}
	if !res.OK() || res.Acked == 0 || res.Jobs < res.Acked {
		t.Errorf("promises broken or nothing done: %+v", res)
	}
	for _, f := range res.Sched {
		if f.UnavailableMs < 0 || f.Victim == "" {
			t.Errorf("fault %+v: no victim or no placement after it", f)
		}
	}
	if res.MaxWaitMs <= 0 {
		t.Errorf("worst wait %d ms: no probe measured during the faults", res.MaxWaitMs)
	}
	if res.DoubleRunBoundMs < 3000 || res.DoubleRun.MaxMs > res.DoubleRunBoundMs {
		t.Errorf("a task ran twice for %d ms, bound %d ms", res.DoubleRun.MaxMs, res.DoubleRunBoundMs)
	}
	if res.MaxUnavailableMs <= 0 || res.MaxUnavailableMs > 30_000 {
		t.Errorf("worst unavailability %d ms, want between 0 and 30 s", res.MaxUnavailableMs)
	}
	var out bytes.Buffer
	if err := printBenchChaos(&out, res, true); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var m map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &m); err != nil {
		t.Fatalf("last line is not JSON: %v\n%s", err, out.String())
	}
	for _, k := range []string{"acked", "lost", "duplicates", "linearizable", "max_unavailable_ms", "faults"} {
		if _, ok := m[k]; !ok {
			t.Errorf("JSON lacks %q: %s", k, lines[len(lines)-1])
		}
	}
}

// childEnvForTest is this process's environment less SLUICE_* settings.
func childEnvForTest() []string {
	return slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, envPrefix) })
}

func TestBenchChaosRejectsBadFlags(t *testing.T) {
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"bench", "chaos", "--faults", "kill-leader,unplug"}, &out, &errOut)
	var ue usageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), `"unplug"`) {
		t.Errorf("--faults with an unknown kind: err = %v, want a usage error naming it", err)
	}
	err = run(context.Background(), []string{"bench", "chaos", "--hold", "-1s", "--nodes", "1", "--fleet-procs", "2"}, &out, &errOut)
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "Hold -1s") || !strings.Contains(err.Error(), "FleetProcs 2 above Nodes 1") {
		t.Errorf("bad sizes: err = %v, want a usage error naming each", err)
	}
}

// TestBenchChaosNodelets runs the real-nodelet faults: two `sluice
// nodelet` processes with the container runtime run the four pods of a
// job; one is killed with SIGKILL and restarted (its pods must be
// adopted, not started again), and one is cut off from every replica for
// longer than the node TTL and then healed (its tasks must run again on
// the other, and it must stop its stale pods, a task running on both no
// longer than the bound). Needs root and the container runtime.
func TestBenchChaosNodelets(t *testing.T) {
	if testing.Short() {
		t.Skip("starts six processes and real containers for about 30s")
	}
	if os.Geteuid() != 0 {
		t.Skip("the container runtime of the real nodelets needs root")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Skipf("cannot find the test binary to run as sluice: %v", err)
	}
	const seed = 3
	t.Logf("seed %d", seed)
	var log bytes.Buffer
	cfg := chaosbench.Config{
		Exe: exe, Env: append(childEnvForTest(), testAsMainEnv+"=1"), Seed: seed, Log: &log,
		Kinds: []chaosbench.Kind{chaosbench.KillNodelet, chaosbench.CutNodelet},
		Gap:   500 * time.Millisecond, Hold: time.Second, FleetProcs: 1, Nodes: 2, Rate: 10,
		Drain: 30 * time.Second, ReadyTimeout: 30 * time.Second, Host: "127.0.0.3",
	}
	res := runChaos(t, cfg, &log)
	if len(res.Skipped) > 0 {
		t.Skipf("real nodelets cannot run here: %v", res.Skipped)
	}
	n := res.Nodelets
	if n == nil || res.Faults != 2 {
		t.Fatalf("%d faults, nodelets %+v: want both real-nodelet faults injected", res.Faults, n)
	}
	if !res.OK() {
		t.Errorf("promises broken: %+v, nodelets %+v", res, *n)
	}
	if n.Cuts != 1 || n.Moved == 0 || n.DoubleRun.Tasks == 0 {
		t.Errorf("the cut moved %d tasks (%d ran twice at once): want the cut node's tasks run again elsewhere", n.Moved, n.DoubleRun.Tasks)
	}
	if n.StaleStopMs <= 0 || n.StaleStopMs > 3000 {
		t.Errorf("the node back stopped its stale pods %d ms after the heal, want within 3 s", n.StaleStopMs)
	}
	if n.DoubleRun.MaxMs > res.DoubleRunBoundMs || res.DoubleRunBoundMs < 3000 {
		t.Errorf("a task ran on both nodelets for %d ms, bound %d ms", n.DoubleRun.MaxMs, res.DoubleRunBoundMs)
	}
}

// runChaos runs cfg (its Log writing to log) within two minutes, logs its
// progress and its printed result, and fails the test if Run fails.
func runChaos(t *testing.T, cfg chaosbench.Config, log *bytes.Buffer) chaosbench.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	res, err := chaosbench.Run(ctx, cfg)
	t.Logf("progress:\n%s", log.String())
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	var out bytes.Buffer
	if err := printBenchChaos(&out, res, false); err != nil {
		t.Fatal(err)
	}
	t.Logf("result:\n%s", out.String())
	return res
}
