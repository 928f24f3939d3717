package placement

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
	"unique"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/flowsolver"
)

// Plan is a round's outcome.
type Plan struct {
	// Assignments say how many tasks of a group go to a node, in priority
	// order (higher first).
	Assignments []Assignment
	// Pending lists, per group with tasks left over, how many and why:
	// one entry per group, or, for a group of a capped queue, one per
	// reason (some held back by the caps, others short of room).
	Pending []Pending
	Stats   Stats
}

// Assignment places Count tasks of Group on Node; Slots are the cached
// slots they reuse (at most Count; the rest take free resources).
type Assignment struct {
	Group GroupKey
	Node  string
	Count int64
	Slots []string
}

// Preemption stops a running task to make room for a group's tasks.
type Preemption struct {
	// Task is the running task's ID (with its attempt), on Node.
	Task string
	Node string
	// For is the higher-priority group it makes room for.
	For GroupKey
}

// Pending is what stays of a group for a later round.
type Pending struct {
	Group  GroupKey
	Count  int64
	Reason string
	// Rejected counts, by filter name, the nodes each filter ruled out
	// for the group (the first filter to reject a node is charged).
	Rejected map[string]int
}

// Reasons a task stays pending.
const (
	ReasonNoNodes      = "no ready node in the cluster"
	ReasonNoCandidates = "no node passes the filters"
	ReasonNoCapacity   = "no capacity: the candidate nodes are full or taken by higher-priority work"
	ReasonConflict     = "resources taken by other placements of this round; retried next round"
	ReasonGang         = "gang group could not be placed whole"
	ReasonDeadline     = "round time budget ran out before a plan"
)

// Stats describe a round's work.
type Stats struct {
	Groups, Classes, Candidates int
	FlowNodes, FlowArcs         int
	Placed, Pending             int64
	// Cost is the flow's cost; Optimal is false when the solver stopped at
	// the context's deadline with a feasible but unproven flow.
	Cost             int64
	Optimal          bool
	Build, Solve     time.Duration
	SolverAlgorithm  string
	RepairedConflict int64
}

// Placer computes plans. It keeps scratch memory between rounds and is not
// safe for concurrent use.
type Placer struct {
	reg    *Registry
	solver flowsolver.Solver
	// net is the flow network, kept from round to round (network.go).
	net network
	// scratch is working memory reused from round to round.
	scratch scratch
	// round counts the calls of Place; verdicts are the classes'
	// verdicts on the nodes, kept for the next round's (candidates.go).
	round    uint64
	verdicts map[classKey]*verdicts
	// validNodes is the number of nodes of the last input, if it was
	// valid (else -1): a Kept input's unchanged nodes need no new check.
	validNodes int
	// quota holds the capped queues of the input being placed (nil: none;
	// quota.go), and quotaGroups the queue of each of its groups in one;
	// quotaCosts and quotaFair are the cost model and fair-share tiers of
	// that input, by group, which the placements of its parts use.
	quota       quotas
	quotaGroups map[GroupKey]string
	quotaCosts  costModel
	quotaFair   map[GroupKey][]fairTier
}

// scratch is a Placer's working memory by input node and by class,
// reused from round to round: a round looks at every node, and slices of
// that length made afresh each round were most of what a busy
// dispatcher allocated.
type scratch struct {
	// kept holds the classes' candidates, every class's after the
	// last's; costCount and costRoom count the admitted nodes and their
	// room by cost while candidates chooses; uncached holds the verdicts
	// of a class past maxCachedClasses.
	kept      []candidate
	costCount [maxPlaceCost + 1]int32
	costRoom  [maxPlaceCost + 1]int64
	uncached  verdicts
	free      []api.Allocatable
	seen      []bool
	nodeID    []flowsolver.NodeID
	nodeCap   []int64
}

// grown returns s with length n and every element zero, reusing its
// memory when it is large enough.
func grown[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	s = s[:n]
	clear(s)
	return s
}

