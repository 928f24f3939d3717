package placement

import (
	"context"
	"math"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/api"
)

// Queue caps (Queue.Caps) bound the sum of a queue's tasks' demands, of
// whatever shapes: a knapsack, which a single-commodity flow cannot hold.
// They are kept in three steps around it:
//
//  1. Before the flow, a group is offered at most the tasks that fit under
//     its queue's caps on their own (a gang that does not fit whole is
//     offered none), so that the flow does not give a capped queue the
//     capacity of many rounds.
//  2. The fit check (Placer.fit) takes the assignments in priority order
//     and counts each queue's use as it goes: an assignment that would take
//     its queue past a cap is cut to what fits, and a gang cut short is
//     dropped with the other incomplete gangs. This is what makes the caps
//     hold: nothing reaches a plan without passing it.
//  3. When step 2 cut anything, the flow's capacity for the cut tasks is
//     unused: the round is placed again with each group of the queues cut
//     offered what step 2 placed of it (which fits under the caps
//     together), so that the other queues get that capacity. Another
//     queue may then be cut in turn (the capacity freed lets more of its
//     groups' offers through than fit under its caps together): this
//     repeats while something is cut, at most maxQuotaPasses times. Each
//     pass offers fewer tasks than the one before.
//
// Every pass prices the tasks it offers as the whole input would (the cost
// model and fair-share tiers of the input, each group's cut to what it
// offers), so that the tasks held back weigh in the queues' fair shares
// as they would without caps and change no other queue's costs: a
// capped queue's capacity goes to the others. With no capped queue in
// the input none of this runs.

// maxQuotaPasses bounds the placements again of a round whose fit check
// cut tasks for their queues' caps (step 3). A round that still cuts
// after them keeps its last plan, which its fit check kept under the
// caps.
const maxQuotaPasses = 4

// QuotaReason is the pending reason of tasks of queue held back because one
// more would take the queue past its cap on dim ("cpu", "memory", "gpus" or
// "tasks").
func QuotaReason(queue, dim string) string { return "queue " + queue + " over its " + dim + " quota" }

// isQuotaReason reports whether reason is a QuotaReason.
func isQuotaReason(reason string) bool {
	return strings.HasPrefix(reason, "queue ") && strings.HasSuffix(reason, " quota")
}

// queueRoom is a capped queue's use during a round's fit check.
type queueRoom struct {
	name string
	caps api.QueueCaps
	// base is what the queue's active tasks hold at the round's start
	// (baseTasks of them); used and tasks add the fit check's
	// assignments so far.
	base      api.Capacity
	baseTasks int64
	used      api.Capacity
	tasks     int64
}

// fits returns how many tasks of demand d the queue may still be given.
// A cap binds only a dimension the task takes: a task without GPUs is not
// held back by a queue at (or over) its GPU cap.
func (r *queueRoom) fits(d api.Capacity) int64 {
	n := int64(math.MaxInt64)
	if r.caps.CPU > 0 {
		n = min(n, under(r.caps.CPU, r.used.CPU, d.CPU))
	}
	if r.caps.Memory > 0 {
		n = min(n, under(r.caps.Memory, r.used.Memory, d.Memory))
	}
	if r.caps.GPUs > 0 {
		n = min(n, under(r.caps.GPUs, r.used.GPUs, d.GPUs))
	}
	if r.caps.Tasks > 0 {
		n = min(n, under(r.caps.Tasks, r.tasks, 1))
	}
	return n
}

// under returns how many amounts per fit between used and limit.
func under(limit, used, per int64) int64 {
	switch {
	case per <= 0:
		return math.MaxInt64
	case used >= limit:
		return 0
	}
	return (limit - used) / per
}

// reason says which cap lets only k more tasks of demand d in (k is
// fits(d)): the first of cpu, memory, gpus and tasks that does.
func (r *queueRoom) reason(d api.Capacity, k int64) string {
	dim := "tasks"
	switch {
	case r.caps.CPU > 0 && under(r.caps.CPU, r.used.CPU, d.CPU) == k:
		dim = "cpu"
	case r.caps.Memory > 0 && under(r.caps.Memory, r.used.Memory, d.Memory) == k:
		dim = "memory"
	case r.caps.GPUs > 0 && under(r.caps.GPUs, r.used.GPUs, d.GPUs) == k:
		dim = "gpus"
	}
	return QuotaReason(r.name, dim)
}

// take counts k tasks of demand d as given to the queue.
func (r *queueRoom) take(d api.Capacity, k int64) {
	r.used = r.used.Plus(d, k)
	r.tasks += k
}

// quotas are the capped queues of a round, by name.
type quotas map[string]*queueRoom

// newQuotas returns in's capped queues, or nil when it has none.
func newQuotas(in *Input) quotas {
	var q quotas
	for _, iq := range in.Queues {
		if !iq.Caps.Capped() {
			continue
		}
		if q == nil {
			q = quotas{}
		}
		q[iq.Name] = &queueRoom{name: iq.Name, caps: iq.Caps, base: iq.Running, baseTasks: iq.Tasks, used: iq.Running, tasks: iq.Tasks}
	}
	return q
}

