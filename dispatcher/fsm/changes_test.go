package fsm

import (
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/dispatcher/placement"
)

// TestChangesOfOneEntry: a raft entry may carry several commands, applied
// one by one with the entry's index. A watcher that reads between two of
// them and resumes from the index it was given must still see the second
// command's changes of node targets (NodesChangedSince).
func TestChangesOfOneEntry(t *testing.T) {
	f := New()
	var w discard
	now := time.Unix(1_800_000_000, 0)
	apply := func(index uint64, cmd []byte) {
		t.Helper()
		if _, err := f.apply(&w, index, cmd); err != nil {
			t.Fatalf("apply at %d: %v", index, err)
		}
	}
	c := api.Capacity{CPU: 4000, Memory: 4 << 30, Ports: 10}
	for i, name := range []string{"n1", "n2"} {
		cmd, err := RegisterNode(now, api.NodeSpec{Name: name, Capacity: c, Allocatable: api.Allocatable{Online: c, Offline: c}})
		if err != nil {
			t.Fatal(err)
		}
		apply(uint64(1+i), cmd)
	}
	spec := func(name string) api.JobSpec {
		s := api.JobSpec{Name: name, Tasks: []api.TaskGroupSpec{{Name: "g", Count: 1, Pod: api.PodSpec{Containers: []api.ContainerSpec{{
			Image: api.Image{Rootfs: "/r"}, Command: []string{"x"}, Resources: api.Resources{CPU: 100, Memory: 1 << 20}}}}}}}
		s.SetDefaults()
		return s
	}
	cmd, err := SubmitJobs(now, []api.JobSpec{spec("a"), spec("b")})
	if err != nil {
		t.Fatal(err)
	}
	apply(3, cmd)
	f.EntriesApplied(3)
	place := func(job, node string) []byte {
		return CommitPlan(&Plan{Term: 1, Index: 3, Now: now, Assignments: []placement.Assignment{
			{Group: placement.GroupKey{Job: job, Group: "g"}, Node: node, Count: 1}}})
	}

	// Entry 4 carries two plans; the watcher reads between them.
	nodesFrom := uint64(3)
	var seenNodes []string
	read := func() {
		nodes, nextNodes, complete := f.NodesChangedSince(nodesFrom)
		if !complete {
			t.Fatal("node changes incomplete")
		}
		seenNodes = append(seenNodes, nodes...)
		nodesFrom = nextNodes
	}
	apply(4, place("j1", "n1"))
	read()
	apply(4, place("j2", "n2"))
	f.EntriesApplied(4)
	read()
	slices.Sort(seenNodes)
	if !slices.Equal(slices.Compact(seenNodes), []string{"n1", "n2"}) {
		t.Errorf("the node watcher saw %v, want n1 and n2", seenNodes)
	}
	if nodesFrom != 4 {
		t.Errorf("resume point %d, want 4", nodesFrom)
	}
}
