package placement_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/dispatcher/placement"
	"github.com/sluicehq/sluice/internal/seedtest"
)

const gib = 1 << 30

func res(cpu, memGiB int64) api.Capacity { return api.Capacity{CPU: cpu, Memory: memGiB * gib} }

// node returns a node with the same capacity and free resources in both
// tiers.
func node(id string, cpu, memGiB int64) placement.Node {
	c := res(cpu, memGiB)
	return placement.Node{ID: id, Capacity: api.Allocatable{Online: c, Offline: c}, Free: api.Allocatable{Online: c, Offline: c}}
}

func group(job string, pending, cpu, memGiB int64) placement.Group {
	return placement.Group{Key: placement.GroupKey{Job: job, Group: "g0"}, Pending: pending, Demand: res(cpu, memGiB), QoS: api.QoSOffline}
}

func place(t *testing.T, in *placement.Input) *placement.Plan {
	t.Helper()
	plan, err := placement.New(nil).Place(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	checkPlan(t, in, plan)
	return plan
}

// placedOn sums a plan's assignments by "job@node".
func placedOn(plan *placement.Plan) map[string]int64 {
	m := map[string]int64{}
	for _, a := range plan.Assignments {
		m[a.Group.Job+"@"+a.Node] += a.Count
	}
	return m
}

func pendingOf(plan *placement.Plan, job string) (int64, string) {
	for _, p := range plan.Pending {
		if p.Group.Job == job {
			return p.Count, p.Reason
		}
	}
	return 0, ""
}

func TestPlace(t *testing.T) {
	labelled := node("gpu1", 4000, 16)
	labelled.Labels = map[string]string{"zone": "a"}
	pooled := node("p1", 4000, 16)
	pooled.Pool = "batch"
	withSlot := node("s1", 1000, 4)
	withSlot.Free = api.Allocatable{}
	withSlot.Slots = []placement.Slot{{ID: "slot-1", QoS: api.QoSOffline, Shape: res(500, 1)}}
	hosting := node("h1", 4000, 16)
	hosting.Jobs = map[string]bool{"d": true}
	onlineFull := node("o1", 4000, 16)
	onlineFull.Free.Online = api.Capacity{}

	for _, tc := range []struct {
		name    string
		in      placement.Input
		placed  map[string]int64
		pending map[string]string // job -> reason
	}{{
		name:    "fits some, the rest wait for capacity",
		in:      placement.Input{Nodes: []placement.Node{node("n1", 3000, 64)}, Groups: []placement.Group{group("j", 5, 1000, 1)}},
		placed:  map[string]int64{"j@n1": 3},
		pending: map[string]string{"j": placement.ReasonNoCapacity},
	}, {
		name:   "memory is a dimension too",
		in:     placement.Input{Nodes: []placement.Node{node("n1", 64000, 3)}, Groups: []placement.Group{group("j", 5, 100, 1)}},
		placed: map[string]int64{"j@n1": 3}, pending: map[string]string{"j": placement.ReasonNoCapacity},
	}, {
		name: "constraints: no node has the label",
		in: placement.Input{Nodes: []placement.Node{node("n1", 4000, 16), labelled}, Groups: []placement.Group{func() placement.Group {
			g := group("j", 2, 100, 1)
			g.Constraints = []api.Constraint{{Key: "zone", Op: api.OpIn, Values: []string{"b"}}}
			return g
		}()}},
		pending: map[string]string{"j": placement.ReasonNoCandidates},
	}, {
		name: "constraints pick the labelled node",
		in: placement.Input{Nodes: []placement.Node{node("n1", 4000, 16), labelled}, Groups: []placement.Group{func() placement.Group {
			g := group("j", 2, 100, 1)
			g.Constraints = []api.Constraint{{Key: "zone", Op: api.OpExists}}
			return g
		}()}},
		placed: map[string]int64{"j@gpu1": 2},
	}, {
		name: "pool",
		in: placement.Input{Nodes: []placement.Node{node("n1", 4000, 16), pooled}, Groups: []placement.Group{func() placement.Group {
			g := group("j", 3, 100, 1)
			g.Pool = "batch"
			return g
		}()}},
		placed: map[string]int64{"j@p1": 3},
	}, {
		name: "higher priority takes contended capacity",
		in: placement.Input{Nodes: []placement.Node{node("n1", 2000, 16)}, Groups: []placement.Group{
			group("low", 2, 1000, 1),
			func() placement.Group { g := group("high", 2, 1000, 1); g.Priority = 10; return g }(),
		}},
		placed:  map[string]int64{"high@n1": 2},
		pending: map[string]string{"low": placement.ReasonNoCapacity},
	}, {
		name: "online work draws on the online tier only",
		in: placement.Input{Nodes: []placement.Node{onlineFull, node("n2", 1000, 16)}, Groups: []placement.Group{func() placement.Group {
			g := group("on", 2, 500, 1)
			g.QoS = api.QoSOnline
			return g
		}()}},
		placed: map[string]int64{"on@n2": 2},
	}, {
		name: "preferred nodes win when otherwise equal",
		in: placement.Input{Nodes: []placement.Node{node("a", 4000, 16), node("b", 4000, 16), node("c", 4000, 16)}, Groups: []placement.Group{func() placement.Group {
			g := group("j", 2, 1000, 1)
			g.Preferred = []string{"c"}
			return g
		}()}},
		placed: map[string]int64{"j@c": 2},
	}, {
		name:   "a cached slot of the same shape is reused",
		in:     placement.Input{Nodes: []placement.Node{withSlot}, Groups: []placement.Group{group("j", 2, 500, 1)}},
		placed: map[string]int64{"j@s1": 1}, pending: map[string]string{"j": placement.ReasonNoCapacity},
	}, {
		name: "distinct nodes: one task per node, none where the job runs",
		in: placement.Input{Nodes: []placement.Node{node("n1", 4000, 16), node("n2", 4000, 16), hosting}, Groups: []placement.Group{func() placement.Group {
			g := group("d", 3, 100, 1)
			g.DistinctNodes = true
			return g
		}()}},
		placed: map[string]int64{"d@n1": 1, "d@n2": 1}, pending: map[string]string{"d": placement.ReasonNoCapacity},
	}, {
		name: "a gang that does not fit whole is not placed at all",
		in: placement.Input{Nodes: []placement.Node{node("n1", 2000, 16)}, Groups: []placement.Group{func() placement.Group {
			g := group("gang", 3, 1000, 1)
			g.Gang = true
			return g
		}(), group("other", 1, 1000, 1)}},
		placed:  map[string]int64{"other@n1": 1},
		pending: map[string]string{"gang": placement.ReasonGang},
	}, {
		name: "a distinct-node gang that fits is placed beside a gang that does not",
		in: placement.Input{Nodes: []placement.Node{node("n1", 4000, 16), func() placement.Node {
			n := node("n2", 4000, 16)
			n.Free.Offline.CPU, n.Free.Online.CPU = 1000, 1000
			return n
		}()}, Groups: []placement.Group{func() placement.Group {
			g := group("ps", 2, 1000, 1)
			g.Gang, g.DistinctNodes = true, true
			return g
		}(), func() placement.Group {
			g := group("big", 3, 3000, 1)
			g.Gang = true
			return g
		}()}},
		placed:  map[string]int64{"ps@n1": 1, "ps@n2": 1},
		pending: map[string]string{"big": placement.ReasonGang},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			plan := place(t, &tc.in)
			got := placedOn(plan)
			if tc.placed == nil {
				tc.placed = map[string]int64{}
			}
			if !reflect.DeepEqual(got, tc.placed) {
				t.Errorf("placed %v, want %v", got, tc.placed)
			}
			for job, reason := range tc.pending {
				if _, r := pendingOf(plan, job); r != reason {
					t.Errorf("job %s pending because %q, want %q (plan %+v)", job, r, reason, plan.Pending)
				}
			}
		})
	}
}

