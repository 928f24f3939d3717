package flowsolver

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
)

// Solve finds a minimum-cost flow of g: one that meets every supply and
// demand within every arc's bounds at the least total cost. It returns an
// error wrapping ErrInfeasible (an *InfeasibleError naming the supply that
// cannot be routed) when there is no such flow, and one wrapping ErrBadGraph
// when the graph's numbers could overflow the solver. When ctx ends before
// the solve does, Solve returns the last feasible flow it had, with
// Optimal false, and no error.
func Solve(ctx context.Context, g *Graph) (*Solution, error) {
	var s Solver
	return s.Solve(ctx, g)
}

// Solver solves min-cost flow problems by cost scaling (Goldberg's
// push-relabel method with ε-scaling). A Solver keeps its working memory
// between solves and re-solves incrementally: it keeps the last optimum's
// residual network and prices, patches them with the graph's changes since
// (read from the graph's journal: the flow of each changed arc clamped to
// its new bounds, new arcs empty), and reworks only the part of the network
// the changes disturbed. Any starting point gives the same optimum; Reset
// drops it. A Solver is not safe for concurrent use.
type Solver struct {
	net network
	// prevGraph and prevStamp identify the graph and its state at the last
	// optimal solve (nil: start cold), whose flow and prices net still
	// holds: nodes and arcs born after prevStamp are new to the warm start.
	prevGraph *Graph
	prevStamp uint64
	// journalEpoch and journalPos are where in prevGraph's journal the
	// changes since the last optimal solve begin.
	journalEpoch uint64
	journalPos   int
	// prevFlow and prevPotential carry the last optimum across a rebuild
	// of net.
	prevFlow      []int64
	prevPotential []int64
	// best is the last feasible residual state of the current solve.
	best []int64
}

// handoverBudget bounds, in pushes and relabels per node and arc, the
// cost scaling that finishes a warm start whose repair ran over budget.
const handoverBudget = 16

// errWorkBudget says a refine ran past nw.workLimit.
var errWorkBudget = errors.New("flowsolver: work budget spent")

// Reset makes the next solve start from zero flow and zero prices.
func (s *Solver) Reset() { s.prevGraph = nil }

// scaleFactor is how much ε shrinks from one scaling phase to the next.
const scaleFactor = 8

// earlyTermBudget bounds each early-termination check, in scans of every
// arc.
const earlyTermBudget = 4

// maxPath is the longest path a partial augmentation walks before pushing.
const maxPath = 6

// checkEvery is how many discharges pass between looks at the context.
const checkEvery = 1 << 12

