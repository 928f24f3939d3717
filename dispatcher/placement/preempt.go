package placement

import (
	"cmp"
	"slices"
	"time"

	"github.com/sluicehq/sluice/api"
)

// Victim is a running offline task that preemption may stop.
type Victim struct {
	// Task is the task's ID (with its attempt).
	Task     string
	Priority int32
	// Demand is what the task holds on its node's offline tier.
	Demand api.Capacity
	// Since is when the task last changed state: the most recently started
	// victims lose the least work.
	Since time.Time
}

// Preempt chooses running offline tasks to stop so that the offline groups
// a round's plan left pending for lack of capacity (ReasonNoCapacity, or
// ReasonNoCandidates) can run, as many of their tasks as their queues'
// caps let run beside what the queues hold and the plan assigns: at most
// limit
// of them, for the groups in the order of in.Groups (highest priority
// first). in is the round's input, as Place accepted it, and plan its
// outcome; each node's
// Victims are its running offline tasks (of any priority: only those of a
// lower priority than a group are stopped for it), and its Releasing what
// tasks already told to stop still hold.
//
// Tasks that fit once what is being released is free wait for it instead
// of stopping more. Otherwise a task goes to the admitted node (its class's
// filters but the resource filter) where the fewest victims of the lowest
// priority make room: victims are taken lowest priority first, then most
// recently started. Online groups preempt nothing (an online task draws on
// the online tier, which offline work does not hold), nor do gang groups.
// Like Place, Preempt does not change its input, and the same input gives
// the same answer.
func (p *Placer) Preempt(in *Input, plan *Plan, limit int) []Preemption {
	if limit <= 0 {
		return nil
	}
	groups := make(map[GroupKey]*Group, len(in.Groups))
	for i := range in.Groups {
		groups[in.Groups[i].Key] = &in.Groups[i]
	}
	wants := make([]*Group, 0, len(plan.Pending))
	left := map[GroupKey]int64{}
	for _, pd := range plan.Pending {
		g := groups[pd.Group]
		if preemptible(pd.Reason) && g != nil && g.QoS == api.QoSOffline && !g.Gang && g.Priority > 0 {
			if left[g.Key] == 0 {
				wants = append(wants, g)
			}
			left[g.Key] += pd.Count
		}
	}
	if len(wants) == 0 {
		return nil
	}
	slices.SortStableFunc(wants, func(a, b *Group) int { return cmp.Compare(b.Priority, a.Priority) })

	// avail is each node's offline tier once the plan's assignments are
	// taken and what is being released is free; victims its victims in the
	// order they are taken, and next the first not taken yet.
	idx := make(map[string]int, len(in.Nodes))
	avail := make([]api.Capacity, len(in.Nodes))
	victims := make([][]Victim, len(in.Nodes))
	next := make([]int, len(in.Nodes))
	for i := range in.Nodes {
		n := &in.Nodes[i]
		idx[n.ID] = i
		avail[i] = n.Free.Offline.Plus(n.Releasing.Offline, 1)
		victims[i] = slices.Clone(n.Victims)
		slices.SortFunc(victims[i], func(a, b Victim) int {
			return cmp.Or(cmp.Compare(a.Priority, b.Priority), b.Since.Compare(a.Since), cmp.Compare(a.Task, b.Task))
		})
	}
	// quota is what the capped queues hold once the plan's assignments
	// are made; no victim's stop is counted as lowering it.
	quota := newQuotas(in)
	for _, a := range plan.Assignments {
		g, i := groups[a.Group], idx[a.Node]
		if g != nil && g.QoS == api.QoSOffline {
			avail[i] = avail[i].Plus(g.Demand, int64(len(a.Slots))-a.Count)
		}
		if g != nil && quota[g.Queue] != nil {
			quota[g.Queue].take(g.Demand, a.Count)
		}
	}

	var out []Preemption
	for _, g := range wants {
		filters, _ := p.reg.resolve(g.Policy, g.wantsPorts())
		c := Class{Demand: g.Demand, QoS: g.QoS, Pool: g.Pool, Constraints: g.Constraints, DistinctNodes: g.DistinctNodes, StaticPorts: g.StaticPorts,
			Filters: filters[1:]}
		if g.DistinctNodes {
			c.Job = g.Key.Job
		}
		var admitted []int
		for i := range in.Nodes {
			if admits(&c, &in.Nodes[i]) {
				admitted = append(admitted, i)
			}
		}
		need := left[g.Key]
		if g.DistinctNodes {
			need = min(need, int64(len(admitted)))
		}
		// Room is made only for tasks their queue's caps let run.
		room := quota[g.Queue]
		if room != nil {
			need = min(need, room.fits(g.Demand))
		}
		wanted := need
		// Room being released comes first: those tasks only wait.
		for _, i := range admitted {
			if need == 0 {
				break
			}
			k := min(need, fits(avail[i], g.Demand))
			if g.DistinctNodes {
				k = min(k, 1)
			}
			avail[i] = avail[i].Plus(g.Demand, -k)
			need -= k
		}
		for need > 0 && len(out) < limit {
			best, bestTake, bestPrio := -1, 0, int32(0)
			for _, i := range admitted {
				n, prio, ok := victimsFor(avail[i], victims[i][next[i]:], g)
				if ok && (best < 0 || prio < bestPrio || prio == bestPrio && n < bestTake) {
					best, bestTake, bestPrio = i, n, prio
				}
			}
			if best < 0 || len(out)+bestTake > limit {
				break
			}
			for _, v := range victims[best][next[best] : next[best]+bestTake] {
				out = append(out, Preemption{Task: v.Task, Node: in.Nodes[best].ID, For: g.Key})
				avail[best] = avail[best].Plus(v.Demand, 1)
			}
			next[best] += bestTake
			k := min(need, fits(avail[best], g.Demand))
			if g.DistinctNodes {
				k = min(k, 1)
				admitted = slices.DeleteFunc(admitted, func(i int) bool { return i == best })
			}
			avail[best] = avail[best].Plus(g.Demand, -k)
			need -= k
		}
		if room != nil {
			room.take(g.Demand, wanted-need)
		}
	}
	return out
}

// preemptible reports whether tasks pending for reason may preempt: those
// short of capacity (which the resource filter may have reported as no
// node passing the filters; Preempt applies the others itself).
func preemptible(reason string) bool {
	return reason == ReasonNoCapacity || reason == ReasonNoCandidates
}

// admits reports whether every filter of c admits n.
func admits(c *Class, n *Node) bool {
	for _, f := range c.Filters {
		if !f.Admit(c, n) {
			return false
		}
	}
	return true
}

// victimsFor returns how many of vs (in the order they are taken) must stop
// for one task of g to fit beside avail, and the highest priority among
// them; ok is false when stopping every victim of a lower priority is not
// enough, or none needs to stop.
func victimsFor(avail api.Capacity, vs []Victim, g *Group) (n int, prio int32, ok bool) {
	for i, v := range vs {
		if v.Priority >= g.Priority {
			return 0, 0, false
		}
		avail = avail.Plus(v.Demand, 1)
		if fits(avail, g.Demand) > 0 {
			return i + 1, v.Priority, true
		}
	}
	return 0, 0, false
}
