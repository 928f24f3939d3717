// Package flowsolver solves minimum-cost flow problems exactly: the
// placement engine of Sluice's scheduler, which models every scheduling
// round as a flow network (task groups → equivalence classes → nodes and
// cached slots → sink, with unscheduled arcs) in the style of Quincy and
// Firmament.
//
// A Graph has dense integer node and arc IDs, int64 supplies, bounds and
// costs, and is changed in place between solves (supplies, bounds and costs
// changed; nodes and arcs added and removed, their IDs reused). Solve finds
// an optimal flow by cost scaling (Goldberg's method with partial
// augment-relabel, global price updates and early termination) after
// routing a feasible flow with Dinic's algorithm, and returns potentials
// that prove optimality. A Solver reused on the same Graph re-solves
// incrementally: it keeps the previous optimum's residual network and
// prices, patches them in place with the changes the graph has journaled
// since (a cost of what changed, not of the graph), repairs what the
// changes disturbed by primal-dual shortest paths, and hands over to cost
// scaling when the changes are large. Verify checks any solution: bounds,
// conservation, cost, and reduced-cost optimality. ReadDIMACS and
// WriteDIMACS read and write the DIMACS min-cost-flow format.
//
// # Invariants
//
//   - A solution returned with Optimal true passes Verify; one returned at a
//     context deadline is feasible and passes Verify with Optimal false.
//   - An infeasible graph yields an *InfeasibleError naming a node whose
//     supply or demand cannot be routed; nothing is ever partly solved.
//   - Numbers beyond the limits (MaxCapacity, MaxAbsCost, and the solver's
//     overflow bound on |cost|·(n+1)²) are rejected with ErrBadGraph before
//     any arithmetic can overflow.
//   - A Solver's warm start patches exactly the nodes and arcs the graph's
//     journal names; when it cannot (the journal overflowed, node IDs grew
//     past the network's scale, the network is more garbage than arcs) it
//     rebuilds from the graph, so every path gives the same optimum. A warm
//     start whose repair runs over budget is finished by cost scaling from
//     its prices, which is pseudo-polynomial in how far they are from the
//     new optimum's: past a budget of pushes and relabels (16 per node and
//     arc) the solve starts over from zero (Stats.StartedOver), so a warm
//     start costs at most a bounded amount more than a cold one.
//   - The package has no goroutines, logger or clock; the caller's context
//     is its only tie to time.
//
// # Usage
//
//	g := flowsolver.NewGraph(3, 2)
//	task, _ := g.AddNode(5)     // five identical tasks
//	node, _ := g.AddNode(0)
//	sink, _ := g.AddNode(-5)
//	g.AddArc(task, node, 0, 5, 10)
//	g.AddArc(node, sink, 0, 8, 0)
//	sol, err := flowsolver.Solve(ctx, g)
package flowsolver
