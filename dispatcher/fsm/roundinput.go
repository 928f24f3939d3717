package fsm

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/dispatcher/placement"
)

// HasReadyNode reports whether some node is ready for new work.
func (f *FSM) HasReadyNode() bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	for _, n := range f.mu.nodes {
		if n.state == api.NodeReady {
			return true
		}
	}
	return false
}

// PlacementInput builds a round's input: the ready nodes, and the groups
// with tasks eligible at now, highest priority first, then oldest job, at
// most limit tasks in all (0: no limit).
func (f *FSM) PlacementInput(now time.Time, limit int64) *placement.Input {
	f.mu.RLock()
	defer f.mu.RUnlock()
	in := &placement.Input{}
	nowNS := now.UnixNano()
	f.readGroupsLocked(in, nowNS, limit)
	for _, n := range f.sortedNodeListLocked() {
		if n.state == api.NodeReady {
			in.Nodes = append(in.Nodes, placement.Node{})
			f.readNodeLocked(&in.Nodes[len(in.Nodes)-1], n, nowNS)
		}
	}
	f.readQueuesLocked(in)
	return in
}

// RoundInput is a view of the FSM's change sets: a round's placement
// input that its reader, the leader's scheduling loop, keeps from round to
// round. ReadRoundInput reads again only the nodes whose part the change
// sets consumed since the last read named (and those with cached slots,
// whose TTLs run out), not every node of a large cluster every round, or
// every node when they said which nodes are ready may have changed (or
// the FSM was reset).
//
// A RoundInput has one reader: ReadRoundInput with it and its methods
// but Consume are called by one goroutine at a time. Consume, given the
// FSM's change sets (FSM.Subscribe, or a subscriber passing them on), may
// run at the same time; each RoundInput keeps its own changes, so any
// number of them may follow one FSM. The zero value is ready to use; until
// it consumed a reset (the first change set a subscriber gets), every read
// reads every node. A read may see in the FSM a change whose change set
// was not consumed yet: the read after its change set reads that node
// again.
type RoundInput struct {
	// Input is the input as of the last read.
	placement.Input
	// Modified, set by the reader, says it changed the Input's nodes'
	// Free in place (the dispatcher's offline estimate lowers it): the
	// next read puts back what the FSM says for every node.
	Modified bool

	mu sync.Mutex
	// Guarded by mu, written by Consume: following says a reset was
	// consumed; whole that the next read reads every node; changed the
	// nodes named since the last read (a node possibly more than once),
	// at most maxChanged of them, past which the read reads every node.
	following, whole bool
	changed          []*node

	// The reader's: f is the FSM read last, spare the memory of the list
	// of changed nodes before, pos each node's place in Nodes by its
	// number (node.num; -1: not there), free each input node's Free as
	// read, and timed the nodes with cached slots, read every round
	// (timedAt marks them there; timedSpare is the memory of the list
	// before).
	f                 *FSM
	spare             []*node
	pos               []int32
	free              []api.Allocatable
	timed, timedSpare []string
	timedAt           map[string]bool
}

// maxChanged bounds the nodes a RoundInput lists between two reads (its
// reader may read rarely, or never on a follower): past it, the next read
// reads every node.
const maxChanged = 1 << 16