// New returns a Placer using the filters and scorers of reg (nil: the
// default registry).
func New(reg *Registry) *Placer {
	if reg == nil {
		reg = DefaultRegistry()
	}
	return &Placer{reg: reg, validNodes: -1}
}

// costScale turns a normalized score (0..MaxScore) into flow cost units,
// leaving room to tell scores apart after weighting.
const costScale = 10

// maxPlaceCost bounds the cost of any placement arc.
const maxPlaceCost = MaxScore * costScale

// costModel prices leaving a round's tasks unscheduled: more than any
// placement, so that what can be placed is; rising with priority (so that
// contended capacity goes to higher priority), then, within a priority,
// with the fair-share bonus of fairShares (a lower queue level, then job
// level, weighs more than any difference of wait and placement cost), then
// with the wait (at most one more placement's worth, capped at an hour).
// Priorities are ranked among the round's, and the fair-share levels are
// as fine as the solver's cost bound allows for that many ranks; a round
// whose tasks the nodes' free resources could hold has none.
type costModel struct {
	rank   map[int32]int64 // a priority's rank among the round's, from 0
	levels int64           // fair-share levels; 0: no fair-share bonus
	step   int64           // between ranks
}

// levelStep is the bonus between two fair-share levels: more than any
// difference of wait and placement cost.
const levelStep = 2*maxPlaceCost + 1

// maxFairBonus is the largest fair-share bonus with levels levels.
func maxFairBonus(levels int64) int64 { return ((levels+1)*(levels+1) - 1) * levelStep }

func newCostModel(in *Input) costModel {
	var prios []int32
	for i := range in.Groups {
		prios = append(prios, in.Groups[i].Priority)
	}
	slices.Sort(prios)
	prios = slices.Compact(prios)
	m := costModel{rank: make(map[int32]int64, len(prios))}
	for i, p := range prios {
		m.rank[p] = int64(i)
	}
	choices := []int64{8, 4, 2, 1, 0}
	if !contended(in) {
		// The bonus would change nothing, and its larger costs slow the
		// solver by a third.
		choices = []int64{0}
	}
	for _, levels := range choices {
		m.levels, m.step = levels, maxFairBonus(levels)+2*maxPlaceCost+1
		if (int64(len(prios))+1)*m.step+maxFairBonus(levels)+maxPlaceCost <= flowsolver.MaxAbsCost {
			break
		}
	}
	return m
}

// unscheduled is the cost of leaving one task of g pending, before its
// fair-share bonus.
func (m *costModel) unscheduled(g *Group) int64 {
	wait := min(int64(g.Waited/time.Second), 3600) * maxPlaceCost / 3600
	return (m.rank[g.Priority]+1)*m.step + wait
}

// urgency orders groups as their unscheduled costs do: priority, then
// wait.
func urgency(a, b *Group) int {
	return cmp.Or(cmp.Compare(a.Priority, b.Priority), cmp.Compare(min(a.Waited/time.Second, 3600), min(b.Waited/time.Second, 3600)))
}

// class is the build state of an equivalence class.
type class struct {
	Class
	key        classKey
	groups     []int // indexes of the input's groups, priority order
	demand     int64
	rejected   map[string]int
	candidates []candidate
	node       flowsolver.NodeID
	locality   int64 // cost a preferred node is spared
	slot       int64 // cost a reused slot is spared
}

type candidate struct {
	node  int // index in the input's nodes
	cost  int64
	fit   int64
	slots int64
}

// arcKind says what an arc of the flow network decodes to.
type arcKind uint8

const (
	arcOther arcKind = iota
	arcClassNode
	arcClassSlot
	arcGroupNode
	arcGroupClass
	arcUnscheduled
)

type arcInfo struct {
	kind  arcKind
	class int
	group int
	node  int
}

