package fsm

import (
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
)

// TestGroupRecordsOnlyOncePlaced checks that a submit writes no group
// record, that a plan writes the record of the group it placed from and of
// no other, and that Load rebuilds the same state from what was written.
func TestGroupRecordsOnlyOncePlaced(t *testing.T) {
	f, s, now := New(), newMemStore(), time.Unix(1_800_000_000, 0)
	index := uint64(0)
	apply := func(cmd []byte, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		index++
		if _, _, err := s.apply(f, index, cmd); err != nil {
			t.Fatal(err)
		}
	}
	groupKeys := func() (keys []string) {
		for k := range s.m {
			if strings.HasPrefix(k, prefixGroup) {
				keys = append(keys, k)
			}
		}
		return keys
	}
	c := api.Capacity{CPU: 8000, Memory: 16 << 30, Ports: 10}
	apply(RegisterNode(now, api.NodeSpec{Name: "n1", Capacity: c, Allocatable: api.Allocatable{Online: c, Offline: c}}))
	pod := api.PodSpec{Containers: []api.ContainerSpec{{Image: api.Image{Rootfs: "/img"}, Command: []string{"/bin/work"},
		Resources: api.Resources{CPU: 500, Memory: 1 << 30}}}}
	apply(SubmitJobs(now, []api.JobSpec{{Name: "two-groups", Tasks: []api.TaskGroupSpec{
		{Name: "a", Count: 3, Pod: pod}, {Name: "b", Count: 2, Pod: pod}}}}))
	if keys := groupKeys(); len(keys) != 0 {
		t.Fatalf("submit wrote group records %q; want none", keys)
	}
	apply(CommitPlan(&Plan{Term: 1, Index: index, Now: now, Assignments: []Assignment{
		{Group: GroupKey{Job: "j1", Group: "b"}, Node: "n1", Count: 1}}}), nil)
	if keys, want := groupKeys(), string(appendGroupKey(nil, 1, 1)); len(keys) != 1 || keys[0] != want {
		t.Fatalf("after placing one task of group b: group records %q; want only %q", keys, want)
	}
	loaded := New()
	if err := loaded.Load(s); err != nil {
		t.Fatal(err)
	}
	if a, b := f.dump(), loaded.dump(); a != b {
		t.Fatalf("loaded state differs:\nlive:\n%s\nloaded:\n%s", a, b)
	}
}
