package fsm

import (
	"iter"
	"time"

	"github.com/sluicehq/sluice/api"
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

// RoundRead is the state a round's input is read from (package
// dispatcher/roundinput builds placement's input from it), under the
// FSM's read lock: it and every value it returns are valid only during
// the function given to ReadRound, and what they return shares memory
// with the FSM (do not modify it).
type RoundRead struct{ f *FSM }

// ReadRound calls fn with the state under the FSM's read lock. fn must
// not call the FSM's other methods: a command waiting for the lock would
// hold them up, and them fn.
func (f *FSM) ReadRound(fn func(RoundRead)) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	fn(RoundRead{f})
}

// NodeNums bounds the nodes' numbers (RoundNode.Num): every node's is
// below it.
func (r RoundRead) NodeNums() int { return len(r.f.mu.nodeList) }

// Nodes yields every node, by name.
func (r RoundRead) Nodes() iter.Seq[RoundNode] {
	return func(yield func(RoundNode) bool) {
		for _, n := range r.f.sortedNodeListLocked() {
			if !yield(RoundNode{n: n, f: r.f}) {
				return
			}
		}
	}
}

// Node returns the node named; ok is false for an unknown one.
func (r RoundRead) Node(name string) (n RoundNode, ok bool) {
	x := r.f.mu.nodes[name]
	return RoundNode{n: x, f: r.f}, x != nil
}

// RoundNode is a node as a round reads it.
type RoundNode struct {
	n *node
	f *FSM
}

// Num is the node's number: dense from 0 (below NodeNums), the same
// while the FSM holds the node, renumbered by a Load (which a ChangeReset
// announces).
func (n RoundNode) Num() int32 { return n.n.num }

// Spec is the node's spec as registered (its Pool canonical: equal pools
// share their bytes).
func (n RoundNode) Spec() *api.NodeSpec { return &n.n.spec }

// Ready reports whether the node takes new work.
func (n RoundNode) Ready() bool { return n.n.state == api.NodeReady }

// Free is what is left of each tier's allocatable after what its active
// tasks and cached slots hold; a tier's may be negative (a node
// registered again smaller than what it runs).
func (n RoundNode) Free() api.Allocatable {
	return api.Allocatable{Online: n.n.free(api.QoSOnline), Offline: n.n.free(api.QoSOffline)}
}

// Releasing is what the node's active tasks told to stop hold.
func (n RoundNode) Releasing() api.Allocatable { return n.n.releasing }

// CachedSlot is a slot cached on a node by a task that ended, for a task
// of the same shape, until Expires.
type CachedSlot struct {
	ID      string
	QoS     api.QoS
	Shape   api.Capacity
	Expires time.Time
}

// Slots yields the node's cached slots, oldest first; those expired
// still hold their resources until a command drops them.
func (n RoundNode) Slots() iter.Seq[CachedSlot] {
	return func(yield func(CachedSlot) bool) {
		for _, s := range n.n.slots {
			if !yield(CachedSlot{ID: s.id, QoS: s.qos, Shape: s.shape, Expires: time.Unix(0, s.expires)}) {
				return
			}
		}
	}
}

// HasSlots reports whether the node has cached slots.
func (n RoundNode) HasSlots() bool { return len(n.n.slots) > 0 }

// PortsFree is how many ports of the node's range are free for dynamic
// assignment.
func (n RoundNode) PortsFree() int64 { return n.n.portsFree() }

// PortsInUse returns the ports the node's active tasks hold, sorted, in
// a new slice (nil while none is).
func (n RoundNode) PortsInUse() []api.PortKey { return n.n.portsInUse() }

// DistinctJobs yields the IDs of the jobs that want distinct nodes and
// have an active task on the node, in no order.
func (n RoundNode) DistinctJobs() iter.Seq[string] {
	return func(yield func(string) bool) {
		if n.n.distinctJobs == 0 {
			return
		}
		for num := range n.n.jobs {
			if j := n.f.mu.jobs.get(num); j.distinct && !yield(j.id) {
				return
			}
		}
	}
}