// Solve is the package-level Solve with s's working memory.
func (s *Solver) Solve(ctx context.Context, g *Graph) (*Solution, error) {
	if err := checkNumbers(g); err != nil {
		return nil, err
	}
	nw := &s.net
	stats := Stats{Algorithm: AlgorithmCostScaling, Incremental: s.prevGraph == g}
	if stats.Incremental {
		// A warm start keeps the previous optimum's flow and prices, which
		// are optimal for every arc the changes did not touch, and repairs
		// the rest (see repair), handing over to cost scaling if that runs
		// long.
		if stats.Patched = s.patch(g); !stats.Patched {
			s.rebuild(g)
		}
	} else {
		nw.build(g)
	}
	if total := nw.imbalance(); total != 0 {
		s.Reset()
		return nil, nw.infeasible(total)
	}
	// best keeps the last feasible flow of the solve, for a deadline.
	best, optimal := s.best[:0], true
	var proof []int64
	eps := nw.maxCost
	if stats.Incremental {
		stats.Algorithm = AlgorithmRepair
		done, err := nw.repair(ctx, &stats)
		switch {
		case errors.Is(err, errRepairBudget):
			// Too much changed for shortest paths: the pseudoflow the repair
			// left is 0-optimal, so cost scaling can finish it from ε of one
			// unit of the original costs. A feasible flow for a deadline is
			// found on the side, so as not to disturb that pseudoflow.
			stats.Algorithm = AlgorithmRepairThenScaling
			eps = nw.scale * scaleFactor
			// Finishing from prices far from the new optimum's is
			// pseudo-polynomial in the distance; past a budget it starts
			// over from zero.
			nw.workLimit = stats.Relabels + stats.Pushes + handoverBudget*int64(nw.n+nw.live)
			nw.save()
			err = nw.feasible()
			best = append(best, nw.res...)
			nw.restore()
		case err == nil && !done:
			// The deadline came first: finish the flow without costs.
			err = nw.feasible()
			optimal, eps = false, 0
			best = append(best, nw.res...)
		case err == nil:
			// Optimal as it stands: best stays empty, nothing to restore.
			eps = 0
			proof = nw.appendScaledPrices(make([]int64, 0, nw.n))
		}
		if err != nil {
			s.Reset()
			return nil, err
		}
	} else {
		if err := nw.feasible(); err != nil {
			s.Reset()
			return nil, err
		}
		best = append(best, nw.res...)
	}
	s.best = best
	for eps > 1 || stats.Phases == 0 && eps > 0 {
		eps = max(eps/scaleFactor, 1)
		stats.Phases++
		if ctx.Err() != nil {
			optimal = false
			break
		}
		done, err := nw.refine(ctx, eps, &stats)
		if errors.Is(err, errWorkBudget) {
			// The warm handover ran long: solve from zero flow and prices.
			stats.StartedOver = true
			nw.workLimit = 0
			nw.build(g)
			if err := nw.feasible(); err != nil {
				s.Reset()
				return nil, err
			}
			best = append(best[:0], nw.res...)
			s.best, eps = best, nw.maxCost
			continue
		}
		if err != nil {
			s.Reset()
			return nil, err
		} else if !done {
			optimal = false
			break
		}
		copy(best, nw.res)
		// Early termination: once ε is down to a unit of the original
		// costs, the flow is often optimal already; a bounded search for
		// potentials that prove it saves the remaining, costliest phases.
		if eps > 1 && eps <= nw.scale {
			if p, ok := nw.potentials(earlyTermBudget * int64(nw.live)); ok {
				stats.EarlyTermination = true
				proof = p
				break
			}
		}
	}
	nw.workLimit = 0
	copy(nw.res, best)
	sol := &Solution{Optimal: optimal, Stats: stats}
	sol.Flow, sol.Cost = nw.flows(g)
	if optimal && proof == nil {
		p, err := nw.exactPotentials()
		if err != nil {
			s.Reset()
			return nil, err
		}
		proof = p
	}
	if optimal {
		sol.Potential = proof
	}
	s.prevGraph = nil
	if optimal {
		// The network keeps this optimum for the next solve, with the
		// certificate as its prices.
		for u, p := range proof {
			nw.price[u] = p * nw.scale
		}
		s.prevGraph, s.prevStamp = g, g.stamp
		s.journalEpoch, s.journalPos = g.startJournal()
	}
	return sol, nil
}

// save keeps a copy of the residual capacities and excesses; restore puts
// it back.
func (nw *network) save() {
	nw.savedRes = append(nw.savedRes[:0], nw.res...)
	nw.savedExcess = append(nw.savedExcess[:0], nw.excess...)
}

func (nw *network) restore() {
	copy(nw.res, nw.savedRes)
	copy(nw.excess, nw.savedExcess)
}

// unbalanced reports whether some node has excess or deficit.
func (nw *network) unbalanced() bool {
	for _, e := range nw.excess {
		if e != 0 {
			return true
		}
	}
	return false
}

// imbalance returns the sum of the excesses: zero when supplies and demands
// balance.
func (nw *network) imbalance() int64 {
	var total int64
	for _, e := range nw.excess {
		total += e
	}
	return total
}

