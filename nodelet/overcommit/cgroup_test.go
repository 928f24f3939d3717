package overcommit_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/nodelet/cgroup"
	"github.com/sluicehq/sluice/nodelet/cgroup/cgrouptest"
	"github.com/sluicehq/sluice/nodelet/overcommit"
)

func TestMain(m *testing.M) {
	cgrouptest.MaybeSpin()
	os.Exit(m.Run())
}

// TestThrottleOfflineUnderOnlineLoad runs the Loop on real cgroups: two
// online spinners saturate the host's CPUs, one offline spinner competes.
// After a few periods above the watermark the offline tier's quota is at
// its floor and it is being throttled, while the online tier never is.
func TestThrottleOfflineUnderOnlineLoad(t *testing.T) {
	m := cgrouptest.NewManager(t)
	if m.Mode() != cgroup.ModeV1 {
		t.Skip("the raw file checks are written for v1")
	}
	// Equal shares, so that without the quota CFS would give offline half
	// the host: what keeps it down here is the controller's quota alone.
	if err := m.EnsureTiers(cgroup.Limits{CPUQuotaUS: -1, CPUShares: 1024}, cgroup.Limits{CPUShares: 1024}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct {
		tier cgroup.Tier
		id   string
	}{{cgroup.Online, "web"}, {cgroup.Offline, "batch"}} {
		if err := m.CreatePod(p.tier, p.id, cgroup.Limits{}); err != nil {
			t.Fatal(err)
		}
	}
	ncpu := 2
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		ncpu = max(strings.Count(string(b), "\ncpu"), 1)
	}
	for range ncpu {
		cgrouptest.Spin(t, m, cgroup.Online, "web")
	}
	cgrouptest.Spin(t, m, cgroup.Offline, "batch")

	dir := t.TempDir()
	pods := []overcommit.Pod{
		{ID: "web", Tier: cgroup.Online, Priority: 10, StartedAt: time.Now(), Request: overcommit.Resources{CPUMillis: int64(ncpu) * 1000, MemoryBytes: 1 << 30}},
		{ID: "batch", Tier: cgroup.Offline, Priority: 1, StartedAt: time.Now(), Request: overcommit.Resources{CPUMillis: 1000, MemoryBytes: 256 << 20}, ResourceFile: filepath.Join(dir, "sluice-resources.json")},
	}
	const floor = 100
	loop, err := overcommit.NewLoop(overcommit.Config{
		Params: overcommit.Params{
			CPUWatermark:         0.8,
			OfflineCPUMinMillis:  floor,
			OfflineCPUInitMillis: int64(ncpu) * 1000,
		},
		Period:  200 * time.Millisecond,
		Cgroups: m,
		Pods:    overcommit.PodSourceFunc(func() []overcommit.Pod { return pods }),
		Killer: overcommit.KillerFunc(func(_ context.Context, id, reason string) error {
			t.Errorf("unexpected kill of %s: %s", id, reason)
			return nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- loop.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})

	quotaFile := filepath.Join("/sys/fs/cgroup/cpu", m.TierPath(cgroup.Offline), "cpu.cfs_quota_us")
	want := fmt.Sprint(floor * 100) // millicores × 100000us / 1000
	deadline := time.Now().Add(10 * time.Second)
	var quota string
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(quotaFile)
		if quota = strings.TrimSpace(string(b)); quota == want {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	cpuDec, _ := loop.LastDecision()
	if quota != want {
		t.Fatalf("offline quota %s, want the floor %s (last decision %+v, stats %+v)", quota, want, cpuDec, loop.Stats())
	}
	t.Logf("floor reached; last decision %+v", cpuDec)

	off0, err := m.TierSample(cgroup.Offline)
	if err != nil {
		t.Fatal(err)
	}
	on0, err := m.TierSample(cgroup.Online)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	off1, _ := m.TierSample(cgroup.Offline)
	on1, _ := m.TierSample(cgroup.Online)
	if off1.CPUThrottled <= off0.CPUThrottled {
		t.Errorf("offline nr_throttled did not grow: %d -> %d", off0.CPUThrottled, off1.CPUThrottled)
	}
	if on1.CPUThrottled != 0 || on0.CPUThrottled != 0 {
		t.Errorf("online was throttled: %d -> %d", on0.CPUThrottled, on1.CPUThrottled)
	}
	offCPU := time.Duration(off1.CPUUsageNS - off0.CPUUsageNS)
	onCPU := time.Duration(on1.CPUUsageNS - on0.CPUUsageNS)
	t.Logf("over 1s: online used %v CPU, offline %v (floor %dm); offline throttled %d periods", onCPU, offCPU, floor, off1.CPUThrottled-off0.CPUThrottled)
	if offCPU > 300*time.Millisecond {
		t.Errorf("offline used %v of CPU in 1s at a %dm quota", offCPU, floor)
	}
	if offCPU == 0 {
		t.Errorf("offline starved: no CPU at all in 1s")
	}
	rep, ok := loop.LastReport()
	if !ok || len(rep.Pods) != 2 {
		t.Errorf("report %+v", rep)
	}
	if st := loop.Stats(); st.Errors != 0 {
		t.Errorf("loop errors: %+v", st)
	}
	if b, err := os.ReadFile(pods[1].ResourceFile); err != nil || !strings.Contains(string(b), `"cpu_millis":100`) {
		t.Errorf("resource file: %s, %v", b, err)
	}
}

// BenchmarkTick100Pods measures one Loop iteration against real cgroups
// with 100 pod cgroups (idle): the Loop's cost per period. At a 1 s period
// the CPU share is the CPU time per iteration ÷ 1 s.
//
// host=real samples this machine's /proc between iterations that follow
// each other at once: utilization over a few ms swings, the offline quota
// with it, and most offline pods' resource files are rewritten each time
// (the worst case). host=steady reads a fixed /proc: the quota settles and
// the files stay (a node whose load holds over the period).
// BenchmarkTick100Pods measures one iteration of the control loop over 100
// pod cgroups, in CPU time as a share of a core at the default 1 s period:
//   - host=real: the real /proc, iterations back to back, so that host
//     utilization is measured over a few milliseconds and swings the
//     offline quota (and the resource files) at nearly every iteration;
//   - host=real-paced: the real /proc, one iteration a second as the agent
//     runs it (use -benchtime Nx: each iteration takes a second of wall
//     time);
//   - host=steady: a fixed /proc, so the quota settles.
func BenchmarkTick100Pods(b *testing.B) {
	for _, host := range []string{"real", "real-paced", "steady"} {
		b.Run("host="+host, func(b *testing.B) {
			procRoot := "/proc"
			if host == "steady" {
				procRoot = b.TempDir()
				files := map[string]string{
					"stat":    "cpu  100 0 0 900 0 0 0 0 0 0\ncpu0 0 0 0 0 0 0 0 0 0 0\ncpu1 0 0 0 0 0 0 0 0 0 0\n",
					"meminfo": "MemTotal: 16777216 kB\nMemAvailable: 15728640 kB\n",
				}
				for name, content := range files {
					if err := os.WriteFile(filepath.Join(procRoot, name), []byte(content), 0o644); err != nil {
						b.Fatal(err)
					}
				}
			}
			benchTick(b, procRoot, host == "real-paced")
		})
	}
}

func benchTick(b *testing.B, procRoot string, paced bool) {
	m := cgrouptest.NewManager(b)
	var pods []overcommit.Pod
	dir := b.TempDir()
	for i := range 100 {
		tier := cgroup.Online
		if i%2 == 1 {
			tier = cgroup.Offline
		}
		id := fmt.Sprintf("pod-%03d", i)
		if err := m.CreatePod(tier, id, cgroup.Limits{}); err != nil {
			b.Fatal(err)
		}
		pods = append(pods, overcommit.Pod{ID: id, Tier: tier, Priority: i % 5, Request: overcommit.Resources{CPUMillis: 100, MemoryBytes: 64 << 20},
			ResourceFile: filepath.Join(dir, id+".json")})
	}
	loop, err := overcommit.NewLoop(overcommit.Config{
		Cgroups:  m,
		ProcRoot: procRoot,
		Pods:     overcommit.PodSourceFunc(func() []overcommit.Pod { return pods }),
		Killer:   overcommit.KillerFunc(func(context.Context, string, string) error { return nil }),
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for range 20 { // let the quota settle where it can
		if _, err := loop.Tick(ctx); err != nil {
			b.Fatal(err)
		}
	}
	writes0 := loop.Stats().FileWrites
	b.ReportAllocs()
	cpu0 := cpuTime(b)
	n := 0
	for b.Loop() {
		if paced {
			time.Sleep(time.Second) // Config.Period's default
		}
		if _, err := loop.Tick(ctx); err != nil {
			b.Fatal(err)
		}
		n++
	}
	// CPU time (user+system) per tick, as a percentage of one core at a 1 s
	// period: wall time is inflated on a shared host, CPU time is not.
	b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(n)/1e9*100, "%core@1s")
	b.ReportMetric(float64(loop.Stats().FileWrites-writes0)/float64(n), "writes/op")
}

func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
