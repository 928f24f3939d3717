package flowsolver_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/sluicehq/sluice/flowsolver"
	"github.com/sluicehq/sluice/internal/seedtest"
)

// change applies one random change to g: a supply moved between two nodes,
// an arc's cost or bounds changed, an arc added or removed, a node added
// (with arcs) or removed (its supply handed to another node).
func change(r *rand.Rand, g *flowsolver.Graph, sh shape) {
	live := func() flowsolver.NodeID {
		for {
			if n := flowsolver.NodeID(r.IntN(g.NodeCap())); g.HasNode(n) {
				return n
			}
		}
	}
	liveArc := func() (flowsolver.ArcID, bool) {
		if g.Arcs() == 0 {
			return 0, false
		}
		for {
			if a := flowsolver.ArcID(r.IntN(g.ArcCap())); g.HasArc(a) {
				return a, true
			}
		}
	}
	switch r.IntN(7) {
	case 0:
		a, b := live(), live()
		d := r.Int64N(sh.maxSupply + 1)
		if a != b {
			_ = g.SetSupply(a, g.Supply(a)+d)
			_ = g.SetSupply(b, g.Supply(b)-d)
		}
	case 1:
		if a, ok := liveArc(); ok {
			_ = g.SetCost(a, r.Int64N(2*sh.maxCost+1)-sh.maxCost)
		}
	case 2:
		if a, ok := liveArc(); ok {
			up := r.Int64N(sh.maxCap + 1)
			_ = g.SetBounds(a, r.Int64N(up/2+1), up)
		}
	case 3:
		must(g.AddArc(live(), live(), 0, r.Int64N(sh.maxCap+1), r.Int64N(sh.maxCost+1)))
	case 4:
		if a, ok := liveArc(); ok {
			_ = g.RemoveArc(a)
		}
	case 5:
		n := must(g.AddNode(0))
		for range 3 {
			must(g.AddArc(n, live(), 0, r.Int64N(sh.maxCap+1), r.Int64N(sh.maxCost+1)))
			must(g.AddArc(live(), n, 0, r.Int64N(sh.maxCap+1), r.Int64N(sh.maxCost+1)))
		}
	case 6:
		if g.Nodes() > 3 {
			n, heir := live(), live()
			if n != heir {
				_ = g.SetSupply(heir, g.Supply(heir)+g.Supply(n))
				_ = g.RemoveNode(n)
			}
		}
	}
}

// TestIncremental solves a graph, changes it, and re-solves it with the
// same Solver (warm, from the previous flow and potentials), again and
// again: every re-solve must agree with a from-scratch solve and pass
// Verify, whatever the sequence of changes.
func TestIncremental(t *testing.T) {
	r := seedtest.Rand(t)
	for _, sh := range shapes {
		t.Run(sh.name, func(t *testing.T) {
			warmRuns, repaired, patched := 0, 0, 0
			covered := func() bool {
				return warmRuns > 0 && repaired > 0 && patched > 0 && patched < warmRuns
			}
			// At least 20 graphs, and more (up to 200) until every path
			// was taken: a shape whose graphs are mostly infeasible has
			// few warm re-solves, and 20 graphs of them now and then
			// happen to need no rebuild.
			for i := 0; i < 20 || (i < 200 && !covered()); i++ {
				g := randomGraph(r, sh)
				var s flowsolver.Solver
				for step := range 15 {
					name := fmt.Sprintf("%s graph %d step %d", sh.name, i, step)
					warm, werr := s.Solve(context.Background(), g)
					cold, cerr := flowsolver.Solve(context.Background(), g)
					switch {
					case (werr == nil) != (cerr == nil):
						t.Fatalf("%s: warm error %v, cold error %v", name, werr, cerr)
					case werr == nil:
						if warm.Cost != cold.Cost {
							t.Fatalf("%s: warm cost %d, cold %d", name, warm.Cost, cold.Cost)
						}
						if err := flowsolver.Verify(g, warm); err != nil {
							t.Fatalf("%s: %v", name, err)
						}
						if warm.Stats.Incremental {
							warmRuns++
						}
						if warm.Stats.Algorithm == flowsolver.AlgorithmRepair {
							repaired++
						}
						if warm.Stats.Patched {
							patched++
						}
					}
					for range 1 + r.IntN(3) {
						change(r, g, sh)
					}
				}
			}
			if !covered() {
				t.Errorf("%d re-solves started warm, %d finished by repair alone, %d patched the network in place: want some of each, and some rebuilt", warmRuns, repaired, patched)
			}
		})
	}
}