// checkNumbers rejects graphs whose solve could overflow int64: costs are
// scaled by n+1 and prices may fall to about 4(n+1)·max|cost|·(n+1); the
// total cost is bounded by the sum of capacity × |cost|.
func checkNumbers(g *Graph) error {
	var maxCost, total uint64
	ma := g.ArcCap()
	upper, cost := g.upper[:ma], g.cost[:ma]
	for a, alive := range g.arcAlive[:ma] {
		if !alive {
			continue
		}
		up, c := upper[a], cost[a]
		ac := uint64(max(c, -c))
		maxCost = max(maxCost, ac)
		hi, lo := bits.Mul64(uint64(up), ac)
		var carry uint64
		total, carry = bits.Add64(total, lo, 0)
		if hi != 0 || carry != 0 || total > 1<<62 {
			return fmt.Errorf("%w: capacities times costs sum beyond 2^62: the total cost could overflow", ErrBadGraph)
		}
	}
	n := uint64(g.NodeCap()) + 1
	hi, prod := bits.Mul64(maxCost, n*n)
	if hi != 0 || prod > 1<<58 {
		return fmt.Errorf("%w: max |cost| %d is too large for %d nodes: scaled prices could overflow (need |cost|·(n+1)² < 2^58)", ErrBadGraph, maxCost, n-1)
	}
	return nil
}

// network is the residual graph: the residual arcs leaving node u are
// first[u]..end[u]-1, with room reserved up to limit[u]. Each graph arc
// becomes a forward residual arc (capacity upper-lower, cost c) and a
// backward one (capacity 0, cost -c), paired by rev. Costs are scaled by n+1
// so that ε-optimality with ε < 1 means optimality. build lays the arcs out
// contiguously; a patch (patch.go) adds and deletes arcs in place, moving a
// node's arcs to the end of the arrays when it runs out of room, which
// leaves garbage behind until the next build.
type network struct {
	n      int
	first  []int32
	end    []int32
	limit  []int32
	head   []int32
	rev    []int32
	res    []int64
	cost   []int64
	arcOf  []int32 // by residual arc: its graph arc
	fwd    []int32 // by ArcID: its forward residual arc, or -1
	excess []int64
	price  []int64
	cur    []int32
	scale  int64
	// live counts the residual arcs in use; garbage the slots that moved
	// nodes left behind.
	live, garbage int
	// arcLower (by ArcID) and supply (by NodeID) are the graph's numbers
	// the network's flow and excesses account for, which a patch compares
	// with the graph's current ones.
	arcLower []int64
	supply   []int64
	// maxCost is the largest scaled |cost|.
	maxCost int64
	queue   []int32
	inQueue []bool
	level   []int32
	// pot and count are the scratch of potentials.
	pot   []int64
	count []int32
	// path is the scratch of partial augmentations.
	path []int32
	// savedRes and savedExcess hold a warm start while feasibility is
	// checked.
	savedRes, savedExcess []int64
	// scanned counts the arcs a repair has scanned; budget bounds it.
	scanned, budget int64
	// workLimit, when positive, bounds the pushes and relabels a solve
	// may count before refine gives up (errWorkBudget).
	workLimit int64
	// Global update scratch.
	dist    []int64
	done    []bool
	heap    distHeap
	buckets [][]int32
	// Patch scratch: the arcs a patch touched and the nodes it added.
	touched []ArcID
	fresh   []NodeID
	isFresh []bool
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	s = s[:n]
	clear(s)
	return s
}

