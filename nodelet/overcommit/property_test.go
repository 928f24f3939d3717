package overcommit_test

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/seedtest"
	"github.com/sluicehq/sluice/nodelet/cgroup"
	"github.com/sluicehq/sluice/nodelet/overcommit"
)

func randParams(r *rand.Rand) overcommit.Params {
	p := overcommit.Params{
		CPUWatermark:      0.3 + 0.7*r.Float64(),
		CPUGrowFactor:     1 + r.Float64(),
		CPUGrowStepMillis: r.Int64N(500),
		CPUShrinkFactor:   0.05 + 0.95*r.Float64(),
		MemWatermark:      0.3 + 0.7*r.Float64(),
		MemLendRatio:      r.Float64(),
		MemLendKnee:       r.Float64() * 0.5,
		KillFreeFraction:  r.Float64() * 0.2,
		KillGrace:         time.Duration(r.IntN(10)) * time.Second,
		EWMAAlpha:         0.01 + 0.99*r.Float64(),
	}
	p.CPUDeadband = r.Float64() * p.CPUWatermark / 2
	p.MemLendRatioAbove = r.Float64() * p.MemLendRatio
	if r.IntN(2) == 0 {
		p.OfflineCPUMinMillis = 1 + r.Int64N(2000)
		p.OfflineCPUMaxMillis = p.OfflineCPUMinMillis + r.Int64N(8000)
		p.OfflineCPUInitMillis = r.Int64N(12000)
	}
	return p
}

// randStep returns a host sample and a pod set; numbers may be wild
// (negative, larger than capacity) to show that Step clamps rather than
// trusts them.
func randStep(r *rand.Rand, pods []overcommit.PodSample) (overcommit.HostSample, []overcommit.PodSample) {
	h := overcommit.HostSample{
		CPUCapacityMillis: 1000 * (1 + r.Int64N(64)),
		MemTotal:          (1 + r.Int64N(512)) << 30,
	}
	h.CPUUsedMillis = r.Int64N(h.CPUCapacityMillis*5/4+1) - 10
	h.MemAvailable = r.Int64N(h.MemTotal+1) - r.Int64N(2)
	if r.IntN(4) == 0 || len(pods) == 0 {
		pods = pods[:0]
		for i := range r.IntN(40) {
			tier := cgroup.Online
			if r.IntN(2) == 0 {
				tier = cgroup.Offline
			}
			pods = append(pods, overcommit.PodSample{
				ID: fmt.Sprintf("p%d", i), Tier: tier, Priority: r.IntN(5),
				StartedAt: time.Unix(0, 0).Add(time.Duration(r.IntN(1000)) * time.Second),
			})
		}
	}
	for i := range pods {
		p := &pods[i]
		p.Request = overcommit.Resources{CPUMillis: r.Int64N(4000), MemoryBytes: r.Int64N(16 << 30)}
		p.CPUUsedMillis = r.Int64N(4000) - 5
		p.MemoryBytes = r.Int64N(16<<30) - 5
	}
	return h, pods
}

// TestProperties: over random parameters and sample sequences, the offline
// quota stays within [min, max], kills name only offline pods, every
// offline pod gets guaranteed <= limit and the offline memory limit is at
// least the guarantee; and the controller is deterministic.
func TestProperties(t *testing.T) {
	r := seedtest.Rand(t)
	for run := range 200 {
		p := randParams(r)
		a, err := overcommit.New(p)
		if err != nil {
			t.Fatalf("run %d: params %+v: %v", run, p, err)
		}
		b, _ := overcommit.New(p)
		var pods []overcommit.PodSample
		now := time.Unix(1000, 0)
		for step := range 50 {
			var h overcommit.HostSample
			h, pods = randStep(r, pods)
			now = now.Add(time.Duration(1+r.IntN(3000)) * time.Millisecond)
			d := a.Step(now, h, pods)
			e := b.Step(now, h, pods)
			if !reflect.DeepEqual(d, e) {
				t.Fatalf("run %d step %d: same inputs, different decisions:\n%+v\n%+v", run, step, d, e)
			}
			where := fmt.Sprintf("run %d step %d (params %+v host %+v)", run, step, p, h)
			if q := d.CPU.OfflineQuotaMillis; q < d.CPU.MinMillis || q > d.CPU.MaxMillis || d.CPU.MinMillis < 1 {
				t.Fatalf("%s: quota %d outside [%d, %d]", where, q, d.CPU.MinMillis, d.CPU.MaxMillis)
			}
			if p.OfflineCPUMinMillis != 0 && d.CPU.MinMillis != p.OfflineCPUMinMillis {
				t.Fatalf("%s: floor %d, configured %d", where, d.CPU.MinMillis, p.OfflineCPUMinMillis)
			}
			if d.Memory.OfflineLimitBytes < d.Memory.GuaranteedBytes {
				t.Fatalf("%s: memory limit %d < guarantee %d", where, d.Memory.OfflineLimitBytes, d.Memory.GuaranteedBytes)
			}
			if d.Memory.LendableBytes > d.Memory.OnlineIdleBytes || d.Memory.LendableBytes < 0 {
				t.Fatalf("%s: lendable %d of idle %d", where, d.Memory.LendableBytes, d.Memory.OnlineIdleBytes)
			}
			tier := map[string]cgroup.Tier{}
			for _, p := range pods {
				tier[p.ID] = p.Tier
			}
			for _, k := range d.Kills {
				if tier[k.ID] != cgroup.Offline || k.Reason == "" {
					t.Fatalf("%s: kill %+v of a %q pod", where, k, tier[k.ID])
				}
			}
			for _, pr := range d.Pods {
				if tier[pr.ID] != cgroup.Offline {
					t.Fatalf("%s: resources for non-offline pod %s", where, pr.ID)
				}
				if pr.Guaranteed.CPUMillis > pr.Limit.CPUMillis || pr.Guaranteed.MemoryBytes > pr.Limit.MemoryBytes ||
					pr.Limit.CPUMillis > d.CPU.OfflineQuotaMillis || pr.Guaranteed.CPUMillis < 0 {
					t.Fatalf("%s: pod %+v (quota %d)", where, pr, d.CPU.OfflineQuotaMillis)
				}
			}
			if len(d.Report.Pods) != len(pods) {
				t.Fatalf("%s: report has %d pods, want %d", where, len(d.Report.Pods), len(pods))
			}
		}
	}
}

