package nodelet_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/nodelet"
	"github.com/sluicehq/sluice/nodelet/cgroup"
	"github.com/sluicehq/sluice/nodelet/overcommit"
	"github.com/sluicehq/sluice/nodelet/runtime/sim"
)

// usageDispatcher is a fakeDispatcher that also takes heartbeats
// (nodelet.UsageReporter).
type usageDispatcher struct {
	*fakeDispatcher
	hmu    sync.Mutex
	usages []api.NodeUsage
	fail   bool // fail every Heartbeat
}

var _ nodelet.UsageReporter = (*usageDispatcher)(nil)

func (d *usageDispatcher) Heartbeat(ctx context.Context, node string, u api.NodeUsage) error {
	if _, ok := ctx.Deadline(); !ok {
		return errors.New("fake: heartbeat without a deadline")
	}
	d.hmu.Lock()
	defer d.hmu.Unlock()
	if d.fail {
		return errors.New("fake: dispatcher unavailable")
	}
	d.usages = append(d.usages, u)
	return nil
}

func (d *usageDispatcher) heartbeats() []api.NodeUsage {
	d.hmu.Lock()
	defer d.hmu.Unlock()
	return append([]api.NodeUsage(nil), d.usages...)
}

// fakeCgroups gives every pod of a tier the same working set and a CPU
// counter that only grows; it records the offline tier's CPU quotas set,
// and applies no limit.
type fakeCgroups struct {
	mu     sync.Mutex
	mem    map[cgroup.Tier]uint64
	cpu    uint64
	quotas map[int64]bool // offline CPU quotas set, in µs per CFS period
}

func (f *fakeCgroups) PodUsage(t cgroup.Tier, _ string) (cgroup.Usage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cpu += uint64(time.Millisecond)
	return cgroup.Usage{CPUUsageNS: f.cpu, MemoryWorkingSet: f.mem[t]}, nil
}

func (f *fakeCgroups) EndUsageRound() {}

func (f *fakeCgroups) SetTier(t cgroup.Tier, l cgroup.Limits) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t == cgroup.Offline {
		if f.quotas == nil {
			f.quotas = map[int64]bool{}
		}
		f.quotas[l.CPUQuotaUS] = true
	}
	return nil
}

// quotaSet reports whether an offline CPU quota of millis was set, in the
// loop's default CFS period of 100 ms.
func (f *fakeCgroups) quotaSet(millis int64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.quotas[millis*100]
}

// fakeOvercommit is an overcommit loop configuration over fake cgroups and
// a fake /proc of an idle host with plenty of free memory.
func fakeOvercommit(t *testing.T, cg *fakeCgroups) *overcommit.Config {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"stat":    "cpu  100 0 0 900 0 0 0 0 0 0\ncpu0 0 0 0 0 0 0 0 0 0 0\ncpu1 0 0 0 0 0 0 0 0 0 0\n",
		"meminfo": "MemTotal: 16777216 kB\nMemAvailable: 15728640 kB\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return &overcommit.Config{Period: 5 * time.Millisecond, Cgroups: cg, ProcRoot: dir}
}

