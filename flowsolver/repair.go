package flowsolver

import (
	"context"
	"errors"
	"fmt"
)

// repairBudget bounds a repair's work, in scans of every arc: past it, the
// repair hands its pseudoflow, 0-optimal throughout, to cost scaling from ε
// of one cost unit.
const repairBudget = 8

// errRepairBudget says a repair ran out of budget.
var errRepairBudget = errors.New("flowsolver: repair over budget")

// repair finishes a warm start by the primal-dual method: the previous
// optimum's flow and potentials leave every untouched arc with a
// non-negative reduced cost, so once the warm start has saturated the arcs
// the changes made negative (patch.go), the excess the changes left is
// routed along shortest paths in reduced costs (Dijkstra from every excess
// node, stopping at the first deficit), then along all zero-reduced-cost
// paths at once (a blocking flow), until no excess is left. Prices stay exact multiples of the scale,
// so they end as an optimality certificate without further work. It returns
// false if ctx ended first, an error wrapping ErrInfeasible if some excess
// can reach no deficit, and errRepairBudget once it has scanned
// repairBudget times as many arcs as the network has: the changes were too
// large for shortest paths alone.
func (nw *network) repair(ctx context.Context, st *Stats) (bool, error) {
	nw.scanned, nw.budget = 0, repairBudget*int64(nw.live)
	nw.level = grow(nw.level, nw.n)
	for first := true; first || nw.unbalanced(); first = false {
		if ctx.Err() != nil {
			return false, nil
		}
		if nw.scanned > nw.budget {
			return false, errRepairBudget
		}
		// The warm prices leave no residual arc of negative reduced cost,
		// so the first round may move excess along zero-reduced-cost arcs
		// before any search.
		if !first {
			if err := nw.shortestPathPrices(); err != nil {
				return false, err
			}
			st.Phases++
			st.GlobalUpdates++
		}
		st.Augmentations += nw.blockingFlows(true)
	}
	return true, nil
}

// shortestPathPrices runs Dijkstra over residual arcs, with reduced costs
// as lengths, from every excess node until the first deficit node is
// settled at distance D, and raises each price by the node's distance capped
// at D: an arc (u,v) then has reduced cost rc + d(u) - d(v) >= 0, which is 0
// along the shortest paths, so some excess can reach a deficit along
// zero-reduced-cost arcs. If no excess can reach a deficit, the problem is
// infeasible and it returns an error wrapping ErrInfeasible.
func (nw *network) shortestPathPrices() error {
	n := nw.n
	dist, done := nw.searchScratch()
	const unreached = -1
	h := &nw.heap
	h.reset()
	for u := range n {
		dist[u] = unreached
		if nw.excess[u] > 0 {
			dist[u] = 0
			h.push(0, int32(u))
		}
	}
	bound := int64(-1)
	for len(h.items) > 0 {
		it := h.pop()
		u := it.node
		if done[u] || it.dist != dist[u] {
			continue
		}
		done[u] = true
		if nw.excess[u] < 0 {
			bound = it.dist
			break
		}
		pu := nw.price[u]
		nw.scanned += int64(nw.end[u] - nw.first[u])
		for i := nw.first[u]; i < nw.end[u]; i++ {
			if nw.res[i] == 0 {
				continue
			}
			v := nw.head[i]
			if done[v] {
				continue
			}
			rc := nw.cost[i] + pu - nw.price[v]
			if rc < 0 {
				return fmt.Errorf("flowsolver: internal error: reduced cost %d < 0 on a residual arc during repair", rc)
			}
			if d := it.dist + rc; dist[v] == unreached || d < dist[v] {
				dist[v] = d
				h.push(d, v)
			}
		}
	}
	if bound < 0 {
		return nw.infeasible(0)
	}
	for u := range n {
		if done[u] {
			nw.price[u] += dist[u]
		} else {
			nw.price[u] += bound
		}
	}
	return nil
}

// heapItem is a node and its tentative distance; seq orders the pushes.
type heapItem struct {
	dist int64
	seq  int64
	node int32
}

// before orders a search: nearest first, and among equals the latest
// pushed, so that the search runs deep along paths of equal length (zero
// reduced cost, mostly) and meets a deficit before it has flooded them all.
func (a heapItem) before(b heapItem) bool {
	return a.dist < b.dist || a.dist == b.dist && a.seq > b.seq
}

// distHeap is a binary min-heap with lazy deletion: stale entries (whose
// distance is above the node's current one) are skipped when popped.
type distHeap struct {
	items []heapItem
	seq   int64
}

func (h *distHeap) push(dist int64, node int32) {
	h.seq++
	it := heapItem{dist, h.seq, node}
	h.items = append(h.items, it)
	s := h.items
	i := len(s) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !it.before(s[p]) {
			break
		}
		s[i] = s[p]
		i = p
	}
	s[i] = it
}

func (h *distHeap) pop() heapItem {
	s := h.items
	top := s[0]
	last := s[len(s)-1]
	s = s[:len(s)-1]
	i := 0
	for {
		c := 2*i + 1
		if c >= len(s) {
			break
		}
		if c+1 < len(s) && s[c+1].before(s[c]) {
			c++
		}
		if !s[c].before(last) {
			break
		}
		s[i] = s[c]
		i = c
	}
	if len(s) > 0 {
		s[i] = last
	}
	h.items = s
	return top
}

// reset empties the heap.
func (h *distHeap) reset() { h.items, h.seq = h.items[:0], 0 }
