package flowsolver

import "math"

// A warm start brings the residual network of the last optimum up to the
// graph's current state. Two ways: patch applies the graph's journal of
// changes to the network in place, costing what changed; rebuild lays the
// network out afresh and puts the last optimum's flow and prices back on
// the nodes and arcs that are still there, costing the whole graph. Either
// way the flow then respects every bound, each node's excess is its supply
// minus what the flow takes out of it, and no residual arc has a negative
// reduced cost: what the changes disturbed is left as excesses and
// deficits for the repair to route.

// patch applies g's changes since the last optimal solve to the network,
// and reports false, having changed nothing, when it cannot: the journal
// was dropped, the node IDs outgrew the network's scale, or the network is
// more garbage than arcs.
func (s *Solver) patch(g *Graph) bool {
	nw := &s.net
	if g.journalEpoch != s.journalEpoch || s.journalPos > len(g.journal) ||
		g.NodeCap() != nw.n || nw.garbage > nw.live {
		return false
	}
	for ma := g.ArcCap(); len(nw.fwd) < ma; {
		nw.fwd = append(nw.fwd, -1)
		nw.arcLower = append(nw.arcLower, 0)
	}
	nw.isFresh = grow(nw.isFresh, nw.n)
	nw.touched, nw.fresh = nw.touched[:0], nw.fresh[:0]
	for _, e := range g.journal[s.journalPos:] {
		if e < 0 {
			nw.syncNode(g, NodeID(-1-e), s.prevStamp)
		} else {
			nw.syncArc(g, ArcID(e), s.prevStamp)
		}
	}
	for _, u := range nw.fresh {
		nw.isFresh[u] = false
		if g.nodeAlive[u] {
			nw.priceNew(u)
		}
	}
	for _, a := range nw.touched {
		if i := nw.fwd[a]; i >= 0 {
			nw.saturateIfNegative(i)
		}
	}
	return true
}

// rebuild lays g out afresh and starts it from the optimum the network held.
func (s *Solver) rebuild(g *Graph) {
	nw := &s.net
	s.prevFlow = nw.arcFlows(s.prevFlow[:0])
	s.prevPotential = nw.appendScaledPrices(s.prevPotential[:0])
	nw.build(g)
	nw.warmStart(g, s.prevFlow, s.prevPotential, s.prevStamp)
	nw.saturateNegative()
}

// syncNode brings node u's supply up to date, and notes it for pricing if
// it is new since stamp.
func (nw *network) syncNode(g *Graph, u NodeID, stamp uint64) {
	var want int64
	if g.nodeAlive[u] {
		want = g.supply[u]
		if g.nodeBorn[u] > stamp && !nw.isFresh[u] {
			nw.isFresh[u] = true
			nw.fresh = append(nw.fresh, u)
		}
	}
	nw.excess[u] += want - nw.supply[u]
	nw.supply[u] = want
}

// syncArc brings arc a up to date: removed (its flow taken back from its
// endpoints), added (empty above its lower bound), or its flow clamped to
// new bounds and its cost changed. An ID reused since stamp is an arc
// removed and another added.
func (nw *network) syncArc(g *Graph, a ArcID, stamp uint64) {
	i := nw.fwd[a]
	alive := g.arcAlive[a]
	if i >= 0 && (!alive || g.arcBorn[a] > stamp) {
		nw.removeArc(a)
		i = -1
	}
	if !alive {
		return
	}
	nw.touched = append(nw.touched, a)
	if i < 0 {
		nw.addArc(g, a)
		return
	}
	j := nw.rev[i]
	t, h := nw.head[j], nw.head[i]
	lo, up := g.lower[a], g.upper[a]
	f := nw.arcLower[a] + nw.res[j]
	nf := min(max(f, lo), up)
	nw.res[i], nw.res[j] = up-nf, nf-lo
	nw.excess[t] += f - nf
	nw.excess[h] -= f - nf
	nw.arcLower[a] = lo
	sc := g.cost[a] * nw.scale
	nw.cost[i], nw.cost[j] = sc, -sc
	nw.maxCost = max(nw.maxCost, sc, -sc)
}

// addArc adds graph arc a, carrying its lower bound.
func (nw *network) addArc(g *Graph, a ArcID) {
	t, h := int32(g.tail[a]), int32(g.head[a])
	if t == h {
		nw.room(t, 2)
	} else {
		nw.room(t, 1)
		nw.room(h, 1)
	}
	i := nw.end[t]
	nw.end[t]++
	j := nw.end[h]
	nw.end[h]++
	lo, up := g.lower[a], g.upper[a]
	sc := g.cost[a] * nw.scale
	nw.head[i], nw.rev[i], nw.res[i], nw.cost[i], nw.arcOf[i] = h, j, up-lo, sc, int32(a)
	nw.head[j], nw.rev[j], nw.res[j], nw.cost[j], nw.arcOf[j] = t, i, 0, -sc, int32(a)
	nw.fwd[a] = i
	nw.arcLower[a] = lo
	nw.excess[t] -= lo
	nw.excess[h] += lo
	nw.maxCost = max(nw.maxCost, sc, -sc)
	nw.live += 2
}

