package flowgen

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Change counts what one Perturb did.
type Change struct {
	// Left is the number of tasks that left the pending set; Arrived the
	// number that joined it, in ArrivedGroups new groups.
	Left, Arrived, ArrivedGroups int64
	// Machines is the number of machines whose free slots were redrawn.
	Machines int
}

// Perturb applies one scheduling round's worth of change to in and its
// graph, in place, drawing from rng; frac, in (0, 1], sets its size (0.01
// for "1% change"). With T pending tasks and M machines before the call:
//
//  1. round(frac·T) tasks leave (placed or cancelled), each drawn uniformly
//     among the pending tasks. Per task: its node and arcs are removed.
//     Aggregated: its group's supply and the capacities of the group's two
//     arcs drop by one; an emptied group loses its node and arcs, and an
//     emptied class its node and arcs too.
//  2. round(frac·T) tasks arrive, in new groups of 1 to 15 tasks (fewer for
//     the last group), each in a job drawn uniformly, reading a data set
//     drawn uniformly with probability LocalShare (else none), with the
//     wait cost of a task that has just arrived. They get new nodes and
//     arcs, and in aggregated mode a new class node when their data set has
//     none.
//  3. round(frac·M) distinct machines, drawn uniformly, get a new number of
//     free slots, uniform in [0, Slots]. The capacity and load cost of
//     their rack → machine arcs, the capacity of their machine → sink arcs,
//     and the capacity and load cost of their racks' cluster → rack arcs
//     follow.
//
// Throughout, the capacities that follow from counts follow them: a job's
// unscheduled → sink arc carries its pending tasks, a class's arcs the tasks
// of its groups, and the sink's demand is the new total. The result stays
// feasible. Per-task and aggregated instances of one Config, perturbed with
// equal rng states, go through the same logical changes and keep equal
// optimal costs.
func Perturb(in *Instance, frac float64, rng *rand.Rand) (Change, error) {
	if !(frac > 0 && frac <= 1) {
		return Change{}, fmt.Errorf("flowgen: perturb: fraction %v not in (0, 1]", frac)
	}
	var ch Change
	n := int64(math.Round(frac * float64(in.tasks)))
	for range n {
		in.leave(rng.Int64N(in.tasks))
		ch.Left++
	}
	for left := n; left > 0; {
		k := min(1+rng.Int64N(maxGroup), left)
		g := &group{job: rng.IntN(len(in.jobs)), data: noData, count: k}
		if rng.Float64() < in.share {
			g.data = rng.IntN(len(in.data))
		}
		in.arrive(g)
		left -= k
		ch.Arrived += k
		ch.ArrivedGroups++
	}
	ch.Machines = int(math.Round(frac * float64(len(in.machines))))
	in.redrawMachines(rng.Perm(len(in.machines))[:ch.Machines], rng)
	in.ed.setSupply(in.sink, -in.tasks)
	if err := in.ed.err; err != nil {
		return ch, fmt.Errorf("flowgen: perturb: %w", err)
	}
	return ch, nil
}

// leave removes the pending task of index t, counting through the groups in
// order.
func (in *Instance) leave(t int64) {
	gi := 0
	for ; t >= in.groups[gi].count; gi++ {
		t -= in.groups[gi].count
	}
	g := in.groups[gi]
	g.count--
	in.tasks--
	jb := &in.jobs[g.job]
	jb.tasks--
	in.ed.setUpper(jb.sinkArc, jb.tasks)
	if in.cfg.Aggregated {
		if g.count > 0 {
			in.ed.setSupply(g.node, g.count)
			in.ed.setUpper(g.unschedArc, g.count)
			in.ed.setUpper(g.classArc, g.count)
		} else {
			in.ed.removeNode(g.node)
		}
		groups := 0
		if g.count == 0 {
			groups = -1
		}
		in.resizeClass(g.data, -1, groups)
	} else {
		last := len(g.taskNodes) - 1
		in.ed.removeNode(g.taskNodes[last])
		g.taskNodes = g.taskNodes[:last]
	}
	if g.count == 0 {
		last := len(in.groups) - 1
		in.groups[gi] = in.groups[last]
		in.groups = in.groups[:last]
	}
}

// arrive adds a new group to its job and the graph.
func (in *Instance) arrive(g *group) {
	in.groups = append(in.groups, g)
	in.tasks += g.count
	jb := &in.jobs[g.job]
	jb.tasks += g.count
	in.ed.setUpper(jb.sinkArc, jb.tasks)
	if in.cfg.Aggregated {
		if in.classes[g.data+1] == nil {
			in.classes[g.data+1] = &class{}
			in.renderClass(in.classes[g.data+1], g.data)
		}
		in.resizeClass(g.data, g.count, 1)
	}
	in.renderGroup(g)
}

// resizeClass changes the task and group counts of data set d's class,
// resizing its arcs, or removing it when it is left with no group.
func (in *Instance) resizeClass(d int, tasks int64, groups int) {
	c := in.classes[d+1]
	c.tasks += tasks
	c.groups += groups
	if c.groups == 0 {
		in.ed.removeNode(c.node)
		in.classes[d+1] = nil
		return
	}
	for _, a := range c.arcs {
		in.ed.setUpper(a, c.tasks)
	}
}

// redrawMachines draws new free slots for the given machines and updates
// their arcs and their racks'.
func (in *Instance) redrawMachines(ms []int, rng *rand.Rand) {
	touched := make([]bool, len(in.racks))
	for _, m := range ms {
		mc := &in.machines[m]
		free := rng.Int64N(int64(in.cfg.Slots) + 1)
		in.racks[mc.rack].free += free - mc.free
		mc.free = free
		in.ed.setUpper(mc.rackArc, free)
		in.ed.setCost(mc.rackArc, in.machineCost(mc))
		in.ed.setUpper(mc.sinkArc, free)
		touched[mc.rack] = true
	}
	for r := range in.racks {
		if !touched[r] {
			continue
		}
		rk := &in.racks[r]
		in.ed.setUpper(rk.clusterArc, rk.free)
		in.ed.setCost(rk.clusterArc, in.rackCost(rk))
	}
}
