package overcommit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/nodelet/cgroup"
	"github.com/sluicehq/sluice/nodelet/overcommit"
)

// fakeCgroups keeps cumulative CPU counters and working sets per pod and
// records what is written.
type fakeCgroups struct {
	mu   sync.Mutex
	pods map[string]*cgroup.Usage
	sets []cgroup.Limits
	tier []cgroup.Tier
}

func (f *fakeCgroups) PodUsage(_ cgroup.Tier, id string) (cgroup.Usage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.pods[id]
	if !ok {
		return cgroup.Usage{}, &cgroup.Error{Op: "stat", Path: id, Err: cgroup.ErrNotFound}
	}
	return *s, nil
}

func (f *fakeCgroups) EndUsageRound() {}

func (f *fakeCgroups) SetTier(t cgroup.Tier, l cgroup.Limits) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tier = append(f.tier, t)
	f.sets = append(f.sets, l)
	return nil
}

// fakeProc writes /proc/stat and /proc/meminfo files into a directory.
type fakeProc struct {
	dir         string
	busy, total uint64
}

func (p *fakeProc) advance(t *testing.T, busy, idle uint64, availKB int64) {
	t.Helper()
	p.busy += busy
	p.total += busy + idle
	stat := fmt.Sprintf("cpu  %d 0 0 %d 0 0 0 0 0 0\ncpu0 0 0 0 0 0 0 0 0 0 0\ncpu1 0 0 0 0 0 0 0 0 0 0\n", p.busy, p.total-p.busy)
	mem := fmt.Sprintf("MemTotal: %d kB\nMemAvailable: %d kB\n", 10<<20, availKB)
	if err := os.WriteFile(filepath.Join(p.dir, "stat"), []byte(stat), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p.dir, "meminfo"), []byte(mem), 0o644); err != nil {
		t.Fatal(err)
	}
}

type kill struct{ id, reason string }

