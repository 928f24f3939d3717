package fsm

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/api"
)

// Errors of the capbox task commands; each rejects its command whole.
var (
	// ErrCapboxNotRunning: a task was started in a capbox that is not
	// running (not yet, or no more), or is being released.
	ErrCapboxNotRunning = errors.New("fsm: capbox is not running")
	// ErrNoRoom: a capbox's tasks would hold more than the capbox does.
	ErrNoRoom = errors.New("fsm: capbox has no room")
)

// captask is a task an appmaster runs in one of its capboxes: a pod on the
// capbox's node, inside the capbox's resources. Its ID is its capbox's ID,
// "/", and its name. It starts assigned (in its node's target), is never
// retried, and ends when its node reports it ended, when its capbox ends,
// or lost with its node.
type captask struct {
	box      taskKey // its capbox's task
	name     string
	pod      api.PodSpec // defaults applied
	demand   api.Capacity
	state    api.TaskState
	stop     bool // its appmaster stopped it, or its capbox is being released: it leaves the target
	exitCode int32
	reason   api.TaskReason
	updated  int64
}

func (c *captask) id() string { return taskID(c.box, 1) + "/" + c.name }

func (c *captask) active() bool {
	return c.state == api.TaskAssigned || c.state == api.TaskStarting || c.state == api.TaskRunning
}

// StartCapTasks returns the command by which appmaster (a job ID) starts
// tasks in its running capboxes. The specs get their defaults and are
// validated as api.DecodeCapTasks does (an *api.ValidationError names
// every problem); each must name a capbox of the appmaster's
// (ErrNotFound) that is running and not being released
// (ErrCapboxNotRunning), with room for the task beside its capbox's other
// tasks that have not ended (ErrNoRoom), or the command is rejected
// whole. A name taken in its capbox is answered with that task's ID. The
// result decodes with DecodeSubmitResult: one task ID per spec.
func StartCapTasks(now time.Time, appmaster string, specs []api.CapTaskSpec) ([]byte, error) {
	body, err := json.Marshal(specs)
	if err != nil {
		return nil, fmt.Errorf("fsm: encoding capbox tasks: %w", err)
	}
	return appmasterCommand(cmdStartCapTasks, now, appmaster, body), nil
}

// StopCapTasks returns the command by which appmaster stops capbox tasks,
// named by ID: each leaves its node's target, and ends when its node
// reports it stopped; one that has ended or is stopping is left as it is.
// Every ID must name a task of one of the appmaster's capboxes
// (ErrNotFound), or the command is rejected whole. The result decodes
// with DecodeCancelResult (Stopping counts the tasks told to stop).
func StopCapTasks(now time.Time, appmaster string, ids []string) []byte {
	return appmasterIDsCommand(cmdStopCapTasks, now, appmaster, ids)
}

// splitCapTaskID splits a capbox task's ID into its capbox's ID and its
// name; ok is false for an ID of another form.
func splitCapTaskID(id string) (box, name string, ok bool) {
	if strings.Count(id, "/") != 4 {
		return "", "", false
	}
	i := strings.LastIndexByte(id, '/')
	return id[:i], id[i+1:], true
}

// capboxOfLocked returns the capbox (a set's task) id names, of
// appmaster am.
func (f *FSM) capboxOfLocked(am, id string) (*job, *task, error) {
	k, attempt, ok := parseTaskID(id)
	s := f.mu.jobs.get(k.job)
	if ok && s != nil && s.owner() != nil && s.owner().id == am && k.group == 0 && attempt == 1 && int64(k.index) < s.groups[0].next {
		if t := s.groups[0].tasks[k.index]; t.attempt == 1 {
			return s, t, nil
		}
	}
	return nil, nil, fmt.Errorf("%w: appmaster %s has no placed capbox %q", ErrNotFound, am, id)
}

// byCapTaskName orders a capbox's tasks by name.
func byCapTaskName(c *captask, name string) int { return strings.Compare(c.name, name) }

// findCapTaskLocked returns the task of the capbox named name, or nil.
func (f *FSM) findCapTaskLocked(box taskKey, name string) *captask {
	ts := f.mu.captasks[box]
	if i, ok := slices.BinarySearchFunc(ts, name, byCapTaskName); ok {
		return ts[i]
	}
	return nil
}