func TestSlotsListed(t *testing.T) {
	n := node("s1", 0, 0)
	n.Slots = []placement.Slot{{ID: "x", QoS: api.QoSOffline, Shape: res(500, 1)}, {ID: "y", QoS: api.QoSOffline, Shape: res(500, 1)}}
	plan := place(t, &placement.Input{Nodes: []placement.Node{n}, Groups: []placement.Group{group("j", 2, 500, 1)}})
	if len(plan.Assignments) != 1 || !reflect.DeepEqual(plan.Assignments[0].Slots, []string{"x", "y"}) {
		t.Fatalf("assignments %+v: want both slots reused", plan.Assignments)
	}
}

func TestDiagnosis(t *testing.T) {
	nodes := []placement.Node{node("n1", 4000, 16), node("n2", 4000, 16), node("n3", 100, 16)}
	nodes[0].Pool = "other"
	g := group("j", 1, 1000, 1)
	g.Pool = "batch"
	plan := place(t, &placement.Input{Nodes: nodes, Groups: []placement.Group{g}})
	if len(plan.Pending) != 1 {
		t.Fatalf("pending %+v", plan.Pending)
	}
	want := map[string]int{api.FilterResources: 1, api.FilterPool: 2}
	if p := plan.Pending[0]; p.Reason != placement.ReasonNoCandidates || !reflect.DeepEqual(p.Rejected, want) {
		t.Fatalf("pending %+v: want no candidates with rejections %v", p, want)
	}
}

