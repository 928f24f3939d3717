package flowsolver

import (
	"errors"
	"fmt"
)

// NodeID names a node of a Graph. IDs are dense: they start at 0, and the ID
// of a removed node is reused by the next AddNode.
type NodeID int32

// ArcID names an arc of a Graph. IDs are dense, and reused like NodeIDs.
type ArcID int32

// Limits on the numbers in a Graph. They keep every intermediate value of
// the solvers (scaled costs, potentials, total cost) inside int64; a graph
// beyond them is rejected when it is built or solved, never overflowed.
const (
	// MaxCapacity is the largest arc capacity and node supply magnitude.
	MaxCapacity = 1 << 40
	// MaxAbsCost is the largest arc cost magnitude.
	MaxAbsCost = 1 << 24
	// MaxNodes is the most nodes a Graph may hold.
	MaxNodes = 1 << 26
)

// Errors callers act on.
var (
	// ErrInfeasible is wrapped by *InfeasibleError.
	ErrInfeasible = errors.New("flowsolver: infeasible")
	// ErrBadGraph is wrapped by every error about a malformed graph or a
	// value beyond the limits.
	ErrBadGraph = errors.New("flowsolver: bad graph")
)

// InfeasibleError says which supply could not be routed.
type InfeasibleError struct {
	// Node still had Excess units of supply (positive) or of demand
	// (negative) when no more flow could move.
	Node   NodeID
	Excess int64
	// Unrouted is the total supply that could not reach a demand.
	Unrouted int64
}

func (e *InfeasibleError) Error() string {
	if e.Excess > 0 {
		return fmt.Sprintf("infeasible: %d units of supply at node %d cannot reach a demand (%d unrouted in all)", e.Excess, e.Node, e.Unrouted)
	}
	return fmt.Sprintf("infeasible: %d units of demand at node %d cannot be met (%d unrouted in all)", -e.Excess, e.Node, e.Unrouted)
}

// Unwrap makes errors.Is(err, ErrInfeasible) true.
func (e *InfeasibleError) Unwrap() error { return ErrInfeasible }

// Graph is a flow network: nodes with supplies (positive) or demands
// (negative), and directed arcs with a lower bound, an upper bound
// (capacity) and a cost per unit of flow. It is built with AddNode and AddArc
// and changed in place between solves. It is not safe for concurrent use.
//
// Removed nodes and arcs leave holes that later additions fill, so IDs stay
// dense; NodeCap and ArcCap bound the IDs in use. Once a Solver has solved
// the graph, the graph journals which nodes and arcs change (4 bytes a
// change, dropped past twice the graph's size), so that the next solve
// patches its previous network instead of rebuilding it.
type Graph struct {
	supply    []int64
	nodeAlive []bool
	freeNodes []NodeID
	nodes     int
	// incident lists, per node, the arcs added with it as an endpoint, so
	// that RemoveNode costs the node's degree. It is built on the first
	// RemoveNode (bulk building pays nothing for it) and kept up to date
	// from then on. An entry may be stale (the arc removed, its ID reused
	// elsewhere): users check the arc's endpoints.
	incident [][]ArcID
	// stamp counts AddNode and AddArc calls; nodeBorn and arcBorn record
	// the stamp at which each ID was last given out, so that a Solver can
	// tell which nodes and arcs are new since its last solve.
	stamp    uint64
	nodeBorn []uint64
	arcBorn  []uint64
	// journal lists the nodes and arcs changed since journaling began (a
	// node n as -1-n, an arc as its ID), so that a Solver patches its
	// residual network instead of rebuilding it. It is off until a Solver
	// first solves the graph; past journalLimit entries it is dropped and
	// journalEpoch counts one more, telling Solvers to rebuild.
	journal      []int32
	journaling   bool
	journalEpoch uint64

	tail, head   []NodeID
	lower, upper []int64
	cost         []int64
	arcAlive     []bool
	freeArcs     []ArcID
	arcs         int
}

// NewGraph returns an empty graph with room for about n nodes and m arcs.
func NewGraph(n, m int) *Graph {
	return &Graph{
		supply: make([]int64, 0, n), nodeAlive: make([]bool, 0, n),
		tail: make([]NodeID, 0, m), head: make([]NodeID, 0, m),
		lower: make([]int64, 0, m), upper: make([]int64, 0, m), cost: make([]int64, 0, m),
		arcAlive: make([]bool, 0, m),
	}
}

