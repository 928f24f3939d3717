package fsm

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sluicehq/sluice/api"
)

// Command tags of an operator's node commands.
const (
	cmdDrainNode   byte = 13
	cmdUndrainNode byte = 14
	cmdRemoveNode  byte = 15
	cmdEndDrain    byte = 16
)

// ErrNodeBusy: a node cannot be removed while it may still take or hold
// work (it is neither drained nor down, or tasks are active on it).
var ErrNodeBusy = errors.New("fsm: node busy")

// DrainNode returns the command that drains a node: it takes no new task
// (it leaves every round's input, and a plan's assignment to it is
// rejected); its active tasks keep running until deadline, when the
// leader's EndDrain stops them and requeues them at once whatever their
// attempts, with reason drained (capboxes end as lost, as on a node going
// down: their appmaster decides). The zero deadline is none: the tasks
// run to their end. A deadline at or before the command's time stops them
// as it applies. Draining a draining node sets its deadline anew. A
// drained node stays drained through a re-registration, and through going
// down and coming back; UndrainNode ends it. The result decodes with
// DecodeDrainResult.
func DrainNode(now time.Time, name string, deadline time.Time) []byte {
	e := newCommand(cmdDrainNode, now, len(name)+24)
	e.str(name)
	var at int64
	if !deadline.IsZero() {
		at = deadline.UnixNano()
	}
	e.varint(at)
	return e.b
}

// UndrainNode returns the command that ends a node's drain: a draining
// node becomes ready, a down one comes back ready. Undraining a node not
// drained changes nothing. The result decodes with DecodeDrainResult.
func UndrainNode(now time.Time, name string) []byte {
	e := newCommand(cmdUndrainNode, now, len(name)+8)
	e.str(name)
	return e.b
}

// RemoveNode returns the command that forgets a node: its record, its
// target generation and its cached slots. It is refused with ErrNodeBusy
// unless the node is drained or down and no task is active on it (so a
// node is drained, its tasks end or reach the deadline, and then it is
// removed). Ended tasks keep the node's name. A later registration of the
// name is a new node, ready and numbered afresh. The result is empty.
func RemoveNode(now time.Time, name string) []byte {
	e := newCommand(cmdRemoveNode, now, len(name)+8)
	e.str(name)
	return e.b
}

// EndDrain returns the command the leader proposes once a drained node's
// deadline passed by its clock: if the node is drained with a deadline at
// or before the command's time, its active tasks are stopped and requeued
// as DrainNode says; otherwise (undrained since, or a later deadline set)
// it changes nothing. The result decodes with DecodeDrainResult.
func EndDrain(now time.Time, name string) []byte {
	e := newCommand(cmdEndDrain, now, len(name)+8)
	e.str(name)
	return e.b
}

// DrainResult answers DrainNode, UndrainNode and EndDrain.
type DrainResult struct {
	// State is the node's state after the command, Drained whether it is
	// drained, and Deadline its drain's deadline (zero: none).
	State    api.NodeState
	Drained  bool
	Deadline time.Time
	// Tasks counts the tasks active on the node after the command.
	Tasks int
	// Stopped counts the tasks the command stopped at the deadline;
	// Requeued those of them that will run again.
	Stopped, Requeued int
}

func (r *DrainResult) encode() []byte {
	e := enc{}
	e.str(string(r.State))
	e.bool(r.Drained)
	var at int64
	if !r.Deadline.IsZero() {
		at = r.Deadline.UnixNano()
	}
	e.varint(at)
	for _, v := range []int{r.Tasks, r.Stopped, r.Requeued} {
		e.uvarint(uint64(v))
	}
	return e.b
}

// DecodeDrainResult decodes the result of a DrainNode, UndrainNode or
// EndDrain command.
func DecodeDrainResult(b []byte) (DrainResult, error) {
	d := dec{b: b}
	r := DrainResult{State: api.NodeState(d.str()), Drained: d.bool(), Deadline: unixTime(d.varint())}
	r.Tasks, r.Stopped, r.Requeued = int(d.uvarint()), int(d.uvarint()), int(d.uvarint())
	return r, d.done("drain result")
}

// comeBackState is the state a node that was down and is heard from (or
// registers) again takes: draining while drained.
func (n *node) comeBackState() api.NodeState {
	if n.drain {
		return api.NodeDraining
	}
	return api.NodeReady
}

// setStateLocked moves n to state, writing its record when it changes.
func (f *FSM) setStateLocked(w writer, n *node, state api.NodeState) {
	if n.state != state {
		n.state = state
		f.feed.c.NodeSet = true
	}
	w.Set(nodeKey(n.spec.Name), encodeNode(n))
}