// Place computes the plan of in. When ctx ends during the solve, it uses
// the best feasible flow found (Stats.Optimal false); if it ends before any
// flow exists, everything stays pending with ReasonDeadline. A bad input is
// an error wrapping ErrBadInput that names every problem.
func (p *Placer) Place(ctx context.Context, in *Input) (*Plan, error) {
	keptValid := in.Kept && p.validNodes == len(in.Nodes)
	p.validNodes = -1
	if err := in.validate(p.reg, keptValid); err != nil {
		return nil, err
	}
	p.validNodes = len(in.Nodes)
	if p.quota = newQuotas(in); p.quota != nil {
		defer func() { p.quota, p.quotaGroups, p.quotaFair = nil, nil, nil }()
		p.quotaGroups = make(map[GroupKey]string, len(in.Groups))
		for i := range in.Groups {
			if g := &in.Groups[i]; p.quota[g.Queue] != nil {
				p.quotaGroups[g.Key] = g.Queue
			}
		}
		return p.placeCapped(ctx, in)
	}
	return p.place(ctx, in)
}

// place is Place on a valid input, within the caps of p.quota.
func (p *Placer) place(ctx context.Context, in *Input) (*Plan, error) {
	start := time.Now()
	p.round++
	if p.verdicts == nil {
		p.verdicts = map[classKey]*verdicts{}
	}
	classes, groupClass := p.classes(in)
	p.scratch.kept = p.scratch.kept[:0]
	for ci := range classes {
		p.candidates(in, &classes[ci])
	}
	p.forgetVerdicts()
	g, arcs, err := p.network(in, classes, groupClass)
	if err != nil {
		return nil, err
	}
	plan := &Plan{}
	plan.Stats.Groups, plan.Stats.Classes = len(in.Groups), len(classes)
	for _, c := range classes {
		plan.Stats.Candidates += len(c.candidates)
	}
	plan.Stats.FlowNodes, plan.Stats.FlowArcs = g.Nodes(), g.Arcs()
	plan.Stats.Build = time.Since(start)
	start = time.Now()
	if !p.net.warm() {
		p.solver.Reset()
	}
	sol, err := p.solver.Solve(ctx, g)
	plan.Stats.Solve = time.Since(start)
	if err != nil {
		if ctx.Err() != nil {
			for i := range in.Groups {
				if n := in.Groups[i].Pending; n > 0 {
					plan.Pending = append(plan.Pending, Pending{Group: in.Groups[i].Key, Count: n, Reason: ReasonDeadline})
					plan.Stats.Pending += n
				}
			}
			return plan, nil
		}
		// Every group can stay unscheduled, so the network is always
		// feasible: an error here is a bug.
		return nil, fmt.Errorf("placement: solve: %w", err)
	}
	plan.Stats.Cost, plan.Stats.Optimal, plan.Stats.SolverAlgorithm = sol.Cost, sol.Optimal, sol.Stats.Algorithm
	p.decode(in, classes, arcs, sol.Flow, plan)
	return p.withoutFailedGangs(ctx, in, plan)
}

// withoutFailedGangs places the round again without the gang groups plan
// could not place whole, when others are left, so that the capacity the
// flow gave those gangs goes to other groups; the gangs stay pending.
// When every group failed, it tries again without the last one.
func (p *Placer) withoutFailedGangs(ctx context.Context, in *Input, plan *Plan) (*Plan, error) {
	var gangs []Pending
	failed := map[GroupKey]bool{}
	for _, pd := range plan.Pending {
		if pd.Reason == ReasonGang {
			gangs = append(gangs, pd)
			failed[pd.Group] = true
		}
	}
	switch {
	case len(gangs) == 0 || len(in.Groups) == 1:
		return plan, nil
	case len(gangs) == len(in.Groups):
		// Every group is a gang that failed: they may have crowded each
		// other out. Try again without the last (the lowest priority,
		// then the newest); each try has a group fewer.
		last := gangs[slices.IndexFunc(gangs, func(pd Pending) bool { return pd.Group == in.Groups[len(in.Groups)-1].Key })]
		gangs, failed = []Pending{last}, map[GroupKey]bool{last.Group: true}
	}
	rest := *in
	rest.Groups = slices.DeleteFunc(slices.Clone(in.Groups), func(g Group) bool { return failed[g.Key] })
	again, err := p.place(ctx, &rest)
	if err != nil {
		return nil, err
	}
	again.Pending = append(again.Pending, gangs...)
	for _, g := range gangs {
		again.Stats.Pending += g.Count
	}
	again.Stats.Groups = len(in.Groups)
	again.Stats.Build += plan.Stats.Build
	again.Stats.Solve += plan.Stats.Solve
	return again, nil
}