// build lays g out as a residual network carrying the lower bounds, with
// every node's excess set to its supply adjusted for them.
func (nw *network) build(g *Graph) {
	n := g.NodeCap()
	nw.n = n
	nw.scale = int64(n) + 1
	nw.first = grow(nw.first, n+1)
	nw.end = grow(nw.end, n)
	nw.limit = grow(nw.limit, n)
	nw.excess = grow(nw.excess, n)
	nw.supply = grow(nw.supply, n)
	nw.price = grow(nw.price, n)
	nw.cur = grow(nw.cur, n)
	nw.fwd = grow(nw.fwd, g.ArcCap())
	nw.arcLower = grow(nw.arcLower, g.ArcCap())
	first, excess, supply := nw.first[:n+1], nw.excess[:n], nw.supply[:n]
	for u, alive := range g.nodeAlive[:n] {
		if alive {
			excess[u] = g.supply[u]
			supply[u] = g.supply[u]
		}
	}
	// The graph's arrays, cut to one length so that the loops below index
	// them without bounds checks.
	ma := g.ArcCap()
	alive, tail, head := g.arcAlive[:ma], g.tail[:ma], g.head[:ma]
	lower, upper, cost := g.lower[:ma], g.upper[:ma], g.cost[:ma]
	m := 0
	for a, ok := range alive {
		if !ok {
			continue
		}
		t, h, lo := tail[a], head[a], lower[a]
		first[t+1]++
		first[h+1]++
		excess[t] -= lo
		excess[h] += lo
		m += 2
	}
	for u := range n {
		first[u+1] += first[u]
	}
	copy(nw.limit, first[1:])
	nw.head = grow(nw.head, m)
	nw.rev = grow(nw.rev, m)
	nw.res = grow(nw.res, m)
	nw.cost = grow(nw.cost, m)
	nw.arcOf = grow(nw.arcOf, m)
	rhead, rev, res, rcost, arcOf := nw.head[:m], nw.rev[:m], nw.res[:m], nw.cost[:m], nw.arcOf[:m]
	end, fwd := nw.end[:n], nw.fwd[:ma]
	arcLower := nw.arcLower[:ma]
	copy(end, first[:n])
	maxCost := int64(1)
	for a, ok := range alive {
		if !ok {
			fwd[a] = -1
			continue
		}
		t, h := tail[a], head[a]
		i := end[t]
		end[t]++
		j := end[h] // after the increment: a self-loop's two halves differ
		end[h]++
		sc := cost[a] * nw.scale
		rhead[i], rev[i], res[i], rcost[i], arcOf[i] = int32(h), j, upper[a]-lower[a], sc, int32(a)
		rhead[j], rev[j], res[j], rcost[j], arcOf[j] = int32(t), i, 0, -sc, int32(a)
		fwd[a] = i
		arcLower[a] = lower[a]
		maxCost = max(maxCost, sc, -sc)
	}
	nw.maxCost = maxCost
	nw.live, nw.garbage = m, 0
}

// feasible routes every excess to a deficit along residual arcs, ignoring
// costs (Dinic's blocking flows, with all excess nodes as sources and all
// deficit nodes as sinks), or returns an *InfeasibleError.
func (nw *network) feasible() error {
	nw.level = grow(nw.level, nw.n)
	nw.blockingFlows(false)
	for _, e := range nw.excess {
		if e != 0 {
			return nw.infeasible(0)
		}
	}
	return nil
}

// infeasible describes the excess left at the node that holds the most.
func (nw *network) infeasible(imbalance int64) error {
	e := &InfeasibleError{}
	for u, x := range nw.excess {
		if max(x, -x) > max(e.Excess, -e.Excess) {
			e.Node, e.Excess = NodeID(u), x
		}
		if x > 0 {
			e.Unrouted += x
		}
	}
	if imbalance != 0 {
		return fmt.Errorf("%w (supplies and demands differ by %d)", e, imbalance)
	}
	return e
}

// blockingFlows routes excess to deficits by Dinic's algorithm over the
// residual arcs, or only over those of zero reduced cost when zeroCost is
// set, until no deficit can be reached; it returns the number of
// augmentations.
func (nw *network) blockingFlows(zeroCost bool) int64 {
	var augmentations int64
	for nw.levels(zeroCost) {
		copy(nw.cur, nw.first[:nw.n])
		for u := range nw.n {
			for nw.excess[u] > 0 && nw.level[u] == 0 {
				pushed := nw.augment(int32(u), nw.excess[u], zeroCost)
				if pushed == 0 {
					break
				}
				nw.excess[u] -= pushed
				augmentations++
			}
		}
	}
	return augmentations
}

