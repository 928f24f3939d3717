package roundinput

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/dispatcher/fsm"
	"github.com/sluicehq/sluice/dispatcher/placement"
)

// Build reads a round's input whole: the ready nodes, by name, and the
// groups with tasks eligible at now, highest priority first, then oldest
// job, at most limit tasks in all (0: no limit).
func Build(f *fsm.FSM, now time.Time, limit int64) *placement.Input {
	in := &placement.Input{}
	f.ReadRound(func(r fsm.RoundRead) {
		readGroups(r, in, now, limit)
		for n := range r.Nodes() {
			if n.Ready() {
				in.Nodes = append(in.Nodes, placement.Node{})
				readNode(&in.Nodes[len(in.Nodes)-1], n, now)
			}
		}
		readQueues(r, in)
	})
	return in
}

// Kept is a round's input that its reader, the leader's scheduling loop,
// keeps from round to round, following the FSM's change sets. Read reads
// again only the nodes the change sets named since the last read (and
// those with cached slots, whose TTLs run out), not every node of a large
// cluster every round; it reads every node when they said which nodes are
// ready may have changed, or the FSM was reset.
//
// A Kept has one reader: Read and its methods but Consume are called by
// one goroutine at a time. Consume, given the FSM's change sets
// (fsm.FSM.Subscribe), may run at the same time; each Kept keeps its own
// changes, so any number of them may follow one FSM. The zero value is
// ready to use; until it consumed a reset (the first change set a
// subscriber gets), every read reads every node. A read may see in the
// FSM a change whose change set was not consumed yet: the read after its
// change set reads that node again.
type Kept struct {
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
	changed          []string

	// The reader's: f is the FSM read last, spare the memory of the list
	// of changed nodes before, pos each node's place in Nodes by its
	// number (fsm.RoundNode.Num; -1: not there), free each input node's
	// Free as read, and timed the nodes with cached slots, read every
	// round (timedAt marks them there; timedSpare is the memory of the
	// list before).
	f                 *fsm.FSM
	spare             []string
	pos               []int32
	free              []api.Allocatable
	timed, timedSpare []string
	timedAt           map[string]bool
}

// maxChanged bounds the nodes a Kept lists between two reads (its reader
// may read rarely, or never on a follower): past it, the next read reads
// every node.
const maxChanged = 1 << 16

// Consume takes one of the FSM's change sets.
func (k *Kept) Consume(c *fsm.Changes) {
	switch c.Kind {
	case fsm.ChangeReset:
		k.mu.Lock()
		defer k.mu.Unlock()
		k.following, k.whole = true, true
		clear(k.changed)
		k.changed = k.changed[:0]
	case fsm.ChangeApplied:
		if len(c.Nodes) == 0 && !c.NodeSet {
			return
		}
		k.mu.Lock()
		defer k.mu.Unlock()
		if c.NodeSet || len(k.changed)+len(c.Nodes) > maxChanged {
			k.whole = true
			clear(k.changed)
			k.changed = k.changed[:0]
		}
		if !k.whole {
			k.changed = append(k.changed, c.Nodes...)
		}
	}
}

// takeChanges returns the nodes named since the last read, and whether
// the read must read every node; the list is k's until the next call.
func (k *Kept) takeChanges() (changed []string, whole bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	changed, whole = k.changed, k.whole || !k.following
	clear(k.spare)
	k.changed, k.spare, k.whole = k.spare[:0], changed, false
	return changed, whole
}

// Read brings k up to date as Build(f, now, limit) would build it, and
// returns its Input. The Input is Kept (placement.Input) after a read of
// the changed nodes that follows Placed, with their positions appended to
// Changed, so that it lists the changes since the input a Placer last
// saw. After a read of every node it is not Kept until Placed. It reads
// the FSM under its read lock.
func (k *Kept) Read(f *fsm.FSM, now time.Time, limit int64) *placement.Input {
	changed, whole := k.takeChanges()
	f.ReadRound(func(r fsm.RoundRead) {
		readGroups(r, &k.Input, now, limit)
		if whole || k.f != f {
			k.f = f
			k.readAll(r, now)
		} else {
			k.readChanged(r, changed, now)
		}
		k.Modified = false
		readQueues(r, &k.Input)
	})
	return &k.Input
}

