package flowsolver_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flowsolver"
)

// schedulingGraph builds a Quincy-shaped per-task instance: every task is a
// node of supply 1 with arcs to its job's unscheduled aggregator, to the
// cluster aggregator and, for a third of tasks, to two preferred machines;
// the cluster aggregator feeds racks, racks feed machines, machines and
// unscheduled aggregators drain into the sink.
func schedulingGraph(machines, tasks int, seed uint64) *flowsolver.Graph {
	return newCluster(machines, tasks, 1, seed).g
}

// cluster is a scheduling instance with the IDs a benchmark needs to change
// it the way a scheduling round does.
type cluster struct {
	g           *flowsolver.Graph
	r           *rand.Rand
	sink        flowsolver.NodeID
	agg         flowsolver.NodeID
	machines    []flowsolver.NodeID
	machineArcs []flowsolver.ArcID // machine -> sink
	unsched     []flowsolver.NodeID
	tasks       []flowsolver.NodeID
	// group is the supply of a task node: 1 per task, or the count of a
	// task group of identical tasks when the graph is aggregated.
	group int64
}

// addTask adds a task node with its arcs.
func (c *cluster) addTask() {
	g, r := c.g, c.r
	task := must(g.AddNode(c.group))
	must(g.AddArc(task, c.unsched[r.IntN(len(c.unsched))], 0, c.group, 200+r.Int64N(800)))
	must(g.AddArc(task, c.agg, 0, c.group, 50+r.Int64N(50)))
	if r.IntN(3) == 0 {
		for range 2 {
			must(g.AddArc(task, c.machines[r.IntN(len(c.machines))], 0, c.group, r.Int64N(30)))
		}
	}
	c.tasks = append(c.tasks, task)
	_ = g.SetSupply(c.sink, g.Supply(c.sink)-c.group)
}

// churn makes the changes of one scheduling round on frac of the cluster:
// that share of tasks leaves (placed or cancelled) and as many new tasks
// arrive, and that share of machines has its free capacity changed.
func (c *cluster) churn(frac float64) {
	g, r := c.g, c.r
	n := max(int(frac*float64(len(c.tasks))), 1)
	for range n {
		i := r.IntN(len(c.tasks))
		_ = g.SetSupply(c.sink, g.Supply(c.sink)+g.Supply(c.tasks[i]))
		_ = g.RemoveNode(c.tasks[i])
		c.tasks[i] = c.tasks[len(c.tasks)-1]
		c.tasks = c.tasks[:len(c.tasks)-1]
	}
	for range n {
		c.addTask()
	}
	for range max(int(frac*float64(len(c.machines))), 1) {
		a := c.machineArcs[r.IntN(len(c.machineArcs))]
		_, _, _, up, _ := g.Arc(a)
		_ = g.SetBounds(a, 0, max(up+r.Int64N(5)-2, 0))
	}
}

// newCluster builds an instance of tasks tasks on machines machines; with
// group > 1 the tasks come in task groups of that many identical tasks, one
// node each.
func newCluster(machines, tasks int, group int64, seed uint64) *cluster {
	r := rand.New(rand.NewPCG(seed, 1))
	racks := max(machines/40, 1)
	jobs := max(tasks/100, 1)
	slots := int64(tasks*9/10/machines + 1)
	g := flowsolver.NewGraph(tasks+machines+racks+jobs+2, 3*tasks+2*machines+racks+jobs)
	sink := must(g.AddNode(0))
	agg := must(g.AddNode(0))
	rackIDs := make([]flowsolver.NodeID, racks)
	for i := range rackIDs {
		rackIDs[i] = must(g.AddNode(0))
		must(g.AddArc(agg, rackIDs[i], 0, slots*int64(machines/racks+1), 0))
	}
	c := &cluster{g: g, r: r, sink: sink, agg: agg, group: group}
	for i := range machines {
		m := must(g.AddNode(0))
		must(g.AddArc(rackIDs[i%racks], m, 0, slots, r.Int64N(20)))
		c.machines = append(c.machines, m)
		c.machineArcs = append(c.machineArcs, must(g.AddArc(m, sink, 0, slots, 0)))
	}
	for range jobs {
		u := must(g.AddNode(0))
		must(g.AddArc(u, sink, 0, flowsolver.MaxCapacity, 0))
		c.unsched = append(c.unsched, u)
	}
	for range tasks / int(group) {
		c.addTask()
	}
	return c
}

// BenchmarkIncremental measures a warm re-solve after one round's changes
// (1% of tasks replaced, 1% of machines' capacity changed), beside the
// from-scratch solve of the same changed graph.
func BenchmarkIncremental(b *testing.B) {
	for _, size := range []struct {
		machines, tasks int
		group           int64
	}{{1000, 10000, 1}, {5000, 50000, 1}, {1000, 10000, 10}, {12500, 100000, 100}} {
		kind := "pertask"
		if size.group > 1 {
			kind = fmt.Sprintf("groups-of-%d", size.group)
		}
		b.Run(fmt.Sprintf("%s/%dx%d", kind, size.machines, size.tasks), func(b *testing.B) {
			c := newCluster(size.machines, size.tasks, size.group, 1)
			var warm flowsolver.Solver
			if _, err := warm.Solve(context.Background(), c.g); err != nil {
				b.Fatal(err)
			}
			var coldTime, warmTime time.Duration
			for b.Loop() {
				c.churn(0.01)
				start := time.Now()
				if _, err := warm.Solve(context.Background(), c.g); err != nil {
					b.Fatal(err)
				}
				warmTime += time.Since(start)
				b.StopTimer()
				start = time.Now()
				if _, err := flowsolver.Solve(context.Background(), c.g); err != nil {
					b.Fatal(err)
				}
				coldTime += time.Since(start)
				b.StartTimer()
			}
			b.ReportMetric(float64(warmTime.Microseconds())/float64(b.N), "warm-µs/op")
			b.ReportMetric(float64(coldTime.Microseconds())/float64(b.N), "cold-µs/op")
			b.ReportMetric(100*float64(warmTime)/float64(coldTime), "warm-%-of-cold")
		})
	}
}

func BenchmarkSolve(b *testing.B) {
	for _, size := range []struct {
		machines, tasks int
		group           int64
	}{{100, 1000, 1}, {1000, 10000, 1}, {5000, 50000, 1}, {12500, 100000, 100}} {
		g := newCluster(size.machines, size.tasks, size.group, 1).g
		kind := "pertask"
		if size.group > 1 {
			kind = fmt.Sprintf("groups-of-%d", size.group)
		}
		b.Run(fmt.Sprintf("%s/%dx%d", kind, size.machines, size.tasks), func(b *testing.B) {
			var s flowsolver.Solver
			var sol *flowsolver.Solution
			for b.Loop() {
				s.Reset() // from scratch every time, reusing memory
				var err error
				if sol, err = s.Solve(context.Background(), g); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(g.Arcs()), "arcs")
			b.ReportMetric(float64(sol.Stats.Pushes), "pushes")
			b.ReportMetric(float64(sol.Stats.Relabels), "relabels")
		})
	}
}

// TestSchedulingShape checks the solver on the benchmark's shape against the
// reference at a size the reference can take.
func TestSchedulingShape(t *testing.T) {
	for seed := range uint64(5) {
		checkAgainstReference(t, schedulingGraph(10, 120, seed), fmt.Sprint("scheduling seed ", seed))
		checkAgainstReference(t, newCluster(10, 300, 10, seed).g, fmt.Sprint("aggregated seed ", seed))
	}
}
