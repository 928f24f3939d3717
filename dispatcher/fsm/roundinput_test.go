package fsm_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/dispatcher/fsm"
)

// TestRoundInputsFollowTheirOwnChanges: two round inputs follow one FSM,
// each read again only for the nodes changed since its own last read, and
// a reset (a Load) makes the next read of each whole.
func TestRoundInputsFollowTheirOwnChanges(t *testing.T) {
	r := openReplica(t, t.TempDir())
	for i := range 3 {
		r.exec(fmt.Sprintf("node n%d cpu=4000 mem=8Gi", i))
	}
	r.exec("submit a count=2 cpu=1000 mem=1Gi")
	var a, b fsm.RoundInput
	t.Cleanup(r.f.Subscribe(a.Consume))
	t.Cleanup(r.f.Subscribe(b.Consume))
	now := time.Unix(1_800_000_000, 0)
	for _, in := range []*fsm.RoundInput{&a, &b} {
		if got := r.f.ReadRoundInput(in, now, 0); len(got.Nodes) != 3 || got.Kept {
			t.Fatalf("first read: %d nodes, kept %v", len(got.Nodes), got.Kept)
		}
		in.Placed()
	}
	r.exec("plan j1/g0@n1*1")
	if got := r.f.ReadRoundInput(&a, now, 0); !got.Kept || !slices.Equal(got.Changed, []int32{1}) {
		t.Fatalf("a after a plan on n1: kept %v, changed %v", got.Kept, got.Changed)
	}
	a.Placed()
	r.exec("plan j1/g0@n2*1")
	if got := r.f.ReadRoundInput(&b, now, 0); !got.Kept || !slices.Equal(got.Changed, []int32{1, 2}) {
		t.Fatalf("b after plans on n1 and n2: kept %v, changed %v", got.Kept, got.Changed)
	}
	if got := r.f.ReadRoundInput(&a, now, 0); !got.Kept || !slices.Equal(got.Changed, []int32{2}) {
		t.Fatalf("a after the plan on n2: kept %v, changed %v", got.Kept, got.Changed)
	}
	// A node joining changes which nodes the input holds: read whole.
	r.exec("node n3 cpu=4000 mem=8Gi")
	if got := r.f.ReadRoundInput(&a, now, 0); got.Kept || len(got.Nodes) != 4 {
		t.Fatalf("a after a node joined: kept %v, %d nodes", got.Kept, len(got.Nodes))
	}
	a.Placed()
	if err := r.f.Load(emptyStore{}); err != nil {
		t.Fatal(err)
	}
	if got := r.f.ReadRoundInput(&a, now, 0); got.Kept || len(got.Nodes) != 0 || len(got.Groups) != 0 {
		t.Fatalf("a after a reset to an empty state: kept %v, %d nodes, %d groups", got.Kept, len(got.Nodes), len(got.Groups))
	}
}

// TestRoundInputWithoutChangeSets: a round input that follows no change
// sets reads every node every time, and so is never stale.
func TestRoundInputWithoutChangeSets(t *testing.T) {
	r := openReplica(t, t.TempDir())
	r.exec("node n0 cpu=4000 mem=8Gi")
	r.exec("submit a count=1 cpu=1000 mem=1Gi")
	var in fsm.RoundInput
	now := time.Unix(1_800_000_000, 0)
	r.f.ReadRoundInput(&in, now, 0)
	in.Placed()
	r.exec("plan j1/g0@n0*1")
	got := r.f.ReadRoundInput(&in, now, 0)
	if got.Kept || got.Nodes[0].Free.Offline.CPU != 3000 {
		t.Fatalf("kept %v, free cpu %d, want a whole read with 3000", got.Kept, got.Nodes[0].Free.Offline.CPU)
	}
}

// TestRoundInputBoundsItsChanges: a round input not read for long (a
// follower's) keeps a bounded list of changed nodes, and past the bound
// reads every node.
func TestRoundInputBoundsItsChanges(t *testing.T) {
	r := openReplica(t, t.TempDir())
	r.exec("node n0 cpu=4000 mem=8Gi")
	var in fsm.RoundInput
	t.Cleanup(r.f.Subscribe(in.Consume))
	now := time.Unix(1_800_000_000, 0)
	r.f.ReadRoundInput(&in, now, 0)
	in.Placed()
	c := fsm.NodeChanges(r.f, "n0")
	for range 1<<16 + 1 {
		in.Consume(c)
	}
	if got := r.f.ReadRoundInput(&in, now, 0); got.Kept {
		t.Fatalf("after %d changes: kept, changed %d", 1<<16+1, len(got.Changed))
	}
}