// TestHeartbeatSendsOvercommitUsage: with an overcommit loop and a
// dispatcher that takes usage, the agent sends the loop's per-tier usage
// every HeartbeatPeriod, the total being the tiers' sum, and each running
// pod's usage under its task's ID.
func TestHeartbeatSendsOvercommitUsage(t *testing.T) {
	host := sim.NewHost()
	defer host.Close()
	d := &usageDispatcher{fakeDispatcher: newFakeDispatcher()}
	cg := &fakeCgroups{mem: map[cgroup.Tier]uint64{cgroup.Online: 100 << 20, cgroup.Offline: 30 << 20}}
	clk := clock.NewManual(time.Time{})
	h := newHarness(t, host, d.fakeDispatcher, func(c *nodelet.Config) {
		c.Dispatcher = d
		c.Overcommit = fakeOvercommit(t, cg)
		c.HeartbeatPeriod = 10 * time.Millisecond
		c.Clock = clk
	})
	// driven is cond, after moving the clock by an overcommit period: the
	// loops measure and send as the test waits.
	driven := func(cond func() bool) func() bool {
		return func() bool {
			clk.Advance(5 * time.Millisecond)
			return cond()
		}
	}
	on := simPod("on", 1, 0, 0)
	on.Tier = cgroup.Online
	d.setTarget(1, on, simPod("off", 1, 0, 0))

	want := func(u api.NodeUsage) bool {
		return u.Online.Memory == 100<<20 && u.Offline.Memory == 30<<20 &&
			u.Total.Memory == u.Online.Memory+u.Offline.Memory && u.Total.CPU == u.Online.CPU+u.Offline.CPU &&
			slices.Equal(taskUsages(u), []string{"task-off offline 31457280", "task-on online 104857600"})
	}
	eventually(t, 5*time.Second, "a heartbeat with both pods' usage", driven(func() bool {
		hb := d.heartbeats()
		return len(hb) > 0 && want(hb[len(hb)-1])
	}))
	for i, u := range d.heartbeats() {
		if err := u.Validate(); err != nil || u.Total.CPU != u.Online.CPU+u.Offline.CPU || u.Total.Memory != u.Online.Memory+u.Offline.Memory {
			t.Errorf("heartbeat %d: %+v (%v)", i, u, err)
		}
	}
	if s := h.agent.Stats(); s.Heartbeats == 0 || s.HeartbeatErrors != 0 {
		t.Errorf("stats: %d heartbeats, %d errors", s.Heartbeats, s.HeartbeatErrors)
	}

	// Failures are counted, not fatal, and heartbeats resume.
	d.hmu.Lock()
	d.fail = true
	d.hmu.Unlock()
	eventually(t, 5*time.Second, "failed heartbeats counted", driven(func() bool { return h.agent.Stats().HeartbeatErrors >= 2 }))
	d.hmu.Lock()
	d.fail, d.usages = false, nil
	d.hmu.Unlock()
	eventually(t, 5*time.Second, "heartbeats again", driven(func() bool { return len(d.heartbeats()) > 0 }))

	// Run's goroutines, the heartbeat sender and the overcommit loop among
	// them, end with Close: none still waits on the clock.
	h.close()
	if n := clk.Timers(); n != 0 {
		t.Errorf("%d timers armed after Close", n)
	}
}

// TestHeartbeatCarriesOvercommitDecision: each heartbeat of an agent with
// an overcommit loop carries the offline tier's quota the loop decided at
// the step of its usage: the CPU quota between the floor and ceiling the
// loop was given, growing on an idle host up to the ceiling, and the
// memory limit (the guarantee plus what is lent of the online pods' idle
// memory) and guarantee the loop holds.
func TestHeartbeatCarriesOvercommitDecision(t *testing.T) {
	host := sim.NewHost()
	defer host.Close()
	d := &usageDispatcher{fakeDispatcher: newFakeDispatcher()}
	// The online pod uses 16 MiB of the 64 MiB it asked for: the offline
	// tier may borrow of the rest.
	cg := &fakeCgroups{mem: map[cgroup.Tier]uint64{cgroup.Online: 16 << 20, cgroup.Offline: 30 << 20}}
	start := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	clk := clock.NewManual(start)
	oc := fakeOvercommit(t, cg)
	oc.Params = overcommit.Params{OfflineCPUMinMillis: 300, OfflineCPUMaxMillis: 1700}
	h := newHarness(t, host, d.fakeDispatcher, func(c *nodelet.Config) {
		c.Dispatcher = d
		c.Overcommit = oc
		c.HeartbeatPeriod = 10 * time.Millisecond
		c.Clock = clk
	})
	on := simPod("on", 1, 0, 0)
	on.Tier = cgroup.Online
	d.setTarget(1, on, simPod("off", 1, 0, 0))
	eventually(t, 5*time.Second, "a heartbeat of both pods with the CPU quota at its ceiling", func() bool {
		clk.Advance(5 * time.Millisecond)
		hb := d.heartbeats()
		if len(hb) == 0 {
			return false
		}
		u := hb[len(hb)-1]
		return len(u.Tasks) == 2 && u.Overcommit != nil && u.Overcommit.CPUQuota == 1700
	})

	hb := d.heartbeats()
	var prev api.OvercommitStatus
	for i, u := range hb {
		o := u.Overcommit
		if o == nil {
			t.Fatalf("heartbeat %d has no overcommit status: %+v", i, u)
		}
		if err := u.Validate(); err != nil || o.CPUMin != 300 || o.CPUMax != 1700 || o.CPUQuota < prev.CPUQuota {
			t.Errorf("heartbeat %d: %+v (%v); want the floor 300, the ceiling 1700 and a quota from %d up", i, *o, err, prev.CPUQuota)
		}
		if !cg.quotaSet(o.CPUQuota) {
			t.Errorf("heartbeat %d: CPU quota %d, which the loop never set", i, o.CPUQuota)
		}
		if !o.Decided.After(prev.Decided) || o.Decided.Before(start) || o.Decided.After(clk.Now()) || o.Decided.Location() != time.UTC {
			t.Errorf("heartbeat %d decided at %v, after %v: want a later step's time, in UTC", i, o.Decided, prev.Decided)
		}
		prev = *o
	}
	// Settled (an idle host, pods that use the same every period), the
	// loop decides the same at every step: the last heartbeat says what
	// the loop holds now.
	_, dec, ok := h.agent.Overcommit().LastStep()
	last := hb[len(hb)-1].Overcommit
	if !ok || last.CPUQuota != dec.CPU.OfflineQuotaMillis || last.CPUMin != dec.CPU.MinMillis || last.CPUMax != dec.CPU.MaxMillis ||
		last.MemoryLimit != dec.Memory.OfflineLimitBytes || last.MemoryGuaranteed != dec.Memory.GuaranteedBytes {
		t.Errorf("last heartbeat's status %+v; the loop's decision: CPU %+v, memory %+v", *last, dec.CPU, dec.Memory)
	}
	if last.MemoryGuaranteed != 64<<20 || last.MemoryLimit <= last.MemoryGuaranteed {
		t.Errorf("memory guaranteed %d, limit %d: want the offline pod's request (%d) guaranteed and more lent", last.MemoryGuaranteed, last.MemoryLimit, 64<<20)
	}
}

