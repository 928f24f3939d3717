package placement_test

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/dispatcher/placement"
	"github.com/sluicehq/sluice/internal/seedtest"
)

// TestKeptInput runs rounds through two Placers, one told which nodes
// changed since its last input (Kept, Changed) and one not, and checks
// that they plan alike: the first filters and scores again only the
// changed nodes of the classes it saw, the second every node.
func TestKeptInput(t *testing.T) {
	r := seedtest.Rand(t)
	for trial := range 40 {
		in := randomInput(r, 1+r.IntN(60), 1+r.IntN(10))
		hinted, plain := placement.New(nil), placement.New(nil)
		for round := range 12 {
			a, err := hinted.Place(context.Background(), in)
			if err != nil {
				t.Fatalf("trial %d round %d: %v", trial, round, err)
			}
			whole := *in
			whole.Kept, whole.Changed = false, nil
			b, err := plain.Place(context.Background(), &whole)
			if err != nil {
				t.Fatalf("trial %d round %d: %v", trial, round, err)
			}
			if !reflect.DeepEqual(a.Assignments, b.Assignments) || !reflect.DeepEqual(a.Pending, b.Pending) {
				t.Fatalf("trial %d round %d: the Placer told of the changes planned\n%+v\n%+v\nthe one that looked at every node\n%+v\n%+v",
					trial, round, a.Assignments, a.Pending, b.Assignments, b.Pending)
			}
			// The plan is committed and some nodes change besides; the
			// next input lists them all.
			in.Kept, in.Changed = true, in.Changed[:0]
			for _, as := range a.Assignments {
				in.Changed = append(in.Changed, int32(slices.IndexFunc(in.Nodes, func(n placement.Node) bool { return n.ID == as.Node })))
			}
			commit(in, a)
			for range r.IntN(4) {
				i := r.IntN(len(in.Nodes))
				n := &in.Nodes[i]
				switch r.IntN(3) {
				case 0:
					n.Free = n.Capacity
				case 1:
					n.Free.Offline = api.Capacity{}
				case 2:
					n.Slots = append(n.Slots, placement.Slot{ID: n.ID + "-new" + string(rune('a'+round)), QoS: api.QoSOffline, Shape: res(500, 1)})
				}
				in.Changed = append(in.Changed, int32(i))
			}
			if r.IntN(3) == 0 {
				for k, g := range randomInput(r, 1, 3).Groups {
					g.Key.Job = fmt.Sprintf("new-%d-%d", round, k)
					in.Groups = append(in.Groups, g)
				}
			}
			if r.IntN(6) == 0 {
				in.Kept = false // as after a read of every node
			}
		}
	}
}

// TestKeptInputChecked: a Kept input's changed nodes are checked like any
// input's, and after an input that failed its check the next is checked
// whole, Kept or not.
func TestKeptInputChecked(t *testing.T) {
	in := &placement.Input{Nodes: []placement.Node{node("n0", 4000, 8), node("n1", 4000, 8)}, Groups: []placement.Group{group("j", 1, 1000, 1)}}
	p := placement.New(nil)
	if _, err := p.Place(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	in.Kept, in.Changed = true, []int32{1}
	in.Nodes[1].Free.Online.CPU = -1
	if _, err := p.Place(context.Background(), in); err == nil || !strings.Contains(err.Error(), "nodes[1].free.online: negative amount") {
		t.Fatalf("a changed node with a negative amount: %v", err)
	}
	in.Changed = []int32{0}
	if _, err := p.Place(context.Background(), in); err == nil || !strings.Contains(err.Error(), "nodes[1].free.online: negative amount") {
		t.Fatalf("after a refused input, an unchanged node with a negative amount: %v", err)
	}
	in.Changed = []int32{2}
	if _, err := p.Place(context.Background(), in); err == nil || !strings.Contains(err.Error(), "changed[0]: 2 is not a position in nodes (2)") {
		t.Fatalf("a change out of range: %v", err)
	}
}
