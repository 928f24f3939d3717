package flowgen_test

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/bench/flowgen"
	"github.com/sluicehq/sluice/flowsolver"
)

// maxCost is the largest cost doc.go promises.
const maxCost = 1900

// small is a quick config; tests vary it.
func small(seed uint64) flowgen.Config {
	return flowgen.Config{Machines: 60, Racks: 4, Slots: 6, Tasks: 700, Jobs: 9, Seed: seed}
}

func TestDeterministic(t *testing.T) {
	for _, agg := range []bool{false, true} {
		cfg := small(42)
		cfg.Aggregated = agg
		a, b := generate(t, cfg), generate(t, cfg)
		if !slices.Equal(dump(a.Graph), dump(b.Graph)) {
			t.Errorf("aggregated %v: two graphs from one seed differ", agg)
		}
		cfg.Seed++
		if c := generate(t, cfg); slices.Equal(dump(a.Graph), dump(c.Graph)) {
			t.Errorf("aggregated %v: seeds %d and %d give the same graph", agg, cfg.Seed-1, cfg.Seed)
		}

		for _, in := range []*flowgen.Instance{a, b} {
			if _, err := flowgen.Perturb(in, 0.05, rand.New(rand.NewPCG(7, 7))); err != nil {
				t.Fatal(err)
			}
		}
		if !slices.Equal(dump(a.Graph), dump(b.Graph)) {
			t.Errorf("aggregated %v: equal perturbations of equal graphs differ", agg)
		}
	}
}

func TestShapes(t *testing.T) {
	configs := map[string]flowgen.Config{
		"small":            small(1),
		"even jobs":        {Machines: 40, Tasks: 333, Jobs: 7, JobSizes: flowgen.EvenJobs, Seed: 2},
		"no locality":      {Machines: 30, Tasks: 200, LocalShare: -1, Seed: 3},
		"all local":        {Machines: 30, Tasks: 200, LocalShare: 1, Seed: 4},
		"one task":         {Machines: 4, Tasks: 1, Seed: 5},
		"one job per task": {Machines: 10, Tasks: 50, Jobs: 50, Seed: 6},
	}
	for name, cfg := range configs {
		for _, agg := range []bool{false, true} {
			cfg.Aggregated = agg
			in := generate(t, cfg)
			s := in.Shape()
			t.Logf("%s, aggregated %v, seed %d: %+v", name, agg, cfg.Seed, s)
			checkInstance(t, in)
			if s.Tasks != int64(in.Config().Tasks) {
				t.Errorf("%s: %d tasks, config says %d", name, s.Tasks, in.Config().Tasks)
			}
			share := in.Config().LocalShare
			switch {
			case share < 0 && s.LocalTasks != 0:
				t.Errorf("%s: %d local tasks with local share %v", name, s.LocalTasks, share)
			case share == 1 && s.LocalTasks != s.Tasks:
				t.Errorf("%s: %d local tasks of %d with local share 1", name, s.LocalTasks, s.Tasks)
			}
		}
	}
}

// TestRenderingsAgree: both renderings of a config hold the same work, and
// keep holding the same work when perturbed alike.
func TestRenderingsAgree(t *testing.T) {
	cfg := small(9)
	per := generate(t, cfg)
	cfg.Aggregated = true
	agg := generate(t, cfg)
	for round := range 4 {
		ps, as := per.Shape(), agg.Shape()
		as.Classes, as.LocalClasses = 0, 0
		if ps != as {
			t.Fatalf("round %d: per task %+v, aggregated %+v", round, ps, as)
		}
		c1, err1 := flowgen.Perturb(per, 0.1, rand.New(rand.NewPCG(uint64(round), 1)))
		c2, err2 := flowgen.Perturb(agg, 0.1, rand.New(rand.NewPCG(uint64(round), 1)))
		if err1 != nil || err2 != nil || c1 != c2 {
			t.Fatalf("round %d: changes %+v, %v and %+v, %v", round, c1, err1, c2, err2)
		}
	}
}

func TestPerturb(t *testing.T) {
	for _, agg := range []bool{false, true} {
		cfg := small(11)
		cfg.Aggregated = agg
		in := generate(t, cfg)
		rng := rand.New(rand.NewPCG(3, 4))
		for round := range 20 {
			before := in.Shape()
			ch, err := flowgen.Perturb(in, 0.05, rng)
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			after := in.Shape()
			want := int64(float64(before.Tasks)*0.05 + 0.5)
			if ch.Left != want || ch.Arrived != want || ch.Machines != 3 || ch.ArrivedGroups < (want+14)/15 {
				t.Errorf("round %d: change %+v, want %d tasks each way and 3 machines", round, ch, want)
			}
			if after.Tasks != before.Tasks {
				t.Errorf("round %d: %d tasks, was %d", round, after.Tasks, before.Tasks)
			}
			checkInstance(t, in)
		}
	}
	// A whole turnover empties every original group and still checks.
	in := generate(t, flowgen.Config{Machines: 8, Tasks: 40, Aggregated: true, Seed: 12})
	if _, err := flowgen.Perturb(in, 1, rand.New(rand.NewPCG(5, 6))); err != nil {
		t.Fatal(err)
	}
	checkInstance(t, in)
	for _, frac := range []float64{0, -0.1, 1.5} {
		if _, err := flowgen.Perturb(in, frac, rand.New(rand.NewPCG(1, 1))); err == nil {
			t.Errorf("Perturb with fraction %v: no error", frac)
		}
	}
}