// reset forgets what the fit check gave the queues.
func (q quotas) reset() {
	for _, r := range q {
		r.used, r.tasks = r.base, r.baseTasks
	}
}

// placeCapped places in, whose queues p.quota holds capped (steps 1 and
// 3 above; step 2 is the fit check's), and answers for every task of in.
func (p *Placer) placeCapped(ctx context.Context, in *Input) (*Plan, error) {
	p.quotaCosts = newCostModel(in)
	fair := fairShares(in, p.quotaCosts.levels)
	p.quotaFair = make(map[GroupKey][]fairTier, len(in.Groups))
	for gi := range in.Groups {
		p.quotaFair[in.Groups[gi].Key] = fair[gi]
	}
	// held lists the tasks taken out of the round, with their reasons.
	var held []Pending
	work := *in
	work.Groups = slices.Clone(in.Groups)
	for i := range work.Groups {
		g := &work.Groups[i]
		r := p.quota[g.Queue]
		if r == nil {
			continue
		}
		if k := r.fits(g.Demand); k < g.Pending {
			reason := r.reason(g.Demand, k)
			if g.Gang {
				k = 0
			}
			held = append(held, Pending{Group: g.Key, Count: g.Pending - k, Reason: reason})
			g.Pending = k
		}
	}
	// Groups left with nothing to offer leave the round (gangs that fail
	// are retried without others only when nothing else is left).
	work.Groups = slices.DeleteFunc(work.Groups, func(g Group) bool { return g.Pending == 0 })
	plan, err := p.place(ctx, &work)
	if err != nil {
		return nil, err
	}
	for range maxQuotaPasses {
		cut := map[string]bool{}
		for _, pd := range plan.Pending {
			if isQuotaReason(pd.Reason) {
				cut[p.quotaGroups[pd.Group]] = true
			}
		}
		if len(cut) == 0 {
			break
		}
		// The groups of the queues cut are offered what was placed of
		// them; what the plan left of them keeps its reason.
		placed := placedBy(plan)
		for _, pd := range plan.Pending {
			if cut[p.quotaGroups[pd.Group]] {
				held = append(held, pd)
			}
		}
		for i := range work.Groups {
			if g := &work.Groups[i]; cut[g.Queue] {
				g.Pending = placed[g.Key]
			}
		}
		work.Groups = slices.DeleteFunc(work.Groups, func(g Group) bool { return g.Pending == 0 })
		again, err := p.place(ctx, &work)
		if err != nil {
			return nil, err
		}
		again.Stats.Build += plan.Stats.Build
		again.Stats.Solve += plan.Stats.Solve
		plan = again
	}
	return settle(in, plan, held), nil
}

// costs returns the cost model of in and its groups' fair-share tiers.
// With capped queues, in is a part of the input being placed (fewer
// tasks, or fewer groups): the whole input's model and tiers are used,
// each group's cut to its tasks (its first tiers, which carry the most
// bonus), so that the tasks caps hold back still weigh in the queues'
// fair shares as they would without caps, and the caps change no other
// queue's costs.
func (p *Placer) costs(in *Input) (costModel, [][]fairTier) {
	if p.quota == nil {
		m := newCostModel(in)
		return m, fairShares(in, m.levels)
	}
	fair := make([][]fairTier, len(in.Groups))
	for gi := range in.Groups {
		g := &in.Groups[gi]
		left := g.Pending
		for _, t := range p.quotaFair[g.Key] {
			if left == 0 {
				break
			}
			t.count = min(t.count, left)
			fair[gi] = append(fair[gi], t)
			left -= t.count
		}
	}
	return p.quotaCosts, fair
}

// placedBy sums plan's assignments by group.
func placedBy(plan *Plan) map[GroupKey]int64 {
	placed := make(map[GroupKey]int64, len(plan.Assignments))
	for _, a := range plan.Assignments {
		placed[a.Group] += a.Count
	}
	return placed
}

// settle makes plan, placed from a part of in's tasks, answer for every
// task of in: its pending entries and held (the tasks taken out of the
// round) become one entry per group and reason, in the order of in's
// groups, then of the first entry of each reason.
func settle(in *Input, plan *Plan, held []Pending) *Plan {
	by := make(map[GroupKey][]Pending, len(plan.Pending)+len(held))
	for _, pd := range slices.Concat(plan.Pending, held) {
		if pd.Count == 0 {
			continue
		}
		ps := by[pd.Group]
		if i := slices.IndexFunc(ps, func(q Pending) bool { return q.Reason == pd.Reason }); i >= 0 {
			ps[i].Count += pd.Count
			continue
		}
		by[pd.Group] = append(ps, pd)
	}
	out := make([]Pending, 0, len(plan.Pending)+len(held))
	for i := range in.Groups {
		out = append(out, by[in.Groups[i].Key]...)
	}
	plan.Pending = out
	plan.Stats.Pending = 0
	for _, pd := range out {
		plan.Stats.Pending += pd.Count
	}
	plan.Stats.Groups = len(in.Groups)
	return plan
}