// classes sorts the groups into equivalence classes, each class's groups in
// priority order.
func (p *Placer) classes(in *Input) ([]class, []int) {
	index := map[classKey]int{}
	var classes []class
	groupClass := make([]int, len(in.Groups))
	for gi := range in.Groups {
		g := &in.Groups[gi]
		k := classKey{demand: g.Demand, qos: g.QoS, pool: g.Pool, cons: constraintKey(g.Constraints), policy: policyKey(g.Policy),
			ports: portsKey(g.StaticPorts)}
		if g.DistinctNodes {
			k.distinct = g.Key.Job
		}
		ci, ok := index[k]
		if !ok {
			ci = len(classes)
			index[k] = ci
			filters, scorers := p.reg.resolve(g.Policy, g.wantsPorts())
			// The QoS and pool are made canonical: the filters and
			// scorers compare them with constants and with every node's,
			// and equal strings that share their bytes compare without
			// reading them (the FSM makes nodes' pools canonical too).
			c := class{Class: Class{Demand: g.Demand, QoS: canonicalQoS(g.QoS), Pool: unique.Make(g.Pool).Value(), Constraints: g.Constraints,
				DistinctNodes: g.DistinctNodes, StaticPorts: g.StaticPorts, Filters: filters, Scorers: scorers}, key: k, rejected: map[string]int{}}
			if g.DistinctNodes {
				c.Job = g.Key.Job
			}
			c.locality, c.slot = c.share(api.ScorerLocality), c.share(api.ScorerSlotReuse)
			classes = append(classes, c)
		}
		groupClass[gi] = ci
		classes[ci].groups = append(classes[ci].groups, gi)
		classes[ci].demand += g.Pending
	}
	for ci := range classes {
		slices.SortStableFunc(classes[ci].groups, func(a, b int) int {
			return urgency(&in.Groups[b], &in.Groups[a])
		})
	}
	return classes, groupClass
}

// canonicalQoS returns the api's constant for q, or q if it is none.
func canonicalQoS(q api.QoS) api.QoS {
	switch q {
	case api.QoSOnline:
		return api.QoSOnline
	case api.QoSOffline:
		return api.QoSOffline
	}
	return q
}

// share returns the part of a placement's cost that scorer name accounts
// for in c's policy.
func (c *class) share(name string) int64 {
	var w, total int64
	for _, s := range c.Scorers {
		total += s.Weight
		if s.Name() == name {
			w += s.Weight
		}
	}
	if total == 0 {
		return 0
	}
	return w * maxPlaceCost / total
}

// cost is the placement cost of c on n: its scorers' weighted mean.
func (c *class) cost(n *Node) int64 {
	var sum, total int64
	for _, s := range c.Scorers {
		sum += s.Weight * min(max(s.Cost(&c.Class, n), 0), MaxScore)
		total += s.Weight
	}
	if total == 0 {
		return 0
	}
	return sum * costScale / total
}

