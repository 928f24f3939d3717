package placement_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/dispatcher/placement"
	"github.com/sluicehq/sluice/internal/seedtest"
)

func inQueue(g placement.Group, q string) placement.Group { g.Queue = q; return g }

func gang(g placement.Group) placement.Group { g.Gang = true; return g }

func TestQuota(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      placement.Input
		placed  map[string]int64  // by job
		pending map[string]string // job -> reason
	}{{
		name: "a cpu cap holds a queue's tasks back; another queue takes the room",
		in: placement.Input{
			Nodes:  []placement.Node{node("n1", 16000, 64)},
			Groups: []placement.Group{inQueue(prio(group("a", 10, 1000, 1), 2), "qa"), inQueue(group("b", 10, 1000, 1), "qb")},
			Queues: []placement.Queue{{Name: "qa", Running: res(2000, 2), Tasks: 2, Caps: api.QueueCaps{CPU: 5000}}},
		},
		placed:  map[string]int64{"a": 3, "b": 10},
		pending: map[string]string{"a": "queue qa over its cpu quota"},
	}, {
		name: "a task cap counts the running tasks",
		in: placement.Input{
			Nodes:  []placement.Node{node("n1", 16000, 64)},
			Groups: []placement.Group{inQueue(group("a", 10, 1000, 1), "qa")},
			Queues: []placement.Queue{{Name: "qa", Running: res(4000, 4), Tasks: 4, Caps: api.QueueCaps{Tasks: 6, CPU: 100000}}},
		},
		placed:  map[string]int64{"a": 2},
		pending: map[string]string{"a": "queue qa over its tasks quota"},
	}, {
		name: "a memory cap binds across groups of different shapes, higher priority first",
		in: placement.Input{
			Nodes: []placement.Node{node("n1", 64000, 256)},
			Groups: []placement.Group{inQueue(prio(group("big", 4, 1000, 8), 3), "qa"), inQueue(prio(group("small", 20, 500, 1), 1), "qa"),
				inQueue(group("other", 5, 1000, 8), "qb")},
			Queues: []placement.Queue{{Name: "qa", Caps: api.QueueCaps{Memory: 36 * gib}}},
		},
		placed:  map[string]int64{"big": 4, "small": 4, "other": 5},
		pending: map[string]string{"small": "queue qa over its memory quota"},
	}, {
		name: "a gang that does not fit whole under its cap is not placed; a smaller one is",
		in: placement.Input{
			Nodes:  []placement.Node{node("n1", 32000, 64)},
			Groups: []placement.Group{inQueue(prio(gang(group("g6", 6, 1000, 1)), 2), "qa"), inQueue(gang(group("g3", 3, 1000, 1)), "qa")},
			Queues: []placement.Queue{{Name: "qa", Caps: api.QueueCaps{Tasks: 5}}},
		},
		placed:  map[string]int64{"g3": 3},
		pending: map[string]string{"g6": "queue qa over its tasks quota"},
	}, {
		name: "gangs that fit alone but not together: the first in priority order is placed",
		in: placement.Input{
			Nodes:  []placement.Node{node("n1", 32000, 64)},
			Groups: []placement.Group{inQueue(prio(gang(group("g1", 4, 1000, 1)), 2), "qa"), inQueue(gang(group("g2", 4, 1000, 1)), "qa"), inQueue(group("b", 4, 1000, 1), "qb")},
			Queues: []placement.Queue{{Name: "qa", Caps: api.QueueCaps{CPU: 6000}}},
		},
		placed:  map[string]int64{"g1": 4, "b": 4},
		pending: map[string]string{"g2": "queue qa over its cpu quota"},
	}, {
		name: "a queue over a lowered cap gets nothing",
		in: placement.Input{
			Nodes:  []placement.Node{node("n1", 16000, 64)},
			Groups: []placement.Group{inQueue(group("a", 3, 1000, 1), "qa")},
			Queues: []placement.Queue{{Name: "qa", Running: res(9000, 9), Tasks: 9, Caps: api.QueueCaps{CPU: 4000}}},
		},
		placed:  map[string]int64{},
		pending: map[string]string{"a": "queue qa over its cpu quota"},
	}, {
		name: "a gpu cap binds tasks with gpus only",
		in: func() placement.Input {
			n := node("n1", 16000, 64)
			n.Capacity.Offline.GPUs, n.Free.Offline.GPUs = 8, 8
			withGPU := inQueue(group("gpu", 4, 1000, 1), "qa")
			withGPU.Demand.GPUs = 1
			return placement.Input{Nodes: []placement.Node{n}, Groups: []placement.Group{withGPU, inQueue(group("cpu", 4, 1000, 1), "qa")},
				Queues: []placement.Queue{{Name: "qa", Running: api.Capacity{CPU: 1000, Memory: gib, GPUs: 2}, Tasks: 1, Caps: api.QueueCaps{GPUs: 2}}}}
		}(),
		placed:  map[string]int64{"cpu": 4},
		pending: map[string]string{"gpu": "queue qa over its gpus quota"},
	}, {
		name: "no caps: the queues' listing changes nothing",
		in: placement.Input{
			Nodes:  []placement.Node{node("n1", 4000, 64)},
			Groups: []placement.Group{inQueue(group("a", 6, 1000, 1), "qa")},
			Queues: []placement.Queue{{Name: "qa", Running: res(9000, 9), Tasks: 9}},
		},
		placed:  map[string]int64{"a": 4},
		pending: map[string]string{"a": placement.ReasonNoCapacity},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			plan := place(t, &tc.in)
			checkCaps(t, &tc.in, plan)
			got := map[string]int64{}
			for _, a := range plan.Assignments {
				got[a.Group.Job] += a.Count
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.placed) {
				t.Errorf("placed %v, want %v", got, tc.placed)
			}
			reasons := map[string]string{}
			for _, pd := range plan.Pending {
				reasons[pd.Group.Job] = pd.Reason
			}
			if fmt.Sprint(reasons) != fmt.Sprint(tc.pending) {
				t.Errorf("pending %v, want %v", reasons, tc.pending)
			}
		})
	}
}

