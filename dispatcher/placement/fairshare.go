package placement

import (
	"cmp"
	"math"
	"slices"

	"github.com/sluicehq/sluice/api"
)

// fairTier is a run of a group's pending tasks whose unscheduled cost
// carries the same fair-share bonus.
type fairTier struct {
	count, bonus int64
}

// fairBonus is the bonus of a task that starts at queue level qb and job
// level jb (0 to levels, where levels is past the share): a lower queue
// level always weighs more, then a lower job level.
func fairBonus(qb, jb, levels int64) int64 {
	return maxFairBonus(levels) - (qb*(levels+1)+jb)*levelStep
}

// fairShares returns, per group of in, its pending tasks as tiers of
// falling fair-share bonus: weighted max-min fairness on the dominant
// resource (as DRF), between queues first and then between the jobs of a
// queue (Quincy's fairness across jobs), by progressive filling.
//
// The active queues (with running or pending tasks) share the cluster by
// weight, and a queue's active jobs share the queue's fair share equally.
// A share is the larger of CPU and memory over the cluster's (each node
// counting the larger of its tiers); a level is a share over its fair
// share, in steps of 1/levels (and one more for past it; with no levels,
// there is no bonus). A job's tasks take job levels
// from what it runs upward; the queue's tasks, taken in the order of their
// job levels (then priority and age, the input's order), take queue levels
// from what the queue runs upward. A task's bonus falls with its queue
// level, then its job level, so at one priority the solver fills the
// queues furthest below their shares first, within them the jobs furthest
// below theirs, and neither a queue nor a job starves behind another's
// backlog.
func fairShares(in *Input, levels int64) [][]fairTier {
	out := make([][]fairTier, len(in.Groups))
	if levels == 0 {
		return out
	}
	var total api.Capacity
	for i := range in.Nodes {
		c := &in.Nodes[i].Capacity
		total.CPU += max(c.Online.CPU, c.Offline.CPU)
		total.Memory += max(c.Online.Memory, c.Offline.Memory)
	}
	if total.CPU <= 0 || total.Memory <= 0 {
		return out
	}
	type queue struct {
		weight int64
		share  float64 // dominant share held, then taken
		target float64
		active bool
		jobs   map[string]float64 // each job's share, held then taken
	}
	queues := map[string]*queue{}
	get := func(name string) *queue {
		q := queues[name]
		if q == nil {
			q = &queue{weight: 1, jobs: map[string]float64{}}
			queues[name] = q
		}
		return q
	}
	for _, iq := range in.Queues {
		q := get(iq.Name)
		if iq.Weight > 0 {
			q.weight = iq.Weight
		}
		q.share = dominant(iq.Running, total)
		q.active = iq.Running.CPU > 0 || iq.Running.Memory > 0
	}
	for i := range in.Groups {
		g := &in.Groups[i]
		q := get(g.Queue)
		if g.Pending > 0 {
			q.active = true
		}
		if _, ok := q.jobs[g.Key.Job]; !ok {
			q.jobs[g.Key.Job] = dominant(g.JobRunning, total)
		}
	}
	var weights int64
	for _, q := range queues {
		if q.active {
			weights += q.weight
		}
	}
	for _, q := range queues {
		q.target = float64(q.weight) / float64(weights)
	}

	// Cut each group's tasks into pieces of one job level.
	type piece struct {
		group int
		count int64
		jb    int64
		per   float64
	}
	pieces := map[string][]piece{} // by queue
	for i := range in.Groups {
		g := &in.Groups[i]
		q := queues[g.Queue]
		per := dominant(g.Demand, total)
		if g.Pending == 0 || per <= 0 {
			continue
		}
		jt := q.target / float64(len(q.jobs))
		for jb, taken := int64(0), int64(0); taken < g.Pending; jb++ {
			end := levelEnd(jb, levels, jt, q.jobs[g.Key.Job], per, g.Pending)
			if n := end - taken; n > 0 {
				pieces[g.Queue] = append(pieces[g.Queue], piece{group: i, count: n, jb: jb, per: per})
				taken = end
			}
		}
		q.jobs[g.Key.Job] += float64(g.Pending) * per
	}
	// Take each queue's pieces by job level, cutting them at queue levels.
	for name, ps := range pieces {
		q := queues[name]
		slices.SortStableFunc(ps, func(a, b piece) int { return cmp.Compare(a.jb, b.jb) })
		for _, p := range ps {
			for qb, taken := int64(0), int64(0); taken < p.count; qb++ {
				end := levelEnd(qb, levels, q.target, q.share, p.per, p.count)
				if n := end - taken; n > 0 {
					out[p.group] = append(out[p.group], fairTier{count: n, bonus: fairBonus(qb, p.jb, levels)})
					taken = end
				}
			}
			q.share += float64(p.count) * p.per
		}
	}
	return out
}

// contended reports whether the round's pending tasks ask for more CPU or
// memory of a tier than the nodes have free in it. Without contention the
// fair-share bonus changes nothing (what does not fit is a matter of
// packing, not of shares) and its larger costs slow the solver, so the
// round's cost model has no fair-share levels. Free is never negative (an
// input's is validated), so the sum stops at the first nodes that cover
// the demand: a round on 10,000 nodes with room to spare reads a few.
func contended(in *Input) bool {
	var want, free api.Allocatable
	for i := range in.Groups {
		g := &in.Groups[i]
		want.AddTier(g.QoS, g.Demand, g.Pending)
	}
	covered := func() bool {
		return want.Online.CPU <= free.Online.CPU && want.Online.Memory <= free.Online.Memory &&
			want.Offline.CPU <= free.Offline.CPU && want.Offline.Memory <= free.Offline.Memory
	}
	for i := range in.Nodes {
		if covered() {
			return false
		}
		free.Online = free.Online.Plus(in.Nodes[i].Free.Online, 1)
		free.Offline = free.Offline.Plus(in.Nodes[i].Free.Offline, 1)
	}
	return !covered()
}

// levelEnd returns how many of count tasks of dominant share per, taken
// from share upward, start below level b+1 of levels of fair share target:
// all of them at the last level.
func levelEnd(b, levels int64, target, share, per float64, count int64) int64 {
	if b >= levels {
		return count
	}
	upTo := (float64(b+1)/float64(levels)*target - share) / per
	if upTo >= float64(count) {
		return count
	}
	return max(int64(math.Ceil(upTo)), 0)
}

// dominant returns the larger of c's CPU and memory shares of total.
func dominant(c, total api.Capacity) float64 {
	return max(float64(c.CPU)/float64(total.CPU), float64(c.Memory)/float64(total.Memory))
}