func TestLoopAppliesDecisions(t *testing.T) {
	dir := t.TempDir()
	proc := &fakeProc{dir: dir}
	cg := &fakeCgroups{pods: map[string]*cgroup.Usage{
		"on":  {MemoryWorkingSet: 2 << 30},
		"off": {MemoryWorkingSet: 1 << 30},
	}}
	clk := clock.NewManual(time.Unix(1000, 0))
	now := clk.Now()
	var kills []kill
	resFile := filepath.Join(dir, "off-resources.json")
	pods := []overcommit.Pod{
		{ID: "on", Tier: cgroup.Online, Priority: 9, Request: overcommit.Resources{CPUMillis: 1000, MemoryBytes: 4 << 30}, ResourceFile: filepath.Join(dir, "on.json")},
		{ID: "off", Tier: cgroup.Offline, Priority: 1, StartedAt: now, Request: overcommit.Resources{CPUMillis: 500, MemoryBytes: 1 << 30}, ResourceFile: resFile},
		{ID: "not-started", Tier: cgroup.Offline},
	}
	loop, err := overcommit.NewLoop(overcommit.Config{
		Params:   overcommit.Params{OfflineCPUMinMillis: 100, OfflineCPUInitMillis: 1600, KillGrace: 2 * time.Second},
		Cgroups:  cg,
		Pods:     overcommit.PodSourceFunc(func() []overcommit.Pod { return pods }),
		Killer:   overcommit.KillerFunc(func(_ context.Context, id, reason string) error { kills = append(kills, kill{id, reason}); return nil }),
		ProcRoot: dir,
		Clock:    clk,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tick := func(busy, idle uint64, availKB int64, onCPU, offCPU time.Duration) overcommit.Decision {
		t.Helper()
		clk.Advance(time.Second)
		proc.advance(t, busy, idle, availKB)
		cg.mu.Lock()
		cg.pods["on"].CPUUsageNS += uint64(onCPU)
		cg.pods["off"].CPUUsageNS += uint64(offCPU)
		cg.mu.Unlock()
		d, err := loop.Tick(ctx)
		if err != nil {
			t.Fatalf("Tick: %v", err)
		}
		return d
	}

	// First tick: no CPU delta yet, host looks idle, quota grows.
	tick(0, 0, 8<<20, 0, 0)
	// Host 95% busy (2 CPUs): shrink to the floor over a few ticks.
	for range 5 {
		d := tick(190, 10, 8<<20, 1500*time.Millisecond, 400*time.Millisecond)
		if d.CPU.Action != overcommit.CPUShrink {
			t.Fatalf("action %v at util %.2f", d.CPU.Action, d.CPU.Util)
		}
	}
	last := cg.sets[len(cg.sets)-1]
	if last.CPUQuotaUS != 100*100 || last.CPUPeriodUS != 100000 || last.MemoryLimit <= 0 {
		t.Errorf("last offline limits %+v, want a 10000us quota", last)
	}
	for _, tr := range cg.tier {
		if tr != cgroup.Offline {
			t.Fatalf("the loop wrote tier %s", tr)
		}
	}
	nSets := len(cg.sets)
	d := tick(190, 10, 8<<20, 1500*time.Millisecond, 400*time.Millisecond)
	if len(cg.sets) != nSets {
		t.Errorf("unchanged limits were written again")
	}
	// LastStep: the report and the decision of the last tick, together.
	if r, ld, ok := loop.LastStep(); !ok || !r.Time.Equal(clk.Now()) || !ld.Now.Equal(clk.Now()) || ld.CPU != d.CPU || ld.Memory != d.Memory ||
		ld.Pods != nil || ld.Kills != nil {
		t.Errorf("LastStep: report of %v, decision %+v, %v; want the tick's at %v: CPU %+v, memory %+v", r.Time, ld, ok, clk.Now(), d.CPU, d.Memory)
	}

	// Reports: the per-pod rate from cumulative counters.
	rep, ok := loop.LastReport()
	if !ok || len(rep.Pods) != 2 || rep.Pods[0].LastCPUMillis != 1500 || rep.Pods[1].LastCPUMillis != 400 {
		t.Errorf("report %+v", rep)
	}

	// Resource file for the offline pod only, atomically replaced.
	raw, err := os.ReadFile(resFile)
	if err != nil {
		t.Fatal(err)
	}
	var pr overcommit.PodResources
	if err := json.Unmarshal(raw, &pr); err != nil || pr.ID != "off" || pr.Limit.CPUMillis != 100 || pr.Guaranteed.MemoryBytes != 1<<30 {
		t.Errorf("resource file %s: %+v, %v", raw, pr, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "on.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("online pod got a resource file: %v", err)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, ".sluice-resources-*")); len(m) > 0 {
		t.Errorf("temporary files left: %v", m)
	}
	st := loop.Stats()
	if st.FileWrites < 2 || st.FileWrites > 7 || st.Errors != 0 {
		t.Errorf("stats %+v", st)
	}

	// Memory pressure (avail 0.1G of 10G < 5%) for the grace period: the
	// offline pod is killed, with a reason; never the online one.
	for range 2 {
		tick(100, 100, 100<<10, 0, 0)
	}
	if len(kills) != 0 {
		t.Fatalf("killed before the grace period: %v", kills)
	}
	tick(100, 100, 100<<10, 0, 0)
	if len(kills) != 1 || kills[0].id != "off" || !strings.Contains(kills[0].reason, "memory pressure") {
		t.Fatalf("kills %v", kills)
	}
	if loop.Stats().Kills != 1 {
		t.Errorf("stats %+v", loop.Stats())
	}
}

func TestLoopRunStops(t *testing.T) {
	dir := t.TempDir()
	(&fakeProc{dir: dir}).advance(t, 1, 1, 1<<20)
	clk := clock.NewManual(time.Time{})
	ticked := make(chan struct{}, 1) // a Tick asked for the pods
	loop, err := overcommit.NewLoop(overcommit.Config{
		Period:  5 * time.Millisecond,
		Cgroups: &fakeCgroups{pods: map[string]*cgroup.Usage{}},
		Pods: overcommit.PodSourceFunc(func() []overcommit.Pod {
			ticked <- struct{}{}
			return nil
		}),
		Killer:   overcommit.KillerFunc(func(context.Context, string, string) error { return nil }),
		ProcRoot: dir,
		Clock:    clk,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- loop.Run(ctx) }()
	wait := func(what string) {
		t.Helper()
		select {
		case <-ticked:
		case <-time.After(5 * time.Second):
			t.Fatalf("no tick %s", what)
		}
	}
	wait("at the start")
	clk.Advance(4 * time.Millisecond)
	select {
	case <-ticked:
		t.Fatal("a tick before the period passed")
	default:
	}
	for range 2 {
		clk.Advance(time.Millisecond)
		wait("a period after the last")
		clk.Advance(4 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not stop")
	}
	if n := loop.Stats().Ticks; n != 3 {
		t.Errorf("%d ticks, want 3", n)
	}
}

func TestConfigValidate(t *testing.T) {
	_, err := overcommit.NewLoop(overcommit.Config{Period: -1, CPUPeriodUS: 5})
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{"Period", "CPUPeriodUS", "Cgroups", "Pods", "Killer"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not mention %s", err, want)
		}
	}
}

// TestLoopReserveMakesRoomBeforeStart: an offline pod reserved before it
// starts raises the offline tier's memory limit by its request at once,
// keeps it raised at the ticks before its cgroup shows, is counted by its
// own sample once it shows, and gives the room back when released.
// Without the reservation, a pod started between two ticks ran under the
// limit of the pods before it, and the kernel killed offline pods at the
// tier's limit when it touched its own guaranteed memory.
func TestLoopReserveMakesRoomBeforeStart(t *testing.T) {
	dir := t.TempDir()
	proc := &fakeProc{dir: dir}
	cg := &fakeCgroups{pods: map[string]*cgroup.Usage{
		"on":   {MemoryWorkingSet: 1 << 30},
		"off1": {MemoryWorkingSet: 1 << 30},
	}}
	clk := clock.NewManual(time.Unix(1000, 0))
	now := clk.Now()
	var mu sync.Mutex
	pods := []overcommit.Pod{
		{ID: "on", Tier: cgroup.Online, Request: overcommit.Resources{CPUMillis: 1000, MemoryBytes: 4 << 30}},
		{ID: "off1", Tier: cgroup.Offline, StartedAt: now, Request: overcommit.Resources{CPUMillis: 500, MemoryBytes: 1 << 30}},
	}
	loop, err := overcommit.NewLoop(overcommit.Config{
		Cgroups:  cg,
		Pods:     overcommit.PodSourceFunc(func() []overcommit.Pod { mu.Lock(); defer mu.Unlock(); return slices.Clone(pods) }),
		Killer:   overcommit.KillerFunc(func(context.Context, string, string) error { return nil }),
		ProcRoot: dir,
		Clock:    clk,
	})
	if err != nil {
		t.Fatal(err)
	}
	lastLimit := func() int64 {
		cg.mu.Lock()
		defer cg.mu.Unlock()
		return cg.sets[len(cg.sets)-1].MemoryLimit
	}
	tick := func() {
		t.Helper()
		clk.Advance(time.Second)
		proc.advance(t, 50, 150, 8<<20)
		if _, err := loop.Tick(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	// A reservation before the loop limited the tier writes nothing.
	if err := loop.Reserve("early", overcommit.Resources{MemoryBytes: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	cg.mu.Lock()
	if len(cg.sets) != 0 {
		t.Fatalf("a reservation before any tick wrote %+v", cg.sets)
	}
	cg.mu.Unlock()
	loop.Release("early")
	tick()
	base := lastLimit()
	if base <= 1<<30 {
		t.Fatalf("offline memory limit %d: want the guarantee (1 GiB) and lent idle memory", base)
	}

	const req = 512 << 20
	if err := loop.Reserve("off2", overcommit.Resources{CPUMillis: 250, MemoryBytes: req}); err != nil {
		t.Fatal(err)
	}
	if got := lastLimit(); got != base+req {
		t.Fatalf("after Reserve the limit is %d, want %d (raised by the request at once)", got, base+req)
	}
	if err := loop.Reserve("off2", overcommit.Resources{MemoryBytes: req}); err != nil || lastLimit() != base+req {
		t.Fatalf("reserving again: %v, limit %d; want nothing changed", err, lastLimit())
	}
	// Ticks before the pod's cgroup shows keep its room.
	for range 2 {
		tick()
		if got := lastLimit(); got != base+req {
			t.Fatalf("tick before the pod shows: limit %d, want %d", got, base+req)
		}
	}
	// The pod shows: its own sample counts it; the reservation is gone.
	mu.Lock()
	pods = append(pods, overcommit.Pod{ID: "off2", Tier: cgroup.Offline, StartedAt: clk.Now(), Request: overcommit.Resources{CPUMillis: 250, MemoryBytes: req}})
	mu.Unlock()
	cg.mu.Lock()
	cg.pods["off2"] = &cgroup.Usage{}
	cg.mu.Unlock()
	tick()
	if got := lastLimit(); got != base+req {
		t.Fatalf("with the pod running: limit %d, want %d", got, base+req)
	}
	// It ends: the room goes back (no reservation lingers).
	mu.Lock()
	pods = pods[:2]
	mu.Unlock()
	tick()
	if got := lastLimit(); got != base {
		t.Fatalf("after the pod ended: limit %d, want %d", got, base)
	}

	// A pod that never starts gives its room back when released.
	if err := loop.Reserve("off3", overcommit.Resources{MemoryBytes: req}); err != nil {
		t.Fatal(err)
	}
	tick()
	if got := lastLimit(); got != base+req {
		t.Fatalf("reserved off3: limit %d, want %d", got, base+req)
	}
	loop.Release("off3")
	tick()
	if got := lastLimit(); got != base {
		t.Fatalf("after Release: limit %d, want %d", got, base)
	}
	// And one never released counts no longer than ReservationTTL.
	if err := loop.Reserve("off4", overcommit.Resources{MemoryBytes: req}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(overcommit.ReservationTTL)
	tick()
	if got := lastLimit(); got != base {
		t.Fatalf("after the reservation's TTL: limit %d, want %d", got, base)
	}
}
