package flowgen

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/sluicehq/sluice/flowsolver"
)

// The workload's fixed numbers; doc.go explains where each is used.
const (
	maxGroup        = 15   // tasks in a data-local or arriving group: 1 to maxGroup
	maxWait         = 1800 // seconds a job has waited: 0 to maxWait
	waitBase        = 100  // cost of leaving a task that has just arrived unscheduled
	minDataGB       = 1    // a data set's size, in GB, is minDataGB
	maxDataGB       = 64   // to maxDataGB
	remoteCostPerGB = 8    // task → X for a data-local task: reading across racks
	rackCostPerGB   = 2    // task → preferred rack: reading within the rack
	noDataCost      = 8    // task → X for a task that reads no data set
	slotLoadCost    = 4    // R → machine, per used slot of the machine
	rackLoadCost    = 16   // X → R, times the used fraction of the rack's slots
	prefArcs        = 5    // a data set's preference arcs: 3 machines, 2 racks
	seedStream      = 0x5eed_f10e_6e4e_0001
)

// noData marks a task group that reads no data set.
const noData = -1

// Instance is a generated flow network and the workload it encodes, which
// Perturb changes together.
type Instance struct {
	// Graph is the flow network. Perturb changes it in place; other
	// changes make the Instance stale.
	Graph *flowsolver.Graph

	cfg   Config
	share float64
	ed    editor

	sink, cluster flowsolver.NodeID
	racks         []rack
	machines      []machine
	data          []dataSet
	jobs          []job
	// groups are the live task groups. Perturb removes an emptied group by
	// moving the last one into its place.
	groups []*group
	// classes holds, in aggregated mode, the equivalence class of each
	// data set at index data+1 (index 0: tasks that read no data set), or
	// nil while no group is in it.
	classes []*class
	tasks   int64
}

type rack struct {
	node        flowsolver.NodeID
	first, end  int   // its machines
	free, slots int64 // free and total slots of its machines
	clusterArc  flowsolver.ArcID
}

type machine struct {
	node             flowsolver.NodeID
	rack             int
	free             int64
	rackArc, sinkArc flowsolver.ArcID
}

// dataSet is an input that data-local tasks read. Its three replicas sit on
// one machine of one rack and two machines of another rack.
type dataSet struct {
	gb       int64
	machines [3]int
	racks    [2]int
}

type job struct {
	node    flowsolver.NodeID
	sinkArc flowsolver.ArcID
	tasks   int64 // pending tasks: the capacity of sinkArc
}

// group is a set of tasks of one job with identical requirements and cost.
type group struct {
	job   int
	data  int // a data set, or noData
	wait  int64
	count int64
	// Aggregated mode: one node with supply count, and its arcs to the
	// job's unscheduled node and to its class.
	node                 flowsolver.NodeID
	unschedArc, classArc flowsolver.ArcID
	// Per-task mode: one node per task.
	taskNodes []flowsolver.NodeID
}

// class is an equivalence-class node: the groups that read one data set
// (or none) feed it, and it leads to where they may run.
type class struct {
	node   flowsolver.NodeID
	groups int
	tasks  int64 // the capacity of each of its arcs
	arcs   []flowsolver.ArcID
}

// Shape counts what an Instance holds. doc.go gives the number of nodes and
// arcs of the graph in terms of it.
type Shape struct {
	Machines, Racks, Jobs int
	// Tasks is the number of pending tasks (the total supply); LocalTasks
	// of them read a data set.
	Tasks, LocalTasks int64
	// Groups is the number of task groups; LocalGroups of them read a data
	// set.
	Groups, LocalGroups int
	// Classes is the number of equivalence-class nodes (aggregated mode
	// only); LocalClasses of them are for a data set.
	Classes, LocalClasses int
	// FreeSlots is the total capacity of the machine → sink arcs.
	FreeSlots int64
}

// Generate builds the instance that cfg describes. The same cfg always
// gives the same instance.
func Generate(cfg Config) (*Instance, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	rng := rand.New(rand.NewPCG(cfg.Seed, seedStream))
	in := &Instance{cfg: cfg, share: cfg.localShare()}
	in.layCluster(rng)
	in.layJobs(rng)

	s := in.Shape()
	in.Graph = flowsolver.NewGraph(s.nodes(cfg.Aggregated), s.arcs(cfg.Aggregated))
	in.ed.g = in.Graph
	in.render()
	if err := in.ed.err; err != nil {
		return nil, fmt.Errorf("flowgen: generate: %w", err)
	}
	return in, nil
}

// Config returns the configuration the instance was generated from, with
// its defaults filled in.
func (in *Instance) Config() Config { return in.cfg }

// Sink returns the sink node, whose demand is the number of pending tasks.
func (in *Instance) Sink() flowsolver.NodeID { return in.sink }