// TestBenchmarkSizes generates the sizes the solver benchmark uses and logs
// their node and arc counts.
func TestBenchmarkSizes(t *testing.T) {
	if testing.Short() {
		t.Skip("large instances")
	}
	for _, size := range []struct{ machines, tasks int }{{1000, 10000}, {5000, 50000}, {12500, 100000}} {
		for _, agg := range []bool{false, true} {
			cfg := flowgen.Config{Machines: size.machines, Tasks: size.tasks, Aggregated: agg}
			in := generate(t, cfg)
			checkInstance(t, in)
			t.Logf("%d machines, %d tasks, aggregated %v, seed %d: %d nodes, %d arcs; %+v",
				size.machines, size.tasks, agg, cfg.Seed, in.Graph.Nodes(), in.Graph.Arcs(), in.Shape())
		}
	}
}

func TestConfig(t *testing.T) {
	in := generate(t, flowgen.Config{})
	got := in.Config()
	want := flowgen.Config{Machines: 1000, Racks: 25, Slots: 12, Tasks: 10000, Jobs: 100, LocalShare: 0.5}
	if got != want {
		t.Errorf("defaults %+v, want %+v", got, want)
	}
	if g := in.Graph; g.Nodes() < 11000 || g.Nodes() > 11200 || g.Arcs() < 46000 || g.Arcs() > 48000 {
		t.Errorf("default instance has %d nodes and %d arcs; doc.go says about 11,100 and 47,000", g.Nodes(), g.Arcs())
	}

	bad := flowgen.Config{Machines: 10, Racks: 6, Slots: -1, Tasks: 5, Jobs: 9, LocalShare: 1.5, JobSizes: 7}
	err := bad.Validate()
	if !errors.Is(err, flowgen.ErrBadConfig) {
		t.Fatalf("Validate: %v", err)
	}
	for _, p := range []string{"machines 10 in 6 racks", "slots -1", "jobs 9", "job sizes JobSizes(7)", "local share 1.5"} {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("Validate: %v\ndoes not report %q", err, p)
		}
	}
	if _, err := flowgen.Generate(bad); !errors.Is(err, flowgen.ErrBadConfig) {
		t.Errorf("Generate with a bad config: %v", err)
	}
	if err := (flowgen.Config{Racks: 1}).Validate(); err == nil {
		t.Error("one rack: no error")
	}

	for _, s := range []flowgen.JobSizes{flowgen.SkewedJobs, flowgen.EvenJobs} {
		if p, err := flowgen.ParseJobSizes(s.String()); p != s || err != nil {
			t.Errorf("ParseJobSizes(%q) = %v, %v", s.String(), p, err)
		}
	}
	if _, err := flowgen.ParseJobSizes("zipf"); !errors.Is(err, flowgen.ErrBadConfig) {
		t.Errorf("ParseJobSizes(zipf): %v", err)
	}
}

// generate generates cfg's instance, logging cfg and so its seed.
func generate(t *testing.T, cfg flowgen.Config) *flowgen.Instance {
	t.Helper()
	t.Logf("generate %+v", cfg)
	in, err := flowgen.Generate(cfg)
	if err != nil {
		t.Fatalf("seed %d: %v", cfg.Seed, err)
	}
	return in
}