func TestBadInput(t *testing.T) {
	negative := node("n3", 1000, 1)
	negative.Releasing.Offline.Memory = -1
	in := &placement.Input{
		Nodes: []placement.Node{node("n1", 1000, 1), node("n1", 1000, 1), {}, negative},
		Groups: []placement.Group{
			{Key: placement.GroupKey{Job: "j", Group: "g"}, Pending: -1, Demand: res(0, 1), QoS: "gold", Priority: 5000,
				Policy: &api.Policy{Filters: []string{"nope"}, Scorers: []api.ScorerRef{{Name: "binpack", Weight: 500}}}},
			{Key: placement.GroupKey{Job: "j", Group: "g"}, Pending: 1, Demand: res(1, 1), QoS: api.QoSOnline},
		},
	}
	_, err := placement.New(nil).Place(context.Background(), in)
	if !errors.Is(err, placement.ErrBadInput) {
		t.Fatalf("error %v: want ErrBadInput", err)
	}
	for _, want := range []string{`nodes[1].id: "n1" appears twice`, "nodes[2].id: empty", "nodes[3].releasing.offline: negative amount", "groups[0].pending", "groups[0].demand",
		`groups[0].qos: "gold"`, "groups[0].priority", `unknown filter "nope"`, "scorers[0].weight", "groups[1].key: j/g appears twice"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}

// randomInput builds a cluster and a round of groups of a few shapes, both
// QoS classes, some constraints, preferences, slots, distinct and gang
// groups.
func randomInput(r *rand.Rand, nodes, groups int) *placement.Input {
	in := &placement.Input{}
	for i := range nodes {
		n := node(fmt.Sprintf("n%d", i), 1000*(1+r.Int64N(16)), 1+r.Int64N(64))
		n.Free.Online = api.Capacity{CPU: r.Int64N(n.Capacity.Online.CPU + 1), Memory: r.Int64N(n.Capacity.Online.Memory + 1)}
		n.Free.Offline = api.Capacity{CPU: r.Int64N(n.Capacity.Offline.CPU + 1), Memory: r.Int64N(n.Capacity.Offline.Memory + 1)}
		n.Rack = fmt.Sprint("r", i%4)
		n.Labels = map[string]string{"zone": fmt.Sprint("z", r.IntN(3))}
		if r.IntN(4) == 0 {
			n.Pool = "batch"
		}
		for k := range r.IntN(3) {
			n.Slots = append(n.Slots, placement.Slot{ID: fmt.Sprintf("n%d-s%d", i, k), QoS: api.QoSOffline, Shape: res(500*(1+r.Int64N(2)), 1)})
		}
		if r.IntN(5) == 0 {
			n.Jobs = map[string]bool{fmt.Sprint("j", r.IntN(groups)): true}
		}
		in.Nodes = append(in.Nodes, n)
	}
	for i := range groups {
		g := group(fmt.Sprint("j", i), 1+r.Int64N(40), 500*(1+r.Int64N(2)), 1+r.Int64N(2))
		g.Priority = int32(r.IntN(3))
		g.Waited = time.Duration(r.IntN(600)) * time.Second
		if r.IntN(3) == 0 {
			g.QoS = api.QoSOnline
		}
		if r.IntN(5) == 0 {
			g.Constraints = []api.Constraint{{Key: "zone", Op: api.OpNotIn, Values: []string{"z0"}}}
		}
		if r.IntN(6) == 0 {
			g.Pool = "batch"
		}
		if r.IntN(6) == 0 {
			g.DistinctNodes = true
		}
		if r.IntN(8) == 0 {
			g.Gang = true
		}
		for range r.IntN(3) {
			g.Preferred = append(g.Preferred, fmt.Sprint("n", r.IntN(nodes)))
		}
		if r.IntN(4) == 0 {
			g.Policy = &api.Policy{Scorers: []api.ScorerRef{{Name: api.ScorerSpread, Weight: 2}, {Name: api.ScorerLocality, Weight: 1}}}
		}
		in.Groups = append(in.Groups, g)
	}
	return in
}

// checkPlan checks the invariants of any plan: no node over its free
// resources in either tier, no slot reused twice, counts adding up per
// group, distinct nodes and gangs respected, every pending count with a
// reason.
func checkPlan(t *testing.T, in *placement.Input, plan *placement.Plan) {
	t.Helper()
	nodes := map[string]*placement.Node{}
	for i := range in.Nodes {
		nodes[in.Nodes[i].ID] = &in.Nodes[i]
	}
	groups := map[placement.GroupKey]*placement.Group{}
	for i := range in.Groups {
		groups[in.Groups[i].Key] = &in.Groups[i]
	}
	used := map[string]api.Allocatable{}
	slots := map[string]bool{}
	placed := map[placement.GroupKey]int64{}
	perNode := map[[2]string]int64{}
	for _, a := range plan.Assignments {
		g, n := groups[a.Group], nodes[a.Node]
		if g == nil || n == nil || a.Count <= 0 || int64(len(a.Slots)) > a.Count {
			t.Fatalf("assignment %+v: unknown group or node, or bad count", a)
		}
		placed[a.Group] += a.Count
		perNode[[2]string{a.Group.Job, a.Node}] += a.Count
		for _, s := range a.Slots {
			if slots[s] {
				t.Fatalf("slot %s reused twice", s)
			}
			slots[s] = true
		}
		fresh := a.Count - int64(len(a.Slots))
		u := used[a.Node]
		if g.QoS == api.QoSOnline {
			u.Online.CPU += fresh * g.Demand.CPU
			u.Online.Memory += fresh * g.Demand.Memory
		} else {
			u.Offline.CPU += fresh * g.Demand.CPU
			u.Offline.Memory += fresh * g.Demand.Memory
		}
		used[a.Node] = u
		if g.DistinctNodes && (perNode[[2]string{a.Group.Job, a.Node}] > 1 || n.Jobs[a.Group.Job]) {
			t.Fatalf("distinct-node job %s placed twice on %s", a.Group.Job, a.Node)
		}
	}
	for id, u := range used {
		f := nodes[id].Free
		if u.Online.CPU > f.Online.CPU || u.Online.Memory > f.Online.Memory || u.Offline.CPU > f.Offline.CPU || u.Offline.Memory > f.Offline.Memory {
			t.Fatalf("node %s over capacity: used %+v, free %+v", id, u, f)
		}
	}
	pending := map[placement.GroupKey]int64{}
	for _, p := range plan.Pending {
		if p.Count <= 0 || p.Reason == "" {
			t.Fatalf("pending %+v: want a count and a reason", p)
		}
		pending[p.Group] += p.Count
	}
	for k, g := range groups {
		if placed[k]+pending[k] != g.Pending {
			t.Fatalf("group %s: %d placed + %d pending != %d", k, placed[k], pending[k], g.Pending)
		}
		if g.Gang && placed[k] != 0 && placed[k] != g.Pending {
			t.Fatalf("gang %s partly placed: %d of %d", k, placed[k], g.Pending)
		}
	}
}

func TestPlaceProperties(t *testing.T) {
	r := seedtest.Rand(t)
	for i := range 200 {
		in := randomInput(r, 1+r.IntN(30), 1+r.IntN(12))
		p := placement.New(nil)
		plan, err := p.Place(context.Background(), in)
		if err != nil {
			t.Fatalf("input %d: %v", i, err)
		}
		checkPlan(t, in, plan)
		// A fresh Placer plans alike; the same one re-solves its kept
		// network warm, to a flow of the same cost (gangs aside).
		fresh, err := placement.New(nil).Place(context.Background(), in)
		if err != nil || !reflect.DeepEqual(fresh.Assignments, plan.Assignments) || !reflect.DeepEqual(fresh.Pending, plan.Pending) {
			t.Fatalf("input %d: a fresh Placer gave a different plan", i)
		}
		again, err := p.Place(context.Background(), in)
		if err != nil || !gangFailed(plan) && !gangFailed(again) && again.Stats.Cost != plan.Stats.Cost {
			t.Fatalf("input %d: the second Place's flow costs %d, the first's %d (%v)", i, again.Stats.Cost, plan.Stats.Cost, err)
		}
		checkPlan(t, in, again)
	}
}

// TestPlacesAllThatFits: with one group, the plan places as many tasks as
// the admitted nodes can hold (leaving tasks pending costs more than any
// placement).
func TestPlacesAllThatFits(t *testing.T) {
	r := seedtest.Rand(t)
	for i := range 100 {
		in := randomInput(r, 1+r.IntN(40), 1)
		g := &in.Groups[0]
		g.Gang, g.DistinctNodes, g.Constraints, g.Pool = false, false, nil, ""
		g.Pending = 1 + r.Int64N(200)
		var room int64
		for _, n := range in.Nodes {
			free := n.Free.Offline
			if g.QoS == api.QoSOnline {
				free = n.Free.Online
			}
			room += min(free.CPU/g.Demand.CPU, free.Memory/g.Demand.Memory)
			for _, s := range n.Slots {
				if s.QoS == g.QoS && s.Shape == g.Demand {
					room++
				}
			}
		}
		plan := place(t, in)
		if want := min(room, g.Pending); plan.Stats.Placed != want {
			t.Fatalf("input %d: placed %d, want %d (room %d, pending %d)", i, plan.Stats.Placed, want, room, g.Pending)
		}
	}
}

func TestDeadline(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	in := randomInput(r, 50, 20)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	plan, err := placement.New(nil).Place(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	checkPlan(t, in, plan)
}
