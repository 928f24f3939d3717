package cgroup

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/containerd/cgroups/v3"
)

func TestChooseMode(t *testing.T) {
	for _, c := range []struct {
		layout cgroups.CGMode
		v1     bool
		ctl    []string
		want   Mode
	}{
		{cgroups.Unified, false, []string{"cpu", "memory", "pids"}, ModeV2},
		{cgroups.Legacy, true, nil, ModeV1},
		{cgroups.Hybrid, true, nil, ModeV1}, // this host: v1 controllers, empty cgroup2
		{cgroups.Hybrid, true, []string{"hugetlb"}, ModeV1},
		{cgroups.Hybrid, false, []string{"cpu", "memory"}, ModeV2},
		{cgroups.Hybrid, false, nil, 0},
		{cgroups.Unified, false, nil, 0},
		{cgroups.Unavailable, false, nil, 0},
	} {
		got, err := chooseMode(c.layout, c.v1, c.ctl)
		if c.want == 0 {
			if err == nil {
				t.Errorf("chooseMode(%v,%v,%v) = %v, want error", c.layout, c.v1, c.ctl, got)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("chooseMode(%v,%v,%v) = %v, %v; want %v", c.layout, c.v1, c.ctl, got, err, c.want)
		}
	}
}

func TestSharesWeight(t *testing.T) {
	for _, c := range []struct{ shares, weight uint64 }{{2, 1}, {1024, 39}, {262144, 10000}} {
		if w := sharesToWeight(c.shares); w != c.weight {
			t.Errorf("sharesToWeight(%d) = %d, want %d", c.shares, w, c.weight)
		}
		if back := sharesToWeight(weightToShares(c.weight)); back != c.weight {
			t.Errorf("round trip of weight %d gave %d", c.weight, back)
		}
	}
}

func TestSubtreeDeepestFirst(t *testing.T) {
	d := t.TempDir()
	for _, p := range []string{"a/b/c", "a/d"} {
		if err := mkdirAll(d + "/" + p); err != nil {
			t.Fatal(err)
		}
	}
	got, err := subtree([]string{d, d + "/missing"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a/b/c", "a/b", "a/d", "a", "."}
	if len(got) != len(want) {
		t.Fatalf("subtree = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("subtree = %v, want %v", got, want)
		}
	}
}

func mkdirAll(p string) error { return os.MkdirAll(p, 0o755) }

// fakeV2 lays out a cgroup2 tree of plain files under a temporary
// directory: the root offering cpu, memory, pids and io, and the groups
// ps with the interface files the kernel would show (io.weight, or
// io.bfq.weight when bfq is set). It checks what the v2 backend writes
// where this host's cgroup2 mount has no controllers to write to.
func fakeV2(t *testing.T, bfq bool, ps ...string) *v2 {
	t.Helper()
	mount := t.TempDir()
	files := map[string]string{"cgroup.controllers": "cpu memory pids io\n", "cgroup.subtree_control": ""}
	for name, v := range files {
		if err := os.WriteFile(filepath.Join(mount, name), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	group := map[string]string{
		"cgroup.subtree_control": "", "cgroup.controllers": "cpu memory pids io\n", "cgroup.procs": "", "cgroup.type": "domain\n",
		"cpu.weight": "100\n", "cpu.max": "max 100000\n", "cpu.idle": "0\n", "memory.max": "max\n", "pids.max": "max\n",
		"cpu.stat":       "usage_usec 1500\nuser_usec 1000\nsystem_usec 500\nnr_periods 4\nnr_throttled 2\nthrottled_usec 30\n",
		"memory.current": "1000\n", "memory.stat": "anon 700\nfile 300\ninactive_file 300\n",
		"memory.events": "low 0\nhigh 0\nmax 3\noom 1\noom_kill 2\n", "pids.current": "3\n",
	}
	if bfq {
		group["io.bfq.weight"] = "default 100\n"
	} else {
		group["io.weight"] = "default 100\n"
	}
	for _, p := range ps {
		if err := os.MkdirAll(filepath.Join(mount, p), 0o755); err != nil {
			t.Fatal(err)
		}
		for name, v := range group {
			if err := os.WriteFile(filepath.Join(mount, p, name), []byte(v), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return newV2(mount)
}

func readFake(t *testing.T, b *v2, p, name string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(b.dir(p), name))
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// TestV2Writes: the values the v2 backend writes, through the library or
// by hand, in the kernel's formats; a zero half of cpu.max keeps the
// current one; what it reads back; the controllers it enables.
func TestV2Writes(t *testing.T) {
	b := fakeV2(t, false, "/r", "/r/offline")
	l := Limits{CPUShares: 128, CPUQuotaUS: 50000, CPUIdle: 1, MemoryLimit: 256 << 20, PidsMax: 100, IOWeight: 200}
	if err := b.create("/r/offline", l); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"cpu.weight": "5", "cpu.max": "50000 100000", "cpu.idle": "1", "memory.max": "268435456", "pids.max": "100", "io.weight": "200",
	} {
		if got := readFake(t, b, "/r/offline", name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	for _, p := range []string{"/", "/r"} {
		if got := readFake(t, b, p, "cgroup.subtree_control"); got != "+cpu +memory +pids +io" {
			t.Errorf("%s cgroup.subtree_control = %q", p, got)
		}
	}
	if err := b.update("/r/offline", Limits{CPUQuotaUS: -1, CPUPeriodUS: 50000, MemoryLimit: -1, PidsMax: -1}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"cpu.max": "max 50000", "memory.max": "max", "pids.max": "max", "cpu.idle": "1"} {
		if got := readFake(t, b, "/r/offline", name); got != want {
			t.Errorf("after unlimiting %s = %q, want %q", name, got, want)
		}
	}
	got, err := b.limits("/r/offline")
	want := Limits{CPUQuotaUS: -1, CPUPeriodUS: 50000, CPUShares: 107, CPUIdle: 1, MemoryLimit: -1, PidsMax: -1, IOWeight: 200}
	if err != nil || got != want {
		t.Errorf("limits = %+v, %v; want %+v", got, err, want)
	}
	// A weight for an idle group is not written (the kernel would refuse
	// it); one given with the mark's clearing is.
	if err := b.update("/r/offline", Limits{CPUShares: 1024}); err != nil {
		t.Fatal(err)
	}
	if w, idle := readFake(t, b, "/r/offline", "cpu.weight"), readFake(t, b, "/r/offline", "cpu.idle"); w != "5" || idle != "1" {
		t.Errorf("after a weight for an idle group: cpu.weight %q, cpu.idle %q; want 5, 1", w, idle)
	}
	if err := b.update("/r/offline", Limits{CPUIdle: -1, CPUShares: 1024}); err != nil {
		t.Fatal(err)
	}
	if w, idle := readFake(t, b, "/r/offline", "cpu.weight"), readFake(t, b, "/r/offline", "cpu.idle"); w != "39" || idle != "0" {
		t.Errorf("after clearing with a weight: cpu.weight %q, cpu.idle %q; want 39, 0", w, idle)
	}

	s, err := b.stat("/r/offline")
	wantS := Sample{CPUUsageNS: 1500000, CPUPeriods: 4, CPUThrottled: 2, CPUThrottledNS: 30000, MemoryUsage: 1000, MemoryWorkingSet: 700,
		MemoryLimit: math.MaxInt64, Pids: 3, OOMKills: 2, OOMEvents: 1}
	if err != nil || s != wantS {
		t.Errorf("stat = %+v, %v; want %+v", s, err, wantS)
	}

	bfq := fakeV2(t, true, "/r")
	if err := bfq.update("/r", Limits{IOWeight: 300}); err != nil || readFake(t, bfq, "/r", "io.bfq.weight") != "300" {
		t.Errorf("BFQ weight: %v, io.bfq.weight %q", err, readFake(t, bfq, "/r", "io.bfq.weight"))
	}
}

// TestV2Refusals: settings the host cannot take fail with ErrUnsupported
// and name the controller; a missing group is ErrNotFound.
func TestV2Refusals(t *testing.T) {
	b := fakeV2(t, false, "/r")
	for _, f := range []string{"io.weight", "cpu.idle"} {
		if err := os.Remove(filepath.Join(b.dir("/r"), f)); err != nil {
			t.Fatal(err)
		}
	}
	var e *Error
	for _, c := range []struct {
		l   Limits
		ctl string
	}{{Limits{IOWeight: 100}, "io"}, {Limits{CPUIdle: 1}, "cpu"}} {
		if err := b.update("/r", c.l); !errors.Is(err, ErrUnsupported) || !errors.As(err, &e) || e.Controller != c.ctl || e.Path != "/r" {
			t.Errorf("update %+v: %v, want ErrUnsupported naming %s", c.l, err, c.ctl)
		}
	}
	if err := b.update("/r/none", Limits{PidsMax: 1}); !errors.Is(err, ErrNotFound) {
		t.Errorf("update of a missing group: %v", err)
	}
	if err := os.WriteFile(filepath.Join(b.dir("/r"), "cpu.max"), []byte("bogus\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := b.update("/r", Limits{CPUQuotaUS: 1000}); !errors.As(err, &e) || e.Controller != "cpu" {
		t.Errorf("quota over a malformed cpu.max: %v", err)
	}
}
