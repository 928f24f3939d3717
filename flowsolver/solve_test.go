package flowsolver_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/sluicehq/sluice/flowsolver"
	"github.com/sluicehq/sluice/internal/seedtest"
)

// shape describes a family of random graphs.
type shape struct {
	name                  string
	nodes, arcs           int
	maxCap, maxCost       int64
	negative, lowerBounds bool
	parallel, selfLoops   bool
	zeroCostCycles        bool
	maxSupply             int64
}

var shapes = []shape{
	{name: "sparse", nodes: 30, arcs: 60, maxCap: 20, maxCost: 50, maxSupply: 10},
	{name: "dense", nodes: 15, arcs: 200, maxCap: 10, maxCost: 100, maxSupply: 20},
	{name: "negative costs", nodes: 20, arcs: 80, maxCap: 15, maxCost: 40, negative: true, maxSupply: 10},
	{name: "lower bounds", nodes: 20, arcs: 70, maxCap: 12, maxCost: 30, lowerBounds: true, maxSupply: 8},
	{name: "parallel and self loops", nodes: 10, arcs: 60, maxCap: 8, maxCost: 20, parallel: true, selfLoops: true, negative: true, maxSupply: 6},
	{name: "zero-cost cycles", nodes: 20, arcs: 60, maxCap: 10, maxCost: 10, zeroCostCycles: true, maxSupply: 10},
	{name: "large supplies", nodes: 25, arcs: 90, maxCap: 1 << 30, maxCost: 1000, maxSupply: 1 << 28},
	{name: "tiny", nodes: 3, arcs: 4, maxCap: 3, maxCost: 5, negative: true, maxSupply: 3},
}

// randomGraph builds a graph of the shape. Supplies are balanced; the graph
// may still be infeasible, which the test checks both solvers agree on.
func randomGraph(r *rand.Rand, sh shape) *flowsolver.Graph {
	g := flowsolver.NewGraph(sh.nodes, sh.arcs)
	nodes := make([]flowsolver.NodeID, sh.nodes)
	for i := range nodes {
		nodes[i] = must(g.AddNode(0))
	}
	var balance int64
	for i := range nodes[:len(nodes)-1] {
		s := r.Int64N(2*sh.maxSupply+1) - sh.maxSupply
		if r.IntN(3) == 0 {
			s = 0
		}
		_ = g.SetSupply(nodes[i], s)
		balance += s
	}
	last := nodes[len(nodes)-1]
	for balance > flowsolver.MaxCapacity || balance < -flowsolver.MaxCapacity {
		balance /= 2
	}
	_ = g.SetSupply(last, -balance)
	if r.IntN(2) == 0 {
		// A ring of roomy, costly arcs makes most graphs of the shape
		// feasible, so that optimality, not only infeasibility, is tested.
		ring := min(sh.maxSupply*int64(sh.nodes), flowsolver.MaxCapacity)
		for i := range nodes {
			must(g.AddArc(nodes[i], nodes[(i+1)%len(nodes)], 0, ring, sh.maxCost))
		}
	}
	for range sh.arcs {
		t, h := nodes[r.IntN(len(nodes))], nodes[r.IntN(len(nodes))]
		if t == h && !sh.selfLoops {
			continue
		}
		up := r.Int64N(sh.maxCap + 1)
		lo := int64(0)
		if sh.lowerBounds && r.IntN(3) == 0 {
			lo = r.Int64N(up + 1)
		}
		c := r.Int64N(sh.maxCost + 1)
		if sh.negative && r.IntN(3) == 0 {
			c = -c
		}
		if sh.zeroCostCycles {
			c = 0
		}
		must(g.AddArc(t, h, lo, up, c))
		if sh.parallel && r.IntN(4) == 0 {
			must(g.AddArc(t, h, 0, r.Int64N(sh.maxCap+1), r.Int64N(sh.maxCost+1)))
		}
	}
	return g
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestDifferential compares Solve with the reference on random graphs of
// many shapes: the same feasibility and optimal cost, and every solution
// passes Verify.
func TestDifferential(t *testing.T) {
	r := seedtest.Rand(t)
	early := 0
	defer func() {
		if early == 0 {
			t.Error("no solve terminated early: that path went untested")
		}
	}()
	for _, sh := range shapes {
		t.Run(sh.name, func(t *testing.T) {
			feasible := 0
			for i := range 150 {
				g := randomGraph(r, sh)
				checkAgainstReference(t, g, fmt.Sprintf("%s #%d", sh.name, i))
				if sol, err := flowsolver.Solve(context.Background(), g); err == nil {
					feasible++
					if sol.Stats.EarlyTermination {
						early++
					}
				}
			}
			if feasible == 0 {
				t.Errorf("no feasible graph among 150: the shape tests nothing")
			}
		})
	}
}

func checkAgainstReference(t *testing.T, g *flowsolver.Graph, name string) {
	t.Helper()
	want, refErr := referenceSolve(g)
	sol, err := flowsolver.Solve(context.Background(), g)
	switch {
	case refErr != nil && err == nil:
		t.Fatalf("%s: reference finds it infeasible, Solve found cost %d", name, sol.Cost)
	case refErr == nil && err != nil:
		t.Fatalf("%s: Solve: %v; reference cost %d", name, err, want)
	case err != nil:
		var ie *flowsolver.InfeasibleError
		if !errors.Is(err, flowsolver.ErrInfeasible) || !errors.As(err, &ie) || ie.Excess == 0 {
			t.Fatalf("%s: infeasible error %v lacks detail", name, err)
		}
		return
	}
	if !sol.Optimal {
		t.Fatalf("%s: solution not optimal without a deadline", name)
	}
	if sol.Cost != want {
		t.Fatalf("%s: cost %d, reference %d", name, sol.Cost, want)
	}
	if err := flowsolver.Verify(g, sol); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	noPot := *sol
	noPot.Potential = nil
	if err := flowsolver.Verify(g, &noPot); err != nil {
		t.Fatalf("%s: without potentials: %v", name, err)
	}
}

// TestDIMACSInstances solves the instances in testdata/dimacs, whose answers
// ("c optimal COST" or "c infeasible") were checked with another solver.
func TestDIMACSInstances(t *testing.T) {
	files, err := filepath.Glob("testdata/dimacs/*.min")
	if err != nil || len(files) == 0 {
		t.Fatalf("no instances: %v", err)
	}
	answer := regexp.MustCompile(`(?m)^c (optimal (-?\d+)|infeasible)\r?$`)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		m := answer.FindSubmatch(data)
		if m == nil {
			t.Fatalf("%s: no answer comment", f)
		}
		g, err := flowsolver.ReadDIMACS(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		want, _ := referenceSolve(g)
		sol, err := flowsolver.Solve(context.Background(), g)
		if string(m[1]) == "infeasible" {
			if !errors.Is(err, flowsolver.ErrInfeasible) {
				t.Errorf("%s: want infeasible, got %v", f, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if got := strconv.FormatInt(sol.Cost, 10); got != string(m[2]) || sol.Cost != want {
			t.Errorf("%s: cost %s, want %s (reference %d)", f, got, m[2], want)
		}
		if err := flowsolver.Verify(g, sol); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}