// network states the round's flow network on the kept one (network.go)
// and returns it, with what each arc means.
func (p *Placer) network(in *Input, classes []class, groupClass []int) (*flowsolver.Graph, []arcInfo, error) {
	var total int64
	for i := range in.Groups {
		total += in.Groups[i].Pending
	}
	costs, fair := p.costs(in)
	arcCount := len(in.Nodes) + (3+2*int(costs.levels))*len(in.Groups)
	for ci := range classes {
		arcCount += 2 * len(classes[ci].candidates)
	}
	nw := &p.net
	nw.begin(len(in.Groups)+len(classes)+len(in.Nodes)+2, arcCount)
	sink := nw.node(netNode{kind: netSink}, -total)
	p.scratch.nodeID = grown(p.scratch.nodeID, len(in.Nodes))
	p.scratch.nodeCap = grown(p.scratch.nodeCap, len(in.Nodes))
	nodeID, nodeCap := p.scratch.nodeID, p.scratch.nodeCap
	for ci := range classes {
		c := &classes[ci]
		c.node = nw.node(netNode{kind: netClass, class: c.key}, 0)
		for _, cd := range c.candidates {
			nodeCap[cd.node] = max(nodeCap[cd.node], cd.fit+cd.slots)
		}
	}
	for ni := range in.Nodes {
		if k := nodeCap[ni]; k > 0 {
			id := nw.node(netNode{kind: netMachine, name: in.Nodes[ni].ID}, 0)
			nodeID[ni] = id
			nw.arc(id, sink, 0, k, 0, arcInfo{})
		}
	}
	for ci := range classes {
		c := &classes[ci]
		for _, cd := range c.candidates {
			if cd.fit > 0 {
				nw.arc(c.node, nodeID[cd.node], variantFit, cd.fit, cd.cost, arcInfo{kind: arcClassNode, class: ci, node: cd.node})
			}
			if cd.slots > 0 {
				nw.arc(c.node, nodeID[cd.node], variantSlot, cd.slots, max(cd.cost-c.slot, 0), arcInfo{kind: arcClassSlot, class: ci, node: cd.node})
			}
		}
	}
	unsched := map[string]flowsolver.NodeID{}
	for gi := range in.Groups {
		gr := &in.Groups[gi]
		if gr.Pending == 0 {
			continue
		}
		c := &classes[groupClass[gi]]
		id := nw.node(netNode{kind: netGroup, name: gr.Key.Job, group: gr.Key.Group}, gr.Pending)
		nw.arc(id, c.node, 0, gr.Pending, 0, arcInfo{kind: arcGroupClass, class: groupClass[gi], group: gi})
		u, ok := unsched[gr.Key.Job]
		if !ok {
			u = nw.node(netNode{kind: netUnscheduled, name: gr.Key.Job}, 0)
			unsched[gr.Key.Job] = u
			nw.arc(u, sink, 0, flowsolver.MaxCapacity, 0, arcInfo{})
		}
		left := gr.Pending
		for ti, t := range fair[gi] {
			nw.arc(id, u, int32(ti), t.count, costs.unscheduled(gr)+t.bonus, arcInfo{kind: arcUnscheduled, group: gi})
			left -= t.count
		}
		if left > 0 {
			nw.arc(id, u, variantRest, left, costs.unscheduled(gr), arcInfo{kind: arcUnscheduled, group: gi})
		}
		if c.locality == 0 || len(gr.Preferred) == 0 {
			continue
		}
		preferred := map[string]bool{}
		for _, name := range gr.Preferred {
			preferred[name] = true
		}
		for _, cd := range c.candidates {
			if cd.fit > 0 && preferred[in.Nodes[cd.node].ID] {
				nw.arc(id, nodeID[cd.node], 0, min(cd.fit, gr.Pending), max(cd.cost-c.locality, 0), arcInfo{kind: arcGroupNode, class: groupClass[gi], group: gi, node: cd.node})
			}
		}
	}
	nw.end()
	if len(nw.errs) > 0 {
		err := nw.errs[0]
		*nw = network{} // the kept network may be half-changed: build the next afresh
		return nil, nil, fmt.Errorf("placement: build flow network: %v", err)
	}
	return nw.g, nw.info, nil
}

// tentative is an assignment before the fit check.
type tentative struct {
	group, node int
	count       int64
	slot        bool
}

