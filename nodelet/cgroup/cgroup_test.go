package cgroup_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/nodelet/cgroup"
	"github.com/sluicehq/sluice/nodelet/cgroup/cgrouptest"
)

func TestMain(m *testing.M) {
	cgrouptest.MaybeSpin()
	os.Exit(m.Run())
}

// file reads one cgroup interface file of path p under the v1 controller
// ctl (or the v2 mount when the manager runs v2).
func file(t *testing.T, m *cgroup.Manager, ctl, p, name string) string {
	t.Helper()
	dir := filepath.Join("/sys/fs/cgroup", ctl, p)
	if m.Mode() == cgroup.ModeV2 {
		t.Skip("raw file checks are written for v1 hierarchies")
	}
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	s := strings.TrimSpace(string(b))
	if rest, ok := strings.CutPrefix(s, "default "); ok {
		s = rest
	}
	return s
}

func TestTiersPodLimitsAndDelete(t *testing.T) {
	m := cgrouptest.NewManager(t)
	t.Logf("mode %v, root %s", m.Mode(), m.Root())

	online := cgroup.Limits{CPUShares: 4096, CPUQuotaUS: -1, MemoryLimit: -1, PidsMax: -1}
	offline := cgroup.Limits{CPUShares: 64, CPUQuotaUS: 50000, CPUPeriodUS: 100000, MemoryLimit: 256 << 20, PidsMax: 100}
	if err := m.EnsureTiers(online, offline); err != nil {
		t.Fatalf("EnsureTiers: %v", err)
	}
	off := m.TierPath(cgroup.Offline)
	for _, c := range []struct{ ctl, name, want string }{
		{"cpu", "cpu.cfs_quota_us", "50000"},
		{"cpu", "cpu.cfs_period_us", "100000"},
		{"cpu", "cpu.shares", "64"},
		{"memory", "memory.limit_in_bytes", "268435456"},
		{"pids", "pids.max", "100"},
	} {
		if got := file(t, m, c.ctl, off, c.name); got != c.want {
			t.Errorf("%s/%s = %q, want %q", off, c.name, got, c.want)
		}
	}
	if got := file(t, m, "cpu", m.TierPath(cgroup.Online), "cpu.cfs_quota_us"); got != "-1" {
		t.Errorf("online quota %q, want -1", got)
	}
	got, err := m.TierLimits(cgroup.Offline)
	if err != nil {
		t.Fatal(err)
	}
	got.IOWeight = 0 // the kernel's default (100 with BFQ) since none was set
	if got != offline {
		t.Errorf("TierLimits(offline) = %+v, want %+v", got, offline)
	}

	// A pod with limits, including an I/O weight where the host supports one.
	pod := cgroup.Limits{CPUShares: 512, MemoryLimit: 64 << 20, PidsMax: 16, IOWeight: 200}
	err = m.CreatePod(cgroup.Offline, "p1", pod)
	if errors.Is(err, cgroup.ErrUnsupported) {
		t.Logf("no block I/O weight here: %v", err)
		pod.IOWeight = 0
		err = m.CreatePod(cgroup.Offline, "p1", pod)
	}
	if err != nil {
		t.Fatalf("CreatePod: %v", err)
	}
	pp := m.PodPath(cgroup.Offline, "p1")
	if g := file(t, m, "memory", pp, "memory.limit_in_bytes"); g != "67108864" {
		t.Errorf("pod memory limit %q", g)
	}
	if g := file(t, m, "pids", pp, "pids.max"); g != "16" {
		t.Errorf("pod pids.max %q", g)
	}
	if pod.IOWeight != 0 {
		w := "blkio.weight"
		if _, err := os.Stat(filepath.Join("/sys/fs/cgroup/blkio", pp, w)); err != nil {
			w = "blkio.bfq.weight"
		}
		if g := file(t, m, "blkio", pp, w); g != "200" {
			t.Errorf("pod %s %q", w, g)
		}
	}
	if err := m.SetPod(cgroup.Offline, "p1", cgroup.Limits{MemoryLimit: 32 << 20}); err != nil {
		t.Fatal(err)
	}
	if pl, err := m.PodLimits(cgroup.Offline, "p1"); err != nil || pl.MemoryLimit != 32<<20 || pl.PidsMax != 16 || pl.CPUShares != 512 {
		t.Errorf("PodLimits = %+v, %v", pl, err)
	}
	if ids, err := m.Pods(cgroup.Offline); err != nil || len(ids) != 1 || ids[0] != "p1" {
		t.Errorf("Pods = %v, %v", ids, err)
	}

	// A real process in the pod.
	sleep := cgrouptest.Start(t, m, cgroup.Offline, "p1", exec.Command("sleep", "60"))
	pids, err := m.PodProcs(cgroup.Offline, "p1")
	if err != nil || len(pids) != 1 || pids[0] != sleep.Process.Pid {
		t.Fatalf("PodProcs = %v, %v; want [%d]", pids, err, sleep.Process.Pid)
	}
	s, err := m.PodSample(cgroup.Offline, "p1")
	if err != nil {
		t.Fatal(err)
	}
	if s.Pids != 1 || s.PidsLimit != 16 || s.MemoryLimit != 32<<20 {
		t.Errorf("PodSample = %+v", s)
	}
	if err := m.DeletePod(cgroup.Offline, "p1"); err == nil || !strings.Contains(err.Error(), pp) {
		t.Fatalf("DeletePod of a busy pod: %v, want an error naming %s", err, pp)
	}
	_ = sleep.Process.Kill()
	_ = sleep.Wait()
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
	if err := m.SetPod(cgroup.Offline, "p1", pod); !errors.As(err, &ce) || ce.Path != pp || !errors.Is(err, cgroup.ErrNotFound) {
		t.Errorf("SetPod after delete: %v", err)
	}
	if err := m.DeletePod(cgroup.Offline, "p1"); !errors.Is(err, cgroup.ErrNotFound) {
		t.Errorf("second DeletePod: %v, want ErrNotFound", err)
	}
}