// TestBorrowRatioFalls: as idle online memory grows, the amount lent never
// falls and the borrowing ratio never rises.
func TestBorrowRatioFalls(t *testing.T) {
	r := seedtest.Rand(t)
	for range 50 {
		p := randParams(r)
		p.MemWatermark = 1
		c, err := overcommit.New(p)
		if err != nil {
			t.Fatal(err)
		}
		h := overcommit.HostSample{CPUCapacityMillis: 4000, MemTotal: 100 << 30, MemAvailable: 100 << 30}
		prevLend, prevRatio := int64(-1), 2.0
		for idle := int64(0); idle <= 100<<30; idle += 1 << 30 {
			pods := []overcommit.PodSample{{ID: "on", Tier: cgroup.Online, Request: overcommit.Resources{MemoryBytes: idle}}}
			d := c.Step(time.Unix(0, 0), h, pods).Memory
			if d.LendableBytes < prevLend || (idle > 0 && d.BorrowRatio > prevRatio+1e-9) {
				t.Fatalf("params %+v idle %d: lend %d (prev %d) ratio %v (prev %v)", p, idle, d.LendableBytes, prevLend, d.BorrowRatio, prevRatio)
			}
			prevLend = d.LendableBytes
			if idle > 0 {
				prevRatio = d.BorrowRatio
			}
		}
	}
}

func TestParamsValidate(t *testing.T) {
	err := overcommit.Params{CPUWatermark: 2, MemLendRatio: -1, OfflineCPUMinMillis: 500, OfflineCPUMaxMillis: 100, KillGrace: -time.Second}.Validate()
	if err == nil {
		t.Fatal("invalid params accepted")
	}
	for _, want := range []string{"CPUWatermark", "MemLendRatio", "OfflineCPUMinMillis 500 > OfflineCPUMaxMillis", "KillGrace"} {
		if !contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
	if err := (overcommit.Params{}).Validate(); err != nil {
		t.Errorf("defaults invalid: %v", err)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// BenchmarkStep: one step with 100 pods (50 online, 50 offline), steady
// state. Allocations per step should be 0.
func BenchmarkStep(b *testing.B) {
	c, err := overcommit.New(overcommit.Params{})
	if err != nil {
		b.Fatal(err)
	}
	pods := make([]overcommit.PodSample, 100)
	for i := range pods {
		tier := cgroup.Online
		if i%2 == 1 {
			tier = cgroup.Offline
		}
		pods[i] = overcommit.PodSample{ID: fmt.Sprintf("pod-%03d", i), Tier: tier, Priority: i % 7,
			StartedAt: time.Unix(int64(i), 0), Request: overcommit.Resources{CPUMillis: 500, MemoryBytes: 1 << 30},
			CPUUsedMillis: int64(100 + i), MemoryBytes: int64(i) << 24}
	}
	h := overcommit.HostSample{CPUCapacityMillis: 32000, CPUUsedMillis: 20000, MemTotal: 128 << 30, MemAvailable: 64 << 30}
	now := time.Unix(10000, 0)
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Second)
		h.CPUUsedMillis = 20000 + (now.Unix()%7)*1000
		_ = c.Step(now, h, pods)
	}
}