func (f *FSM) startCapTasksLocked(w writer, now int64, d *dec) ([]byte, error) {
	am, body := d.str(), d.bytes()
	if err := d.done("start capbox tasks command"); err != nil {
		return nil, err
	}
	specs, err := api.DecodeCapTasks(body)
	if err != nil {
		return nil, fmt.Errorf("fsm: start capbox tasks: %w", err)
	}
	// Check every spec against the state the ones before it leave: per
	// capbox, what its tasks that have not ended hold, and the names the
	// command adds.
	boxes := make([]*task, len(specs))
	held := map[*task]api.Capacity{}
	names := map[*task][]string{}
	for i := range specs {
		sp := &specs[i]
		s, box, err := f.capboxOfLocked(am, sp.Capbox)
		if err != nil {
			return nil, fmt.Errorf("fsm: start capbox tasks: tasks[%d]: %w", i, err)
		}
		boxes[i] = box
		if f.findCapTaskLocked(box.key, sp.Name) != nil || slices.Contains(names[box], sp.Name) {
			continue
		}
		if box.state != api.TaskRunning || box.stop {
			return nil, fmt.Errorf("fsm: start capbox tasks: tasks[%d]: %w: %s is %s (stopping %v)", i, ErrCapboxNotRunning, sp.Capbox, box.state, box.stop)
		}
		if n := len(f.mu.captasks[box.key]) + len(names[box]); n >= api.MaxTasksPerCapbox {
			return nil, fmt.Errorf("fsm: start capbox tasks: tasks[%d]: %w: %s has had %d tasks, the limit", i, ErrNoRoom, sp.Capbox, n)
		}
		h, seen := held[box]
		if !seen {
			for _, c := range f.mu.captasks[box.key] {
				if c.active() {
					h = h.Plus(c.demand, 1)
				}
			}
		}
		if err := checkCapTaskPorts(&sp.Pod); err != nil {
			return nil, fmt.Errorf("fsm: start capbox tasks: tasks[%d]: %s: %w", i, sp.Capbox, err)
		}
		demand := sp.Pod.Demand()
		if why := shortfall(s.groups[0].demand.Plus(h, -1), demand, 1); why != "" {
			return nil, fmt.Errorf("fsm: start capbox tasks: tasks[%d]: %w: %s: %s", i, ErrNoRoom, sp.Capbox, why)
		}
		held[box] = h.Plus(demand, 1)
		names[box] = append(names[box], sp.Name)
	}
	// Nothing below can fail.
	res := SubmitResult{Jobs: make([]SubmittedJob, len(specs))}
	for i := range specs {
		sp, box := &specs[i], boxes[i]
		if c := f.findCapTaskLocked(box.key, sp.Name); c != nil {
			res.Jobs[i] = SubmittedJob{ID: c.id(), Existing: true}
			continue
		}
		c := &captask{box: box.key, name: sp.Name, pod: sp.Pod, demand: sp.Pod.Demand(), state: api.TaskAssigned, updated: now}
		f.addCapTaskLocked(c)
		f.writeCapTask(w, c)
		f.touchGroup(f.mu.jobs.get(box.key.job).groups[0])
		f.restartJournalLocked(f.mu.nodes[box.node])
		res.Jobs[i] = SubmittedJob{ID: c.id()}
	}
	return res.encode(), nil
}

// addCapTaskLocked puts c among its capbox's tasks, kept by name.
func (f *FSM) addCapTaskLocked(c *captask) {
	ts := f.mu.captasks[c.box]
	i, _ := slices.BinarySearchFunc(ts, c.name, byCapTaskName)
	f.mu.captasks[c.box] = slices.Insert(ts, i, c)
}

func (f *FSM) stopCapTasksLocked(w writer, now int64, d *dec) ([]byte, error) {
	am := d.str()
	ids := make([]string, d.count(1))
	for i := range ids {
		ids[i] = d.str()
	}
	if err := d.done("stop capbox tasks command"); err != nil {
		return nil, err
	}
	cs := make([]*captask, len(ids))
	for i, id := range ids {
		boxID, name, ok := splitCapTaskID(id)
		var c *captask
		if ok {
			if _, box, err := f.capboxOfLocked(am, boxID); err == nil {
				c = f.findCapTaskLocked(box.key, name)
			}
		}
		if c == nil {
			return nil, fmt.Errorf("fsm: stop capbox tasks: %w: appmaster %s has no capbox task %q", ErrNotFound, am, id)
		}
		cs[i] = c
	}
	var stopping int64
	for _, c := range cs {
		if c.active() && !c.stop {
			f.stopCapTaskLocked(w, c, now)
			stopping++
		}
	}
	return encodeUvarints(0, uint64(stopping)), nil
}

// stopCapTaskLocked takes an active capbox task out of its node's target.
func (f *FSM) stopCapTaskLocked(w writer, c *captask, now int64) {
	box := f.taskLocked(c.box)
	c.stop, c.updated = true, now
	f.writeCapTask(w, c)
	f.touchGroup(f.mu.jobs.get(c.box.job).groups[0])
	f.restartJournalLocked(f.mu.nodes[box.node])
}

// stopCapTasksOfLocked tells the active tasks of capbox box to stop, with
// it.
func (f *FSM) stopCapTasksOfLocked(w writer, box taskKey, now int64) {
	for _, c := range f.mu.captasks[box] {
		if c.active() && !c.stop {
			f.stopCapTaskLocked(w, c, now)
		}
	}
}