// TestDeleteEveryHierarchy: a container runtime creates the pod cgroup in
// every hierarchy (cpuset, devices, freezer, the named systemd one...);
// DeletePod removes all of them, children included.
func TestDeleteEveryHierarchy(t *testing.T) {
	m := cgrouptest.NewManager(t)
	if m.Mode() != cgroup.ModeV1 {
		t.Skip("v1 only")
	}
	if err := m.CreatePod(cgroup.Online, "rt", cgroup.Limits{}); err != nil {
		t.Fatal(err)
	}
	pp := m.PodPath(cgroup.Online, "rt")
	var made []string
	for _, h := range []string{"cpuset", "devices", "freezer", "systemd", "cpu", "memory"} {
		d := filepath.Join("/sys/fs/cgroup", h, pp, "inner")
		if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", h)); err != nil {
			continue
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatalf("mkdir %s: %v", d, err)
		}
		made = append(made, h)
	}
	t.Logf("created in %v", made)
	if err := m.DeletePod(cgroup.Online, "rt"); err != nil {
		t.Fatalf("DeletePod: %v", err)
	}
	if left := cgrouptest.Leftovers(pp); len(left) > 0 {
		t.Errorf("pod left in %v", left)
	}
}

func TestSpinningProcessUsage(t *testing.T) {
	m := cgrouptest.NewManager(t)
	if err := m.CreatePod(cgroup.Online, "spin", cgroup.Limits{}); err != nil {
		t.Fatal(err)
	}
	cgrouptest.Spin(t, m, cgroup.Online, "spin")
	time.Sleep(400 * time.Millisecond)
	s, err := m.PodSample(cgroup.Online, "spin")
	if err != nil {
		t.Fatal(err)
	}
	if s.CPUUsageNS < uint64(50*time.Millisecond) || s.Pids == 0 || s.MemoryUsage == 0 {
		t.Errorf("sample of a spinning pod: %+v", s)
	}
	u, err := m.PodUsage(cgroup.Online, "spin")
	if err != nil {
		t.Fatal(err)
	}
	if u.CPUUsageNS < s.CPUUsageNS || u.MemoryUsage == 0 || u.MemoryWorkingSet > u.MemoryUsage {
		t.Errorf("PodUsage %+v after Sample %+v", u, s)
	}
	if tu, err := m.TierUsage(cgroup.Online); err != nil || tu.CPUUsageNS < u.CPUUsageNS {
		t.Errorf("TierUsage %+v, %v", tu, err)
	}
	if _, err := m.PodUsage(cgroup.Online, "absent"); !errors.Is(err, cgroup.ErrNotFound) {
		t.Errorf("PodUsage of a missing pod: %v", err)
	}
	ts, err := m.TierSample(cgroup.Online)
	if err != nil {
		t.Fatal(err)
	}
	if ts.CPUUsageNS < s.CPUUsageNS {
		t.Errorf("tier usage %d < pod usage %d", ts.CPUUsageNS, s.CPUUsageNS)
	}
}