// RunningTask is an active task on a node as preemption sees it.
type RunningTask struct {
	key      taskKey
	attempt  uint32
	QoS      api.QoS
	Priority int32
	// Capbox says the task is a capbox, whose appmaster decides how long
	// it lives; Stopping that it was told to stop.
	Capbox, Stopping bool
	Demand           api.Capacity
	// Since is when the task last changed state.
	Since time.Time
}

// ID is the task's ID with its attempt. It is formatted when asked for:
// preemption looks at every active task and names few.
func (t RunningTask) ID() string { return taskID(t.key, t.attempt) }

// Tasks yields the node's active tasks, in no order.
func (n RoundNode) Tasks() iter.Seq[RunningTask] {
	return func(yield func(RunningTask) bool) {
		for _, t := range n.n.tasks {
			j := n.f.mu.jobs.get(t.key.job)
			rt := RunningTask{key: t.key, attempt: t.attempt, QoS: j.qos, Priority: j.priority, Capbox: j.owner() != nil,
				Stopping: t.stop, Demand: j.groups[t.key.group].demand, Since: time.Unix(0, t.updated)}
			if !yield(rt) {
				return
			}
		}
	}
}

// PendingGroupCount is how many groups PendingGroups yields.
func (r RoundRead) PendingGroupCount() int { return r.f.mu.pending.gs.len() }

// PendingGroups yields the groups with tasks waiting for placement, in no
// order.
func (r RoundRead) PendingGroups() iter.Seq[PendingGroup] {
	return func(yield func(PendingGroup) bool) {
		for g := range r.f.mu.pending.gs.all() {
			if !yield(PendingGroup{g}) {
				return
			}
		}
	}
}

// PendingGroup is a group with tasks waiting for placement.
type PendingGroup struct{ g *group }

// Job is the group's job's number: jobs are numbered in the order they
// were submitted.
func (p PendingGroup) Job() uint64 { return p.g.job.num }

// Index is the group's index in its job.
func (p PendingGroup) Index() uint16 { return p.g.idx }

// Priority is the group's job's priority.
func (p PendingGroup) Priority() int32 { return p.g.job.priority }

// Key names the group.
func (p PendingGroup) Key() GroupKey { return p.g.key() }

// Eligible is how many of the group's tasks may be placed at now (those
// requeued wait out their backoff).
func (p PendingGroup) Eligible(now time.Time) int64 { return p.g.eligible(now.UnixNano()) }

// Demand is what one task of the group needs (api.PodSpec.Demand).
func (p PendingGroup) Demand() api.Capacity { return p.g.demand }

// StaticPorts are the ports by number one task needs, sorted.
func (p PendingGroup) StaticPorts() []api.PortKey { return p.g.static }

// Spec is the group's job's spec; the group's is Spec().Tasks[Index()].
func (p PendingGroup) Spec() *api.JobSpec { return p.g.job.specOf() }

// Gang says the job's groups are placed all at once or not at all.
func (p PendingGroup) Gang() bool { return p.g.job.gang }

// Submitted is when the group's job was submitted.
func (p PendingGroup) Submitted() time.Time { return time.Unix(0, p.g.job.submitted) }

// JobRunning is what the active tasks of the group's job hold, both tiers
// summed; the work is in proportion to the job's groups.
func (p PendingGroup) JobRunning() api.Capacity {
	var running api.Capacity
	for _, jg := range p.g.job.groups {
		running = running.Plus(jg.demand, jg.active)
	}
	return running
}

// QueueRead is a queue as a round reads it.
type QueueRead struct {
	Name string
	// Running is what its active tasks hold, both tiers summed; Tasks is
	// how many they are.
	Running api.Capacity
	Tasks   int64
	// Settings are its replicated weight and caps (SetQueue).
	Settings api.QueueSettings
}

// Queues yields each queue with active tasks or settings, in no order.
func (r RoundRead) Queues() iter.Seq[QueueRead] {
	return func(yield func(QueueRead) bool) {
		f := r.f
		for q, used := range f.mu.queueUsed {
			if !yield(QueueRead{Name: q, Running: used, Tasks: f.mu.queueTasks[q], Settings: f.mu.queues[q]}) {
				return
			}
		}
		for q, s := range f.mu.queues {
			if _, ok := f.mu.queueUsed[q]; !ok && !yield(QueueRead{Name: q, Settings: s}) {
				return
			}
		}
	}
}
