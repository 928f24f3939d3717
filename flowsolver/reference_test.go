package flowsolver_test

import (
	"errors"
	"math"

	"github.com/sluicehq/sluice/flowsolver"
)

// refArc is an arc of the reference solver's residual graph.
type refArc struct {
	to, rev int
	res     int64
	cost    int64
	arc     flowsolver.ArcID
	forward bool
}

var errRefInfeasible = errors.New("reference: infeasible")

// referenceSolve is the simple, obviously correct solver the fast ones are
// tested against: saturate every negative-cost arc (so the residual graph has
// no negative cycle), then successive shortest paths with Bellman-Ford from
// an excess node to the nearest deficit node. It returns the optimal cost.
func referenceSolve(g *flowsolver.Graph) (int64, error) {
	n := g.NodeCap()
	adj := make([][]refArc, n)
	excess := make([]int64, n)
	var cost int64
	for u := range n {
		if g.HasNode(flowsolver.NodeID(u)) {
			excess[u] = g.Supply(flowsolver.NodeID(u))
		}
	}
	for a := range g.ArcCap() {
		id := flowsolver.ArcID(a)
		if !g.HasArc(id) {
			continue
		}
		t, h, lo, up, c := g.Arc(id)
		f := lo
		if c < 0 {
			f = up
		}
		cost += f * c
		excess[t] -= f
		excess[h] += f
		u, v := int(t), int(h)
		adj[u] = append(adj[u], refArc{to: v, rev: len(adj[v]), res: up - f, cost: c, arc: id, forward: true})
		if u == v {
			adj[u][len(adj[u])-1].rev++
		}
		adj[v] = append(adj[v], refArc{to: u, rev: len(adj[u]) - 1, res: f - lo, cost: -c, arc: id})
	}
	for {
		s := -1
		for u := range n {
			if excess[u] > 0 {
				s = u
				break
			}
		}
		if s < 0 {
			return cost, nil
		}
		dist := make([]int64, n)
		prev := make([][2]int, n)
		for i := range dist {
			dist[i] = math.MaxInt64
		}
		dist[s] = 0
		for range n {
			changed := false
			for u := range n {
				if dist[u] == math.MaxInt64 {
					continue
				}
				for k, e := range adj[u] {
					if e.res > 0 && dist[u]+e.cost < dist[e.to] {
						dist[e.to] = dist[u] + e.cost
						prev[e.to] = [2]int{u, k}
						changed = true
					}
				}
			}
			if !changed {
				break
			}
		}
		t := -1
		for v := range n {
			if excess[v] < 0 && dist[v] != math.MaxInt64 && (t < 0 || dist[v] < dist[t]) {
				t = v
			}
		}
		if t < 0 {
			return 0, errRefInfeasible
		}
		d := min(excess[s], -excess[t])
		for v := t; v != s; v = prev[v][0] {
			d = min(d, adj[prev[v][0]][prev[v][1]].res)
		}
		for v := t; v != s; v = prev[v][0] {
			e := &adj[prev[v][0]][prev[v][1]]
			e.res -= d
			adj[v][e.rev].res += d
			cost += d * e.cost
		}
		excess[s] -= d
		excess[t] += d
	}
}
