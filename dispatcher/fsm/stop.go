package fsm

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/sluicehq/sluice/api"
)

func cmpKey(a, b taskKey) int {
	return cmp.Or(cmp.Compare(a.job, b.job), cmp.Compare(a.group, b.group), cmp.Compare(a.index, b.index))
}

// finishLocked ends an active task's attempt in state to (succeeded,
// failed, killed or lost): it frees the task's resources and either retries
// it (returning true) or counts it as done for good. closed marks an attempt
// the dispatcher ended itself, so that later reports about it are stale.
func (f *FSM) finishLocked(w writer, t *task, to api.TaskState, reason api.TaskReason, exit int32, now int64, closed bool) bool {
	j := f.mu.jobs.get(t.key.job)
	g := j.groups[t.key.group]
	if t.active() {
		n := f.mu.nodes[t.node]
		f.holdLocked(n, j, g, -1)
		if t.ports != nil {
			n.releasePorts(g, t)
		}
		if t.stop {
			n.release(j.qos, g.demand, -1)
		}
		if (to == api.TaskSucceeded || to == api.TaskFailed) && !t.stop {
			f.cacheSlotLocked(w, n, j.qos, g.demand, now)
		}
		if closed {
			f.noteTargetLocked(n, j, t)
		} else {
			f.noteEndedLocked(n, j, t)
		}
		n.removeTask(t)
		n.addJobTasks(j, -1)
		g.active--
	}
	t.state, t.reason, t.exitCode, t.updated, t.closed = to, reason, exit, now, closed
	if j.owner() != nil {
		f.endCapTasksOfLocked(w, t.key, to == api.TaskLost, now)
	}
	retry := false
	switch {
	case to == api.TaskSucceeded:
		g.succeeded++
	case t.preempted && !j.cancelled:
		// Stopped for higher-priority work, or at its node's drain
		// deadline: it did nothing wrong.
		if reason != api.ReasonDrained {
			t.reason = api.ReasonPreempted
		}
		g.requeue = append(g.requeue, requeued{index: t.key.index, notBefore: now})
		retry = true
	case !j.cancelled && !t.stop && reason != api.ReasonStopped && reason != api.ReasonTimeLimit && t.attempt < uint32(j.retry.MaxAttempts):
		g.requeue = append(g.requeue, requeued{index: t.key.index, notBefore: now + backoff(&j.retry, t.attempt)})
		retry = true
	case to == api.TaskKilled:
		g.killed++
	default:
		g.failed++
	}
	f.touchGroup(g)
	f.writeTask(t)
	return retry
}

// backoff is the wait before attempt+1: Backoff doubled per failure, capped.
func backoff(r *api.RetryPolicy, attempt uint32) int64 {
	b := int64(r.Backoff)
	for i := uint32(1); i < attempt && b < int64(r.MaxBackoff); i++ {
		b *= 2
	}
	return min(b, int64(r.MaxBackoff))
}

func (f *FSM) cancelLocked(w writer, now int64, d *dec) ([]byte, error) {
	id := d.str()
	if err := d.done("cancel command"); err != nil {
		return nil, err
	}
	num, ok := parseJobID(id)
	j := f.mu.jobs.get(num)
	if !ok || j == nil {
		return nil, fmt.Errorf("%w: job %q", ErrNotFound, id)
	}
	res := f.cancelJobLocked(w, now, j)
	return encodeUvarints(uint64(res.Dropped), uint64(res.Stopping)), nil
}

// cancelJobLocked cancels j, and the capbox sets of an appmaster with it:
// pending tasks are dropped, active ones told to stop. Cancelling a
// cancelled job changes nothing.
func (f *FSM) cancelJobLocked(w writer, now int64, j *job) CancelResult {
	var res CancelResult
	if j.cancelled {
		return res
	}
	j.cancelled = true
	f.writeJobLocked(w, j)
	for _, g := range j.groups {
		for _, r := range g.requeue {
			t := g.tasks[r.index]
			t.closed, t.updated = true, now
			f.writeTask(t)
		}
		dropped := g.count - g.next + int64(len(g.requeue))
		g.killed += dropped
		g.next, g.requeue = g.count, nil
		res.Dropped += dropped
		f.touchGroup(g)
	}
	for _, n := range f.sortedNodeListLocked() {
		if n.jobs[j.num] == 0 {
			continue
		}
		for _, t := range n.tasks {
			if t.key.job == j.num && !t.stop {
				f.stopTaskLocked(w, j, t, now)
				res.Stopping++
			}
		}
		f.touchNode(n)
	}
	for _, s := range j.sets() {
		r := f.cancelJobLocked(w, now, s)
		res.Dropped += r.Dropped
		res.Stopping += r.Stopping
	}
	f.noteFinishedLocked(j, now) // a job of no groups has nothing to flush
	return res
}

