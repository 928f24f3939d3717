package cgroup

import (
	"os"
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
