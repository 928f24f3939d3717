package cgroup_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/nodelet/cgroup"
	"github.com/sluicehq/sluice/nodelet/cgroup/cgrouptest"
	"golang.org/x/sys/unix"
)

// unifiedMount returns where the cgroup2 hierarchy is mounted on this host.
func unifiedMount(t testing.TB) string {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs("/sys/fs/cgroup", &st); err == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
		return "/sys/fs/cgroup"
	}
	return "/sys/fs/cgroup/unified"
}

// unifiedControllers lists the controllers the cgroup2 root offers.
func unifiedControllers(t testing.TB) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(unifiedMount(t), "cgroup.controllers"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}

func readV2(t *testing.T, p, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(unifiedMount(t), p, name))
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	return strings.TrimSpace(string(b))
}

// TestV2Lifecycle runs the v2 backend against the host's cgroup2 mount:
// on a unified host with every controller, on a hybrid host (v1
// controllers, an empty cgroup2 beside them) with none. The tree, pods,
// processes, CPU time from cpu.stat, the refusal to delete a busy pod, the
// recursive delete and ErrNotFound work either way; limits are written and
// read back where the controllers are there, and refused, naming the
// controller, where they are not.
func TestV2Lifecycle(t *testing.T) {
	m := cgrouptest.NewManagerMode(t, cgroup.ModeV2)
	ctl := unifiedControllers(t)
	t.Logf("cgroup2 at %s offers %v; root %s", unifiedMount(t), ctl, m.Root())
	off := m.TierPath(cgroup.Offline)

	if slices.Contains(ctl, "cpu") && slices.Contains(ctl, "memory") && slices.Contains(ctl, "pids") {
		l := cgroup.Limits{CPUShares: 128, CPUQuotaUS: 50000, CPUPeriodUS: 100000, MemoryLimit: 256 << 20, PidsMax: 100}
		if err := m.SetTier(cgroup.Offline, l); err != nil {
			t.Fatal(err)
		}
		for name, want := range map[string]string{"cpu.max": "50000 100000", "cpu.weight": "5", "memory.max": "268435456", "pids.max": "100"} {
			if got := readV2(t, off, name); got != want {
				t.Errorf("%s/%s = %q, want %q", off, name, got, want)
			}
		}
		if err := m.SetTier(cgroup.Offline, cgroup.Limits{CPUQuotaUS: -1, MemoryLimit: -1, PidsMax: -1}); err != nil {
			t.Fatal(err)
		}
		for name, want := range map[string]string{"cpu.max": "max 100000", "memory.max": "max", "pids.max": "max"} {
			if got := readV2(t, off, name); got != want {
				t.Errorf("after unlimiting %s/%s = %q, want %q", off, name, got, want)
			}
		}
		got, err := m.TierLimits(cgroup.Offline)
		if err != nil || got.CPUQuotaUS != -1 || got.CPUPeriodUS != 100000 || got.MemoryLimit != -1 || got.PidsMax != -1 || got.CPUShares != 107 {
			t.Errorf("TierLimits(offline) = %+v, %v", got, err)
		}
	} else {
		var ce *cgroup.Error
		err := m.SetTier(cgroup.Offline, cgroup.Limits{MemoryLimit: 1 << 30})
		if !errors.As(err, &ce) || ce.Path != off || ce.Controller != "memory" {
			t.Errorf("memory limit without a v2 memory controller: %v, want an *Error for %s naming memory", err, off)
		}
	}

	if err := m.CreatePod(cgroup.Offline, "p1", cgroup.Limits{}); err != nil {
		t.Fatalf("CreatePod: %v", err)
	}
	if err := m.CreatePod(cgroup.Offline, "p1", cgroup.Limits{}); err != nil {
		t.Fatalf("CreatePod again: %v", err)
	}
	if ids, err := m.Pods(cgroup.Offline); err != nil || !slices.Equal(ids, []string{"p1"}) {
		t.Errorf("Pods = %v, %v", ids, err)
	}
	pp := m.PodPath(cgroup.Offline, "p1")
	// A runtime's own cgroup below the pod's, holding the process.
	if err := os.Mkdir(filepath.Join(unifiedMount(t), pp, "inner"), 0o755); err != nil {
		t.Fatal(err)
	}
	spin := cgrouptest.Spin(t, m, cgroup.Offline, "p1")
	if err := os.WriteFile(filepath.Join(unifiedMount(t), pp, "inner", "cgroup.procs"), []byte(fmt.Sprint(spin.Process.Pid)), 0); err != nil {
		t.Fatal(err)
	}
	if pids, err := m.PodProcs(cgroup.Offline, "p1"); err != nil || !slices.Equal(pids, []int{spin.Process.Pid}) {
		t.Fatalf("PodProcs = %v, %v; want [%d]", pids, err, spin.Process.Pid)
	}
	var s cgroup.Sample
	for deadline := time.Now().Add(5 * time.Second); s.CPUUsageNS < uint64(20*time.Millisecond) && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		var err error
		if s, err = m.PodSample(cgroup.Offline, "p1"); err != nil {
			t.Fatal(err)
		}
	}
	if s.CPUUsageNS < uint64(20*time.Millisecond) {
		t.Errorf("PodSample of a spinning pod: %+v", s)
	}
	if ts, err := m.TierSample(cgroup.Offline); err != nil || ts.CPUUsageNS < s.CPUUsageNS {
		t.Errorf("TierSample = %+v, %v; want at least the pod's CPU time %d", ts, err, s.CPUUsageNS)
	}
	if err := m.DeletePod(cgroup.Offline, "p1"); err == nil || !strings.Contains(err.Error(), pp) {
		t.Fatalf("DeletePod of a busy pod: %v, want an error naming %s", err, pp)
	}
	if _, err := os.Stat(filepath.Join(unifiedMount(t), pp)); err != nil {
		t.Fatalf("busy pod removed: %v", err)
	}
	_ = spin.Process.Kill()
	_ = spin.Wait()
	if err := m.DeletePod(cgroup.Offline, "p1"); err != nil {
		t.Fatalf("DeletePod: %v", err)
	}
	if left := cgrouptest.Leftovers(pp); len(left) > 0 {
		t.Errorf("pod left in %v", left)
	}
	if _, err := m.PodSample(cgroup.Offline, "p1"); !errors.Is(err, cgroup.ErrNotFound) {
		t.Errorf("PodSample after delete: %v, want ErrNotFound", err)
	}
	var ce *cgroup.Error
	if err := m.SetPod(cgroup.Offline, "p1", cgroup.Limits{PidsMax: 4}); !errors.As(err, &ce) || ce.Path != pp || !errors.Is(err, cgroup.ErrNotFound) {
		t.Errorf("SetPod after delete: %v", err)
	}
	if err := m.AddProc(cgroup.Offline, "p1", os.Getpid()); !errors.Is(err, cgroup.ErrNotFound) {
		t.Errorf("AddProc after delete: %v", err)
	}
	if err := m.DeletePod(cgroup.Offline, "p1"); !errors.Is(err, cgroup.ErrNotFound) {
		t.Errorf("second DeletePod: %v, want ErrNotFound", err)
	}
	if err := m.CreatePod(cgroup.Online, "p2", cgroup.Limits{}); err != nil {
		t.Fatal(err)
	}
	if err := m.Delete(); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if left := cgrouptest.Leftovers(m.Root()); len(left) > 0 {
		t.Errorf("tree left in %v", left)
	}
	if err := m.CreatePod(cgroup.Online, "p3", cgroup.Limits{}); !errors.Is(err, cgroup.ErrNotFound) {
		t.Errorf("CreatePod without its tier: %v, want ErrNotFound", err)
	}
}

// BenchmarkCreateDeletePod creates an empty pod cgroup under a tier and
// deletes it, through each backend this host can run (v2 on a hybrid host
// is the empty cgroup2 mount: no controllers to enable or limit).
func BenchmarkCreateDeletePod(b *testing.B) {
	for _, mode := range []cgroup.Mode{cgroup.ModeV1, cgroup.ModeV2} {
		b.Run("mode="+mode.String(), func(b *testing.B) {
			m := cgrouptest.NewManagerMode(b, mode)
			if m.Mode() != mode {
				b.Skipf("host runs %v", m.Mode())
			}
			for b.Loop() {
				if err := m.CreatePod(cgroup.Offline, "bench", cgroup.Limits{}); err != nil {
					b.Fatal(err)
				}
				if err := m.DeletePod(cgroup.Offline, "bench"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