// checkInstance checks in's graph against doc.go: the node and arc counts,
// the supplies, the limits on values, and that sending every task to its
// job's unscheduled node is a feasible flow.
func checkInstance(t *testing.T, in *flowgen.Instance) {
	t.Helper()
	g, s, agg := in.Graph, in.Shape(), in.Config().Aggregated
	wantNodes := 2 + s.Racks + s.Machines + s.Jobs + int(s.Tasks)
	wantArcs := s.Racks + 2*s.Machines + s.Jobs + 2*int(s.Tasks) + 5*int(s.LocalTasks)
	if agg {
		wantNodes = 2 + s.Racks + s.Machines + s.Jobs + s.Groups + s.Classes
		wantArcs = s.Racks + 2*s.Machines + s.Jobs + 2*s.Groups + s.Classes + 5*s.LocalClasses
	}
	if g.Nodes() != wantNodes || g.Arcs() != wantArcs {
		t.Errorf("%d nodes and %d arcs, want %d and %d for %+v", g.Nodes(), g.Arcs(), wantNodes, wantArcs, s)
	}

	sink := in.Sink()
	var sum, sources, supply int64
	for n := range flowsolver.NodeID(g.NodeCap()) {
		if !g.HasNode(n) {
			continue
		}
		v := g.Supply(n)
		sum += v
		switch {
		case v > 0:
			sources++
			supply += v
			if !agg && v != 1 {
				t.Errorf("task node %d has supply %d", n, v)
			}
		case v < 0 && n != sink:
			t.Errorf("node %d has demand %d; only the sink should", n, -v)
		}
	}
	if sum != 0 || g.Supply(sink) != -s.Tasks || supply != s.Tasks {
		t.Errorf("supplies sum to %d, total supply %d, sink demand %d; want 0, %d, %d", sum, supply, -g.Supply(sink), s.Tasks, s.Tasks)
	}
	if want := s.Tasks; agg {
		want = int64(s.Groups)
		if sources != want {
			t.Errorf("%d supply nodes, want %d groups", sources, want)
		}
	} else if sources != want {
		t.Errorf("%d supply nodes, want %d tasks", sources, want)
	}

	// Arcs into the sink: one from each machine, carrying its free slots,
	// and one from each job's unscheduled node, carrying its tasks.
	toSink := map[flowsolver.NodeID]int64{}
	var intoSink int64
	for a := range flowsolver.ArcID(g.ArcCap()) {
		if !g.HasArc(a) {
			continue
		}
		tail, head, lower, upper, cost := g.Arc(a)
		if lower != 0 || upper < 0 || upper > flowsolver.MaxCapacity || cost < 0 || cost > maxCost {
			t.Errorf("arc %d: %d→%d [%d, %d] cost %d out of range", a, tail, head, lower, upper, cost)
		}
		if v := g.Supply(tail); v > 0 && upper != v {
			t.Errorf("arc %d out of source %d carries %d, want its supply %d", a, tail, upper, v)
		}
		if head == sink {
			toSink[tail] = upper
			intoSink += upper
		}
	}
	if len(toSink) != s.Jobs+s.Machines || intoSink != s.FreeSlots+s.Tasks {
		t.Errorf("%d arcs into the sink carry %d; want %d (jobs and machines) carrying %d (free slots and tasks)",
			len(toSink), intoSink, s.Jobs+s.Machines, s.FreeSlots+s.Tasks)
	}
	// Feasible by construction: each source sends its supply along its arc
	// into its job's unscheduled node and on to the sink, within every
	// capacity. Among the sink's neighbours, the machines are those with an
	// arc from a node without supply (a rack).
	machine := map[flowsolver.NodeID]bool{}
	for a := range flowsolver.ArcID(g.ArcCap()) {
		if !g.HasArc(a) {
			continue
		}
		if tail, head, _, _, _ := g.Arc(a); g.Supply(tail) == 0 {
			if _, ok := toSink[head]; ok {
				machine[head] = true
			}
		}
	}
	if len(machine) != s.Machines {
		t.Errorf("%d machine nodes, want %d", len(machine), s.Machines)
	}
	routed := map[flowsolver.NodeID]int64{}
	var total int64
	for a := range flowsolver.ArcID(g.ArcCap()) {
		if !g.HasArc(a) {
			continue
		}
		tail, head, _, upper, _ := g.Arc(a)
		if _, ok := toSink[head]; !ok || machine[head] || g.Supply(tail) <= 0 {
			continue
		}
		if upper < g.Supply(tail) {
			t.Errorf("arc %d to unscheduled node %d carries %d < supply %d", a, head, upper, g.Supply(tail))
		}
		routed[head] += g.Supply(tail)
		total += g.Supply(tail)
	}
	for u, f := range routed {
		if f > toSink[u] {
			t.Errorf("unscheduled node %d receives %d, its arc to the sink carries %d", u, f, toSink[u])
		}
	}
	if total != s.Tasks {
		t.Errorf("%d tasks routed to unscheduled nodes, want %d", total, s.Tasks)
	}
}

// dump lists a graph's supplies and arcs, for comparing two graphs.
func dump(g *flowsolver.Graph) []int64 {
	var out []int64
	for n := range flowsolver.NodeID(g.NodeCap()) {
		if g.HasNode(n) {
			out = append(out, int64(n), g.Supply(n))
		}
	}
	for a := range flowsolver.ArcID(g.ArcCap()) {
		if g.HasArc(a) {
			tail, head, lower, upper, cost := g.Arc(a)
			out = append(out, int64(a), int64(tail), int64(head), lower, upper, cost)
		}
	}
	return out
}
