package flowsolver

// Global price updates: Goldberg's heuristic that recomputes prices from
// shortest paths to the deficit nodes, replacing many small relabels by one
// search. Under the new prices every residual arc is still ε-optimal, and
// flow can move from every excess node to a deficit along arcs whose reduced
// costs lead downhill.

// globalUpdate lowers every node's price by ε times its distance to the
// nearest deficit, where a residual arc of reduced cost rc has length 0 if
// rc < 0 and rc/ε + 1 otherwise. Distances are integers, so the search is
// Dial's bucket queue, linear in the arcs it scans; distances of n or more
// are not followed (a node left at such a distance is treated as not
// reached, which only lowers it less than its true distance would). The
// search stops once every excess node has its distance and that distance is
// finished; nodes not settled by then are lowered by one step more than the
// largest distance settled, which keeps ε-optimality: such a node's
// distance is at least that much (an arc from it into a settled node would
// have given it a distance, and an unfinished one would be larger).
func (nw *network) globalUpdate(eps int64) {
	n := nw.n
	dist, done := nw.searchScratch()
	const unreached = -1
	limit := int64(n) + 1
	if len(nw.buckets) < int(limit) {
		nw.buckets = append(nw.buckets, make([][]int32, int(limit)-len(nw.buckets))...)
	}
	buckets := nw.buckets
	pending, active := 0, 0
	for u := range n {
		dist[u] = unreached
		switch {
		case nw.excess[u] < 0:
			dist[u] = 0
			buckets[0] = append(buckets[0], int32(u))
			pending++
		case nw.excess[u] > 0:
			active++
		}
	}
	last := int64(0)
	for d := int64(0); d < limit && pending > 0; d++ {
		b := buckets[d]
		for j := 0; j < len(b); j++ {
			v := b[j]
			pending--
			if done[v] || dist[v] != d {
				continue
			}
			done[v] = true
			if nw.excess[v] > 0 {
				active--
			}
			pv := nw.price[v]
			lo, hi := nw.first[v], nw.end[v]
			hs := nw.head[lo:hi]
			rv, cs := nw.rev[lo:hi], nw.cost[lo:hi]
			rv, cs = rv[:len(hs)], cs[:len(hs)]
			for k, u := range hs {
				if nw.res[rv[k]] == 0 || done[u] { // res of the residual arc u -> v
					continue
				}
				nd := d
				if rc := -cs[k] + nw.price[u] - pv; rc >= 0 { // the cost of u -> v is -cs[k]
					nd += min(rc/eps+1, limit)
				}
				if nd < limit && (dist[u] == unreached || nd < dist[u]) {
					dist[u] = nd
					if nd == d {
						b = append(b, u)
					} else {
						buckets[nd] = append(buckets[nd], u)
					}
					pending++
				}
			}
		}
		buckets[d] = b[:0]
		last = d
		if active == 0 {
			break
		}
	}
	if pending > 0 {
		for d := range buckets[:limit] {
			buckets[d] = buckets[d][:0]
		}
	}
	for u := range n {
		if done[u] {
			nw.price[u] -= dist[u] * eps
		} else {
			nw.price[u] -= (last + 1) * eps
		}
	}
}