// decode turns the flow into assignments, checks them against every
// resource dimension in priority order, drops incomplete gangs, and
// explains what stays pending.
func (p *Placer) decode(in *Input, classes []class, arcs []arcInfo, flow []int64, plan *Plan) {
	// Per class, the flow to each node (reused slots apart) and from each
	// group; direct group→node arcs are assignments already.
	type nodeFlow struct {
		node  int
		count int64
		slot  bool
	}
	classNodes := make([][]nodeFlow, len(classes))
	classGroups := make([]map[int]int64, len(classes))
	var tent []tentative
	for a, info := range arcs {
		f := flow[a]
		if f == 0 {
			continue
		}
		switch info.kind {
		case arcClassNode, arcClassSlot:
			classNodes[info.class] = append(classNodes[info.class], nodeFlow{info.node, f, info.kind == arcClassSlot})
		case arcGroupClass:
			if classGroups[info.class] == nil {
				classGroups[info.class] = map[int]int64{}
			}
			classGroups[info.class][info.group] += f
		case arcGroupNode:
			tent = append(tent, tentative{group: info.group, node: info.node, count: f})
		}
	}
	for ci := range classes {
		nodes := classNodes[ci]
		k := 0
		for _, gi := range classes[ci].groups {
			want := classGroups[ci][gi]
			for want > 0 && k < len(nodes) {
				n := min(want, nodes[k].count)
				tent = append(tent, tentative{group: gi, node: nodes[k].node, count: n, slot: nodes[k].slot})
				want -= n
				nodes[k].count -= n
				if nodes[k].count == 0 {
					k++
				}
			}
		}
	}
	slices.SortStableFunc(tent, func(a, b tentative) int {
		return cmp.Or(
			urgency(&in.Groups[b.group], &in.Groups[a.group]),
			cmp.Compare(a.group, b.group),
			cmp.Compare(a.node, b.node))
	})
	// Fit check, repeated without the gangs it leaves incomplete.
	// A gang cut short by its queue's caps is dropped, and keeps the
	// quota reason (quota: by group, of a cut in the last fit check, or
	// in the one that dropped the gang).
	dropped := map[int]bool{}
	var placed []int64
	var assigned []Assignment
	var conflicts int64
	var quota []string
	if p.quota != nil {
		quota = make([]string, len(in.Groups))
	}
	for {
		var cut []string
		placed, assigned, conflicts, cut = p.fit(in, tent, dropped)
		for gi, r := range cut {
			if !dropped[gi] {
				quota[gi] = r
			}
		}
		again := false
		for gi := range in.Groups {
			if in.Groups[gi].Gang && !dropped[gi] && placed[gi] > 0 && placed[gi] < in.Groups[gi].Pending {
				dropped[gi] = true
				again = true
			}
		}
		if !again {
			break
		}
	}
	plan.Assignments = assigned
	plan.Stats.RepairedConflict = conflicts
	flowed := make([]int64, len(in.Groups))
	for _, t := range tent {
		flowed[t.group] += t.count
	}
	groupClass := make([]int, len(in.Groups))
	for ci := range classes {
		for _, gi := range classes[ci].groups {
			groupClass[gi] = ci
		}
	}
	for gi := range in.Groups {
		gr := &in.Groups[gi]
		plan.Stats.Placed += placed[gi]
		left := gr.Pending - placed[gi]
		if left == 0 {
			continue
		}
		plan.Stats.Pending += left
		c := &classes[groupClass[gi]]
		pd := Pending{Group: gr.Key, Count: left, Rejected: c.rejected}
		switch {
		case quota != nil && quota[gi] != "":
			pd.Reason = quota[gi]
		case dropped[gi]:
			pd.Reason = ReasonGang
		case len(c.candidates) == 0:
			pd.Reason = ReasonNoCandidates
		case placed[gi] < flowed[gi]:
			pd.Reason = ReasonConflict
		default:
			pd.Reason = ReasonNoCapacity
		}
		plan.Pending = append(plan.Pending, pd)
	}
}

