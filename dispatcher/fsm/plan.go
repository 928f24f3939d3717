package fsm

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/sluicehq/sluice/api"
)

// planAssignment is a decoded assignment of a plan command.
type planAssignment struct {
	job, group, node string
	count            int64
	slots            []string
}

func (f *FSM) planLocked(w writer, now int64, d *dec) ([]byte, error) {
	term, _ := d.uvarint(), d.uvarint()
	as := make([]planAssignment, d.count(5))
	for i := range as {
		a := &as[i]
		a.job, a.group, a.node, a.count = d.str(), d.str(), d.str(), d.varint()
		if n := d.count(1); n > 0 {
			a.slots = make([]string, n)
			for k := range a.slots {
				a.slots[k] = d.str()
			}
		}
	}
	if err := d.done("plan command"); err != nil {
		return nil, err
	}
	if term < f.mu.planTerm {
		return nil, fmt.Errorf("%w: term %d, a plan of term %d was committed", ErrStalePlan, term, f.mu.planTerm)
	}
	// Nothing below fails the command: each assignment is checked against
	// the state the ones before it left, then applied or rejected alone.
	f.expireSlotsLocked(w, now)
	if term > f.mu.planTerm {
		f.mu.planTerm = term
		w.Set(keyPlanTerm, binary.BigEndian.AppendUint64(nil, term))
	}
	var res PlanResult
	for i := range as {
		if code, detail := f.placeLocked(w, now, &as[i]); code != 0 {
			res.Rejected = append(res.Rejected, Rejection{Index: i, Code: code, Detail: detail})
		} else {
			res.Placed += as[i].count
		}
	}
	return res.encode(), nil
}

// placeLocked checks one assignment and applies it, or says why not.
func (f *FSM) placeLocked(w writer, now int64, a *planAssignment) (RejectCode, string) {
	j, g, code, detail := f.liveGroupLocked(GroupKey{Job: a.job, Group: a.group})
	if code != 0 {
		return code, detail
	}
	num := j.num
	if a.count < 1 {
		return RejectBadCount, fmt.Sprint(a.count)
	}
	if e := g.eligible(now); e < a.count {
		return RejectNotPending, fmt.Sprintf("%d tasks eligible, %d assigned", e, a.count)
	}
	n := f.mu.nodes[a.node]
	switch {
	case n == nil:
		return RejectNodeNotFound, a.node
	case n.state != api.NodeReady:
		return RejectNodeNotReady, fmt.Sprintf("node %s is %s", a.node, n.state)
	case int64(len(a.slots)) > a.count:
		return RejectSlot, fmt.Sprintf("%d slots for %d tasks", len(a.slots), a.count)
	}
	slots := make([]*slot, len(a.slots))
	for k, id := range a.slots {
		i := slices.IndexFunc(n.slots, func(s *slot) bool { return s.id == id })
		switch {
		case i < 0 || slices.Contains(slots[:k], n.slots[i]):
			return RejectSlot, fmt.Sprintf("no slot %s on node %s, or named twice", id, a.node)
		case n.slots[i].qos != j.qos || shortfall(n.slots[i].shape, g.demand, 1) != "":
			return RejectSlot, fmt.Sprintf("slot %s (%s, %+v) does not hold a task of %s (%s, %+v)", id, n.slots[i].qos, n.slots[i].shape, a.job, j.qos, g.demand)
		}
		slots[k] = n.slots[i]
	}
	if why := matches(j.rules, &n.spec); why != "" {
		return RejectConstraint, why
	}
	if j.distinct && (a.count > 1 || n.jobs[num] > 0) {
		return RejectDistinct, fmt.Sprintf("job already on node %s or %d tasks assigned to it", a.node, a.count)
	}
	if why := shortfall(n.free(j.qos), g.demand, a.count-int64(len(slots))); why != "" {
		return RejectNoFit, fmt.Sprintf("node %s, %s tier: %s", a.node, j.qos, why)
	}
	if g.ports != nil {
		if why := n.portsShortfall(g, a.count); why != "" {
			return RejectPorts, why
		}
	}
	if why := f.quotaShortfallLocked(j.queue, g.demand, a.count); why != "" {
		return RejectQuota, why
	}

	// Apply: the slots give their resources to the tasks; retries first
	// (those due), then never-placed tasks.
	for _, s := range slots {
		f.removeSlotLocked(w, s)
	}
	left := a.count
	if len(g.requeue) > 0 {
		keep := g.requeue[:0]
		for _, r := range g.requeue {
			if left > 0 && r.notBefore <= now {
				f.assignLocked(now, n, j, g.tasks[r.index])
				left--
				continue
			}
			keep = append(keep, r)
		}
		clear(g.requeue[len(keep):])
		g.requeue = keep
	}
	// Never-placed tasks' records are allocated together.
	fresh := make([]task, left)
	g.tasks = slices.Grow(g.tasks, len(fresh))
	for i := range fresh {
		t := &fresh[i]
		t.key = taskKey{num, g.idx, uint32(g.next)}
		g.next++
		g.tasks = append(g.tasks, t)
		f.assignLocked(now, n, j, t)
	}
	f.holdLocked(n, j, g, a.count)
	n.addJobTasks(j, int(a.count))
	g.active += a.count
	if g.started == 0 && f.version >= startedVersion {
		g.started = max(now, 1)
	}
	f.touchGroup(g)
	f.touchNode(n)
	return 0, ""
}

// holdLocked counts k tasks of group g (of job j) more (or fewer) as held
// on node n and by the job's queue.
func (f *FSM) holdLocked(n *node, j *job, g *group, k int64) {
	n.hold(j.qos, g.demand, k)
	f.inputChangedLocked(n)
	q := j.queue
	if u := f.mu.queueUsed[q].Plus(g.demand, k); u == (api.Capacity{}) {
		delete(f.mu.queueUsed, q)
	} else {
		f.mu.queueUsed[q] = u
	}
	if t := f.mu.queueTasks[q] + k; t == 0 {
		delete(f.mu.queueTasks, q)
	} else {
		f.mu.queueTasks[q] = t
	}
}

// inputChangedLocked notes that n's part of a round's input changed,
// for the command's change set.
func (f *FSM) inputChangedLocked(n *node) {
	if !n.inputDirty {
		n.inputDirty = true
		f.inputDirty = append(f.inputDirty, n)
	}
}

func (f *FSM) assignLocked(now int64, n *node, j *job, t *task) {
	t.attempt++
	t.state, t.node, t.stop, t.closed, t.preempted = api.TaskAssigned, n.spec.Name, false, false, false
	t.exitCode, t.reason, t.updated = 0, "", now
	if g := j.groups[t.key.group]; g.ports != nil {
		t.ports = n.takePorts(g)
	}
	n.addTask(t)
	f.noteTargetLocked(n, j, t)
	f.writeTask(t)
}
