package chaosbench_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/bench/chaosbench"
)

func TestScheduleReplays(t *testing.T) {
	const seed = 42
	t.Logf("seed %d", seed)
	kinds := []chaosbench.Kind{chaosbench.KillLeader, chaosbench.PartitionFollower, chaosbench.KillFleet}
	a := chaosbench.Schedule(seed, kinds, 3, time.Second, 2*time.Second)
	b := chaosbench.Schedule(seed, kinds, 3, time.Second, 2*time.Second)
	if !slices.Equal(a, b) {
		t.Fatalf("the same seed gave two schedules:\n%v\n%v", a, b)
	}
	if len(a) != 9 {
		t.Fatalf("%d faults, want 9", len(a))
	}
	for r := range 3 {
		var got []chaosbench.Kind
		for _, f := range a[3*r : 3*r+3] {
			got = append(got, f.Kind)
			if f.Gap < time.Second || f.Gap > 2*time.Second || f.Hold < 2*time.Second || f.Hold > 4*time.Second {
				t.Errorf("fault %v: gap or hold out of range", f)
			}
		}
		slices.Sort(got)
		want := slices.Clone(kinds)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("round %d has %v, want each of %v once", r, got, kinds)
		}
	}
	if c := chaosbench.Schedule(seed+1, kinds, 3, time.Second, 2*time.Second); slices.Equal(a, c) {
		t.Error("seeds 42 and 43 gave the same schedule")
	}
}

func TestParseKinds(t *testing.T) {
	all, err := chaosbench.ParseKinds("all")
	if err != nil || !slices.Equal(all, chaosbench.Kinds) {
		t.Fatalf("all = %v, %v", all, err)
	}
	ks, err := chaosbench.ParseKinds("kill-leader, disk-full")
	if err != nil || !slices.Equal(ks, []chaosbench.Kind{chaosbench.KillLeader, chaosbench.DiskFull}) {
		t.Fatalf("two kinds = %v, %v", ks, err)
	}
	for _, bad := range []string{"", "kill-everything", "kill-leader,kill-leader"} {
		if _, err := chaosbench.ParseKinds(bad); err == nil {
			t.Errorf("ParseKinds(%q) succeeded", bad)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	bad := chaosbench.Config{Hold: -time.Second, Nodes: 2, FleetProcs: 3, Rate: -1, Kinds: []chaosbench.Kind{"nope"}, Host: "10.0.0.1"}
	err := bad.Validate()
	if !errors.Is(err, chaosbench.ErrConfig) {
		t.Fatalf("Validate = %v, want ErrConfig", err)
	}
	for _, want := range []string{"Exe is required", "Hold -1s", "FleetProcs 3 above Nodes 2", "Rate -1", `unknown "nope"`, `Host "10.0.0.1"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate = %v\nwant it to name %q", err, want)
		}
	}
	good := chaosbench.Config{Exe: "/bin/true"}
	if err := good.Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
}