// Nodes returns the number of nodes in the graph.
func (g *Graph) Nodes() int { return g.nodes }

// Arcs returns the number of arcs in the graph.
func (g *Graph) Arcs() int { return g.arcs }

// NodeCap returns one more than the largest NodeID ever used: every node's
// ID is below it. Per-node slices of a Solution have this length.
func (g *Graph) NodeCap() int { return len(g.supply) }

// ArcCap returns one more than the largest ArcID ever used.
func (g *Graph) ArcCap() int { return len(g.tail) }

// HasNode reports whether n is a node of the graph.
func (g *Graph) HasNode(n NodeID) bool {
	return n >= 0 && int(n) < len(g.nodeAlive) && g.nodeAlive[n]
}

// HasArc reports whether a is an arc of the graph.
func (g *Graph) HasArc(a ArcID) bool {
	return a >= 0 && int(a) < len(g.arcAlive) && g.arcAlive[a]
}

// AddNode adds a node with the given supply (negative for a demand).
func (g *Graph) AddNode(supply int64) (NodeID, error) {
	if err := checkMagnitude("supply", supply, MaxCapacity); err != nil {
		return 0, err
	}
	if n := len(g.freeNodes); n > 0 {
		id := g.freeNodes[n-1]
		g.freeNodes = g.freeNodes[:n-1]
		g.supply[id], g.nodeAlive[id] = supply, true
		g.stamp++
		g.nodeBorn[id] = g.stamp
		if g.incident != nil {
			g.incident[id] = g.incident[id][:0]
		}
		g.nodes++
		g.noteNode(id)
		return id, nil
	}
	if len(g.supply) >= MaxNodes {
		return 0, fmt.Errorf("%w: more than %d nodes", ErrBadGraph, MaxNodes)
	}
	g.supply = append(g.supply, supply)
	g.nodeAlive = append(g.nodeAlive, true)
	g.stamp++
	g.nodeBorn = append(g.nodeBorn, g.stamp)
	if g.incident != nil {
		g.incident = append(g.incident, nil)
	}
	g.nodes++
	g.noteNode(NodeID(len(g.supply) - 1))
	return NodeID(len(g.supply) - 1), nil
}

// SetSupply changes a node's supply.
func (g *Graph) SetSupply(n NodeID, supply int64) error {
	if err := g.checkNode(n); err != nil {
		return err
	}
	if err := checkMagnitude("supply", supply, MaxCapacity); err != nil {
		return err
	}
	g.supply[n] = supply
	g.noteNode(n)
	return nil
}

// Supply returns a node's supply.
func (g *Graph) Supply(n NodeID) int64 { return g.supply[n] }

// RemoveNode removes a node and every arc that touches it.
func (g *Graph) RemoveNode(n NodeID) error {
	if err := g.checkNode(n); err != nil {
		return err
	}
	if g.incident == nil {
		g.incident = make([][]ArcID, len(g.supply))
		for a := range g.tail {
			if g.arcAlive[a] {
				g.addIncident(ArcID(a))
			}
		}
	}
	for _, a := range g.incident[n] {
		if g.arcAlive[a] && (g.tail[a] == n || g.head[a] == n) {
			g.removeArc(a)
		}
	}
	g.incident[n] = g.incident[n][:0]
	g.nodeAlive[n], g.supply[n] = false, 0
	g.freeNodes = append(g.freeNodes, n)
	g.nodes--
	g.noteNode(n)
	return nil
}

// AddArc adds an arc from tail to head carrying between lower and upper
// units of flow at cost per unit.
func (g *Graph) AddArc(tail, head NodeID, lower, upper, cost int64) (ArcID, error) {
	if err := g.checkNode(tail); err != nil {
		return 0, fmt.Errorf("arc tail: %w", err)
	}
	if err := g.checkNode(head); err != nil {
		return 0, fmt.Errorf("arc head: %w", err)
	}
	if err := checkArc(lower, upper, cost); err != nil {
		return 0, err
	}
	var a ArcID
	if n := len(g.freeArcs); n > 0 {
		a = g.freeArcs[n-1]
		g.freeArcs = g.freeArcs[:n-1]
		g.tail[a], g.head[a], g.lower[a], g.upper[a], g.cost[a], g.arcAlive[a] = tail, head, lower, upper, cost, true
		g.stamp++
		g.arcBorn[a] = g.stamp
	} else {
		a = ArcID(len(g.tail))
		g.tail = append(g.tail, tail)
		g.head = append(g.head, head)
		g.lower = append(g.lower, lower)
		g.upper = append(g.upper, upper)
		g.cost = append(g.cost, cost)
		g.arcAlive = append(g.arcAlive, true)
		g.stamp++
		g.arcBorn = append(g.arcBorn, g.stamp)
	}
	if g.incident != nil {
		g.addIncident(a)
	}
	g.arcs++
	g.noteArc(a)
	return a, nil
}

