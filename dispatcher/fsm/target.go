package fsm

import (
	"slices"

	"github.com/sluicehq/sluice/api"
)

// NodeGeneration returns the generation of a node's target; ok is false
// for an unknown node.
func (f *FSM) NodeGeneration(name string) (gen uint64, ok bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	n := f.mu.nodes[name]
	if n == nil {
		return 0, false
	}
	return n.gen, true
}

// NodeTarget returns a node's target: the pods it should run, by task ID
// order, and the generation of that set, which increases whenever the set
// changes. ok is false for an unknown node. The pods are the api's, as
// the node is sent them; their specs share memory with the FSM: do not
// modify them.
func (f *FSM) NodeTarget(name string) (gen uint64, pods []api.TargetPod, ok bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	n := f.mu.nodes[name]
	if n == nil {
		return 0, nil, false
	}
	return n.gen, f.targetLocked(n), true
}

// targetLocked returns n's target, by task ID order.
func (f *FSM) targetLocked(n *node) []api.TargetPod {
	ts := make([]*task, 0, len(n.tasks))
	for _, t := range n.tasks {
		if !t.stop {
			ts = append(ts, t)
		}
	}
	slices.SortFunc(ts, func(a, b *task) int { return cmpKey(a.key, b.key) })
	pods := make([]api.TargetPod, 0, len(ts))
	for _, t := range ts {
		pods = f.appendPodsLocked(pods, t)
	}
	return pods
}

// appendPodsLocked appends the pod of t, a task in its node's target, and
// those of the capbox tasks running in it.
func (f *FSM) appendPodsLocked(pods []api.TargetPod, t *task) []api.TargetPod {
	j := f.mu.jobs.get(t.key.job)
	s := j.specOf()
	g := &s.Tasks[t.key.group]
	id := taskID(t.key, t.attempt)
	pods = append(pods, api.TargetPod{TaskID: id, Job: j.id, JobName: s.Name, Count: g.Count, Group: g.Name, QoS: j.qos, Priority: j.priority,
		MaxRunTime: s.MaxRunTime, Capbox: j.owner() != nil, Pod: g.Pod, Ports: apiPorts(&g.Pod, t.ports)})
	if j.owner() == nil {
		return pods // only capboxes have tasks in them
	}
	for _, c := range f.mu.captasks[t.key] {
		if c.active() && !c.stop {
			pods = append(pods, api.TargetPod{TaskID: c.id(), Job: j.id, JobName: s.Name, Count: g.Count, Group: g.Name,
				QoS: j.qos, Priority: j.priority, InCapbox: id, Pod: c.pod})
		}
	}
	return pods
}

// NodeTargetChanges returns what of a node's target a list of task
// attempts from its journal (TargetChange) concerns: the pods of those in
// the target, in the list's order, and the task IDs of the others (which
// may name pods the node never had or no longer has), with the target's
// generation. ok is false for an unknown node. The work is in proportion
// to the list, not to the node's pods. The pods' specs share memory with
// the FSM: do not modify them.
func (f *FSM) NodeTargetChanges(name string, changes []TaskAttempt) (gen uint64, pods []api.TargetPod, removed []string, ok bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	n := f.mu.nodes[name]
	if n == nil {
		return 0, nil, nil, false
	}
	pods = make([]api.TargetPod, 0, len(changes)) // most changes add a pod
	for _, c := range changes {
		k := taskKey{c.Task.Job, c.Task.Group, c.Task.Index}
		if t := f.taskLocked(k); t != nil && n.holds(t) && t.attempt == c.Attempt && !t.stop {
			pods = f.appendPodsLocked(pods, t)
		} else {
			removed = append(removed, taskID(k, c.Attempt))
		}
	}
	return n.gen, pods, removed, true
}