// taskUsages lists a heartbeat's per-task usage as "task qos memory",
// sorted.
func taskUsages(u api.NodeUsage) []string {
	var out []string
	for _, t := range u.Tasks {
		out = append(out, fmt.Sprintf("%s %s %d", t.TaskID, t.QoS, t.Memory))
	}
	slices.Sort(out)
	return out
}

// TestHeartbeatNeedsOvercommit: without an overcommit loop there is no
// usage to send, and the agent sends no heartbeat.
func TestHeartbeatNeedsOvercommit(t *testing.T) {
	host := sim.NewHost()
	defer host.Close()
	// timers is how many timers an agent on a manual clock has armed once
	// its pod runs: a heartbeat sender would have one more.
	timers := func(d nodelet.Dispatcher, fd *fakeDispatcher, id string) int {
		clk := clock.NewManual(time.Time{})
		h := newHarness(t, host, fd, func(c *nodelet.Config) {
			c.Dispatcher = d
			c.HeartbeatPeriod = time.Millisecond
			c.Clock = clk
		})
		defer h.close()
		fd.setTarget(1, simPod(id, 1, 0, 0))
		eventually(t, 5*time.Second, id+" running", func() bool { return len(fd.find(id, api.TaskRunning)) == 1 })
		h.barrier()
		if s := h.agent.Stats(); s.Heartbeats != 0 {
			t.Errorf("%d heartbeats without an overcommit loop", s.Heartbeats)
		}
		return clk.Timers()
	}
	plain := newFakeDispatcher()
	d := &usageDispatcher{fakeDispatcher: newFakeDispatcher()}
	if with, without := timers(d, d.fakeDispatcher, "a"), timers(plain, plain, "b"); with != without {
		t.Errorf("an agent whose dispatcher takes heartbeats has %d timers armed, one whose does not %d: want the same, without an overcommit loop", with, without)
	}
	if hb := d.heartbeats(); len(hb) != 0 {
		t.Errorf("heartbeats without an overcommit loop: %+v", hb)
	}
}

func TestHeartbeatPeriodValidated(t *testing.T) {
	host := sim.NewHost()
	defer host.Close()
	_, err := nodelet.New(nodelet.Config{Node: "n1", Runtime: sim.New(host), Dispatcher: newFakeDispatcher(), HeartbeatPeriod: -time.Second})
	if err == nil || !strings.Contains(err.Error(), "HeartbeatPeriod") {
		t.Errorf("New with a negative HeartbeatPeriod: %v", err)
	}
}

