package placement

import (
	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/flowsolver"
)

// The flow network is kept between rounds: each round states the nodes
// and arcs it needs, by identity (the sink, a class by its key, a machine
// by name, a group by its key, a job's unscheduled aggregator), and the
// kept graph is changed to match — supplies, bounds and costs set where
// they differ, nodes and arcs added, and those the round did not state
// removed — so that the solver re-solves from the previous optimum
// (flowsolver.Solver's warm start) instead of from zero.

// Kinds of network node.
const (
	netSink uint8 = iota
	netClass
	netMachine
	netGroup
	netUnscheduled
)

// classKey identifies an equivalence class across rounds.
type classKey struct {
	demand   api.Capacity
	qos      api.QoS
	pool     string
	cons     string
	policy   string
	distinct string
	ports    string // portsKey of the static ports
}

// netNode identifies a network node across rounds.
type netNode struct {
	kind  uint8
	class classKey
	name  string // a machine's ID, a job's ID
	group string // a group's name within job name
}

// netArc identifies a network arc across rounds: its endpoints and, for
// parallel arcs, which one.
type netArc struct {
	tail, head flowsolver.NodeID
	variant    int32
}

// Arc variants among parallel arcs.
const (
	variantFit  int32 = 0 // class → machine, free resources
	variantSlot int32 = 1 // class → machine, cached slots
	// Group → unscheduled: fair-share tiers 0, 1, …, and the rest.
	variantRest int32 = 1 << 20
)

// network is the kept flow network and the identities of its parts.
type network struct {
	g     *flowsolver.Graph
	nodes map[netNode]flowsolver.NodeID
	arcs  map[netArc]flowsolver.ArcID
	// nodeKey and arcKey are the identity of each ID in use; nodeSeen and
	// arcSeen the round that last stated it.
	nodeKey  []netNode
	arcKey   []netArc
	nodeSeen []uint32
	arcSeen  []uint32
	round    uint32
	// info is what each arc of this round decodes to, by ArcID.
	info []arcInfo
	// changes counts this round's changes to the kept graph.
	changes int
	errs    []error
}

// warmShare bounds the changes a warm re-solve takes on: past one change
// per warmShare nodes and arcs, repairing the previous optimum costs more
// than solving from zero (measured with BenchmarkRounds: a busy round
// changes more nodes and arcs than the network has).
const warmShare = 8

// warm reports whether the round changed the kept network little enough
// for the solver to start from the previous optimum.
func (nw *network) warm() bool { return nw.changes <= (nw.g.Nodes()+nw.g.Arcs())/warmShare }

// maxSlack bounds the IDs a kept graph may leave unused, relative to the
// ones in use, before the next round builds it afresh.
const maxSlack = 2

// begin starts a round over the kept network, or a fresh one when the
// kept one has grown holes (or never was).
func (nw *network) begin(nodes, arcs int) {
	if nw.g == nil || nw.g.NodeCap() > maxSlack*(nodes+64) || nw.g.ArcCap() > maxSlack*(arcs+64) || nw.round == ^uint32(0) {
		*nw = network{
			g:     flowsolver.NewGraph(nodes, arcs),
			nodes: make(map[netNode]flowsolver.NodeID, nodes),
			arcs:  make(map[netArc]flowsolver.ArcID, arcs),
		}
	}
	nw.round++
	nw.info = nw.info[:0]
	nw.errs = nw.errs[:0]
	nw.changes = 0
}

// node states a node of this round with supply.
func (nw *network) node(k netNode, supply int64) flowsolver.NodeID {
	if id, ok := nw.nodes[k]; ok {
		if nw.g.Supply(id) != supply {
			nw.changes++
			if err := nw.g.SetSupply(id, supply); err != nil {
				nw.errs = append(nw.errs, err)
			}
		}
		nw.nodeSeen[id] = nw.round
		return id
	}
	nw.changes++
	id, err := nw.g.AddNode(supply)
	if err != nil {
		nw.errs = append(nw.errs, err)
		return 0
	}
	for len(nw.nodeKey) <= int(id) {
		nw.nodeKey = append(nw.nodeKey, netNode{})
		nw.nodeSeen = append(nw.nodeSeen, 0)
	}
	nw.nodes[k], nw.nodeKey[id], nw.nodeSeen[id] = id, k, nw.round
	return id
}

// arc states an arc of this round, from tail to head, with capacity and
// cost, decoding to info.
func (nw *network) arc(tail, head flowsolver.NodeID, variant int32, capacity, cost int64, info arcInfo) {
	k := netArc{tail, head, variant}
	id, ok := nw.arcs[k]
	if ok {
		_, _, lower, upper, c := nw.g.Arc(id)
		if lower != 0 || upper != capacity {
			nw.changes++
			if err := nw.g.SetBounds(id, 0, capacity); err != nil {
				nw.errs = append(nw.errs, err)
			}
		}
		if c != cost {
			nw.changes++
			if err := nw.g.SetCost(id, cost); err != nil {
				nw.errs = append(nw.errs, err)
			}
		}
	} else {
		nw.changes++
		var err error
		if id, err = nw.g.AddArc(tail, head, 0, capacity, cost); err != nil {
			nw.errs = append(nw.errs, err)
			return
		}
		for len(nw.arcKey) <= int(id) {
			nw.arcKey = append(nw.arcKey, netArc{})
			nw.arcSeen = append(nw.arcSeen, 0)
		}
		nw.arcs[k], nw.arcKey[id] = id, k
	}
	nw.arcSeen[id] = nw.round
	for len(nw.info) <= int(id) {
		nw.info = append(nw.info, arcInfo{})
	}
	nw.info[id] = info
}

// end removes the nodes and arcs this round did not state, and leaves
// info covering every arc ID.
func (nw *network) end() {
	for id := range nw.arcKey {
		a := flowsolver.ArcID(id)
		if nw.arcSeen[id] != nw.round && nw.g.HasArc(a) {
			nw.changes++
			delete(nw.arcs, nw.arcKey[id])
			if err := nw.g.RemoveArc(a); err != nil {
				nw.errs = append(nw.errs, err)
			}
		}
	}
	for id := range nw.nodeKey {
		n := flowsolver.NodeID(id)
		if nw.nodeSeen[id] != nw.round && nw.g.HasNode(n) {
			nw.changes++
			delete(nw.nodes, nw.nodeKey[id])
			if err := nw.g.RemoveNode(n); err != nil {
				nw.errs = append(nw.errs, err)
			}
		}
	}
	for len(nw.info) < nw.g.ArcCap() {
		nw.info = append(nw.info, arcInfo{})
	}
}