// TestQuotaBadInput: negative caps and running amounts are refused.
func TestQuotaBadInput(t *testing.T) {
	for _, q := range []placement.Queue{{Name: "q", Caps: api.QueueCaps{CPU: -1}}, {Name: "q", Caps: api.QueueCaps{Tasks: -1}}, {Name: "q", Tasks: -1}} {
		in := &placement.Input{Nodes: []placement.Node{node("n1", 1000, 1)}, Groups: []placement.Group{group("a", 1, 100, 1)}, Queues: []placement.Queue{q}}
		if _, err := placement.New(nil).Place(context.Background(), in); err == nil {
			t.Errorf("queue %+v: no error", q)
		}
	}
}

// TestPreemptQuota: preemption makes room only for the tasks their
// queue's caps let run.
func TestPreemptQuota(t *testing.T) {
	in := &placement.Input{
		Nodes:  []placement.Node{full("n1", 0, 0, 0, 0)},
		Groups: []placement.Group{inQueue(prio(group("a", 4, 1000, 4), 5), "qa")},
		Queues: []placement.Queue{{Name: "qa", Running: res(1000, 4), Tasks: 1, Caps: api.QueueCaps{Tasks: 3}}},
	}
	if got := preempt(t, in, 10); len(got) != 2 {
		t.Errorf("preempted %v, want 2 (the queue's cap lets 2 more run)", tasks(got))
	}
	in.Queues[0].Tasks = 3
	if got := preempt(t, in, 10); len(got) != 0 {
		t.Errorf("preempted %v for a queue at its cap", tasks(got))
	}
	in.Queues[0].Caps = api.QueueCaps{}
	if got := preempt(t, in, 10); len(got) != 4 {
		t.Errorf("preempted %v without caps, want 4", tasks(got))
	}
}

// checkCaps checks that plan takes no capped queue of in past a cap in a
// dimension it adds to, and that every quota reason names the group's own
// capped queue.
func checkCaps(t *testing.T, in *placement.Input, plan *placement.Plan) {
	t.Helper()
	groups := map[placement.GroupKey]*placement.Group{}
	for i := range in.Groups {
		groups[in.Groups[i].Key] = &in.Groups[i]
	}
	type use struct {
		c     api.Capacity
		tasks int64
	}
	added := map[string]use{}
	for _, a := range plan.Assignments {
		g := groups[a.Group]
		u := added[g.Queue]
		u.c, u.tasks = u.c.Plus(g.Demand, a.Count), u.tasks+a.Count
		added[g.Queue] = u
	}
	for _, q := range in.Queues {
		u := added[q.Name]
		for _, d := range []struct {
			name            string
			capv, run, plus int64
		}{{"cpu", q.Caps.CPU, q.Running.CPU, u.c.CPU}, {"memory", q.Caps.Memory, q.Running.Memory, u.c.Memory},
			{"gpus", q.Caps.GPUs, q.Running.GPUs, u.c.GPUs}, {"tasks", q.Caps.Tasks, q.Tasks, u.tasks}} {
			if d.capv > 0 && d.plus > 0 && d.run+d.plus > d.capv {
				t.Fatalf("queue %s over its %s cap %d: %d running + %d placed", q.Name, d.name, d.capv, d.run, d.plus)
			}
		}
	}
	for _, pd := range plan.Pending {
		g := groups[pd.Group]
		if len(pd.Reason) > 6 && pd.Reason[:6] == "queue " {
			i := slices.IndexFunc(in.Queues, func(q placement.Queue) bool { return q.Name == g.Queue })
			if i < 0 || !in.Queues[i].Caps.Capped() || pd.Reason[:len("queue "+g.Queue+" ")] != "queue "+g.Queue+" " {
				t.Fatalf("group %s of queue %s pending with %q", pd.Group, g.Queue, pd.Reason)
			}
		}
	}
}

