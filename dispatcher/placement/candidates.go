package placement

import (
	"cmp"
	"slices"
)

// minCandidates is the fewest candidates a class keeps when it has that
// many admitted nodes.
const minCandidates = 32

// maxCachedClasses bounds the classes whose every node's verdict a Placer
// keeps between rounds: at most 10 MB at 10,000 nodes.
const maxCachedClasses = 32

// verdict is what a class's filters and scorers said of one node (32
// bytes).
type verdict struct {
	cost, fit, slots int64
	// by is the filter that rejected the node (an index in the class's
	// Filters), when not admitted.
	by       int32
	admitted bool
}

// verdicts are a class's verdicts on every node of the last input, kept
// by the Placer while the class appears in every round, so that a round
// whose input is Kept judges again only the nodes in Changed.
type verdicts struct {
	round    uint64 // the last round that used it
	byNode   []verdict
	rejected []int // by filter index: the nodes it rejected
}

// candidates runs c's filters and scorers over the nodes, counting
// rejections, and keeps the cheapest admitted nodes (by cost, then
// position): enough to hold twice the class's demand, and at least
// minCandidates, so that the solver has room to choose without the
// network growing with the cluster. For a Kept input it judges again only
// the changed nodes of a class it judged in the last round. The
// candidates live in p.scratch.kept until the next round.
func (p *Placer) candidates(in *Input, c *class) {
	v := p.verdictsOf(in, c)
	for fi, k := range v.rejected {
		if k > 0 {
			c.rejected[c.Filters[fi].Name()] += k
		}
	}
	// Choose by counting the admitted nodes and their room per cost (costs
	// run from 0 to maxPlaceCost) rather than sorting them all: the
	// threshold cost is the first at which the cheapest nodes hold enough;
	// of the nodes at the threshold, the first ones by position are taken
	// until they do.
	count, room := &p.scratch.costCount, &p.scratch.costRoom
	clear(count[:])
	clear(room[:])
	admitted := 0
	for i := range v.byNode {
		if d := &v.byNode[i]; d.admitted {
			count[d.cost]++
			room[d.cost] += d.fit + d.slots
			admitted++
		}
	}
	enough := func(k int, r int64) bool { return k >= minCandidates && r >= 2*c.demand }
	threshold := int64(maxPlaceCost)
	var k int
	var r int64
	for cost := range count {
		if enough(k+int(count[cost]), r+room[cost]) {
			threshold = int64(cost)
			break
		}
		k += int(count[cost])
		r += room[cost]
	}
	start := len(p.scratch.kept)
	for i := range v.byNode {
		d := &v.byNode[i]
		switch {
		case !d.admitted || d.cost > threshold:
		case d.cost < threshold:
			p.scratch.kept = append(p.scratch.kept, candidate{node: i, cost: d.cost, fit: d.fit, slots: d.slots})
		case !enough(k, r):
			p.scratch.kept = append(p.scratch.kept, candidate{node: i, cost: d.cost, fit: d.fit, slots: d.slots})
			k++
			r += d.fit + d.slots
		}
	}
	chosen := p.scratch.kept[start:len(p.scratch.kept):len(p.scratch.kept)]
	slices.SortFunc(chosen, func(a, b candidate) int { return cmp.Or(cmp.Compare(a.cost, b.cost), cmp.Compare(a.node, b.node)) })
	c.candidates = chosen
}

// verdictsOf returns c's verdicts on in's nodes: the last round's, with
// the changed nodes judged again, when in is Kept and c was judged in the
// last round; else every node judged afresh.
func (p *Placer) verdictsOf(in *Input, c *class) *verdicts {
	// A class's verdicts stay in p.verdicts only while it appears in
	// every round (forgetVerdicts): those found are the last round's.
	v := p.verdicts[c.key]
	fresh := v == nil || !in.Kept || len(v.byNode) != len(in.Nodes)
	if v == nil {
		if len(p.verdicts) >= maxCachedClasses {
			v = &p.scratch.uncached
		} else {
			v = &verdicts{}
			p.verdicts[c.key] = v
		}
	}
	v.round = p.round
	if fresh {
		v.byNode = slices.Grow(v.byNode[:0], len(in.Nodes))[:len(in.Nodes)]
		v.rejected = append(v.rejected[:0], make([]int, len(c.Filters))...)
		for i := range in.Nodes {
			v.byNode[i] = judge(c, &in.Nodes[i])
			if d := &v.byNode[i]; !d.admitted {
				v.rejected[d.by]++
			}
		}
		return v
	}
	for _, i := range in.Changed {
		old := &v.byNode[i]
		if !old.admitted {
			v.rejected[old.by]--
		}
		*old = judge(c, &in.Nodes[i])
		if !old.admitted {
			v.rejected[old.by]++
		}
	}
	return v
}

// judge runs c's filters and scorers on n.
func judge(c *class, n *Node) verdict {
	for fi, f := range c.Filters {
		if !f.Admit(&c.Class, n) {
			return verdict{by: int32(fi)}
		}
	}
	d := verdict{admitted: true, cost: c.cost(n), fit: fits(pool(n.Free, c.QoS), c.Demand), slots: matchingSlots(&c.Class, n)}
	if c.DistinctNodes || len(c.StaticPorts) > 0 {
		// One task a node: a job's, or one that holds a port by number.
		d.fit, d.slots = min(d.fit, 1), min(d.slots, max(1-d.fit, 0))
	}
	return d
}

// forgetVerdicts drops the verdicts of the classes the round did not
// have.
func (p *Placer) forgetVerdicts() {
	for k, v := range p.verdicts {
		if v.round != p.round {
			delete(p.verdicts, k)
		}
	}
}