func (g *Graph) addIncident(a ArcID) {
	t, h := g.tail[a], g.head[a]
	g.incident[t] = append(g.incident[t], a)
	if h != t {
		g.incident[h] = append(g.incident[h], a)
	}
}

// SetBounds changes an arc's lower and upper bounds.
func (g *Graph) SetBounds(a ArcID, lower, upper int64) error {
	if err := g.checkArcID(a); err != nil {
		return err
	}
	if err := checkArc(lower, upper, g.cost[a]); err != nil {
		return err
	}
	g.lower[a], g.upper[a] = lower, upper
	g.noteArc(a)
	return nil
}

// SetCost changes an arc's cost per unit of flow.
func (g *Graph) SetCost(a ArcID, cost int64) error {
	if err := g.checkArcID(a); err != nil {
		return err
	}
	if err := checkArc(g.lower[a], g.upper[a], cost); err != nil {
		return err
	}
	g.cost[a] = cost
	g.noteArc(a)
	return nil
}

// RemoveArc removes an arc.
func (g *Graph) RemoveArc(a ArcID) error {
	if err := g.checkArcID(a); err != nil {
		return err
	}
	g.removeArc(a)
	return nil
}

func (g *Graph) removeArc(a ArcID) {
	g.arcAlive[a] = false
	g.lower[a], g.upper[a], g.cost[a] = 0, 0, 0
	g.freeArcs = append(g.freeArcs, a)
	g.arcs--
	g.noteArc(a)
}

// startJournal turns the journal on, and returns its epoch and length: a
// Solver's position in it.
func (g *Graph) startJournal() (epoch uint64, pos int) {
	g.journaling = true
	return g.journalEpoch, len(g.journal)
}

// noteNode and noteArc record a change in the journal.
func (g *Graph) noteNode(n NodeID) { g.note(-1 - int32(n)) }

func (g *Graph) noteArc(a ArcID) { g.note(int32(a)) }

func (g *Graph) note(entry int32) {
	if !g.journaling {
		return
	}
	if len(g.journal) >= g.journalLimit() {
		g.journal = g.journal[:0]
		g.journalEpoch++
	}
	g.journal = append(g.journal, entry)
}

// journalLimit is how long the journal grows before it is dropped: a patch
// longer than twice the graph would cost more than a rebuild.
func (g *Graph) journalLimit() int { return 2*(len(g.supply)+len(g.tail)) + 64 }

// Arc returns an arc's endpoints, bounds and cost.
func (g *Graph) Arc(a ArcID) (tail, head NodeID, lower, upper, cost int64) {
	return g.tail[a], g.head[a], g.lower[a], g.upper[a], g.cost[a]
}

func (g *Graph) checkNode(n NodeID) error {
	if !g.HasNode(n) {
		return fmt.Errorf("%w: no node %d", ErrBadGraph, n)
	}
	return nil
}

func (g *Graph) checkArcID(a ArcID) error {
	if !g.HasArc(a) {
		return fmt.Errorf("%w: no arc %d", ErrBadGraph, a)
	}
	return nil
}

func checkArc(lower, upper, cost int64) error {
	if lower < 0 || lower > upper {
		return fmt.Errorf("%w: bounds [%d, %d] (want 0 <= lower <= upper)", ErrBadGraph, lower, upper)
	}
	if err := checkMagnitude("capacity", upper, MaxCapacity); err != nil {
		return err
	}
	return checkMagnitude("cost", cost, MaxAbsCost)
}

func checkMagnitude(what string, v, limit int64) error {
	if v > limit || v < -limit {
		return fmt.Errorf("%w: %s %d beyond the limit of ±%d", ErrBadGraph, what, v, int64(limit))
	}
	return nil
}