func (f *FSM) preemptLocked(w writer, now int64, d *dec) ([]byte, error) {
	term := d.uvarint()
	ps := make([]Preemption, d.count(4))
	for i := range ps {
		ps[i] = Preemption{Task: d.str(), Node: d.str(), For: GroupKey{Job: d.str(), Group: d.str()}}
	}
	if err := d.done("preempt command"); err != nil {
		return nil, err
	}
	if term < f.mu.planTerm {
		return nil, fmt.Errorf("%w: term %d, a plan of term %d was committed", ErrStalePlan, term, f.mu.planTerm)
	}
	// Nothing below fails the command: each preemption is checked against
	// the state the ones before it left, then applied or rejected alone.
	var res PreemptResult
	for i := range ps {
		if code, detail := f.preemptOneLocked(w, now, &ps[i]); code != 0 {
			res.Rejected = append(res.Rejected, Rejection{Index: i, Code: code, Detail: detail})
		} else {
			res.Preempted++
		}
	}
	return res.encode(), nil
}

// liveGroupLocked returns the group k names, of a job not cancelled, or
// says why there is none.
func (f *FSM) liveGroupLocked(k GroupKey) (*job, *group, RejectCode, string) {
	num, _ := parseJobID(k.Job)
	j := f.mu.jobs.get(num)
	switch {
	case j == nil:
		return nil, nil, RejectJobNotFound, k.Job
	case j.cancelled:
		return nil, nil, RejectJobCancelled, k.Job
	}
	gi := slices.IndexFunc(j.groups, func(g *group) bool { return g.name == k.Group })
	if gi < 0 {
		return nil, nil, RejectGroupNotFound, k.String()
	}
	return j, j.groups[gi], 0, ""
}

// preemptOneLocked checks one preemption and applies it, or says why not.
func (f *FSM) preemptOneLocked(w writer, now int64, p *Preemption) (RejectCode, string) {
	k, attempt, ok := parseTaskID(p.Task)
	t := f.taskLocked(k)
	switch {
	case !ok || t == nil || t.attempt != attempt || t.node != p.Node:
		return RejectTaskNotFound, p.Task + " on " + p.Node
	case !t.active() || t.stop:
		return RejectNotActive, fmt.Sprintf("%s is %s, stopping %v", p.Task, t.state, t.stop)
	}
	pj, pg, code, detail := f.liveGroupLocked(p.For)
	if code != 0 {
		return code, detail
	}
	if pg.pending() == 0 {
		return RejectNotPending, p.For.String() + " has no pending task"
	}
	vj := f.mu.jobs.get(k.job)
	if vj.owner() != nil {
		return RejectPriority, p.Task + " is a capbox: its appmaster decides how long it lives"
	}
	if vj.qos != api.QoSOffline || pj.qos != api.QoSOffline || vj.priority >= pj.priority {
		return RejectPriority, fmt.Sprintf("%s (%s, priority %d) for %s (%s, priority %d): offline work of a lower priority only",
			p.Task, vj.qos, vj.priority, p.For, pj.qos, pj.priority)
	}
	t.preempted = true
	f.stopTaskLocked(w, vj, t, now)
	return 0, ""
}

// stopTaskLocked tells active task t of job j to stop: it leaves its
// node's target, what it holds counts as releasing until its node reports
// it ended, and a capbox's tasks are told to stop with it.
func (f *FSM) stopTaskLocked(w writer, j *job, t *task, now int64) {
	n, g := f.mu.nodes[t.node], j.groups[t.key.group]
	t.stop, t.updated = true, now
	n.release(j.qos, g.demand, 1)
	f.inputChangedLocked(n)
	f.writeTask(t)
	if j.owner() != nil {
		f.stopCapTasksOfLocked(w, t.key, now)
	}
	f.noteTargetLocked(n, j, t)
	f.touchGroup(g)
}