// TestPatch re-solves a scheduling instance after changes of each kind a
// patch handles in place — one round's churn, a hub given many new arcs
// (its arcs moved to a larger room), arcs removed and their IDs reused
// between other nodes — and after changes it hands to a rebuild: a node ID
// beyond any used before, and more changes than the graph's journal keeps.
// Every re-solve must match a cold solve and pass Verify.
func TestPatch(t *testing.T) {
	c := newCluster(30, 600, 1, 11)
	var s flowsolver.Solver
	if _, err := s.Solve(context.Background(), c.g); err != nil {
		t.Fatal(err)
	}
	check := func(name string, wantPatched bool) {
		t.Helper()
		warm, err := s.Solve(context.Background(), c.g)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		cold, err := flowsolver.Solve(context.Background(), c.g)
		if err != nil {
			t.Fatalf("%s: cold: %v", name, err)
		}
		if warm.Cost != cold.Cost {
			t.Fatalf("%s: warm cost %d, cold %d", name, warm.Cost, cold.Cost)
		}
		if err := flowsolver.Verify(c.g, warm); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !warm.Stats.Incremental || warm.Stats.Patched != wantPatched {
			t.Fatalf("%s: stats %+v, want incremental and patched %v", name, warm.Stats, wantPatched)
		}
	}
	for i := range 5 {
		c.churn(0.05)
		check(fmt.Sprint("churn ", i), true)
	}
	// A hub gains far more arcs than it has room for.
	hub := c.machines[0]
	for _, task := range c.tasks[:200] {
		must(c.g.AddArc(task, hub, 0, 1, 1))
	}
	check("hub grown", true)
	// Arcs removed and their IDs reused elsewhere, one with a lower bound.
	moved := map[flowsolver.NodeID]bool{}
	for _, task := range c.tasks[:20] {
		moved[task] = true
	}
	for a := range flowsolver.ArcID(c.g.ArcCap()) {
		if tail, _, _, _, _ := c.g.Arc(a); c.g.HasArc(a) && moved[tail] {
			_ = c.g.RemoveArc(a)
		}
	}
	for i, task := range c.tasks[:20] {
		must(c.g.AddArc(task, c.unsched[i%len(c.unsched)], 0, 1, 500))
		must(c.g.AddArc(task, c.machines[(i+1)%len(c.machines)], 0, 1, int64(i%7)))
	}
	must(c.g.AddArc(c.agg, c.machines[1], 1, 3, 5))
	check("IDs reused", true)
	// A node ID never used before changes the network's scale.
	c.addTask()
	for len(c.tasks) > 0 && c.g.NodeCap() == len(c.tasks) {
		c.addTask()
	}
	fresh := must(c.g.AddNode(0))
	must(c.g.AddArc(fresh, c.sink, 0, 1, 0))
	check("new node ID", false)
	// More changes than the journal keeps.
	for i := range 2*(c.g.NodeCap()+c.g.ArcCap()) + 100 {
		a := c.machineArcs[i%len(c.machineArcs)]
		_, _, _, up, _ := c.g.Arc(a)
		_ = c.g.SetBounds(a, 0, up)
	}
	check("journal dropped", false)
	c.churn(0.05)
	check("patched again", true)
}

// TestRepairAbandoned changes most of a scheduling instance at once (every
// task replaced, half the machines emptied, every other cost changed): the
// warm re-solve hands its repair over to cost scaling once over budget, and
// still finds the optimum.
func TestRepairAbandoned(t *testing.T) {
	c := newCluster(40, 2000, 1, 7)
	var s flowsolver.Solver
	if _, err := s.Solve(context.Background(), c.g); err != nil {
		t.Fatal(err)
	}
	c.churn(1.0)
	for i, a := range c.machineArcs {
		if i%2 == 0 {
			_ = c.g.SetBounds(a, 0, 0)
		}
	}
	for a := range c.g.ArcCap() {
		if id := flowsolver.ArcID(a); c.g.HasArc(id) && a%2 == 0 {
			_, _, _, _, cost := c.g.Arc(id)
			_ = c.g.SetCost(id, (cost*7+13)%1000)
		}
	}
	warm, err := s.Solve(context.Background(), c.g)
	if err != nil {
		t.Fatal(err)
	}
	if warm.Stats.Algorithm != flowsolver.AlgorithmRepairThenScaling {
		t.Fatalf("stats %+v: want the repair handed over to cost scaling", warm.Stats)
	}
	checkAgainstReference(t, c.g, "after heavy churn")
	cold, err := flowsolver.Solve(context.Background(), c.g)
	if err != nil || cold.Cost != warm.Cost {
		t.Fatalf("cold %v, %v; warm cost %d", cold, err, warm.Cost)
	}
	if err := flowsolver.Verify(c.g, warm); err != nil {
		t.Fatal(err)
	}
}