// randomQueues spreads in's groups over four queues, gives some of their
// tasks GPUs and some nodes GPUs, and lists the queues with what they run
// and random caps (some below what they run, as after a cap was lowered).
func randomQueues(r *rand.Rand, in *placement.Input) {
	for i := range in.Nodes {
		if g := r.Int64N(5); g > 0 {
			n := &in.Nodes[i]
			n.Capacity.Online.GPUs, n.Capacity.Offline.GPUs = g, g
			n.Free.Online.GPUs, n.Free.Offline.GPUs = r.Int64N(g+1), r.Int64N(g+1)
		}
	}
	for i := range in.Groups {
		in.Groups[i].Queue = fmt.Sprint("q", r.IntN(4))
		if r.IntN(4) == 0 {
			in.Groups[i].Demand.GPUs = 1
		}
	}
	in.Queues = nil
	for q := range 4 {
		run := api.Capacity{CPU: r.Int64N(20000), Memory: r.Int64N(40 * gib), GPUs: r.Int64N(4)}
		iq := placement.Queue{Name: fmt.Sprint("q", q), Running: run, Tasks: r.Int64N(20), Weight: 1 + r.Int64N(3)}
		if r.IntN(4) > 0 {
			capOf := func(running, scale int64) int64 {
				if r.IntN(2) == 0 {
					return 0
				}
				return max(1, running+r.Int64N(scale)-scale/8)
			}
			iq.Caps = api.QueueCaps{CPU: capOf(run.CPU, 30000), Memory: capOf(run.Memory, 60*gib), GPUs: capOf(run.GPUs, 6), Tasks: capOf(iq.Tasks, 40)}
		}
		in.Queues = append(in.Queues, iq)
	}
}

// uncapped returns a copy of in without caps.
func uncapped(in *placement.Input) *placement.Input {
	out := *in
	out.Queues = slices.Clone(in.Queues)
	for i := range out.Queues {
		out.Queues[i].Caps = api.QueueCaps{}
	}
	return &out
}

// placedIn sums by the queue of their group in in the tasks plan places
// or retries at once (ReasonConflict: the flow placed them, and the fit
// check found them short of room in a dimension the flow does not see,
// which depends on which of several flows the solver found).
func placedIn(in *placement.Input, plan *placement.Plan) map[string]int64 {
	queue := map[placement.GroupKey]string{}
	for _, g := range in.Groups {
		queue[g.Key] = g.Queue
	}
	out := map[string]int64{}
	for _, a := range plan.Assignments {
		out[queue[a.Group]] += a.Count
	}
	for _, pd := range plan.Pending {
		if pd.Reason == placement.ReasonConflict {
			out[queue[pd.Group]] += pd.Count
		}
	}
	return out
}