// Consume takes one of the FSM's change sets.
func (r *RoundInput) Consume(c *Changes) {
	switch c.Kind {
	case ChangeReset:
		r.mu.Lock()
		defer r.mu.Unlock()
		r.following, r.whole = true, true
		clear(r.changed)
		r.changed = r.changed[:0]
	case ChangeApplied:
		if len(c.Nodes) == 0 && !c.NodeSet {
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if c.NodeSet || len(r.changed)+len(c.nodes) > maxChanged {
			r.whole = true
			clear(r.changed)
			r.changed = r.changed[:0]
		}
		if !r.whole {
			r.changed = append(r.changed, c.nodes...)
		}
	}
}

// takeChanges returns the nodes named since the last read, and whether
// the read must read every node; the list is r's until the next call.
func (r *RoundInput) takeChanges() (changed []*node, whole bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	changed, whole = r.changed, r.whole || !r.following
	clear(r.spare)
	r.changed, r.spare, r.whole = r.spare[:0], changed, false
	return changed, whole
}

// ReadRoundInput brings r up to date as PlacementInput(now, limit) would
// build it, and returns its Input. The Input is Kept (placement.Input)
// after a read of the changed nodes that follows Placed, with their
// positions appended to Changed, so that it lists the changes since the
// input a Placer last saw. After a read of every node it is not Kept
// until Placed. It reads the FSM under its read lock.
func (f *FSM) ReadRoundInput(r *RoundInput, now time.Time, limit int64) *placement.Input {
	changed, whole := r.takeChanges()
	f.mu.RLock()
	defer f.mu.RUnlock()
	in := &r.Input
	nowNS := now.UnixNano()
	f.readGroupsLocked(in, nowNS, limit)
	if whole || r.f != f {
		r.f = f
		if r.timedAt == nil {
			r.timedAt = map[string]bool{}
		}
		r.pos = slices.Grow(r.pos[:0], len(f.mu.nodeList))[:len(f.mu.nodeList)]
		for i := range r.pos {
			r.pos[i] = -1
		}
		clear(r.timedAt)
		clear(r.timed)
		in.Kept, in.Changed = false, in.Changed[:0]
		in.Nodes, r.timed = slices.Grow(in.Nodes[:0], len(f.mu.nodeList)), r.timed[:0]
		r.free = slices.Grow(r.free[:0], len(f.mu.nodeList))
		for _, n := range f.sortedNodeListLocked() {
			if n.state != api.NodeReady {
				continue
			}
			i := int32(len(in.Nodes))
			r.pos[n.num] = i
			in.Nodes = append(in.Nodes, placement.Node{})
			r.free = append(r.free, api.Allocatable{})
			f.readRoundNodeLocked(r, n, i, nowNS)
		}
		// What a longer input of an earlier round left beyond the end is
		// not kept alive.
		clear(in.Nodes[len(in.Nodes):cap(in.Nodes)])
	} else {
		if r.Modified {
			for i := range in.Nodes {
				in.Nodes[i].Free = r.free[i]
			}
		}
		// The timed nodes are read again, and listed again if they still
		// have slots.
		timed := r.timed
		r.timed = r.timedSpare[:0]
		clear(r.timedAt)
		for _, name := range timed {
			f.readChangedLocked(r, f.mu.nodes[name], nowNS)
		}
		clear(timed)
		r.timedSpare = timed[:0]
		for _, n := range changed {
			f.readChangedLocked(r, n, nowNS)
		}
		if len(in.Changed) > len(in.Nodes) {
			// Read many times since a round placed it: bound the list.
			in.Kept, in.Changed = false, in.Changed[:0]
		}
	}
	r.Modified = false
	f.readQueuesLocked(in)
	return in
}

// Placed says that a Placer has seen r's Input: the next reads list
// their changes since, and the Input is Kept.
func (r *RoundInput) Placed() {
	r.Kept, r.Changed = true, r.Changed[:0]
}

// readChangedLocked reads node n again into its place in r, if r holds
// it. (A node of the state before a Load whose reset r has not consumed
// yet is read as it was left, or not at all, until the whole read that
// reset brings.)
func (f *FSM) readChangedLocked(r *RoundInput, n *node, nowNS int64) {
	if n == nil || int(n.num) >= len(r.pos) {
		return
	}
	if i := r.pos[n.num]; i >= 0 && r.Nodes[i].ID == n.spec.Name {
		f.readRoundNodeLocked(r, n, i, nowNS)
	}
}

// readRoundNodeLocked reads n into its place i in r, and keeps it among
// the nodes read every round if it has cached slots.
func (f *FSM) readRoundNodeLocked(r *RoundInput, n *node, i int32, nowNS int64) {
	pn := &r.Nodes[i]
	f.readNodeLocked(pn, n, nowNS)
	r.free[i] = pn.Free
	if r.Kept {
		r.Changed = append(r.Changed, i)
	}
	if len(n.slots) > 0 && !r.timedAt[n.spec.Name] {
		r.timedAt[n.spec.Name] = true
		r.timed = append(r.timed, n.spec.Name)
	}
}

// readGroupsLocked sets in's groups: those with tasks eligible at nowNS,
// highest priority first, then oldest job, at most limit tasks in all (0:
// no limit).
func (f *FSM) readGroupsLocked(in *placement.Input, nowNS int64, limit int64) {
	// The groups are ranked on copies of their keys: comparing through
	// each group's job, scattered in memory, would make the sort most of
	// a round's read under a backlog of small jobs (a group each).
	ranks := make([]groupRank, 0, f.mu.pending.gs.len())
	for g := range f.mu.pending.gs.all() {
		ranks = append(ranks, groupRank{num: g.job.num, priority: g.job.priority, idx: g.idx, g: g})
	}
	slices.SortFunc(ranks, groupRank.compare)
	in.Groups = in.Groups[:0]
	left := limit
	jobRunning := map[*job]api.Capacity{}
	for _, r := range ranks {
		if limit > 0 && left <= 0 {
			break
		}
		g := r.g
		e := g.eligible(nowNS)
		if limit > 0 {
			e = min(e, left)
			left -= e
		}
		if e == 0 {
			continue
		}
		s := g.job.specOf()
		running, ok := jobRunning[g.job]
		if !ok {
			for _, jg := range g.job.groups {
				running = running.Plus(jg.demand, jg.active)
			}
			jobRunning[g.job] = running
		}
		in.Groups = append(in.Groups, placement.Group{
			Key: g.key(), Pending: e, Demand: g.demand, StaticPorts: g.static, QoS: s.QoS, Priority: s.Priority,
			Queue: s.Queue, Pool: s.Pool, Constraints: s.Constraints, DistinctNodes: s.DistinctNodes,
			Preferred: s.Tasks[g.idx].PreferredNodes, Policy: s.Policy, Gang: g.job.gang,
			Waited:     max(0, time.Duration(nowNS-g.job.submitted)),
			JobRunning: running,
		})
	}
	// What a longer input of an earlier round left beyond the end is not
	// kept alive.
	clear(in.Groups[len(in.Groups):cap(in.Groups)])
}

// groupRank is a pending group's place in the order in which a round
// takes them (compare): higher priority first, then older jobs, then a
// job's groups in its order. No two pending groups rank equal.
type groupRank struct {
	num      uint64
	priority int32
	idx      uint16
	g        *group
}

func (a groupRank) compare(b groupRank) int {
	return cmp.Or(cmp.Compare(b.priority, a.priority), cmp.Compare(a.num, b.num), cmp.Compare(a.idx, b.idx))
}

// readNodeLocked fills pn with ready node n's part of a round's input at
// nowNS.
func (f *FSM) readNodeLocked(pn *placement.Node, n *node, nowNS int64) {
	// Slots whose TTL ended by now count as free before the next command
	// drops them.
	free := api.Allocatable{Online: n.free(api.QoSOnline), Offline: n.free(api.QoSOffline)}
	var slots []placement.Slot
	for _, s := range n.slots {
		if s.expires > nowNS {
			slots = append(slots, placement.Slot{ID: s.id, QoS: s.qos, Shape: s.shape})
		} else {
			free.AddTier(s.qos, s.shape, 1)
		}
	}
	*pn = placement.Node{
		ID: n.spec.Name, Pool: n.spec.Pool, Labels: n.spec.Labels, Capacity: n.spec.Allocatable,
		Free:      api.Allocatable{Online: clampZero(free.Online), Offline: clampZero(free.Offline)},
		Releasing: n.releasing,
		Slots:     slots,
		PortRange: n.spec.Ports,
	}
	// Ports are the node's, not a tier's: what either tier may still
	// assign is at most what the range has free.
	if pn.PortRange.Size() > 0 {
		free := n.portsFree()
		pn.Free.Online.Ports, pn.Free.Offline.Ports = min(pn.Free.Online.Ports, free), min(pn.Free.Offline.Ports, free)
		pn.PortsInUse = n.portsInUse()
	}
	if n.distinctJobs == 0 {
		return
	}
	for num := range n.jobs {
		if j := f.mu.jobs.get(num); j.distinct {
			if pn.Jobs == nil {
				pn.Jobs = map[string]bool{}
			}
			pn.Jobs[j.id] = true
		}
	}
}

// readQueuesLocked sets in's queues: what each queue's active tasks hold.
func (f *FSM) readQueuesLocked(in *placement.Input) {
	in.Queues = in.Queues[:0]
	for q, used := range f.mu.queueUsed {
		in.Queues = append(in.Queues, placement.Queue{Name: q, Running: used})
	}
	slices.SortFunc(in.Queues, func(a, b placement.Queue) int { return cmp.Compare(a.Name, b.Name) })
}

// AddVictims fills the Victims of in's nodes, in no order (placement.Preempt
// orders them): their running offline tasks (active and not told to stop)
// of jobs of a priority below below. Capboxes are never victims: their
// appmasters decide how long they live. Nodes the FSM does not know are left
// alone.
func (f *FSM) AddVictims(in *placement.Input, below int32) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	for i := range in.Nodes {
		pn := &in.Nodes[i]
		pn.Victims = pn.Victims[:0]
		n := f.mu.nodes[pn.ID]
		if n == nil {
			continue
		}
		for _, t := range n.tasks {
			j := f.mu.jobs.get(t.key.job)
			if t.stop || j.owner() != nil || j.qos != api.QoSOffline || j.priority >= below {
				continue
			}
			pn.Victims = append(pn.Victims, placement.Victim{Task: taskID(t.key, t.attempt), Priority: j.priority,
				Demand: j.groups[t.key.group].demand, Since: time.Unix(0, t.updated)})
		}
	}
}

func clampZero(c api.Capacity) api.Capacity {
	c.CPU, c.Memory, c.GPUs, c.Disk, c.Ports = max(c.CPU, 0), max(c.Memory, 0), max(c.GPUs, 0), max(c.Disk, 0), max(c.Ports, 0)
	return c
}