// usable reports whether residual arc i out of u may carry flow in a
// blocking flow: it has room and, with zeroCost, a zero reduced cost.
func (nw *network) usable(u int32, i int32, zeroCost bool) bool {
	return nw.res[i] > 0 && (!zeroCost || nw.cost[i]+nw.price[u] == nw.price[nw.head[i]])
}

// levels labels nodes with their BFS distance from the excess nodes over
// usable arcs (-1 when unreached), up to the distance of the nearest
// deficit (farther nodes cannot be on a shortest augmenting path), and
// reports whether a deficit is reached.
func (nw *network) levels(zeroCost bool) bool {
	q := nw.queue[:0]
	for u := range nw.n {
		nw.level[u] = -1
		if nw.excess[u] > 0 {
			nw.level[u] = 0
			q = append(q, int32(u))
		}
	}
	nearest := int32(math.MaxInt32)
	for k := 0; k < len(q); k++ {
		u := q[k]
		if nw.level[u] >= nearest {
			break
		}
		nw.scanned += int64(nw.end[u] - nw.first[u])
		for i := nw.first[u]; i < nw.end[u]; i++ {
			v := nw.head[i]
			if nw.level[v] < 0 && nw.usable(u, i, zeroCost) {
				nw.level[v] = nw.level[u] + 1
				if nw.excess[v] < 0 {
					nearest = nw.level[v]
				}
				q = append(q, v)
			}
		}
	}
	nw.queue = q
	return nearest != math.MaxInt32
}

// augment sends up to limit units from u along level-increasing usable arcs
// into deficits, and returns how much it sent.
func (nw *network) augment(u int32, limit int64, zeroCost bool) int64 {
	if nw.excess[u] < 0 && nw.level[u] > 0 {
		take := min(limit, -nw.excess[u])
		nw.excess[u] += take
		return take
	}
	var sent int64
	for ; nw.cur[u] < nw.end[u]; nw.cur[u]++ {
		i := nw.cur[u]
		v := nw.head[i]
		if nw.level[v] != nw.level[u]+1 || !nw.usable(u, i, zeroCost) {
			continue
		}
		d := nw.augment(v, min(limit-sent, nw.res[i]), zeroCost)
		nw.res[i] -= d
		nw.res[nw.rev[i]] += d
		sent += d
		if sent == limit {
			break
		}
	}
	return sent
}

