package fsm

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/sluicehq/sluice/api"
)

func (f *FSM) registerLocked(w writer, d *dec) ([]byte, error) {
	js := d.bytes()
	if err := d.done("register command"); err != nil {
		return nil, err
	}
	var spec api.NodeSpec
	if err := json.Unmarshal(js, &spec); err != nil {
		return nil, fmt.Errorf("%w: register command: %v", ErrCorrupt, err)
	}
	if err := spec.Validate(); err != nil {
		return nil, fmt.Errorf("fsm: register node %q: %w", spec.Name, err)
	}
	n, ok := f.mu.nodes[spec.Name]
	if !ok {
		n = &node{state: api.NodeReady, jobs: map[uint64]int{}}
		n.setSpec(spec)
		n.num = int32(len(f.mu.nodes))
		f.mu.nodes[spec.Name] = n
		i, _ := slices.BinarySearchFunc(f.mu.nodeList, n, byName)
		f.mu.nodeList = slices.Insert(f.mu.nodeList, i, n)
		f.feed.c.NodeSet = true
		f.newJournalLocked(n)
	}
	n.setSpec(spec)
	n.specJSON = bytes.Clone(js) // the command is only valid during Apply
	f.inputChangedLocked(n)
	if n.state == api.NodeDown {
		n.state = n.comeBackState()
		f.feed.c.NodeSet = true
	}
	w.Set(nodeKey(spec.Name), encodeNode(n))
	return nil, nil
}

func (f *FSM) nodeStateLocked(w writer, now int64, d *dec) ([]byte, error) {
	name, state := d.str(), api.NodeState(d.str())
	if err := d.done("node state command"); err != nil {
		return nil, err
	}
	if !validNodeState(state) {
		return nil, fmt.Errorf("%w: node state %q", ErrCorrupt, state)
	}
	n, ok := f.mu.nodes[name]
	if !ok {
		return nil, fmt.Errorf("%w: node %q", ErrNotFound, name)
	}
	switch {
	case state == api.NodeDraining:
		n.drain, n.drainDeadline = true, 0
	case state == api.NodeReady && n.state == api.NodeDown:
		state = n.comeBackState()
	case state == api.NodeReady:
		n.drain, n.drainDeadline = false, 0
	}
	var res NodeStateResult
	if state == api.NodeDown {
		res.Lost, res.Requeued = f.loseTasksLocked(w, n, now, func(*task) api.TaskReason { return api.ReasonLost })
		f.dropSlotsLocked(w, n)
	}
	f.setStateLocked(w, n, state)
	return encodeUvarints(uint64(res.Lost), uint64(res.Requeued)), nil
}

// loseTasksLocked ends every active task of n as lost, in key order,
// with the reason reasonOf gives (which may mark the task), and returns
// how many ended and how many of those will be retried.
func (f *FSM) loseTasksLocked(w writer, n *node, now int64, reasonOf func(*task) api.TaskReason) (lost, requeued int) {
	ts := slices.Clone(n.tasks)
	slices.SortFunc(ts, func(a, b *task) int { return cmpKey(a.key, b.key) })
	for _, t := range ts {
		lost++
		if f.finishLocked(w, t, api.TaskLost, reasonOf(t), 0, now, true) {
			requeued++
		}
	}
	return lost, requeued
}

// dropSlotsLocked removes every slot kept on n.
func (f *FSM) dropSlotsLocked(w writer, n *node) {
	for len(n.slots) > 0 {
		f.removeSlotLocked(w, n.slots[0])
	}
}

// byName orders nodes by name.
func byName(a, b *node) int { return cmp.Compare(a.spec.Name, b.spec.Name) }

// sortedNodeListLocked returns the nodes sorted by name. The slice is the
// FSM's own: read it under the lock, never change it.
func (f *FSM) sortedNodeListLocked() []*node {
	return f.mu.nodeList
}
