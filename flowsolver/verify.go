package flowsolver

import (
	"errors"
	"fmt"
)

// ErrVerify is wrapped by every error Verify returns.
var ErrVerify = errors.New("flowsolver: solution fails verification")

// Verify checks a solution against its graph: every arc's flow within its
// bounds, flow conserved at every node (outflow minus inflow equals supply),
// Cost equal to the flow's cost, and, when the solution claims to be
// optimal, optimality: if Potential is given, every residual arc must have a
// non-negative reduced cost under it (an O(arcs) proof); otherwise the
// residual graph must have no negative-cost cycle (Bellman-Ford, slower).
// It returns nil or an error wrapping ErrVerify that names the first
// violation found.
func Verify(g *Graph, s *Solution) error {
	if s == nil {
		return fmt.Errorf("%w: no solution", ErrVerify)
	}
	if len(s.Flow) != g.ArcCap() {
		return fmt.Errorf("%w: %d flows for %d arc IDs", ErrVerify, len(s.Flow), g.ArcCap())
	}
	balance := make([]int64, g.NodeCap())
	var cost int64
	for a := range g.ArcCap() {
		f := s.Flow[a]
		if !g.HasArc(ArcID(a)) {
			if f != 0 {
				return fmt.Errorf("%w: flow %d on removed arc %d", ErrVerify, f, a)
			}
			continue
		}
		t, h, lo, up, c := g.Arc(ArcID(a))
		if f < lo || f > up {
			return fmt.Errorf("%w: arc %d (%d->%d) carries %d, outside [%d, %d]", ErrVerify, a, t, h, f, lo, up)
		}
		balance[t] += f
		balance[h] -= f
		cost += f * c
	}
	for n := range g.NodeCap() {
		if !g.HasNode(NodeID(n)) {
			continue
		}
		if balance[n] != g.Supply(NodeID(n)) {
			return fmt.Errorf("%w: node %d sends %d net, its supply is %d", ErrVerify, n, balance[n], g.Supply(NodeID(n)))
		}
	}
	if cost != s.Cost {
		return fmt.Errorf("%w: the flow costs %d, the solution says %d", ErrVerify, cost, s.Cost)
	}
	if !s.Optimal {
		return nil
	}
	if s.Potential != nil {
		return verifyPotential(g, s)
	}
	return verifyNoNegativeCycle(g, s)
}

// verifyPotential checks the reduced-cost optimality conditions.
func verifyPotential(g *Graph, s *Solution) error {
	if len(s.Potential) != g.NodeCap() {
		return fmt.Errorf("%w: %d potentials for %d node IDs", ErrVerify, len(s.Potential), g.NodeCap())
	}
	for a := range g.ArcCap() {
		if !g.HasArc(ArcID(a)) {
			continue
		}
		t, h, lo, up, c := g.Arc(ArcID(a))
		rc := c + s.Potential[t] - s.Potential[h]
		f := s.Flow[a]
		if f < up && rc < 0 {
			return fmt.Errorf("%w: arc %d (%d->%d) has room and reduced cost %d < 0: not optimal", ErrVerify, a, t, h, rc)
		}
		if f > lo && rc > 0 {
			return fmt.Errorf("%w: arc %d (%d->%d) carries flow at reduced cost %d > 0: not optimal", ErrVerify, a, t, h, rc)
		}
	}
	return nil
}

// verifyNoNegativeCycle runs Bellman-Ford over the residual graph from a
// virtual root joined to every node, and fails if a relaxation still
// succeeds after as many rounds as there are nodes.
func verifyNoNegativeCycle(g *Graph, s *Solution) error {
	n := g.NodeCap()
	dist := make([]int64, n)
	for round := 0; ; round++ {
		changed := -1
		for a := range g.ArcCap() {
			if !g.HasArc(ArcID(a)) {
				continue
			}
			t, h, lo, up, c := g.Arc(ArcID(a))
			if s.Flow[a] < up && dist[t]+c < dist[h] {
				dist[h], changed = dist[t]+c, a
			}
			if s.Flow[a] > lo && dist[h]-c < dist[t] {
				dist[t], changed = dist[h]-c, a
			}
		}
		if changed < 0 {
			return nil
		}
		if round >= n {
			return fmt.Errorf("%w: the residual graph has a negative-cost cycle through arc %d: not optimal", ErrVerify, changed)
		}
	}
}