// readAll reads every ready node into k.
func (k *Kept) readAll(r fsm.RoundRead, now time.Time) {
	in, nums := &k.Input, r.NodeNums()
	if k.timedAt == nil {
		k.timedAt = map[string]bool{}
	}
	k.pos = slices.Grow(k.pos[:0], nums)[:nums]
	for i := range k.pos {
		k.pos[i] = -1
	}
	clear(k.timedAt)
	clear(k.timed)
	in.Kept, in.Changed = false, in.Changed[:0]
	in.Nodes, k.timed = slices.Grow(in.Nodes[:0], nums), k.timed[:0]
	k.free = slices.Grow(k.free[:0], nums)
	for n := range r.Nodes() {
		if !n.Ready() {
			continue
		}
		i := int32(len(in.Nodes))
		k.pos[n.Num()] = i
		in.Nodes = append(in.Nodes, placement.Node{})
		k.free = append(k.free, api.Allocatable{})
		k.readNode(n, i, now)
	}
	// What a longer input of an earlier round left beyond the end is not
	// kept alive.
	clear(in.Nodes[len(in.Nodes):cap(in.Nodes)])
}

// readChanged reads again the nodes changed and those with cached slots.
func (k *Kept) readChanged(r fsm.RoundRead, changed []string, now time.Time) {
	in := &k.Input
	if k.Modified {
		for i := range in.Nodes {
			in.Nodes[i].Free = k.free[i]
		}
	}
	// The timed nodes are read again, and listed again if they still
	// have slots.
	timed := k.timed
	k.timed = k.timedSpare[:0]
	clear(k.timedAt)
	for _, name := range timed {
		k.readAgain(r, name, now)
	}
	clear(timed)
	k.timedSpare = timed[:0]
	for _, name := range changed {
		k.readAgain(r, name, now)
	}
	if len(in.Changed) > len(in.Nodes) {
		// Read many times since a round placed it: bound the list.
		in.Kept, in.Changed = false, in.Changed[:0]
	}
}

// Placed says that a Placer has seen k's Input: the next reads list their
// changes since, and the Input is Kept.
func (k *Kept) Placed() {
	k.Kept, k.Changed = true, k.Changed[:0]
}

// readAgain reads the node named again into its place in k, if k holds
// it. (A node of the state before a Load whose reset k has not consumed
// yet is read as it was left, or not at all, until the whole read that
// reset brings.)
func (k *Kept) readAgain(r fsm.RoundRead, name string, now time.Time) {
	n, ok := r.Node(name)
	if !ok || int(n.Num()) >= len(k.pos) {
		return
	}
	if i := k.pos[n.Num()]; i >= 0 && k.Nodes[i].ID == name {
		k.readNode(n, i, now)
	}
}

// readNode reads n into its place i in k, and keeps it among the nodes
// read every round if it has cached slots.
func (k *Kept) readNode(n fsm.RoundNode, i int32, now time.Time) {
	pn := &k.Nodes[i]
	readNode(pn, n, now)
	k.free[i] = pn.Free
	if k.Kept {
		k.Changed = append(k.Changed, i)
	}
	if name := n.Spec().Name; n.HasSlots() && !k.timedAt[name] {
		k.timedAt[name] = true
		k.timed = append(k.timed, name)
	}
}