// TestPodUsageKeepsFilesOpen: PodUsage reads a pod's files again without
// reopening them, and the counters move; a cgroup removed behind the
// Manager's back reads as not found, and read again once created anew;
// EndUsageRound closes the files of pods not read in the round, DeletePod
// those of the pod it removes.
func TestPodUsageKeepsFilesOpen(t *testing.T) {
	m := cgrouptest.NewManager(t)
	other, err := cgroup.New(cgroup.Config{Root: m.Root()})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"spin", "idle"} {
		if err := m.CreatePod(cgroup.Online, id, cgroup.Limits{}); err != nil {
			t.Fatal(err)
		}
	}
	cgrouptest.Spin(t, m, cgroup.Online, "spin")
	fds0 := openFDs(t)
	var last uint64
	for i := range 3 {
		time.Sleep(100 * time.Millisecond)
		u, err := m.PodUsage(cgroup.Online, "spin")
		if err != nil {
			t.Fatal(err)
		}
		if u.CPUUsageNS <= last || u.MemoryUsage == 0 {
			t.Errorf("reading %d: %+v after CPU time %d", i, u, last)
		}
		last = u.CPUUsageNS
		if _, err := m.PodUsage(cgroup.Online, "idle"); err != nil {
			t.Fatal(err)
		}
	}
	if got := openFDs(t) - fds0; got != 6 {
		t.Errorf("%d more files open after reading two pods three times, want 6", got)
	}

	// Removed by someone else, then created again.
	if err := other.DeletePod(cgroup.Online, "idle"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.PodUsage(cgroup.Online, "idle"); !errors.Is(err, cgroup.ErrNotFound) {
		t.Errorf("PodUsage of a removed pod: %v", err)
	}
	if err := other.CreatePod(cgroup.Online, "idle", cgroup.Limits{}); err != nil {
		t.Fatal(err)
	}
	if u, err := m.PodUsage(cgroup.Online, "idle"); err != nil || u.CPUUsageNS != 0 {
		t.Errorf("PodUsage of a pod created again: %+v, %v", u, err)
	}
	// Removed and created again between two readings: the open files are
	// stale (ENODEV) and opened again.
	if err := other.DeletePod(cgroup.Online, "idle"); err != nil {
		t.Fatal(err)
	}
	if err := other.CreatePod(cgroup.Online, "idle", cgroup.Limits{}); err != nil {
		t.Fatal(err)
	}
	if u, err := m.PodUsage(cgroup.Online, "idle"); err != nil || u.CPUUsageNS != 0 {
		t.Errorf("PodUsage of a pod removed and created again: %+v, %v", u, err)
	}
	if got := openFDs(t) - fds0; got != 6 {
		t.Errorf("%d more files open after reopening, want 6", got)
	}

	m.EndUsageRound() // both read in this round: both stay open
	if _, err := m.PodUsage(cgroup.Online, "spin"); err != nil {
		t.Fatal(err)
	}
	m.EndUsageRound() // idle was not read: closed
	if got := openFDs(t) - fds0; got != 3 {
		t.Errorf("%d more files open after a round without idle, want 3", got)
	}
	if _, err := m.PodUsage(cgroup.Online, "idle"); err != nil {
		t.Fatal(err)
	}
	if err := m.DeletePod(cgroup.Online, "idle"); err != nil {
		t.Fatal(err)
	}
	if got := openFDs(t) - fds0; got != 3 {
		t.Errorf("%d more files open after DeletePod, want 3", got)
	}
	m.Close()
	if got := openFDs(t) - fds0; got != 0 {
		t.Errorf("%d more files open after Close, want 0", got)
	}
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

func TestInvalidInput(t *testing.T) {
	if _, err := cgroup.New(cgroup.Config{Root: "relative", Mountpoint: "x"}); err == nil ||
		!strings.Contains(err.Error(), "Root") || !strings.Contains(err.Error(), "Mountpoint") {
		t.Errorf("New with bad config: %v (want both problems)", err)
	}
	m, err := cgroup.New(cgroup.Config{Root: "/sluice-never-created"})
	if err != nil {
		t.Skipf("no cgroups: %v", err)
	}
	for _, id := range []string{"", ".", "..", "a/b"} {
		if err := m.CreatePod(cgroup.Offline, id, cgroup.Limits{}); err == nil {
			t.Errorf("CreatePod(%q) succeeded", id)
		}
	}
	if _, err := m.TierSample("middle"); err == nil {
		t.Error("TierSample of an unknown tier succeeded")
	}
	if _, err := m.TierSample(cgroup.Online); !errors.Is(err, cgroup.ErrNotFound) {
		t.Errorf("TierSample of a missing tree: %v", err)
	}
	if err := m.Delete(); !errors.Is(err, cgroup.ErrNotFound) {
		t.Errorf("Delete of a missing tree: %v", err)
	}
}

// TestCPUIdle: a tier marked idle has cpu.idle set, reads back so, keeps
// it through other writes (a new weight included, which the kernel would
// refuse for an idle group), and the mark clears with -1, taking a weight
// given with it; a kernel without
// cpu.idle refuses it with ErrUnsupported.
func TestCPUIdle(t *testing.T) {
	m := cgrouptest.NewManager(t)
	err := m.EnsureTiers(cgroup.Limits{CPUShares: 8192}, cgroup.Limits{CPUShares: 128, CPUIdle: 1})
	if errors.Is(err, cgroup.ErrUnsupported) {
		t.Skipf("no cpu.idle on this kernel: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	off := m.TierPath(cgroup.Offline)
	if got := file(t, m, "cpu", off, "cpu.idle"); got != "1" {
		t.Errorf("%s cpu.idle = %q, want 1", off, got)
	}
	if got := file(t, m, "cpu", m.TierPath(cgroup.Online), "cpu.idle"); got != "0" {
		t.Errorf("online cpu.idle = %q, want 0", got)
	}
	if l, err := m.TierLimits(cgroup.Offline); err != nil || l.CPUIdle != 1 {
		t.Errorf("TierLimits(offline) = %+v, %v; want CPUIdle 1", l, err)
	}
	// The kernel refuses a weight for an idle group: set up again (as at a
	// restart) or given a weight, the tier stays idle.
	if err := m.EnsureTiers(cgroup.Limits{CPUShares: 8192}, cgroup.Limits{CPUShares: 128, CPUIdle: 1}); err != nil {
		t.Fatalf("EnsureTiers over an idle offline tier: %v", err)
	}
	if err := m.SetTier(cgroup.Offline, cgroup.Limits{CPUShares: 256}); err != nil {
		t.Fatalf("a weight for an idle tier: %v", err)
	}
	if l, err := m.TierLimits(cgroup.Offline); err != nil || l.CPUIdle != 1 {
		t.Errorf("after a weight for the idle tier TierLimits(offline) = %+v, %v; want CPUIdle 1", l, err)
	}
	if err := m.SetTier(cgroup.Offline, cgroup.Limits{CPUQuotaUS: 50000}); err != nil {
		t.Fatal(err)
	}
	if got := file(t, m, "cpu", off, "cpu.idle"); got != "1" {
		t.Errorf("after a quota write cpu.idle = %q, want 1", got)
	}
	// Cleared with a weight, the group takes that weight.
	if err := m.SetTier(cgroup.Offline, cgroup.Limits{CPUIdle: -1, CPUShares: 256}); err != nil {
		t.Fatal(err)
	}
	if l, err := m.TierLimits(cgroup.Offline); err != nil || l.CPUIdle != 0 || l.CPUShares != 256 || file(t, m, "cpu", off, "cpu.idle") != "0" {
		t.Errorf("after clearing: TierLimits %+v, %v; want CPUIdle 0, CPUShares 256", l, err)
	}
	if err := m.SetTier(cgroup.Offline, cgroup.Limits{CPUIdle: -1}); err != nil {
		t.Fatal(err)
	}
	if l, err := m.TierLimits(cgroup.Offline); err != nil || l.CPUIdle != 0 {
		t.Errorf("after clearing again: TierLimits %+v, %v; want CPUIdle 0", l, err)
	}
}