// refine turns an ε·scaleFactor-optimal feasible flow into an ε-optimal
// one: it saturates every arc of negative reduced cost, then pushes the
// excess this creates along admissible arcs (residual, reduced cost < 0),
// relabelling nodes that have none. It returns false if ctx ended first,
// and an error if prices fall past any bound the theory allows (a bug, never
// an input: it stops what would otherwise loop forever).
func (nw *network) refine(ctx context.Context, eps int64, st *Stats) (bool, error) {
	head, res, cost, price, excess, rev := nw.head, nw.res, nw.cost, nw.price, nw.excess, nw.rev
	nw.saturateNegative()
	nw.globalUpdate(eps)
	st.GlobalUpdates++
	nw.inQueue = grow(nw.inQueue, nw.n)
	q := nw.queue[:0]
	for u := range nw.n {
		if excess[u] > 0 {
			q = append(q, int32(u))
			nw.inQueue[u] = true
		}
	}
	copy(nw.cur, nw.first[:nw.n])
	relabels := 0
	for k := 0; k < len(q); k++ {
		if k%checkEvery == checkEvery-1 && ctx.Err() != nil {
			nw.queue = q[:0]
			return false, nil
		}
		u := q[k]
		nw.inQueue[u] = false
		for excess[u] > 0 {
			// Partial augment-relabel: walk admissible arcs from u for up
			// to maxPath steps or to a deficit, relabelling (and stepping
			// back from) nodes with no admissible arc, then push along the
			// whole path at once.
			path := nw.path[:0]
			tip := u
			for len(path) < maxPath {
				i, end := nw.cur[tip], nw.end[tip]
				pt := price[tip]
				hs := head[i:end]
				rs, cs := res[i:end], cost[i:end]
				rs, cs = rs[:len(hs)], cs[:len(hs)]
				k := 0
				for ; k < len(hs); k++ {
					if rs[k] > 0 && cs[k]+pt-price[hs[k]] < 0 {
						break
					}
				}
				i += int32(k)
				if i < end {
					nw.cur[tip] = i
					path = append(path, i)
					tip = head[i]
					if excess[tip] < 0 {
						break
					}
					continue
				}
				if !nw.relabel(tip, eps) && tip != u {
					// A node on the path with no residual arc at all: one
					// ε lower makes the arc into it inadmissible (it was
					// ε-optimal) and cannot break ε-optimality elsewhere.
					price[tip] = pt - eps
				}
				if price[tip] < minPrice {
					return false, fmt.Errorf("flowsolver: internal error: price of node %d fell below %d", tip, int64(minPrice))
				}
				st.Relabels++
				relabels++
				if nw.workLimit > 0 && st.Relabels+st.Pushes > nw.workLimit {
					nw.queue = q[:0]
					return false, errWorkBudget
				}
				if len(path) > 0 {
					last := path[len(path)-1]
					path = path[:len(path)-1]
					tip = head[rev[last]]
				}
			}
			d := excess[u]
			for _, i := range path {
				d = min(d, res[i])
			}
			for _, i := range path {
				res[i] -= d
				res[rev[i]] += d
			}
			excess[u] -= d
			excess[tip] += d
			st.Pushes += int64(len(path))
			st.Augmentations++
			if nw.workLimit > 0 && st.Relabels+st.Pushes > nw.workLimit {
				nw.queue = q[:0]
				return false, errWorkBudget
			}
			if excess[tip] > 0 && !nw.inQueue[tip] {
				nw.inQueue[tip] = true
				q = append(q, tip)
			}
			nw.path = path
		}
		if relabels > nw.n {
			relabels = 0
			nw.globalUpdate(eps)
			st.GlobalUpdates++
			copy(nw.cur, nw.first[:nw.n])
		}
		if len(q) > 1<<20 && k > len(q)/2 {
			q = append(q[:0], q[k+1:]...)
			k = -1
		}
	}
	nw.queue = q[:0]
	return true, nil
}

// minPrice is far below any price a correct solve reaches (checkNumbers
// keeps those above -2^58).
const minPrice = -(1 << 61)

// saturateNegative fills every residual arc of negative reduced cost,
// leaving the excess this moves at the nodes: afterwards no residual arc has
// a negative reduced cost.
func (nw *network) saturateNegative() {
	res, price, excess := nw.res, nw.price, nw.excess
	for u := range nw.n {
		pu := price[u]
		lo, hi := nw.first[u], nw.end[u]
		hs := nw.head[lo:hi]
		rs, cs, rv := res[lo:hi], nw.cost[lo:hi], nw.rev[lo:hi]
		rs, cs, rv = rs[:len(hs)], cs[:len(hs)], rv[:len(hs)]
		for k, v := range hs {
			if r := rs[k]; r > 0 && cs[k]+pu-price[v] < 0 {
				rs[k] = 0
				res[rv[k]] += r
				excess[u] -= r
				excess[v] += r
			}
		}
	}
}

// relabel lowers u's price as little as keeps every residual arc leaving u
// ε-optimal (reduced cost >= -ε) while making one admissible: to the max over
// residual arcs (u,v) of price(v) - cost - ε. It reports whether u has a
// residual arc; if not, it sets a price below minPrice.
func (nw *network) relabel(u int32, eps int64) bool {
	best := int64(math.MinInt64)
	lo, hi := nw.first[u], nw.end[u]
	hs := nw.head[lo:hi]
	rs, cs := nw.res[lo:hi], nw.cost[lo:hi]
	rs, cs = rs[:len(hs)], cs[:len(hs)]
	for k, v := range hs {
		if rs[k] > 0 {
			best = max(best, nw.price[v]-cs[k])
		}
	}
	nw.price[u] = lowered(best, eps)
	nw.cur[u] = nw.first[u]
	return best != math.MinInt64
}