// fit checks tentative assignments in order against the nodes' free
// resources and cached slots, and their queues' caps (p.quota), skipping
// dropped groups, and returns how many tasks of each group it placed, the
// assignments, how many tasks did not fit in the nodes, and, per group,
// the quota reason of a cap that cut its tasks (nil with no caps).
func (p *Placer) fit(in *Input, tent []tentative, dropped map[int]bool) ([]int64, []Assignment, int64, []string) {
	// free is valid where seen is set.
	p.scratch.free = slices.Grow(p.scratch.free[:0], len(in.Nodes))[:len(in.Nodes)]
	p.scratch.seen = grown(p.scratch.seen, len(in.Nodes))
	free, seen := p.scratch.free, p.scratch.seen
	usedSlot := map[string]bool{}
	distinct := map[[2]string]bool{}
	// ports are the static ports this round's assignments so far take,
	// by node (made when a group has static ports).
	var ports map[int][]api.PortKey
	placed := make([]int64, len(in.Groups))
	var out []Assignment
	var conflicts int64
	var cut []string
	if p.quota != nil {
		p.quota.reset()
		cut = make([]string, len(in.Groups))
	}
	for _, t := range tent {
		if dropped[t.group] {
			continue
		}
		gr := &in.Groups[t.group]
		n := &in.Nodes[t.node]
		if !seen[t.node] {
			free[t.node], seen[t.node] = n.Free, true
		}
		f := free[t.node]
		want := min(t.count, gr.Pending-placed[t.group])
		if gr.DistinctNodes {
			if distinct[[2]string{gr.Key.Job, n.ID}] || n.Jobs[gr.Key.Job] {
				want = 0
			}
			want = min(want, 1)
		}
		if len(gr.StaticPorts) > 0 {
			if !portsFree(gr.StaticPorts, n) || slices.ContainsFunc(gr.StaticPorts, func(k api.PortKey) bool { return slices.Contains(ports[t.node], k) }) {
				want = 0
			}
			want = min(want, 1)
		}
		// The queue's caps: what is cut here is not a conflict.
		var room *queueRoom
		if p.quota != nil {
			if room = p.quota[gr.Queue]; room != nil {
				if k := room.fits(gr.Demand); k < want {
					cut[t.group] = room.reason(gr.Demand, k)
					conflicts -= want - k
					want = k
				}
			}
		}
		// A task takes a matching cached slot or free resources, whichever
		// its arc chose first and the other if that has run out: both
		// kinds of arc into a node share its capacity in the flow.
		a := Assignment{Group: gr.Key, Node: n.ID}
		fresh := func(k int64) {
			k = min(k, fits(pool(f, gr.QoS), gr.Demand))
			f.AddTier(gr.QoS, gr.Demand, -k)
			free[t.node] = f
			a.Count += k
		}
		reuse := func(k int64) {
			for _, s := range n.Slots {
				if k == 0 {
					break
				}
				if !usedSlot[s.ID] && s.QoS == gr.QoS && s.Shape == gr.Demand {
					usedSlot[s.ID] = true
					a.Slots = append(a.Slots, s.ID)
					a.Count++
					k--
				}
			}
		}
		if t.slot {
			reuse(want)
			fresh(want - a.Count)
		} else {
			fresh(want)
			reuse(want - a.Count)
		}
		conflicts += t.count - a.Count
		if a.Count == 0 {
			continue
		}
		if room != nil {
			room.take(gr.Demand, a.Count)
		}
		placed[t.group] += a.Count
		if gr.DistinctNodes {
			distinct[[2]string{gr.Key.Job, n.ID}] = true
		}
		if len(gr.StaticPorts) > 0 {
			if ports == nil {
				ports = map[int][]api.PortKey{}
			}
			ports[t.node] = append(ports[t.node], gr.StaticPorts...)
		}
		out = append(out, a)
	}
	return placed, out, conflicts, cut
}

// constraintKey and policyKey are canonical strings for class keys.
func constraintKey(cs []api.Constraint) string {
	var b strings.Builder
	for _, c := range cs {
		fmt.Fprintf(&b, "%q %s %q;", c.Key, c.Op, c.Values)
	}
	return b.String()
}

func policyKey(p *api.Policy) string {
	if p == nil {
		return ""
	}
	return fmt.Sprintf("%q %v", p.Filters, p.Scorers)
}