// endCapTasksOfLocked ends the tasks of capbox box still active when it
// has ended: lost with it, or killed.
func (f *FSM) endCapTasksOfLocked(w writer, box taskKey, lost bool, now int64) {
	for _, c := range f.mu.captasks[box] {
		if !c.active() {
			continue
		}
		c.state, c.reason, c.updated = api.TaskKilled, api.ReasonStopped, now
		if lost {
			c.state, c.reason = api.TaskLost, api.ReasonLost
		}
		f.writeCapTask(w, c)
		f.touchGroup(f.mu.jobs.get(box.job).groups[0])
	}
}

// capTaskReport checks a report about a capbox task in pass 1 of an
// update, against the overlay of the reports before it; it returns the
// task and what to do, or an error for the whole command.
func (f *FSM) capTaskReport(r *report, overlay map[*captask]api.TaskState) (*captask, error) {
	boxID, name, _ := splitCapTaskID(r.id)
	k, attempt, ok := parseTaskID(boxID)
	box := f.taskLocked(k)
	var c *captask
	if ok && box != nil && attempt == 1 {
		c = f.findCapTaskLocked(k, name)
	}
	if c == nil {
		return nil, fmt.Errorf("%w: no such capbox task", ErrBadReport)
	}
	cur, seen := overlay[c]
	if !seen {
		cur = c.state
	}
	if err := r.classify(cur, r.node != box.node || !c.active() && !seen); err != nil {
		return nil, err
	}
	if r.action == actApply {
		overlay[c] = r.state
	}
	return c, nil
}

// applyCapTaskReport applies a checked report.
func (f *FSM) applyCapTaskReport(w writer, c *captask, r *report, now int64) {
	c.state, c.reason, c.exitCode, c.updated = r.state, r.reason, r.exit, now
	f.writeCapTask(w, c)
	f.touchGroup(f.mu.jobs.get(c.box.job).groups[0])
	if r.state.Done() {
		f.restartJournalLocked(f.mu.nodes[r.node])
	}
}

// capTaskKey is a capbox task's record key: its capbox's task key, then
// its name.
func capTaskKey(box taskKey, name string) []byte {
	return append(appendTaskSuffix([]byte(prefixCapTask), box), name...)
}

func (f *FSM) writeCapTask(w writer, c *captask) {
	pod, _ := json.Marshal(&c.pod) // a decoded pod always encodes
	e := enc{b: make([]byte, 0, len(pod)+32)}
	e.byte(recordVersion)
	e.byte(byte(c.state))
	e.bool(c.stop)
	e.varint(int64(c.exitCode))
	e.str(string(c.reason))
	e.varint(c.updated)
	e.bytes(pod)
	w.Set(capTaskKey(c.box, c.name), e.b)
}

// loadCapTaskLocked decodes a capbox task's record; its capbox must be
// loaded.
func (f *FSM) loadCapTaskLocked(k, v []byte) error {
	if len(k) <= len(prefixCapTask)+14 {
		return fmt.Errorf("%w: capbox task key %x", ErrCorrupt, k)
	}
	box, _ := decodeTaskSuffix(k[len(prefixCapTask) : len(prefixCapTask)+14])
	c := &captask{box: box, name: string(k[len(prefixCapTask)+14:])}
	d := dec{b: v}
	if ver := d.byte(); ver != recordVersion {
		return fmt.Errorf("%w: capbox task record version %d", ErrCorrupt, ver)
	}
	c.state = api.TaskState(d.byte())
	c.stop = d.bool()
	c.exitCode = int32(d.varint())
	c.reason = api.TaskReason(d.str())
	c.updated = d.varint()
	pod := d.bytes()
	if err := d.done("capbox task record"); err != nil {
		return err
	}
	if s := f.mu.jobs.get(box.job); s == nil || s.owner() == nil || f.taskLocked(box) == nil || !c.state.Valid() {
		return fmt.Errorf("%w: capbox task %x without its capbox, or of state %d", ErrCorrupt, k, c.state)
	}
	if err := json.Unmarshal(pod, &c.pod); err != nil {
		return fmt.Errorf("%w: capbox task %s pod: %v", ErrCorrupt, c.id(), err)
	}
	c.demand = c.pod.Demand()
	f.addCapTaskLocked(c)
	return nil
}

// capTaskStatuses returns the tasks of capbox box.
func (f *FSM) capTaskStatusesLocked(box taskKey) []api.CapTaskStatus {
	ts := f.mu.captasks[box]
	if len(ts) == 0 {
		return nil
	}
	out := make([]api.CapTaskStatus, len(ts))
	for i, c := range ts {
		out[i] = api.CapTaskStatus{ID: c.id(), Name: c.name, State: c.state, Reason: c.reason, ExitCode: c.exitCode,
			Updated: time.Unix(0, c.updated).UTC()}
	}
	return out
}