// Shape counts the instance's parts.
func (in *Instance) Shape() Shape {
	s := Shape{Machines: len(in.machines), Racks: len(in.racks), Jobs: len(in.jobs), Tasks: in.tasks, Groups: len(in.groups)}
	for _, g := range in.groups {
		if g.data != noData {
			s.LocalTasks += g.count
			s.LocalGroups++
		}
	}
	for i, c := range in.classes {
		if c != nil {
			s.Classes++
			if i > 0 {
				s.LocalClasses++
			}
		}
	}
	for _, m := range in.machines {
		s.FreeSlots += m.free
	}
	return s
}

// nodes and arcs are the formulas of doc.go, used to size the graph.
func (s Shape) nodes(aggregated bool) int {
	n := 2 + s.Racks + s.Machines + s.Jobs
	if aggregated {
		return n + s.Groups + s.Classes
	}
	return n + int(s.Tasks)
}

func (s Shape) arcs(aggregated bool) int {
	m := s.Racks + 2*s.Machines + s.Jobs
	if aggregated {
		return m + 2*s.Groups + s.Classes + prefArcs*s.LocalClasses
	}
	return m + 2*int(s.Tasks) + prefArcs*int(s.LocalTasks)
}

// layCluster draws the racks, the machines' free slots and the data sets.
func (in *Instance) layCluster(rng *rand.Rand) {
	cfg := in.cfg
	in.racks = make([]rack, cfg.Racks)
	in.machines = make([]machine, cfg.Machines)
	for r := range in.racks {
		rk := &in.racks[r]
		rk.first, rk.end = r*cfg.Machines/cfg.Racks, (r+1)*cfg.Machines/cfg.Racks
		for m := rk.first; m < rk.end; m++ {
			free := rng.Int64N(int64(cfg.Slots) + 1)
			in.machines[m] = machine{rack: r, free: free}
			rk.free += free
		}
		rk.slots = int64(rk.end-rk.first) * int64(cfg.Slots)
	}
	in.data = make([]dataSet, cfg.Machines)
	for d := range in.data {
		r1 := rng.IntN(cfg.Racks)
		r2 := (r1 + 1 + rng.IntN(cfg.Racks-1)) % cfg.Racks
		a, b := &in.racks[r1], &in.racks[r2]
		n2 := b.end - b.first
		i, j := rng.IntN(n2), rng.IntN(n2-1)
		if j >= i {
			j++
		}
		in.data[d] = dataSet{
			gb:       minDataGB + rng.Int64N(maxDataGB-minDataGB+1),
			machines: [3]int{a.first + rng.IntN(a.end-a.first), b.first + i, b.first + j},
			racks:    [2]int{r1, r2},
		}
	}
}

// layJobs draws the jobs' sizes and waiting times and splits their tasks
// into groups.
func (in *Instance) layJobs(rng *rand.Rand) {
	cfg := in.cfg
	sizes := jobSizes(cfg, rng)
	in.jobs = make([]job, cfg.Jobs)
	for j, n := range sizes {
		wait := rng.Int64N(maxWait + 1)
		local := int64(float64(n)*in.share + rng.Float64())
		if rest := n - local; rest > 0 {
			in.groups = append(in.groups, &group{job: j, data: noData, wait: wait, count: rest})
		}
		for local > 0 {
			k := min(1+rng.Int64N(maxGroup), local)
			in.groups = append(in.groups, &group{job: j, data: rng.IntN(len(in.data)), wait: wait, count: k})
			local -= k
		}
		in.jobs[j].tasks = n
		in.tasks += n
	}
	if cfg.Aggregated {
		in.classes = make([]*class, len(in.data)+1)
		for _, g := range in.groups {
			c := in.classes[g.data+1]
			if c == nil {
				c = &class{}
				in.classes[g.data+1] = c
			}
			c.groups++
			c.tasks += g.count
		}
	}
}

// jobSizes splits cfg.Tasks among cfg.Jobs as cfg.JobSizes says.
func jobSizes(cfg Config, rng *rand.Rand) []int64 {
	sizes := make([]int64, cfg.Jobs)
	tasks, jobs := int64(cfg.Tasks), int64(cfg.Jobs)
	if cfg.JobSizes == EvenJobs {
		for j := range sizes {
			sizes[j] = tasks / jobs
			if int64(j) < tasks%jobs {
				sizes[j]++
			}
		}
		return sizes
	}
	weights := make([]float64, cfg.Jobs)
	var sum float64
	for j := range weights {
		weights[j] = math.Pow(1-rng.Float64(), -1/1.2)
		sum += weights[j]
	}
	rest := tasks - jobs
	left := rest
	for j, w := range weights {
		sizes[j] = 1 + int64(float64(rest)*w/sum)
		left -= sizes[j] - 1
	}
	for j := 0; left > 0; j++ {
		sizes[j]++
		left--
	}
	return sizes
}

