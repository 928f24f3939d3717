package nodelet_test

import (
	"testing"

	"github.com/sluicehq/sluice/nodelet"
	"github.com/sluicehq/sluice/nodelet/cgroup"
	"github.com/sluicehq/sluice/nodelet/cgroup/cgrouptest"
)

// TestEnsureTiers: online work gets no quota and a high weight; offline
// work is marked idle where the kernel has cpu.idle; both hold when the
// tiers exist already.
func TestEnsureTiers(t *testing.T) {
	m := cgrouptest.NewManager(t)
	idle, err := nodelet.EnsureTiers(m)
	if err != nil {
		t.Fatal(err)
	}
	on, err := m.TierLimits(cgroup.Online)
	if err != nil || on.CPUQuotaUS != -1 || on.CPUShares != 8192 || on.CPUIdle != 0 {
		t.Errorf("online tier %+v, %v; want no quota, shares 8192, not idle", on, err)
	}
	off, err := m.TierLimits(cgroup.Offline)
	if err != nil || (off.CPUIdle == 1) != idle {
		t.Errorf("offline tier %+v, %v; want idle %v", off, err, idle)
	}
	t.Logf("offline tier idle: %v", idle)

	// A restart finds the tiers in place, the offline one idle.
	again, err := nodelet.EnsureTiers(m)
	if err != nil || again != idle {
		t.Errorf("EnsureTiers again: idle %v, %v; want %v", again, err, idle)
	}
}