// TestQuotaProperties places random rounds over queues with random caps,
// committing each plan and charging its queues, and checks each round:
// the plan's invariants, no queue past a cap, quota reasons only for
// capped queues. It logs how often, compared with the same round without
// caps, the queues without caps place (or retry at once) fewer tasks
// together, and a plain group of a capped queue is left pending (but to be retried at
// once) while its queue is under every cap for it and a node has room for
// it: both follow from the fit check's conflicts, which change with the
// flow, from ties the solver breaks either way, and from the pass before
// the flow offering a group only what fits under the caps at the round's
// start (TestQuotaPropertiesExact checks both where none of these
// arise).
func TestQuotaProperties(t *testing.T) {
	r := seedtest.Rand(t)
	var rounds, held, fewer, idle int
	for run := range 60 {
		in := randomInput(r, 1+r.IntN(25), 1+r.IntN(12))
		randomQueues(r, in)
		p := placement.New(nil)
		for round := range 4 {
			plan, err := p.Place(context.Background(), in)
			if err != nil {
				t.Fatalf("run %d round %d: %v", run, round, err)
			}
			checkPlan(t, in, plan)
			checkCaps(t, in, plan)
			free, err := placement.New(nil).Place(context.Background(), uncapped(in))
			if err != nil {
				t.Fatal(err)
			}
			capped, without := placedIn(in, plan), placedIn(in, free)
			var c, w int64
			for _, q := range in.Queues {
				if !q.Caps.Capped() {
					c, w = c+capped[q.Name], w+without[q.Name]
				}
			}
			if c < w {
				fewer++
			}
			for _, g := range idleRoom(in, plan) {
				if !slices.Contains(idleRoom(uncapped(in), free), g) {
					idle++
				}
			}
			for _, pd := range plan.Pending {
				if len(pd.Reason) > 6 && pd.Reason[:6] == "queue " {
					held++
				}
			}
			rounds++
			// Commit: the queues hold what was placed.
			for _, a := range plan.Assignments {
				g := in.Groups[slices.IndexFunc(in.Groups, func(g placement.Group) bool { return g.Key == a.Group })]
				qi := slices.IndexFunc(in.Queues, func(q placement.Queue) bool { return q.Name == g.Queue })
				in.Queues[qi].Running = in.Queues[qi].Running.Plus(g.Demand, a.Count)
				in.Queues[qi].Tasks += a.Count
			}
			commit(in, plan)
			for i := range in.Nodes {
				if r.IntN(3) == 0 {
					in.Nodes[i].Free = in.Nodes[i].Capacity
				}
			}
		}
	}
	t.Logf("%d rounds, %d groups held by quota; %d times the queues without caps placed fewer, %d times a group of a capped queue waited beside room under its caps",
		rounds, held, fewer, idle)
	if held == 0 {
		t.Error("no round held a task back by its queue's caps")
	}
}

// idleRoom lists the plain groups (no gang, constraint, pool, distinct
// nodes or preference) of capped queues that plan leaves with pending
// tasks, for another reason than ReasonConflict (those are retried at
// once), although their queue is under every cap for one more and a node
// has room for one in its tier once the plan's assignments are made.
func idleRoom(in *placement.Input, plan *placement.Plan) []string {
	free := map[string]api.Allocatable{}
	for _, n := range in.Nodes {
		free[n.ID] = n.Free
	}
	groups := map[placement.GroupKey]*placement.Group{}
	for i := range in.Groups {
		groups[in.Groups[i].Key] = &in.Groups[i]
	}
	used := map[string]api.Capacity{}
	tasks := map[string]int64{}
	for _, q := range in.Queues {
		used[q.Name], tasks[q.Name] = q.Running, q.Tasks
	}
	for _, a := range plan.Assignments {
		g := groups[a.Group]
		f := free[a.Node]
		f.AddTier(g.QoS, g.Demand, -(a.Count - int64(len(a.Slots))))
		free[a.Node] = f
		used[g.Queue] = used[g.Queue].Plus(g.Demand, a.Count)
		tasks[g.Queue] += a.Count
	}
	var out []string
	for _, pd := range plan.Pending {
		g := groups[pd.Group]
		if pd.Reason == placement.ReasonConflict || slices.Contains(out, g.Key.String()) ||
			g.Gang || g.DistinctNodes || g.Pool != "" || len(g.Constraints) > 0 || len(g.Preferred) > 0 {
			continue
		}
		qi := slices.IndexFunc(in.Queues, func(q placement.Queue) bool { return q.Name == g.Queue })
		if qi < 0 || !in.Queues[qi].Caps.Capped() {
			continue
		}
		c, u := in.Queues[qi].Caps, used[g.Queue]
		under := func(capv, have, per int64) bool { return capv == 0 || per == 0 || have+per <= capv }
		if !under(c.CPU, u.CPU, g.Demand.CPU) || !under(c.Memory, u.Memory, g.Demand.Memory) || !under(c.GPUs, u.GPUs, g.Demand.GPUs) || !under(c.Tasks, tasks[g.Queue], 1) {
			continue
		}
		for _, f := range free {
			tier := f.Offline
			if g.QoS == api.QoSOnline {
				tier = f.Online
			}
			if tier.CPU >= g.Demand.CPU && tier.Memory >= g.Demand.Memory && tier.GPUs >= g.Demand.GPUs {
				out = append(out, g.Key.String())
				break
			}
		}
	}
	return out
}

