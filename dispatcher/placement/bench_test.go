package placement_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
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
			var plan *placement.Plan
			var solve time.Duration
			for b.Loop() {
				// A fresh Placer: a kept one would re-solve the same
				// network warm (BenchmarkRounds measures that).
				p := placement.New(nil)
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

// BenchmarkRounds places a sequence of rounds as the scheduling loop does
// at the scale (10,000 nodes), each round's plan committed before
// the next. "busy": 20,000 pending tasks, as many new ones arriving as
// were placed, and 100 nodes' tasks ending, every round — most of the
// network changes. "saturated": a backlog of 100,000 tasks on a full
// cluster where each round 10 nodes' tasks end — little changes. "kept"
// places every round with one Placer, told which nodes changed (it judges
// only those again), whose network is kept and re-solved warm when little
// changed; "fresh" judges every node, and builds and solves every round
// from zero. solve-ms/round is the solver's share of place-ms/round.
func BenchmarkRounds(b *testing.B) {
	const rounds = 8
	for _, load := range []string{"busy", "saturated"} {
		for _, mode := range []string{"kept", "fresh"} {
			b.Run(load+"/"+mode, func(b *testing.B) {
				var solve, place time.Duration
				for b.Loop() {
					tasks, freed := 20000, 100
					if load == "saturated" {
						tasks, freed = 100000, 10
					}
					in := benchInput(10000, tasks, 1)
					if load == "saturated" {
						for i := range in.Nodes {
							in.Nodes[i].Free = api.Allocatable{}
						}
					}
					var extra []placement.Group
					if load == "busy" {
						extra = benchInput(10000, 200000, 2).Groups
						for i := range extra {
							extra[i].Key.Job = "x" + extra[i].Key.Job
						}
					}
					r := rand.New(rand.NewPCG(7, 7))
					p := placement.New(nil)
					for range rounds {
						if mode == "fresh" {
							p = placement.New(nil)
						}
						start := time.Now()
						plan, err := p.Place(context.Background(), in)
						if err != nil {
							b.Fatal(err)
						}
						place += time.Since(start)
						solve += plan.Stats.Solve
						// A kept Placer is told which nodes changed.
						in.Kept, in.Changed = mode == "kept", in.Changed[:0]
						for _, a := range plan.Assignments {
							in.Changed = append(in.Changed, int32(slices.IndexFunc(in.Nodes, func(n placement.Node) bool { return n.ID == a.Node })))
						}
						commit(in, plan)
						var arrived int64
						for arrived < plan.Stats.Placed && len(extra) > 0 {
							arrived += extra[0].Pending
							in.Groups = append(in.Groups, extra[0])
							extra = extra[1:]
						}
						for range freed {
							i := r.IntN(len(in.Nodes))
							in.Nodes[i].Free = api.Allocatable{Online: res(16000, 64), Offline: res(16000, 64)}
							in.Changed = append(in.Changed, int32(i))
						}
						for i := range in.Groups {
							in.Groups[i].Waited += 50 * time.Millisecond
						}
					}
				}
				b.ReportMetric(float64(solve.Microseconds())/float64(b.N*rounds)/1000, "solve-ms/round")
				b.ReportMetric(float64(place.Microseconds())/float64(b.N*rounds)/1000, "place-ms/round")
			})
		}
	}
}
