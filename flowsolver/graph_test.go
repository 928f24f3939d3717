package flowsolver_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/flowsolver"
	"github.com/sluicehq/sluice/internal/seedtest"
)

func TestGraphMutation(t *testing.T) {
	g := flowsolver.NewGraph(0, 0)
	a := must(g.AddNode(5))
	b := must(g.AddNode(0))
	c := must(g.AddNode(-5))
	ab := must(g.AddArc(a, b, 0, 10, 1))
	bc := must(g.AddArc(b, c, 0, 10, 1))
	ac := must(g.AddArc(a, c, 0, 10, 5))
	if g.Nodes() != 3 || g.Arcs() != 3 {
		t.Fatalf("counts %d nodes %d arcs", g.Nodes(), g.Arcs())
	}
	sol := solveOK(t, g)
	if sol.Cost != 10 || sol.Flow[ab] != 5 || sol.Flow[ac] != 0 {
		t.Fatalf("cost %d flows %v", sol.Cost, sol.Flow)
	}

	if err := g.RemoveNode(b); err != nil {
		t.Fatal(err)
	}
	if g.HasArc(ab) || g.HasArc(bc) || !g.HasArc(ac) || g.Arcs() != 1 || g.Nodes() != 2 {
		t.Fatalf("after RemoveNode: arcs ab=%v bc=%v ac=%v, %d arcs, %d nodes", g.HasArc(ab), g.HasArc(bc), g.HasArc(ac), g.Arcs(), g.Nodes())
	}
	if sol := solveOK(t, g); sol.Cost != 25 {
		t.Fatalf("cost after removal %d, want 25", sol.Cost)
	}

	// Removed IDs are reused, and the reused node has no stale arcs.
	d := must(g.AddNode(0))
	if d != b {
		t.Errorf("new node got ID %d, want the freed %d", d, b)
	}
	ad := must(g.AddArc(a, d, 0, 10, 0))
	dc := must(g.AddArc(d, c, 0, 10, 0))
	if ad != bc && ad != ab || g.ArcCap() != 3 {
		t.Errorf("arcs not reused: ad=%d dc=%d cap=%d", ad, dc, g.ArcCap())
	}
	if sol := solveOK(t, g); sol.Cost != 0 {
		t.Fatalf("cost with free path %d, want 0", sol.Cost)
	}
	if err := g.SetCost(ad, 3); err != nil {
		t.Fatal(err)
	}
	if err := g.SetBounds(dc, 0, 2); err != nil {
		t.Fatal(err)
	}
	if err := g.SetSupply(a, 4); err != nil {
		t.Fatal(err)
	}
	if err := g.SetSupply(c, -4); err != nil {
		t.Fatal(err)
	}
	if sol := solveOK(t, g); sol.Cost != 2*3+2*5 {
		t.Fatalf("cost after changes %d, want 16", sol.Cost)
	}
}

func solveOK(t *testing.T, g *flowsolver.Graph) *flowsolver.Solution {
	t.Helper()
	sol, err := flowsolver.Solve(context.Background(), g)
	if err != nil {
		t.Fatal(err)
	}
	if err := flowsolver.Verify(g, sol); err != nil {
		t.Fatal(err)
	}
	return sol
}

func TestGraphErrors(t *testing.T) {
	g := flowsolver.NewGraph(2, 1)
	a := must(g.AddNode(0))
	b := must(g.AddNode(0))
	arc := must(g.AddArc(a, b, 0, 1, 1))
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"missing tail", second(g.AddArc(7, b, 0, 1, 0)), "arc tail: flowsolver: bad graph: no node 7"},
		{"negative lower", second(g.AddArc(a, b, -1, 1, 0)), "bounds [-1, 1]"},
		{"lower above upper", second(g.AddArc(a, b, 3, 2, 0)), "bounds [3, 2]"},
		{"huge capacity", second(g.AddArc(a, b, 0, flowsolver.MaxCapacity+1, 0)), "capacity"},
		{"huge cost", second(g.AddArc(a, b, 0, 1, -flowsolver.MaxAbsCost-1)), "cost"},
		{"huge supply", second(g.AddNode(flowsolver.MaxCapacity + 1)), "supply"},
		{"set cost on missing arc", g.SetCost(99, 1), "no arc 99"},
		{"set bounds bad", g.SetBounds(arc, 2, 1), "bounds [2, 1]"},
		{"remove missing node", g.RemoveNode(-1), "no node -1"},
		{"remove arc twice", removeTwice(g, arc), "no arc"},
	} {
		if !errors.Is(tc.err, flowsolver.ErrBadGraph) || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: got %v, want ErrBadGraph containing %q", tc.name, tc.err, tc.want)
		}
	}
}

