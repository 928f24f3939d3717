package placement_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/dispatcher/placement"
	"github.com/sluicehq/sluice/internal/seedtest"
)

var epoch = time.Unix(1_800_000_000, 0)

// full returns a node whose offline tier is taken by victims, each of
// 1000m and 4 GiB, with the given priorities, the later ones started later.
func full(id string, prios ...int32) placement.Node {
	n := node(id, int64(1000*len(prios)), int64(4*len(prios)))
	n.Free.Offline = api.Capacity{}
	for i, p := range prios {
		n.Victims = append(n.Victims, placement.Victim{Task: fmt.Sprintf("%s-v%d", id, i), Priority: p, Demand: res(1000, 4), Since: epoch.Add(time.Duration(i) * time.Minute)})
	}
	return n
}

func prio(g placement.Group, p int32) placement.Group { g.Priority = p; return g }

// preempt places in, then asks for preemptions for what stays pending.
func preempt(t *testing.T, in *placement.Input, limit int) []placement.Preemption {
	t.Helper()
	p := placement.New(nil)
	plan, err := p.Place(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	return p.Preempt(in, plan, limit)
}

func tasks(ps []placement.Preemption) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Task+"@"+p.Node+">"+p.For.Job)
	}
	return out
}

func TestPreempt(t *testing.T) {
	releasing := full("r1", 0, 0)
	releasing.Releasing.Offline = res(1000, 4)
	pooled := full("p1", 0, 0)
	pooled.Pool = "batch"
	batch := prio(group("b", 2, 1000, 4), 5)
	batch.Pool = "batch"
	online := group("on", 1, 1000, 4)
	online.QoS = api.QoSOnline
	gang := prio(group("gang", 2, 1000, 4), 5)
	gang.Gang = true
	distinct := prio(group("d", 3, 1000, 4), 5)
	distinct.DistinctNodes = true
	onlineFull := full("n1", 0, 0)
	onlineFull.Free.Online = api.Capacity{}
	for _, tc := range []struct {
		name  string
		in    placement.Input
		limit int
		want  []string
	}{{
		name:  "the lowest priority first, then the latest started",
		in:    placement.Input{Nodes: []placement.Node{full("n1", 2, 1, 1)}, Groups: []placement.Group{prio(group("hi", 1, 1000, 4), 5)}},
		limit: 10,
		want:  []string{"n1-v2@n1>hi"},
	}, {
		name:  "the node whose victims have the lowest priority",
		in:    placement.Input{Nodes: []placement.Node{full("n1", 3, 3), full("n2", 1, 4)}, Groups: []placement.Group{prio(group("hi", 1, 1000, 4), 5)}},
		limit: 10,
		want:  []string{"n2-v0@n2>hi"},
	}, {
		name:  "as few victims as make room",
		in:    placement.Input{Nodes: []placement.Node{full("n1", 1, 1, 1)}, Groups: []placement.Group{prio(group("big", 1, 2000, 8), 5)}},
		limit: 10,
		want:  []string{"n1-v2@n1>big", "n1-v1@n1>big"},
	}, {
		name:  "never an equal or higher priority",
		in:    placement.Input{Nodes: []placement.Node{full("n1", 5, 6)}, Groups: []placement.Group{prio(group("hi", 1, 1000, 4), 5)}},
		limit: 10,
	}, {
		name:  "priority 0 preempts nothing",
		in:    placement.Input{Nodes: []placement.Node{full("n1", 0)}, Groups: []placement.Group{group("lo", 1, 1000, 4)}},
		limit: 10,
	}, {
		name:  "room being released is waited for",
		in:    placement.Input{Nodes: []placement.Node{releasing}, Groups: []placement.Group{prio(group("hi", 2, 1000, 4), 5)}},
		limit: 10,
		want:  []string{"r1-v1@r1>hi"},
	}, {
		name:  "the limit bounds the round",
		in:    placement.Input{Nodes: []placement.Node{full("n1", 0, 0, 0)}, Groups: []placement.Group{prio(group("hi", 3, 1000, 4), 5)}},
		limit: 2,
		want:  []string{"n1-v2@n1>hi", "n1-v1@n1>hi"},
	}, {
		name:  "a task needing more victims than the limit leaves stops none",
		in:    placement.Input{Nodes: []placement.Node{full("n1", 0, 0)}, Groups: []placement.Group{prio(group("big", 1, 2000, 8), 5)}},
		limit: 1,
	}, {
		name:  "filters hold: the pool",
		in:    placement.Input{Nodes: []placement.Node{full("n0", 0), pooled}, Groups: []placement.Group{batch}},
		limit: 10,
		want:  []string{"p1-v1@p1>b", "p1-v0@p1>b"},
	}, {
		name:  "online work and gangs preempt nothing",
		in:    placement.Input{Nodes: []placement.Node{onlineFull}, Groups: []placement.Group{prio(online, 5), gang}},
		limit: 10,
	}, {
		name:  "distinct nodes: one task per node",
		in:    placement.Input{Nodes: []placement.Node{full("n1", 0, 0), full("n2", 0)}, Groups: []placement.Group{distinct}},
		limit: 10,
		want:  []string{"n1-v1@n1>d", "n2-v0@n2>d"},
	}, {
		name: "higher-priority groups first",
		in: placement.Input{Nodes: []placement.Node{full("n1", 0)},
			Groups: []placement.Group{prio(group("mid", 1, 1000, 4), 3), prio(group("top", 1, 1000, 4), 7)}},
		limit: 10,
		want:  []string{"n1-v0@n1>top"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tasks(preempt(t, &tc.in, tc.limit)); !slices.Equal(got, tc.want) {
				t.Errorf("preempted %v, want %v", got, tc.want)
			}
		})
	}
}

