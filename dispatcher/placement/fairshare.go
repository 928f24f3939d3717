package placement

import (
	"math"

	"github.com/sluicehq/sluice/api"
)

// shareLevels is how finely fairShares tells apart how far below its
// share a queue is.
const shareLevels = 8

// fairTier is a run of a group's pending tasks whose unscheduled cost
// carries the same fair-share bonus.
type fairTier struct {
	count, bonus int64
}

// fairShares returns, per group of in, its pending tasks that are under
// their queue's fair share, by how far under, as tiers of rising level
// and falling bonus (weighted max-min dominant resource fairness, as DRF,
// by progressive filling). The active queues (with running or pending
// tasks) share the cluster by weight; a queue's share is the larger of its
// CPU and memory over the cluster's (each node counting the larger of its
// tiers); its level is its share over its fair share. A task starting at
// level L (0 ≤ L < 1) gets the bonus of L's eighth: fairShareBonus below
// 1/8, one levelStep less for each eighth above; tasks past the fair share
// get none. A
// queue's groups take its tasks in the input's order (priority, then age).
// Leaving a task of a lower level pending costs more, so at one priority
// the solver fills the queues furthest below their shares first and no
// queue starves behind another's backlog.
func fairShares(in *Input) [][]fairTier {
	out := make([][]fairTier, len(in.Groups))
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
		share  float64 // dominant share of the cluster held, then taken
		target float64
		active bool
	}
	queues := map[string]*queue{}
	get := func(name string) *queue {
		q := queues[name]
		if q == nil {
			q = &queue{weight: 1}
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
		if in.Groups[i].Pending > 0 {
			get(in.Groups[i].Queue).active = true
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
	for i := range in.Groups {
		g := &in.Groups[i]
		q := queues[g.Queue]
		per := dominant(g.Demand, total)
		if g.Pending == 0 || per <= 0 {
			continue
		}
		// Tasks [0, ends[b]) of the group start below level (b+1)/8.
		var taken int64
		for b := int64(0); b < shareLevels && taken < g.Pending; b++ {
			upTo := (float64(b+1)/shareLevels*q.target - q.share) / per
			end := g.Pending
			if upTo < float64(g.Pending) {
				end = max(int64(math.Ceil(upTo)), 0)
			}
			if n := end - taken; n > 0 {
				out[i] = append(out[i], fairTier{count: n, bonus: (shareLevels - b) * levelStep})
				taken = end
			}
		}
		q.share += float64(taken) * per
	}
	return out
}

// dominant returns the larger of c's CPU and memory shares of total.
func dominant(c, total api.Capacity) float64 {
	return max(float64(c.CPU)/float64(total.CPU), float64(c.Memory)/float64(total.Memory))
}