// TestHeartbeatSendsRuntimeUsage: with RuntimeUsage and the simulated
// runtime, the agent sends what the running pods' specs say they use, in
// the overcommit loop's shape: each pod under its task and tier, the
// tiers' sums and their total; a pod that ended is no longer in it.
func TestHeartbeatSendsRuntimeUsage(t *testing.T) {
	host := sim.NewHost()
	defer host.Close()
	d := &usageDispatcher{fakeDispatcher: newFakeDispatcher()}
	newHarness(t, host, d.fakeDispatcher, func(c *nodelet.Config) {
		c.Runtime = sim.New(host)
		c.Dispatcher = d
		c.RuntimeUsage = true
		c.HeartbeatPeriod = 10 * time.Millisecond
	})
	withUsage := func(p nodelet.DesiredPod, u api.SimUsage) nodelet.DesiredPod {
		p.Pod.Sim = &api.SimSpec{RunTime: api.Duration(time.Hour), Usage: &u}
		return p
	}
	on := withUsage(simPod("on", 1, 0, 0), api.SimUsage{CPU: 250, Memory: 100 << 20})
	on.Tier = cgroup.Online
	off := withUsage(simPod("off", 1, 0, 0), api.SimUsage{CPU: 40, Memory: 30 << 20})
	idle := simPod("idle", 1, 0, 0)
	d.setTarget(1, on, off, idle)

	want := []string{"task-idle offline 0", "task-off offline 31457280", "task-on online 104857600"}
	eventually(t, 5*time.Second, "a heartbeat with the three pods' usage", func() bool {
		hb := d.heartbeats()
		return len(hb) > 0 && slices.Equal(taskUsages(hb[len(hb)-1]), want)
	})
	hb := d.heartbeats()
	u := hb[len(hb)-1]
	if err := u.Validate(); err != nil {
		t.Fatalf("heartbeat %+v: %v", u, err)
	}
	if u.Overcommit != nil {
		t.Errorf("a heartbeat without an overcommit loop has an overcommit status: %+v", *u.Overcommit)
	}
	wantTiers := api.NodeUsage{Online: api.Usage{CPU: 250, Memory: 100 << 20}, Offline: api.Usage{CPU: 40, Memory: 30 << 20},
		Total: api.Usage{CPU: 290, Memory: 130 << 20}}
	if u.Online != wantTiers.Online || u.Offline != wantTiers.Offline || u.Total != wantTiers.Total {
		t.Errorf("tiers: total %+v, online %+v, offline %+v; want %+v", u.Total, u.Online, u.Offline, wantTiers)
	}
	d.setTarget(2, on)
	eventually(t, 5*time.Second, "a heartbeat without the stopped pods", func() bool {
		hb := d.heartbeats()
		return len(hb) > 0 && slices.Equal(taskUsages(hb[len(hb)-1]), []string{"task-on online 104857600"})
	})
}

// TestRuntimeUsageValidated: RuntimeUsage needs a runtime that reports
// usage, and excludes an overcommit loop.
func TestRuntimeUsageValidated(t *testing.T) {
	host := sim.NewHost()
	defer host.Close()
	_, err := nodelet.New(nodelet.Config{Node: "n1", Runtime: newCounting(sim.New(host)), Dispatcher: newFakeDispatcher(), RuntimeUsage: true})
	if err == nil || !strings.Contains(err.Error(), "runtime.Meter") {
		t.Errorf("New with RuntimeUsage over a runtime without usage: %v", err)
	}
	_, err = nodelet.New(nodelet.Config{Node: "n1", Runtime: sim.New(host), Dispatcher: newFakeDispatcher(), RuntimeUsage: true,
		Overcommit: fakeOvercommit(t, &fakeCgroups{})})
	if err == nil || !strings.Contains(err.Error(), "exclusive") {
		t.Errorf("New with RuntimeUsage and Overcommit: %v", err)
	}
	if _, err := nodelet.New(nodelet.Config{Node: "n1", Runtime: sim.New(host), Dispatcher: newFakeDispatcher(), RuntimeUsage: true}); err != nil {
		t.Errorf("New with RuntimeUsage over the simulated runtime: %v", err)
	}
}
