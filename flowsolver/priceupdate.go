package flowsolver

// Global price updates: Goldberg's heuristic that recomputes prices from
// shortest paths to the deficit nodes, replacing many small relabels by one
// search. Under the new prices every residual arc is still ε-optimal, and
// flow can move from every excess node to a deficit along arcs whose reduced
// costs lead downhill.

// heapItem is a node and its tentative distance, in units of ε.
type heapItem struct {
	dist int64
	node int32
}

// distHeap is a binary min-heap with lazy deletion: stale entries (whose
// distance is above the node's current one) are skipped when popped.
type distHeap []heapItem

func (h *distHeap) push(it heapItem) {
	*h = append(*h, it)
	s := *h
	i := len(s) - 1
	for i > 0 {
		p := (i - 1) / 2
		if s[p].dist <= it.dist {
			break
		}
		s[i] = s[p]
		i = p
	}
	s[i] = it
}

func (h *distHeap) pop() heapItem {
	s := *h
	top := s[0]
	last := s[len(s)-1]
	s = s[:len(s)-1]
	i := 0
	for {
		c := 2*i + 1
		if c >= len(s) {
			break
		}
		if c+1 < len(s) && s[c+1].dist < s[c].dist {
			c++
		}
		if last.dist <= s[c].dist {
			break
		}
		s[i] = s[c]
		i = c
	}
	if len(s) > 0 {
		s[i] = last
	}
	*h = s
	return top
}

// globalUpdate lowers every node's price by ε times its distance to the
// nearest deficit, where a residual arc of reduced cost rc has length 0 if
// rc < 0 and rc/ε + 1 otherwise. The search stops once every excess node has
// its distance and that distance is finished; nodes not settled by then are
// lowered by one step more than the largest distance settled, which keeps
// ε-optimality: such a node's distance is at least that much (an arc from it
// into a settled node would have given it a distance, and an unfinished one
// would be larger).
func (nw *network) globalUpdate(eps int64) {
	n := nw.n
	dist := grow(nw.dist, n)
	nw.dist = dist
	const unreached = -1
	for i := range dist {
		dist[i] = unreached
	}
	h := nw.heap[:0]
	active := 0
	for u := range n {
		switch {
		case nw.excess[u] < 0:
			dist[u] = 0
			h.push(heapItem{0, int32(u)})
		case nw.excess[u] > 0:
			active++
		}
	}
	done := nw.done
	if cap(done) < n {
		done = make([]bool, n)
	}
	done = done[:n]
	clear(done)
	nw.done = done
	var last int64
	for len(h) > 0 {
		// Stop once every excess node has its distance, but only after
		// finishing the distance reached: a node left at the same
		// tentative distance would otherwise be lowered one step too far
		// against an arc into a settled node.
		if active == 0 && h[0].dist > last {
			break
		}
		it := h.pop()
		v := it.node
		if done[v] || it.dist != dist[v] {
			continue
		}
		done[v] = true
		last = it.dist
		if nw.excess[v] > 0 {
			active--
		}
		pv := nw.price[v]
		for j := nw.first[v]; j < nw.first[v+1]; j++ {
			i := nw.rev[j] // the residual arc u -> v
			if nw.res[i] == 0 {
				continue
			}
			u := nw.head[j]
			if done[u] {
				continue
			}
			rc := nw.cost[i] + nw.price[u] - pv
			d := it.dist
			if rc >= 0 {
				d += rc/eps + 1
			}
			if dist[u] == unreached || d < dist[u] {
				dist[u] = d
				h.push(heapItem{d, u})
			}
		}
	}
	nw.heap = h[:0]
	for u := range n {
		if done[u] {
			nw.price[u] -= dist[u] * eps
		} else {
			nw.price[u] -= (last + 1) * eps
		}
	}
}