// TestPreemptProperties checks, on random clusters, that every preemption
// stops a distinct, known victim on its own node, of a lower priority than
// the group it is for, and never more than the limit.
func TestPreemptProperties(t *testing.T) {
	r := seedtest.Rand(t)
	for round := range 200 {
		var in placement.Input
		victims := map[string]placement.Victim{}
		for i := range 1 + r.IntN(8) {
			var prios []int32
			for range 1 + r.IntN(6) {
				prios = append(prios, int32(r.IntN(6)))
			}
			n := full(fmt.Sprint("n", i), prios...)
			n.Free.Offline = res(int64(r.IntN(3))*500, int64(r.IntN(3))*2)
			for _, v := range n.Victims {
				victims[v.Task] = v
			}
			in.Nodes = append(in.Nodes, n)
		}
		prioOf := map[string]int32{}
		for i := range 1 + r.IntN(4) {
			g := prio(group(fmt.Sprint("j", i), 1+int64(r.IntN(5)), 500*(1+int64(r.IntN(4))), 2*(1+int64(r.IntN(4)))), int32(r.IntN(8)))
			prioOf[g.Key.Job] = g.Priority
			in.Groups = append(in.Groups, g)
		}
		limit := 1 + r.IntN(10)
		ps := preempt(t, &in, limit)
		if len(ps) > limit {
			t.Fatalf("round %d: %d preemptions, limit %d", round, len(ps), limit)
		}
		seen := map[string]bool{}
		for _, p := range ps {
			v, ok := victims[p.Task]
			switch {
			case !ok || seen[p.Task]:
				t.Fatalf("round %d: %s preempted twice or unknown", round, p.Task)
			case v.Priority >= prioOf[p.For.Job]:
				t.Fatalf("round %d: %s (priority %d) preempted for %s (priority %d)", round, p.Task, v.Priority, p.For.Job, prioOf[p.For.Job])
			case p.Node != p.Task[:len(p.Node)] || p.Task[len(p.Node)] != '-':
				t.Fatalf("round %d: %s named on node %s", round, p.Task, p.Node)
			}
			seen[p.Task] = true
		}
	}
}