// TestSolverAcrossGraphs uses one Solver on different graphs: nothing of one
// graph's solution may leak into the other's.
func TestSolverAcrossGraphs(t *testing.T) {
	r := seedtest.Rand(t)
	var s flowsolver.Solver
	for i := range 40 {
		g := randomGraph(r, shapes[i%len(shapes)])
		want, refErr := referenceSolve(g)
		sol, err := s.Solve(context.Background(), g)
		if (err == nil) != (refErr == nil) {
			t.Fatalf("graph %d: error %v, reference error %v", i, err, refErr)
		}
		if err == nil && (sol.Cost != want || sol.Stats.Incremental) {
			t.Fatalf("graph %d: cost %d (reference %d), incremental %v", i, sol.Cost, want, sol.Stats.Incremental)
		}
	}
}

// TestWarmInfeasible makes a solved instance infeasible (machines emptied
// below the tasks' demand, with the unscheduled arcs closed): the warm
// re-solve reports the unroutable supply as a cold one does, and, once the
// change is undone, the next solve is optimal again.
func TestWarmInfeasible(t *testing.T) {
	c := newCluster(20, 400, 1, 3)
	var s flowsolver.Solver
	if _, err := s.Solve(context.Background(), c.g); err != nil {
		t.Fatal(err)
	}
	var closed []flowsolver.ArcID
	for a := range c.g.ArcCap() {
		id := flowsolver.ArcID(a)
		if !c.g.HasArc(id) {
			continue
		}
		_, head, _, up, _ := c.g.Arc(id)
		if head == c.sink && up > 0 {
			_ = c.g.SetBounds(id, 0, 0)
			closed = append(closed, id)
		}
	}
	_, err := s.Solve(context.Background(), c.g)
	var ie *flowsolver.InfeasibleError
	if !errors.Is(err, flowsolver.ErrInfeasible) || !errors.As(err, &ie) || ie.Unrouted == 0 {
		t.Fatalf("warm solve of an infeasible graph: %v, want an *InfeasibleError", err)
	}
	if _, err := flowsolver.Solve(context.Background(), c.g); !errors.Is(err, flowsolver.ErrInfeasible) {
		t.Fatalf("cold solve of an infeasible graph: %v", err)
	}
	for _, id := range closed {
		_ = c.g.SetBounds(id, 0, flowsolver.MaxCapacity)
	}
	sol, err := s.Solve(context.Background(), c.g)
	if err != nil {
		t.Fatal(err)
	}
	if err := flowsolver.Verify(c.g, sol); err != nil {
		t.Fatal(err)
	}
	checkAgainstReference(t, c.g, "after reopening")
}

// TestWarmDeadline re-solves after a change with a context that has
// already ended: the solve returns a feasible flow, not proven optimal.
func TestWarmDeadline(t *testing.T) {
	c := newCluster(50, 2000, 1, 5)
	var s flowsolver.Solver
	if _, err := s.Solve(context.Background(), c.g); err != nil {
		t.Fatal(err)
	}
	c.churn(0.2)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	sol, err := s.Solve(ctx, c.g)
	if err != nil {
		t.Fatal(err)
	}
	if sol.Optimal || sol.Potential != nil {
		t.Fatalf("stats %+v: want a flow not proven optimal", sol.Stats)
	}
	if err := flowsolver.Verify(c.g, sol); err != nil {
		t.Fatal(err)
	}
	// The next solve may not start from an unproven flow.
	next, err := s.Solve(context.Background(), c.g)
	if err != nil || !next.Optimal || next.Stats.Incremental {
		t.Fatalf("solve after a deadline: %+v, %v; want optimal and cold", next, err)
	}
}

// TestHandoverStartsOver changes a scheduling instance whose costs span
// the whole cost range so much that finishing the warm start by cost
// scaling from its old prices would take long: the solve starts over from
// zero within its budget, and still finds the optimum.
func TestHandoverStartsOver(t *testing.T) {
	c := newCluster(40, 2000, 1, 7)
	for a := range c.g.ArcCap() {
		if id := flowsolver.ArcID(a); c.g.HasArc(id) {
			_, _, _, _, cost := c.g.Arc(id)
			_ = c.g.SetCost(id, cost*(flowsolver.MaxAbsCost/2000))
		}
	}
	var s flowsolver.Solver
	if _, err := s.Solve(context.Background(), c.g); err != nil {
		t.Fatal(err)
	}
	c.churn(1.0)
	for i, a := range c.machineArcs {
		if i%2 == 0 {
			_ = c.g.SetBounds(a, 0, 0)
		}
	}
	warm, err := s.Solve(context.Background(), c.g)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("stats %+v", warm.Stats)
	if !warm.Stats.StartedOver {
		t.Fatalf("stats %+v: want the warm start abandoned for a solve from zero", warm.Stats)
	}
	cold, err := flowsolver.Solve(context.Background(), c.g)
	if err != nil || cold.Cost != warm.Cost {
		t.Fatalf("cold %v, %v; warm cost %d", cold, err, warm.Cost)
	}
	if err := flowsolver.Verify(c.g, warm); err != nil {
		t.Fatal(err)
	}
}