func second[T any](_ T, err error) error { return err }

func removeTwice(g *flowsolver.Graph, a flowsolver.ArcID) error {
	if err := g.RemoveArc(a); err != nil {
		return err
	}
	return g.RemoveArc(a)
}

func TestInfeasible(t *testing.T) {
	g := flowsolver.NewGraph(3, 2)
	s := must(g.AddNode(7))
	m := must(g.AddNode(0))
	d := must(g.AddNode(-7))
	must(g.AddArc(s, m, 0, 10, 1))
	must(g.AddArc(m, d, 0, 4, 1))
	_, err := flowsolver.Solve(context.Background(), g)
	var ie *flowsolver.InfeasibleError
	if !errors.As(err, &ie) || ie.Unrouted != 3 || ie.Excess == 0 {
		t.Fatalf("got %v (%+v), want 3 units unrouted", err, ie)
	}
	if !strings.Contains(err.Error(), "cannot") {
		t.Errorf("message %q does not say what cannot be routed", err)
	}

	unbalanced := flowsolver.NewGraph(2, 0)
	must(unbalanced.AddNode(2))
	must(unbalanced.AddNode(-1))
	if _, err := flowsolver.Solve(context.Background(), unbalanced); !errors.Is(err, flowsolver.ErrInfeasible) || !strings.Contains(err.Error(), "differ by 1") {
		t.Errorf("unbalanced supplies: %v", err)
	}
}

func TestOverflowRejected(t *testing.T) {
	g := flowsolver.NewGraph(2, 8)
	a := must(g.AddNode(0))
	b := must(g.AddNode(0))
	for range 8 {
		must(g.AddArc(a, b, 0, flowsolver.MaxCapacity, flowsolver.MaxAbsCost))
	}
	if _, err := flowsolver.Solve(context.Background(), g); !errors.Is(err, flowsolver.ErrBadGraph) || !strings.Contains(err.Error(), "overflow") {
		t.Fatalf("got %v, want an overflow rejection", err)
	}
}

func TestDeadline(t *testing.T) {
	r := seedtest.Rand(t)
	g := randomGraph(r, shape{name: "deadline", nodes: 200, arcs: 2000, maxCap: 50, maxCost: 1000, maxSupply: 30})
	if _, err := referenceSolve(g); err != nil {
		t.Skip("random graph infeasible")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	sol, err := flowsolver.Solve(ctx, g)
	if err != nil {
		t.Fatal(err)
	}
	if sol.Optimal || sol.Potential != nil {
		t.Errorf("a cancelled solve claims optimality")
	}
	if err := flowsolver.Verify(g, sol); err != nil {
		t.Errorf("the flow returned at the deadline is not feasible: %v", err)
	}
}

// TestVerifyCatches shows that Verify rejects each kind of bad solution.
func TestVerifyCatches(t *testing.T) {
	g := flowsolver.NewGraph(3, 3)
	a := must(g.AddNode(2))
	b := must(g.AddNode(0))
	c := must(g.AddNode(-2))
	ab := must(g.AddArc(a, b, 0, 2, 1))
	bc := must(g.AddArc(b, c, 0, 2, 1))
	ac := must(g.AddArc(a, c, 0, 2, 5))
	good := solveOK(t, g)
	for _, tc := range []struct {
		name string
		edit func(s *flowsolver.Solution)
		want string
	}{
		{"over capacity", func(s *flowsolver.Solution) { s.Flow[ab], s.Flow[bc] = 3, 3; s.Cost = 6 }, "outside [0, 2]"},
		{"not conserved", func(s *flowsolver.Solution) { s.Flow[bc] = 1; s.Cost = 3 }, "net"},
		{"wrong cost", func(s *flowsolver.Solution) { s.Cost++ }, "costs 4"},
		{"not optimal, with potentials", func(s *flowsolver.Solution) {
			s.Flow[ab], s.Flow[bc], s.Flow[ac], s.Cost = 0, 0, 2, 10
		}, "not optimal"},
		{"not optimal, no potentials", func(s *flowsolver.Solution) {
			s.Flow[ab], s.Flow[bc], s.Flow[ac], s.Cost, s.Potential = 0, 0, 2, 10, nil
		}, "negative-cost cycle"},
		{"short flow slice", func(s *flowsolver.Solution) { s.Flow = s.Flow[:1] }, "1 flows"},
	} {
		s := *good
		s.Flow = append([]int64(nil), good.Flow...)
		s.Potential = append([]int64(nil), good.Potential...)
		tc.edit(&s)
		err := flowsolver.Verify(g, &s)
		if !errors.Is(err, flowsolver.ErrVerify) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want it to contain %q", tc.name, err, tc.want)
		}
	}
}