// TestQuotaPropertiesExact places random rounds whose groups are of one
// shape and class (offline, no gang, constraint, pool, distinct nodes,
// preference or slot), which the flow places exactly (no conflicts), over
// queues with random caps on CPU and tasks, and checks against the same
// round without caps: the queues without caps place at least as many
// tasks together, and no task of a capped queue is left pending while its queue is
// under its caps for it and a node has room for it.
func TestQuotaPropertiesExact(t *testing.T) {
	r := seedtest.Rand(t)
	var held int
	for run := range 150 {
		in := exactRound(r)
		plan := place(t, in)
		checkCaps(t, in, plan)
		free := place(t, uncapped(in))
		if plan.Stats.RepairedConflict != 0 || free.Stats.RepairedConflict != 0 {
			t.Fatalf("run %d: conflicts in a round of one class", run)
		}
		// Together: a capped queue's share of contended capacity goes to
		// the others by their weights, which may move some from one to
		// another.
		capped, without := placedIn(in, plan), placedIn(in, free)
		var c, w int64
		for _, q := range in.Queues {
			if !q.Caps.Capped() {
				c, w = c+capped[q.Name], w+without[q.Name]
			}
		}
		if c < w {
			t.Errorf("run %d: the queues without caps placed %d, %d when no queue has caps", run, c, w)
		}
		if idle := idleRoom(in, plan); len(idle) > 0 {
			t.Errorf("run %d: groups %v left pending under their queues' caps beside a node with room", run, idle)
		}
		for _, pd := range plan.Pending {
			if len(pd.Reason) > 6 && pd.Reason[:6] == "queue " {
				held++
			}
		}
	}
	if held == 0 {
		t.Error("no round held a task back by its queue's caps")
	}
}

// exactRound is a round of TestQuotaPropertiesExact.
func exactRound(r *rand.Rand) *placement.Input {
	in := &placement.Input{}
	for i := range 1 + r.IntN(12) {
		n := node(fmt.Sprintf("n%d", i), 1000*(1+r.Int64N(16)), 64)
		n.Free.Offline.CPU = r.Int64N(n.Capacity.Offline.CPU + 1)
		in.Nodes = append(in.Nodes, n)
	}
	for i := range 1 + r.IntN(10) {
		g := inQueue(group(fmt.Sprint("j", i), 1+r.Int64N(30), 1000, 1), fmt.Sprint("q", r.IntN(4)))
		g.Priority = int32(r.IntN(3))
		// Waits apart by more than a second, so that no two groups'
		// tasks cost the same to leave pending (ties the solver may
		// break either way).
		g.Waited = time.Duration(i*60+r.IntN(30)) * time.Second
		in.Groups = append(in.Groups, g)
	}
	for q := range 4 {
		iq := placement.Queue{Name: fmt.Sprint("q", q), Running: res(1000*r.Int64N(10), r.Int64N(10)), Tasks: r.Int64N(10), Weight: 1 + r.Int64N(3)}
		if r.IntN(3) > 0 {
			iq.Caps = api.QueueCaps{CPU: 1000 * r.Int64N(30), Tasks: r.Int64N(30)}
		}
		in.Queues = append(in.Queues, iq)
	}
	return in
}

// BenchmarkPlaceCapped is BenchmarkPlace's rounds with the groups spread
// over four queues, two of them capped at a quarter of what they ask for
// (one on CPU, one on tasks): the cost of caps that bind.
func BenchmarkPlaceCapped(b *testing.B) {
	for _, size := range []struct{ nodes, tasks int }{{1000, 10000}, {10000, 100000}} {
		b.Run(fmt.Sprintf("%dx%d", size.nodes, size.tasks), func(b *testing.B) {
			in := benchInput(size.nodes, size.tasks, 1)
			var cpu, tasks [4]int64
			for i := range in.Groups {
				g := &in.Groups[i]
				q := i % 4
				g.Queue = fmt.Sprint("q", q)
				cpu[q] += g.Pending * g.Demand.CPU
				tasks[q] += g.Pending
			}
			in.Queues = []placement.Queue{{Name: "q0", Caps: api.QueueCaps{CPU: cpu[0] / 4}}, {Name: "q1", Caps: api.QueueCaps{Tasks: tasks[1] / 4}}}
			var plan *placement.Plan
			for b.Loop() {
				var err error
				if plan, err = placement.New(nil).Place(context.Background(), in); err != nil {
					b.Fatal(err)
				}
			}
			held := int64(0)
			for _, pd := range plan.Pending {
				if strings.HasPrefix(pd.Reason, "queue ") {
					held += pd.Count
				}
			}
			b.ReportMetric(float64(plan.Stats.Placed), "placed")
			b.ReportMetric(float64(held), "held")
			b.ReportMetric(float64(plan.Stats.Solve.Microseconds())/1000, "solve-ms")
		})
	}
}