// readGroups sets in's groups: those with tasks eligible at now, highest
// priority first, then oldest job, at most limit tasks in all (0: no
// limit).
func readGroups(r fsm.RoundRead, in *placement.Input, now time.Time, limit int64) {
	// The groups are ranked on copies of their keys: comparing through
	// each group's job, scattered in memory, would make the sort most of
	// a round's read under a backlog of small jobs (a group each).
	ranks := make([]groupRank, 0, r.PendingGroupCount())
	for g := range r.PendingGroups() {
		ranks = append(ranks, groupRank{job: g.Job(), priority: g.Priority(), idx: g.Index(), g: g})
	}
	slices.SortFunc(ranks, groupRank.compare)
	in.Groups = in.Groups[:0]
	left := limit
	jobRunning := map[uint64]api.Capacity{}
	for _, rk := range ranks {
		if limit > 0 && left <= 0 {
			break
		}
		g := rk.g
		e := g.Eligible(now)
		if limit > 0 {
			e = min(e, left)
			left -= e
		}
		if e == 0 {
			continue
		}
		s := g.Spec()
		running, ok := jobRunning[rk.job]
		if !ok {
			running = g.JobRunning()
			jobRunning[rk.job] = running
		}
		in.Groups = append(in.Groups, placement.Group{
			Key: placement.GroupKey(g.Key()), Pending: e, Demand: g.Demand(), StaticPorts: g.StaticPorts(), QoS: s.QoS,
			Priority: s.Priority, Queue: s.Queue, Pool: s.Pool, Constraints: s.Constraints, DistinctNodes: s.DistinctNodes,
			Preferred: s.Tasks[rk.idx].PreferredNodes, Policy: s.Policy, Gang: g.Gang(),
			Waited:     max(0, now.Sub(g.Submitted())),
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
	job      uint64
	priority int32
	idx      uint16
	g        fsm.PendingGroup
}

func (a groupRank) compare(b groupRank) int {
	return cmp.Or(cmp.Compare(b.priority, a.priority), cmp.Compare(a.job, b.job), cmp.Compare(a.idx, b.idx))
}

// readNode fills pn with ready node n's part of a round's input at now.
func readNode(pn *placement.Node, n fsm.RoundNode, now time.Time) {
	// Slots whose TTL ended by now count as free before the next command
	// drops them.
	free := n.Free()
	var slots []placement.Slot
	for s := range n.Slots() {
		if s.Expires.After(now) {
			slots = append(slots, placement.Slot{ID: s.ID, QoS: s.QoS, Shape: s.Shape})
		} else {
			free.AddTier(s.QoS, s.Shape, 1)
		}
	}
	spec := n.Spec()
	*pn = placement.Node{
		ID: spec.Name, Pool: spec.Pool, Labels: spec.Labels, Capacity: spec.Allocatable,
		Free:      api.Allocatable{Online: clampZero(free.Online), Offline: clampZero(free.Offline)},
		Releasing: n.Releasing(),
		Slots:     slots,
		PortRange: spec.Ports,
	}
	// Ports are the node's, not a tier's: what either tier may still
	// assign is at most what the range has free.
	if pn.PortRange.Size() > 0 {
		free := n.PortsFree()
		pn.Free.Online.Ports, pn.Free.Offline.Ports = min(pn.Free.Online.Ports, free), min(pn.Free.Offline.Ports, free)
		pn.PortsInUse = n.PortsInUse()
	}
	for id := range n.DistinctJobs() {
		if pn.Jobs == nil {
			pn.Jobs = map[string]bool{}
		}
		pn.Jobs[id] = true
	}
}

// readQueues sets in's queues: what each queue's active tasks hold, how
// many they are, and its replicated weight and caps, for every queue with
// active tasks or settings.
func readQueues(r fsm.RoundRead, in *placement.Input) {
	in.Queues = in.Queues[:0]
	for q := range r.Queues() {
		in.Queues = append(in.Queues, placement.Queue{Name: q.Name, Running: q.Running, Tasks: q.Tasks,
			Weight: q.Settings.Weight, Caps: q.Settings.Caps})
	}
	slices.SortFunc(in.Queues, func(a, b placement.Queue) int { return cmp.Compare(a.Name, b.Name) })
}

// AddVictims fills the Victims of in's nodes, in no order
// (placement.Preempt orders them): their running offline tasks (active
// and not told to stop) of jobs of a priority below below. Capboxes are
// never victims: their appmasters decide how long they live. Nodes the
// FSM does not know are left alone.
func AddVictims(f *fsm.FSM, in *placement.Input, below int32) {
	f.ReadRound(func(r fsm.RoundRead) {
		for i := range in.Nodes {
			pn := &in.Nodes[i]
			pn.Victims = pn.Victims[:0]
			n, ok := r.Node(pn.ID)
			if !ok {
				continue
			}
			for t := range n.Tasks() {
				if t.Stopping || t.Capbox || t.QoS != api.QoSOffline || t.Priority >= below {
					continue
				}
				pn.Victims = append(pn.Victims, placement.Victim{Task: t.ID(), Priority: t.Priority, Demand: t.Demand, Since: t.Since})
			}
		}
	})
}

func clampZero(c api.Capacity) api.Capacity {
	c.CPU, c.Memory, c.GPUs, c.Disk, c.Ports = max(c.CPU, 0), max(c.Memory, 0), max(c.GPUs, 0), max(c.Disk, 0), max(c.Ports, 0)
	return c
}