// removeArc deletes graph arc a, giving its flow back to its endpoints.
func (nw *network) removeArc(a ArcID) {
	i := nw.fwd[a]
	j := nw.rev[i]
	t, h := nw.head[j], nw.head[i]
	f := nw.arcLower[a] + nw.res[j]
	nw.excess[t] += f
	nw.excess[h] -= f
	if moved := nw.deleteSlot(t, i); moved == j {
		j = i // a self-loop whose other half filled the hole
	}
	nw.deleteSlot(h, j)
	nw.fwd[a] = -1
	nw.live -= 2
}

// deleteSlot deletes residual arc i of node u by moving u's last arc into
// its place, and returns where that arc came from.
func (nw *network) deleteSlot(u, i int32) int32 {
	last := nw.end[u] - 1
	if i != last {
		nw.moveSlot(last, i)
	}
	nw.end[u] = last
	return last
}

// moveSlot moves residual arc from to slot to, and points its partner and
// its graph arc at the new place.
func (nw *network) moveSlot(from, to int32) {
	nw.head[to], nw.rev[to], nw.res[to], nw.cost[to], nw.arcOf[to] =
		nw.head[from], nw.rev[from], nw.res[from], nw.cost[from], nw.arcOf[from]
	nw.rev[nw.rev[to]] = to
	if a := nw.arcOf[to]; nw.fwd[a] == from {
		nw.fwd[a] = to
	}
}

// room makes space for k more residual arcs at node u, moving its arcs to
// the end of the arrays, into twice the room they need, when they have
// none.
func (nw *network) room(u int32, k int32) {
	if nw.end[u]+k <= nw.limit[u] {
		return
	}
	old, used := nw.first[u], nw.end[u]-nw.first[u]
	size := max(2*(used+k), 4)
	start := int32(len(nw.head))
	nw.head = extend(nw.head, size)
	nw.rev = extend(nw.rev, size)
	nw.res = extend(nw.res, size)
	nw.cost = extend(nw.cost, size)
	nw.arcOf = extend(nw.arcOf, size)
	for k := range used {
		from, to := old+k, start+k
		if p := nw.rev[from]; p >= old && p < old+used {
			// A self-loop: its other half moves too.
			nw.rev[from] = start + (p - old)
		}
		nw.moveSlot(from, to)
	}
	nw.garbage += int(nw.limit[u] - old)
	nw.first[u], nw.end[u], nw.limit[u] = start, start+used, start+size
}

// extend lengthens s by k elements, whose values are left as they come.
func extend[T any](s []T, k int32) []T {
	n := len(s) + int(k)
	if cap(s) < n {
		t := make([]T, n, 2*n)
		copy(t, s)
		return t
	}
	return s[:n]
}

// saturateIfNegative fills residual arc i or its partner if its reduced
// cost is negative, leaving the excess this moves at its endpoints.
func (nw *network) saturateIfNegative(i int32) {
	j := nw.rev[i]
	t, h := nw.head[j], nw.head[i]
	rc := nw.cost[i] + nw.price[t] - nw.price[h]
	switch {
	case rc < 0 && nw.res[i] > 0:
		nw.push(i, nw.res[i])
	case rc > 0 && nw.res[j] > 0:
		nw.push(j, nw.res[j])
	}
}

// push sends d units along residual arc i.
func (nw *network) push(i int32, d int64) {
	j := nw.rev[i]
	nw.res[i] -= d
	nw.res[j] += d
	nw.excess[nw.head[j]] -= d
	nw.excess[nw.head[i]] += d
}

// arcFlows appends the flow on each graph arc, by ArcID, to dst.
func (nw *network) arcFlows(dst []int64) []int64 {
	for a, i := range nw.fwd {
		var f int64
		if i >= 0 {
			f = nw.arcLower[a] + nw.res[nw.rev[i]]
		}
		dst = append(dst, f)
	}
	return dst
}

// warmStart puts the previous flow on the arcs that existed at the last
// solve (born at or before stamp), clamped to their current bounds, and sets
// those nodes' prices from the previous potentials; new nodes are priced by
// priceNew, and new arcs start empty.
func (nw *network) warmStart(g *Graph, flow, potential []int64, stamp uint64) {
	ma := min(len(nw.fwd), len(flow))
	fwd, flow, born := nw.fwd[:ma], flow[:ma], g.arcBorn[:ma]
	lower, upper := g.lower[:ma], g.upper[:ma]
	for a, x := range flow {
		i := fwd[a]
		if i < 0 || born[a] > stamp {
			continue
		}
		lo := lower[a]
		if f := min(max(x, lo), upper[a]) - lo; f != 0 {
			nw.push(i, f)
		}
	}
	for u := range nw.n {
		if u < len(potential) && g.nodeBorn[u] <= stamp {
			nw.price[u] = potential[u] * nw.scale
		}
	}
	for u := range nw.n {
		if u < len(potential) && g.nodeBorn[u] <= stamp || !g.HasNode(NodeID(u)) {
			continue
		}
		nw.priceNew(NodeID(u))
	}
}

// priceNew prices a new node as low as keeps its residual out-arcs'
// reduced costs non-negative, so that the repair need not saturate them.
func (nw *network) priceNew(u NodeID) {
	best := int64(math.MinInt64)
	for i := nw.first[u]; i < nw.end[u]; i++ {
		if nw.res[i] > 0 {
			best = max(best, nw.price[nw.head[i]]-nw.cost[i])
		}
	}
	if best != math.MinInt64 {
		nw.price[u] = best
	}
}