// render builds the graph of the laid-out workload, in the node order of
// doc.go.
func (in *Instance) render() {
	ed := &in.ed
	in.sink = ed.node(-in.tasks)
	in.cluster = ed.node(0)
	for r := range in.racks {
		in.racks[r].node = ed.node(0)
	}
	for m := range in.machines {
		in.machines[m].node = ed.node(0)
	}
	for r := range in.racks {
		rk := &in.racks[r]
		rk.clusterArc = ed.arc(in.cluster, rk.node, rk.free, in.rackCost(rk))
		for m := rk.first; m < rk.end; m++ {
			mc := &in.machines[m]
			mc.rackArc = ed.arc(rk.node, mc.node, mc.free, in.machineCost(mc))
			mc.sinkArc = ed.arc(mc.node, in.sink, mc.free, 0)
		}
	}
	if in.cfg.Aggregated {
		for i, c := range in.classes {
			if c != nil {
				in.renderClass(c, i-1)
			}
		}
	}
	gi := 0
	for j := range in.jobs {
		jb := &in.jobs[j]
		jb.node = ed.node(0)
		jb.sinkArc = ed.arc(jb.node, in.sink, jb.tasks, 0)
		for ; gi < len(in.groups) && in.groups[gi].job == j; gi++ {
			in.renderGroup(in.groups[gi])
		}
	}
}

// renderClass adds a class node for data set d (or noData) and its arcs.
func (in *Instance) renderClass(c *class, d int) {
	ed := &in.ed
	c.node = ed.node(0)
	c.arcs = append(c.arcs[:0], ed.arc(c.node, in.cluster, c.tasks, in.clusterCost(d)))
	if d != noData {
		ds := &in.data[d]
		for _, m := range ds.machines {
			c.arcs = append(c.arcs, ed.arc(c.node, in.machines[m].node, c.tasks, 0))
		}
		for _, r := range ds.racks {
			c.arcs = append(c.arcs, ed.arc(c.node, in.racks[r].node, c.tasks, rackCostPerGB*ds.gb))
		}
	}
}

// renderGroup adds a group's node (aggregated) or its task nodes.
func (in *Instance) renderGroup(g *group) {
	ed := &in.ed
	u := in.jobs[g.job].node
	if in.cfg.Aggregated {
		g.node = ed.node(g.count)
		g.unschedArc = ed.arc(g.node, u, g.count, waitBase+g.wait)
		g.classArc = ed.arc(g.node, in.classes[g.data+1].node, g.count, 0)
		return
	}
	for range g.count {
		in.addTaskNode(g)
	}
}

// addTaskNode adds one task of g in per-task mode: its node and arcs.
func (in *Instance) addTaskNode(g *group) {
	ed := &in.ed
	t := ed.node(1)
	g.taskNodes = append(g.taskNodes, t)
	ed.arc(t, in.jobs[g.job].node, 1, waitBase+g.wait)
	ed.arc(t, in.cluster, 1, in.clusterCost(g.data))
	if g.data != noData {
		ds := &in.data[g.data]
		for _, m := range ds.machines {
			ed.arc(t, in.machines[m].node, 1, 0)
		}
		for _, r := range ds.racks {
			ed.arc(t, in.racks[r].node, 1, rackCostPerGB*ds.gb)
		}
	}
}

// clusterCost is the cost of task → X for a task that reads data set d.
func (in *Instance) clusterCost(d int) int64 {
	if d == noData {
		return noDataCost
	}
	return remoteCostPerGB * in.data[d].gb
}

// rackCost is the load cost of X → R.
func (in *Instance) rackCost(rk *rack) int64 {
	return (rackLoadCost*(rk.slots-rk.free) + rk.slots/2) / rk.slots
}

// machineCost is the load cost of R → machine.
func (in *Instance) machineCost(m *machine) int64 {
	return slotLoadCost * (int64(in.cfg.Slots) - m.free)
}

// editor changes a graph and keeps the first error, so that a sequence of
// changes is checked once at its end.
type editor struct {
	g   *flowsolver.Graph
	err error
}

func (e *editor) node(supply int64) flowsolver.NodeID {
	if e.err != nil {
		return -1
	}
	n, err := e.g.AddNode(supply)
	e.err = err
	return n
}

func (e *editor) arc(tail, head flowsolver.NodeID, upper, cost int64) flowsolver.ArcID {
	if e.err != nil {
		return -1
	}
	a, err := e.g.AddArc(tail, head, 0, upper, cost)
	e.err = err
	return a
}

func (e *editor) setSupply(n flowsolver.NodeID, supply int64) {
	if e.err == nil {
		e.err = e.g.SetSupply(n, supply)
	}
}

func (e *editor) setUpper(a flowsolver.ArcID, upper int64) {
	if e.err == nil {
		e.err = e.g.SetBounds(a, 0, upper)
	}
}

func (e *editor) setCost(a flowsolver.ArcID, cost int64) {
	if e.err == nil {
		e.err = e.g.SetCost(a, cost)
	}
}

func (e *editor) removeNode(n flowsolver.NodeID) {
	if e.err == nil {
		e.err = e.g.RemoveNode(n)
	}
}
