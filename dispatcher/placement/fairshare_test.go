package placement_test

import (
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/dispatcher/placement"
)

// TestFairShare: at one priority, contended capacity is shared by the
// active queues by weight (dominant resource), whatever their backlogs and
// waits, counting what each already runs; priority still comes first.
func TestFairShare(t *testing.T) {
	inQueue := func(g placement.Group, q string, waited time.Duration) placement.Group {
		g.Queue, g.Waited = q, waited
		return g
	}
	// One node of room for 8 tasks of 1000m and 4 GiB; the cluster is
	// that node, so each task is an eighth of it.
	n := node("n1", 8000, 32)
	for _, tc := range []struct {
		name   string
		groups []placement.Group
		queues []placement.Queue
		want   map[string]int64
	}{{
		name: "equal weights split evenly, the old backlog does not starve the new queue",
		groups: []placement.Group{
			inQueue(group("old", 100, 1000, 4), "a", time.Hour),
			inQueue(group("new", 100, 1000, 4), "b", 0),
		},
		want: map[string]int64{"old@n1": 4, "new@n1": 4},
	}, {
		name: "weights 3 to 1",
		groups: []placement.Group{
			inQueue(group("x", 100, 1000, 4), "a", 0),
			inQueue(group("y", 100, 1000, 4), "b", time.Hour),
		},
		queues: []placement.Queue{{Name: "a", Weight: 3}, {Name: "b", Weight: 1}},
		want:   map[string]int64{"x@n1": 6, "y@n1": 2},
	}, {
		name: "what a queue already runs counts against its share",
		groups: []placement.Group{
			inQueue(group("x", 100, 1000, 4), "a", time.Hour),
			inQueue(group("y", 100, 1000, 4), "b", 0),
		},
		// The cluster counts 16 tasks' worth: this node's 8 free and 8
		// more that queue a holds on a node that is full.
		queues: []placement.Queue{{Name: "a", Running: res(4000, 16)}},
		want:   map[string]int64{"x@n1": 2, "y@n1": 6},
	}, {
		name: "jobs of one queue share it too",
		groups: []placement.Group{
			inQueue(group("old", 100, 1000, 4), "a", time.Hour),
			inQueue(group("new", 100, 1000, 4), "a", 0),
		},
		want: map[string]int64{"old@n1": 4, "new@n1": 4},
	}, {
		name: "queues before jobs: one job of b against two of a",
		groups: []placement.Group{
			inQueue(group("a1", 100, 1000, 4), "a", time.Hour),
			inQueue(group("a2", 100, 1000, 4), "a", time.Hour),
			inQueue(group("b1", 100, 1000, 4), "b", 0),
		},
		want: map[string]int64{"a1@n1": 2, "a2@n1": 2, "b1@n1": 4},
	}, {
		name: "priority first",
		groups: []placement.Group{
			inQueue(group("lo", 100, 1000, 4), "a", time.Hour),
			inQueue(prio(group("hi", 100, 1000, 4), 3), "b", 0),
		},
		want: map[string]int64{"hi@n1": 8},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := []placement.Node{n}
			if tc.name == "what a queue already runs counts against its share" {
				busy := node("busy", 8000, 32)
				busy.Free.Offline, busy.Free.Online = res(0, 0), res(0, 0)
				nodes = append(nodes, busy)
			}
			in := placement.Input{Nodes: nodes, Groups: tc.groups, Queues: tc.queues}
			got := placedOn(place(t, &in))
			if len(got) != len(tc.want) {
				t.Fatalf("placed %v, want %v", got, tc.want)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Fatalf("placed %v, want %v", got, tc.want)
				}
			}
		})
	}
}

// TestEveryPriority: a round may hold every priority from 0 to
// api.MaxPriority; the costs stay within the solver's bound (fair-share
// levels grow coarser) and capacity still goes to the highest first.
func TestEveryPriority(t *testing.T) {
	var groups []placement.Group
	for p := int32(0); p <= api.MaxPriority; p++ {
		groups = append(groups, prio(group(fmt.Sprint("j", p), 1, 1000, 4), p))
	}
	in := placement.Input{Nodes: []placement.Node{node("n1", 3000, 12)}, Groups: groups}
	got := placedOn(place(t, &in))
	want := map[string]int64{"j1000@n1": 1, "j999@n1": 1, "j998@n1": 1}
	if !maps.Equal(got, want) {
		t.Errorf("placed %v, want %v", got, want)
	}
}

// TestContended: a round is contended when its pending tasks ask for more
// of some dimension of a tier than all the nodes have free in it, however
// early the sum of the nodes' free resources covers the others.
func TestContended(t *testing.T) {
	small := node("small", 1000, 1)
	online := func(g placement.Group) placement.Group { g.QoS = api.QoSOnline; return g }
	for _, tc := range []struct {
		name   string
		groups []placement.Group
		nodes  []placement.Node
		want   bool
	}{
		{"nothing pending", nil, []placement.Node{small}, false},
		{"no nodes", []placement.Group{group("a", 1, 1000, 1)}, nil, true},
		{"the first node covers it", []placement.Group{group("a", 1, 1000, 1)}, []placement.Node{small, small}, false},
		{"only all nodes together cover it", []placement.Group{group("a", 3, 1000, 1)}, []placement.Node{small, small, small}, false},
		{"one node short", []placement.Group{group("a", 4, 1000, 1)}, []placement.Node{small, small, small}, true},
		{"offline memory short, CPU to spare", []placement.Group{group("a", 2, 100, 1)}, []placement.Node{small}, true},
		{"offline CPU short, memory to spare", []placement.Group{group("a", 2, 1000, 0)}, []placement.Node{small}, true},
		{"online memory short, CPU to spare", []placement.Group{online(group("a", 2, 100, 1))}, []placement.Node{small}, true},
		{"online CPU short, memory to spare", []placement.Group{online(group("a", 2, 1000, 0))}, []placement.Node{small}, true},
		{"the online tier short, the offline one not", []placement.Group{group("a", 1, 1000, 1), online(group("b", 2, 1000, 1))}, []placement.Node{small}, true},
		{"both tiers covered", []placement.Group{group("a", 1, 1000, 1), online(group("b", 1, 1000, 1))}, []placement.Node{small}, false},
	} {
		in := &placement.Input{Groups: tc.groups, Nodes: tc.nodes}
		if got := placement.Contended(in); got != tc.want {
			t.Errorf("%s: contended = %v, want %v", tc.name, got, tc.want)
		}
	}
}