func (f *FSM) drainLocked(w writer, now int64, d *dec) ([]byte, error) {
	name, deadline := d.str(), d.varint()
	if err := d.done("drain command"); err != nil {
		return nil, err
	}
	n, ok := f.mu.nodes[name]
	if !ok {
		return nil, fmt.Errorf("%w: node %q", ErrNotFound, name)
	}
	n.drain, n.drainDeadline = true, deadline
	// A slot is kept for a task to come; none comes to a drained node.
	f.dropSlotsLocked(w, n)
	state := n.state
	if state == api.NodeReady {
		state = api.NodeDraining
	}
	f.setStateLocked(w, n, state)
	res := f.endDrainLocked(w, n, now)
	return res.encode(), nil
}

func (f *FSM) undrainLocked(w writer, d *dec) ([]byte, error) {
	name := d.str()
	if err := d.done("undrain command"); err != nil {
		return nil, err
	}
	n, ok := f.mu.nodes[name]
	if !ok {
		return nil, fmt.Errorf("%w: node %q", ErrNotFound, name)
	}
	if n.drain {
		n.drain, n.drainDeadline = false, 0
		state := n.state
		if state == api.NodeDraining {
			state = api.NodeReady
		}
		f.setStateLocked(w, n, state)
	}
	res := DrainResult{State: n.state, Tasks: len(n.tasks)}
	return res.encode(), nil
}

func (f *FSM) endDrainCmdLocked(w writer, now int64, d *dec) ([]byte, error) {
	name := d.str()
	if err := d.done("end drain command"); err != nil {
		return nil, err
	}
	n, ok := f.mu.nodes[name]
	if !ok {
		return nil, fmt.Errorf("%w: node %q", ErrNotFound, name)
	}
	res := f.endDrainLocked(w, n, now)
	return res.encode(), nil
}

// endDrainLocked stops the active tasks of n if it is drained with a
// deadline at or before now, as a node going down ends them (closed by the
// dispatcher, leaving the node's target at once), but requeued whatever
// their attempts, with reason drained; a capbox ends as lost.
func (f *FSM) endDrainLocked(w writer, n *node, now int64) DrainResult {
	res := DrainResult{State: n.state, Drained: n.drain, Deadline: unixTime(n.drainDeadline)}
	if !n.drain || n.drainDeadline == 0 || n.drainDeadline > now {
		res.Tasks = len(n.tasks)
		return res
	}
	res.Stopped, res.Requeued = f.loseTasksLocked(w, n, now, func(t *task) api.TaskReason {
		if f.mu.jobs.get(t.key.job).owner() != nil {
			return api.ReasonLost
		}
		t.preempted = true
		return api.ReasonDrained
	})
	res.Tasks = len(n.tasks)
	return res
}

func (f *FSM) removeNodeLocked(w writer, d *dec) ([]byte, error) {
	name := d.str()
	if err := d.done("remove command"); err != nil {
		return nil, err
	}
	n, ok := f.mu.nodes[name]
	switch {
	case !ok:
		return nil, fmt.Errorf("%w: node %q", ErrNotFound, name)
	case !n.drain && n.state != api.NodeDown:
		return nil, fmt.Errorf("%w: node %q is %s: drain it first", ErrNodeBusy, name, n.state)
	case len(n.tasks) > 0:
		return nil, fmt.Errorf("%w: node %q has %d active tasks: wait for them to end, or drain it with a deadline", ErrNodeBusy, name, len(n.tasks))
	}
	f.dropSlotsLocked(w, n)
	// Nothing of the node is left for the command's flush to settle, or
	// for WriteDeferred to write.
	f.inputDirty = slices.DeleteFunc(f.inputDirty, func(x *node) bool { return x == n })
	f.dirtyNodes = slices.DeleteFunc(f.dirtyNodes, func(x *node) bool { return x == n })
	f.unstoredNodes = slices.DeleteFunc(f.unstoredNodes, func(x *node) bool { return x == n })
	n.inputDirty, n.dirty, n.unstored = false, false, false
	w.Delete(nodeKey(name))
	f.kbuf = appendGenKey(f.kbuf, name)
	w.Delete(f.kbuf)
	delete(f.mu.nodes, name)
	f.mu.nodeList = slices.DeleteFunc(f.mu.nodeList, func(x *node) bool { return x == n })
	// Nodes are numbered densely: the last takes the number freed.
	last := int32(len(f.mu.nodes))
	for _, m := range f.mu.nodeList {
		if m.num == last {
			m.num = n.num
			break
		}
	}
	f.feed.c.NodeSet = true
	return nil, nil
}

// unixTime is ns as a time in UTC; 0 is the zero time.
func unixTime(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}
