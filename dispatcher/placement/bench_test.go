package placement_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/dispatcher/placement"
)

// benchInput is a round at the scheduler benchmark's scale: nodes of 32
// cores and 128 GiB, half their resources free, 40 to a rack, with data
// sets on 3 nodes; tasks in jobs of 1 to 10,000 (skewed toward small), of
// four shapes, a third online, a third of the small jobs preferring the
// nodes of a data set.
func benchInput(nodes, tasks int, seed uint64) *placement.Input {
	r := rand.New(rand.NewPCG(seed, 3))
	in := &placement.Input{}
	for i := range nodes {
		c := res(32000, 128)
		n := placement.Node{ID: fmt.Sprint("n", i), Rack: fmt.Sprint("r", i/40),
			Capacity: api.Allocatable{Online: c, Offline: c},
			Free:     api.Allocatable{Online: res(16000, 64), Offline: res(16000+r.Int64N(8000), 64)}}
		in.Nodes = append(in.Nodes, n)
	}
	shapes := []api.Capacity{res(500, 1), res(1000, 2), res(2000, 4), res(4000, 8)}
	for j := 0; tasks > 0; j++ {
		size := min(tasks, 1+int(r.ExpFloat64()*200))
		if r.IntN(50) == 0 {
			size = min(tasks, 10000)
		}
		tasks -= size
		g := group(fmt.Sprint("j", j), int64(size), 0, 0)
		g.Demand = shapes[r.IntN(len(shapes))]
		g.Priority = int32(r.IntN(3))
		g.Waited = time.Duration(r.IntN(300)) * time.Second
		if r.IntN(3) == 0 {
			g.QoS = api.QoSOnline
		}
		if size < 50 && r.IntN(3) == 0 {
			for range 3 {
				g.Preferred = append(g.Preferred, fmt.Sprint("n", r.IntN(nodes)))
			}
		}
		in.Groups = append(in.Groups, g)
	}
	return in
}

func BenchmarkPlace(b *testing.B) {
	for _, size := range []struct{ nodes, tasks int }{{1000, 10000}, {10000, 100000}} {
		b.Run(fmt.Sprintf("%dx%d", size.nodes, size.tasks), func(b *testing.B) {
			in := benchInput(size.nodes, size.tasks, 1)
			p := placement.New(nil)
			var plan *placement.Plan
			var solve time.Duration
			for b.Loop() {
				var err error
				if plan, err = p.Place(context.Background(), in); err != nil {
					b.Fatal(err)
				}
				solve += plan.Stats.Solve
			}
			b.ReportMetric(float64(plan.Stats.Placed), "placed")
			b.ReportMetric(float64(len(in.Groups)), "groups")
			b.ReportMetric(float64(plan.Stats.Classes), "classes")
			b.ReportMetric(float64(plan.Stats.FlowArcs), "arcs")
			b.ReportMetric(float64(plan.Stats.RepairedConflict), "conflicts")
			b.ReportMetric(float64(solve.Microseconds())/float64(b.N)/1000, "solve-ms/op")
		})
	}
}