// searchScratch returns the distance and settled arrays of a shortest-path
// search, cleared, for n nodes.
func (nw *network) searchScratch() (dist []int64, done []bool) {
	nw.dist = grow(nw.dist, nw.n)
	nw.done = grow(nw.done, nw.n)
	return nw.dist, nw.done
}

// lowered returns best - ε, or a price below minPrice when there was no
// residual arc to take a best from (which refine reports as an error).
func lowered(best, eps int64) int64 {
	if best == math.MinInt64 {
		return minPrice - 1
	}
	return best - eps
}

// flows reads the flow on each graph arc and its total cost.
func (nw *network) flows(g *Graph) ([]int64, int64) {
	ma := g.ArcCap()
	flow := make([]int64, ma)
	fwd, lower, cost := nw.fwd[:ma], g.lower[:ma], g.cost[:ma]
	res, rev := nw.res, nw.rev
	var total int64
	for a, i := range fwd {
		if i < 0 {
			continue
		}
		f := lower[a] + res[rev[i]]
		flow[a] = f
		total += f * cost[a]
	}
	return flow, total
}

// appendScaledPrices appends the prices divided by the scale to dst. When
// every price is a multiple of the scale, as the repair keeps them, these
// are integral potentials under which no residual arc has a negative
// reduced cost if no arc has one under the prices.
func (nw *network) appendScaledPrices(dst []int64) []int64 {
	for _, x := range nw.price[:nw.n] {
		dst = append(dst, x/nw.scale)
	}
	return dst
}

// exactPotentials turns the final prices into integral potentials under
// which no residual arc has a negative reduced cost (in unscaled costs), by
// Bellman-Ford-Moore relaxation started from the scaled-down prices, which
// are nearly right already.
func (nw *network) exactPotentials() ([]int64, error) {
	d, ok := nw.potentials(0)
	if !ok {
		return nil, fmt.Errorf("flowsolver: internal error: negative residual cycle after solving")
	}
	return d, nil
}

// potentials looks for integral potentials proving the current flow
// optimal, by Bellman-Ford-Moore relaxation from the scaled-down prices. It
// gives up, reporting false, when it finds a negative residual cycle or when
// budget > 0 and it has scanned more than budget arcs.
func (nw *network) potentials(budget int64) ([]int64, bool) {
	d := grow(nw.pot, nw.n)
	nw.pot = d
	count := grow(nw.count, nw.n)
	nw.count = count
	q := nw.queue[:0]
	nw.inQueue = grow(nw.inQueue, nw.n)
	for u := range nw.n {
		d[u] = floorDiv(nw.price[u], nw.scale)
		q = append(q, int32(u))
		nw.inQueue[u] = true
	}
	var scanned int64
	for k := 0; k < len(q); k++ {
		u := q[k]
		nw.inQueue[u] = false
		scanned += int64(nw.end[u] - nw.first[u])
		if budget > 0 && scanned > budget {
			nw.queue = q[:0]
			return nil, false
		}
		for i := nw.first[u]; i < nw.end[u]; i++ {
			if nw.res[i] == 0 {
				continue
			}
			v := nw.head[i]
			if nd := d[u] + nw.cost[i]/nw.scale; nd < d[v] {
				d[v] = nd
				if !nw.inQueue[v] {
					count[v]++
					if int(count[v]) > nw.n {
						nw.queue = q[:0]
						return nil, false
					}
					nw.inQueue[v] = true
					q = append(q, v)
				}
			}
		}
		if len(q) > 1<<20 && k > len(q)/2 {
			q = append(q[:0], q[k+1:]...)
			k = -1
		}
	}
	nw.queue = q[:0]
	return append([]int64(nil), d...), true
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && (a < 0) != (b < 0) {
		q--
	}
	return q
}
