package flowsolver_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/sluicehq/sluice/flowsolver"
)

// schedulingGraph builds a Quincy-shaped per-task instance: every task is a
// node of supply 1 with arcs to its job's unscheduled aggregator, to the
// cluster aggregator and, for a third of tasks, to two preferred machines;
// the cluster aggregator feeds racks, racks feed machines, machines and
// unscheduled aggregators drain into the sink.
func schedulingGraph(machines, tasks int, seed uint64) *flowsolver.Graph {
	r := rand.New(rand.NewPCG(seed, 1))
	racks := max(machines/40, 1)
	jobs := max(tasks/100, 1)
	slots := int64(tasks*9/10/machines + 1)
	g := flowsolver.NewGraph(tasks+machines+racks+jobs+2, 3*tasks+2*machines+racks+jobs)
	sink := must(g.AddNode(-int64(tasks)))
	cluster := must(g.AddNode(0))
	rackIDs := make([]flowsolver.NodeID, racks)
	for i := range rackIDs {
		rackIDs[i] = must(g.AddNode(0))
		must(g.AddArc(cluster, rackIDs[i], 0, slots*int64(machines/racks+1), 0))
	}
	machineIDs := make([]flowsolver.NodeID, machines)
	for i := range machineIDs {
		machineIDs[i] = must(g.AddNode(0))
		must(g.AddArc(rackIDs[i%racks], machineIDs[i], 0, slots, r.Int64N(20)))
		must(g.AddArc(machineIDs[i], sink, 0, slots, 0))
	}
	unsched := make([]flowsolver.NodeID, jobs)
	for i := range unsched {
		unsched[i] = must(g.AddNode(0))
		must(g.AddArc(unsched[i], sink, 0, int64(tasks), 0))
	}
	for i := range tasks {
		task := must(g.AddNode(1))
		job := i % jobs
		must(g.AddArc(task, unsched[job], 0, 1, 200+r.Int64N(800)))
		must(g.AddArc(task, cluster, 0, 1, 50+r.Int64N(50)))
		if r.IntN(3) == 0 {
			for range 2 {
				must(g.AddArc(task, machineIDs[r.IntN(machines)], 0, 1, r.Int64N(30)))
			}
		}
	}
	return g
}

func BenchmarkSolve(b *testing.B) {
	for _, size := range []struct{ machines, tasks int }{{100, 1000}, {1000, 10000}, {5000, 50000}} {
		g := schedulingGraph(size.machines, size.tasks, 1)
		b.Run(fmt.Sprintf("pertask/%dx%d", size.machines, size.tasks), func(b *testing.B) {
			var s flowsolver.Solver
			var sol *flowsolver.Solution
			for b.Loop() {
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
	}
}
