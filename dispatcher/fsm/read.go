package fsm

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/dispatcher/placement"
	"github.com/sluicehq/sluice/raftkv"
)

// Load replaces the FSM's state with the one stored in r and rebuilds the
// in-memory indexes: what tasks hold on each node, active counts per group,
// pending groups per queue. raftkv calls it at Open and after a snapshot
// restore.
// Subscribers are then told (ChangeReset), whether it succeeded or not.
func (f *FSM) Load(r raftkv.Reader) error {
	err := f.loadLocking(r)
	f.publishControl(ChangeReset, f.Applied())
	return err
}

func (f *FSM) loadLocking(r raftkv.Reader) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.resetLocked()
	if err := f.loadLocked(r); err != nil {
		f.resetLocked()
		return fmt.Errorf("fsm: load: %w", err)
	}
	return nil
}

func getUint64(r raftkv.Reader, key []byte) (uint64, bool, error) {
	v, err := r.Get(key)
	if errors.Is(err, raftkv.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	if len(v) != 8 {
		return 0, false, fmt.Errorf("%w: %s holds %d bytes", ErrCorrupt, key, len(v))
	}
	return binary.BigEndian.Uint64(v), true, nil
}

// checkJobNumLocked rejects the record of a job (or capbox set) numbered
// outside 1 to the job sequence: the table of jobs is indexed by number.
func (f *FSM) checkJobNumLocked(what string, num uint64) error {
	if num == 0 || num >= f.mu.nextJob {
		return fmt.Errorf("%w: %s record numbered %d, outside 1..%d", ErrCorrupt, what, num, f.mu.nextJob-1)
	}
	return nil
}

func (f *FSM) loadLocked(r raftkv.Reader) error {
	var err error
	var ok bool
	if f.mu.nextJob, ok, err = getUint64(r, keyJobSeq); err != nil {
		return err
	} else if !ok {
		f.mu.nextJob = 1
	}
	if f.mu.planTerm, _, err = getUint64(r, keyPlanTerm); err != nil {
		return err
	}
	if f.mu.nextSlot, ok, err = getUint64(r, keySlotSeq); err != nil {
		return err
	} else if !ok {
		f.mu.nextSlot = 1
	}
	if f.mu.applied, _, err = getUint64(r, keyApplied); err != nil {
		return err
	}
	f.mu.complete = f.mu.applied // raftkv stores whole Readies
	sd := newSpecDecoder(maxSlabChunk)
	err = r.Scan([]byte(prefixSubmit), prefixEnd(prefixSubmit), func(k, v []byte) error {
		if len(k) != len(prefixSubmit)+8 {
			return fmt.Errorf("%w: submit key %q", ErrCorrupt, k)
		}
		sub := &submitRecord{first: binary.BigEndian.Uint64(k[len(prefixSubmit):])}
		return decodeSubmit(sd, sub.first, v, func(j *job) error {
			if err := f.checkJobNumLocked("job", j.num); err != nil {
				return err
			}
			if f.mu.jobs.get(j.num) != nil {
				return fmt.Errorf("%w: job %d in two submit records", ErrCorrupt, j.num)
			}
			j.sub = sub
			sub.count++
			sub.live++
			f.mu.jobs.put(j)
			return nil
		})
	})
	if err != nil {
		return err
	}
	// A job's own record (written when it changes after its submit)
	// supersedes its submit record's.
	err = r.Scan([]byte(prefixJob), prefixEnd(prefixJob), func(k, v []byte) error {
		if len(k) != len(prefixJob)+8 {
			return fmt.Errorf("%w: job key %q", ErrCorrupt, k)
		}
		num := binary.BigEndian.Uint64(k[len(prefixJob):])
		if err := f.checkJobNumLocked("job", num); err != nil {
			return err
		}
		j, err := decodeJob(sd, num, v)
		if err != nil {
			return err
		}
		if old := f.mu.jobs.get(num); old != nil {
			j.sub = old.sub
		}
		f.mu.jobs.put(j)
		return nil
	})
	if err != nil {
		return err
	}
	// The jobs forgotten while their submit record held others.
	err = r.Scan([]byte(prefixForgotten), prefixEnd(prefixForgotten), func(k, v []byte) error {
		if len(k) != len(prefixForgotten)+8 || len(v) != 0 {
			return fmt.Errorf("%w: forgotten-job record %q", ErrCorrupt, k)
		}
		num := binary.BigEndian.Uint64(k[len(prefixForgotten):])
		j := f.mu.jobs.get(num)
		if j == nil || j.sub == nil {
			return fmt.Errorf("%w: job %d forgotten outside any submit record", ErrCorrupt, num)
		}
		if j.sub.live--; j.sub.live == 0 {
			return fmt.Errorf("%w: submit record of job %d kept with none of its jobs", ErrCorrupt, j.sub.first)
		}
		j.sub.marked = true
		f.mu.jobs.remove(num)
		return nil
	})
	if err != nil {
		return err
	}
	// Capbox sets after the jobs: their appmasters must be loaded.
	err = r.Scan([]byte(prefixCapboxSet), prefixEnd(prefixCapboxSet), func(k, v []byte) error {
		if len(k) != len(prefixCapboxSet)+8 {
			return fmt.Errorf("%w: capbox set key %q", ErrCorrupt, k)
		}
		num := binary.BigEndian.Uint64(k[len(prefixCapboxSet):])
		if err := f.checkJobNumLocked("capbox set", num); err != nil {
			return err
		}
		return f.loadCapboxSetLocked(num, v)
	})
	if err != nil {
		return err
	}
	err = r.Scan([]byte(prefixGroup), prefixEnd(prefixGroup), func(k, v []byte) error {
		k = k[len(prefixGroup):]
		if len(k) != 10 {
			return fmt.Errorf("%w: group key %q", ErrCorrupt, k)
		}
		j := f.mu.jobs.get(binary.BigEndian.Uint64(k))
		gi := int(binary.BigEndian.Uint16(k[8:]))
		if j == nil || gi >= len(j.groups) {
			return fmt.Errorf("%w: group %x without its job", ErrCorrupt, k)
		}
		return decodeGroupInto(j.groups[gi], v)
	})
	if err != nil {
		return err
	}
	err = r.Scan([]byte(prefixNode), prefixEnd(prefixNode), func(k, v []byte) error {
		n, err := decodeNode(v)
		if err != nil {
			return err
		}
		if n.spec.Name != string(k[len(prefixNode):]) {
			return fmt.Errorf("%w: node record %q under key %q", ErrCorrupt, n.spec.Name, k)
		}
		f.mu.nodes[n.spec.Name] = n
		f.mu.nodeList = append(f.mu.nodeList, n)
		return nil
	})
	if err != nil {
		return err
	}
	slices.SortFunc(f.mu.nodeList, byName)
	err = r.Scan([]byte(prefixGen), prefixEnd(prefixGen), func(k, v []byte) error {
		n := f.mu.nodes[string(k[len(prefixGen):])]
		if n == nil {
			return fmt.Errorf("%w: target generation %q without its node", ErrCorrupt, k)
		}
		if len(v) != 8 {
			return fmt.Errorf("%w: target generation %q of %d bytes", ErrCorrupt, k, len(v))
		}
		n.gen = binary.BigEndian.Uint64(v)
		n.journalFrom = n.gen
		return nil
	})
	if err != nil {
		return err
	}
	err = r.Scan([]byte(prefixTask), prefixEnd(prefixTask), func(k, v []byte) error {
		key, ok := decodeTaskSuffix(k[len(prefixTask):])
		if !ok {
			return fmt.Errorf("%w: task key %x", ErrCorrupt, k)
		}
		ts, err := decodeTasks(key, v)
		if err != nil {
			return err
		}
		j := f.mu.jobs.get(key.job)
		if j == nil || int(key.group) >= len(j.groups) {
			return fmt.Errorf("%w: task %s without its job", ErrCorrupt, taskID(key, ts[0].attempt))
		}
		g := j.groups[key.group]
		// Records come in key order, and placed tasks are a prefix of
		// their group's indexes: each record but a group's last is full.
		if int64(key.index) != int64(len(g.tasks)) {
			return fmt.Errorf("%w: task %s follows %d tasks of its group", ErrCorrupt, taskID(key, ts[0].attempt), len(g.tasks))
		}
		for _, t := range ts {
			g.tasks = append(g.tasks, t)
			if !t.active() {
				continue
			}
			n := f.mu.nodes[t.node]
			if n == nil {
				return fmt.Errorf("%w: task %s on unknown node %q", ErrCorrupt, taskID(t.key, t.attempt), t.node)
			}
			n.addTask(t)
			n.addJobTasks(j, 1)
			f.holdLocked(n, j, g, 1)
			if t.ports != nil {
				if err := n.holdPorts(g, t); err != nil {
					return err
				}
			}
			if t.stop {
				n.release(j.qos, g.demand, 1)
			}
			g.active++
		}
		return nil
	})
	if err != nil {
		return err
	}
	err = r.Scan([]byte(prefixCapTask), prefixEnd(prefixCapTask), f.loadCapTaskLocked)
	if err != nil {
		return err
	}
	err = r.Scan([]byte(prefixSlot), prefixEnd(prefixSlot), func(k, v []byte) error {
		name, id, ok := strings.Cut(string(k[len(prefixSlot):]), "\x00")
		n := f.mu.nodes[name]
		if !ok || n == nil {
			return fmt.Errorf("%w: slot key %q without its node", ErrCorrupt, k)
		}
		s, err := decodeSlot(id, n, v)
		if err != nil {
			return err
		}
		f.addSlotLocked(s)
		return nil
	})
	if err != nil {
		return err
	}
	err = r.Scan([]byte(prefixIdem), prefixEnd(prefixIdem), func(k, v []byte) error {
		if len(v) != 8 {
			return fmt.Errorf("%w: idempotency record %q", ErrCorrupt, k)
		}
		key, num := string(k[len(prefixIdem):]), binary.BigEndian.Uint64(v)
		j := f.mu.jobs.get(num)
		if j == nil {
			return fmt.Errorf("%w: idempotency key %q of job %d, which is not there", ErrCorrupt, key, num)
		}
		f.mu.idem[key], j.idem = num, key
		return nil
	})
	if err != nil {
		return err
	}
	for j := range f.mu.jobs.all() {
		j.changed = f.mu.applied
		for _, g := range j.groups {
			f.syncPendingLocked(g)
		}
	}
	f.loadFinishedLocked()
	return nil
}

// Applied returns the index of the last command applied.
func (f *FSM) Applied() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.mu.applied
}

// GroupStatus counts a task group's tasks by where they are. Pending +
// Active + Succeeded + Failed + Killed == Count.
type GroupStatus struct {
	Name      string
	Count     int64
	Pending   int64 // never placed, or waiting for a retry
	Retrying  int64 // of Pending, those waiting for a retry
	Active    int64 // assigned, starting or running on a node
	Succeeded int64
	Failed    int64 // failed or lost, with no attempt left
	Killed    int64 // killed, or dropped by a cancel
}

// JobStatus is a job as the FSM knows it.
type JobStatus struct {
	ID        string
	State     JobState
	Submitted time.Time
	// Spec is the job's spec with defaults applied. It shares memory with
	// the FSM: do not modify it.
	Spec   api.JobSpec
	Groups []GroupStatus
	// Appmaster is, for a capbox set, the ID of the appmaster that asked
	// for it.
	Appmaster string
}

func (j *job) status() JobStatus {
	s := JobStatus{ID: j.id, State: j.state(), Submitted: time.Unix(0, j.submitted).UTC(), Spec: *j.specOf()}
	if j.owner() != nil {
		s.Appmaster = j.owner().id
	}
	s.Groups = make([]GroupStatus, len(j.groups))
	for i, g := range j.groups {
		s.Groups[i] = GroupStatus{
			Name: g.name, Count: g.count, Pending: g.pending(), Retrying: int64(len(g.requeue)),
			Active: g.active, Succeeded: g.succeeded, Failed: g.failed, Killed: g.killed,
		}
	}
	return s
}

// Job returns the status of the job with the given ID.
func (f *FSM) Job(id string) (JobStatus, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	num, ok := parseJobID(id)
	j := f.mu.jobs.get(num)
	if !ok || j == nil {
		return JobStatus{}, false
	}
	return j.status(), true
}

// JobFacts are the facts of a job a job token is derived from and checked
// against: the same on every replica.
type JobFacts struct {
	// Submitted is the job's submit time (unix nanoseconds, the submit
	// command's clock).
	Submitted int64
	// Appmaster is set for an appmaster job (api.JobSpec.Appmaster), and
	// never for a capbox set.
	Appmaster bool
	// Ended is set once the job has ended: succeeded, failed or
	// cancelled.
	Ended bool
}

// JobFacts returns the facts of the job with the given ID; false for an
// unknown (or forgotten) job. It allocates nothing.
func (f *FSM) JobFacts(id string) (JobFacts, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	num, ok := parseJobID(id)
	j := f.mu.jobs.get(num)
	if !ok || j == nil {
		return JobFacts{}, false
	}
	return j.facts(), true
}

func (j *job) facts() JobFacts {
	st := j.state()
	return JobFacts{Submitted: j.submitted, Appmaster: j.appmaster && j.owner() == nil,
		Ended: st == JobSucceeded || st == JobFailed || st == JobCancelled}
}

// AppmasterPods calls fn, under one read lock, for each pod of pods (a
// node's target) that runs a task of an appmaster job's own task groups
// (not a capbox's placeholder, nor a task in a capbox) whose job has not
// ended, with the pod's index and its job's facts.
func (f *FSM) AppmasterPods(pods []api.TargetPod, fn func(i int, job JobFacts)) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var (
		last  string
		facts JobFacts
		ok    bool
	)
	for i := range pods {
		p := &pods[i]
		if p.Capbox || p.InCapbox != "" {
			continue
		}
		if p.Job != last || i == 0 {
			last, ok = p.Job, false
			if num, valid := parseJobID(p.Job); valid {
				if j := f.mu.jobs.get(num); j != nil {
					facts, ok = j.facts(), true
				}
			}
		}
		if ok && facts.Appmaster && !facts.Ended {
			fn(i, facts)
		}
	}
}

// JobFilter selects jobs. Zero fields select everything.
type JobFilter struct {
	Queue  string
	States []JobState
	// After lists only jobs with a larger ID number (for paging).
	After string
	// Limit bounds how many jobs are returned.
	Limit int
}

// Jobs returns the jobs the filter selects, oldest first. Capbox sets are
// not listed (Capboxes lists them by appmaster).
func (f *FSM) Jobs(filter JobFilter) []JobStatus {
	f.mu.RLock()
	defer f.mu.RUnlock()
	after, _ := parseJobID(filter.After)
	if after == math.MaxUint64 {
		return nil
	}
	var out []JobStatus
	for j := range f.mu.jobs.from(after + 1) {
		if j.owner() != nil || filter.Queue != "" && j.queue != filter.Queue {
			continue
		}
		if len(filter.States) > 0 && !slices.Contains(filter.States, j.state()) {
			continue
		}
		out = append(out, j.status())
		if filter.Limit > 0 && len(out) == filter.Limit {
			break
		}
	}
	return out
}

// NodeInfo is a node as the FSM knows it.
type NodeInfo struct {
	Spec  api.NodeSpec
	State api.NodeState
	// Generation is the node's target generation.
	Generation uint64
	// Used is what the node's active tasks hold per tier; Free what is left
	// of the tier's allocatable (negative when a re-registration shrank it).
	Used, Free api.Allocatable
	// Releasing is what of Used tasks told to stop still hold.
	Releasing api.Allocatable
	Tasks     int
}

// Nodes returns every registered node, by name.
func (f *FSM) Nodes() []NodeInfo {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]NodeInfo, 0, len(f.mu.nodes))
	for _, n := range f.sortedNodeListLocked() {
		out = append(out, NodeInfo{
			Spec: n.spec, State: n.state, Generation: n.gen, Used: n.used, Releasing: n.releasing,
			Free:  api.Allocatable{Online: n.free(api.QoSOnline), Offline: n.free(api.QoSOffline)},
			Tasks: len(n.tasks),
		})
	}
	return out
}

// NodeState is a node's name and state.
type NodeState struct {
	Name  string
	State api.NodeState
}

// AppendNodeStates appends every node's name and state to dst, by name:
// what a liveness check needs, without copying each node's spec.
func (f *FSM) AppendNodeStates(dst []NodeState) []NodeState {
	f.mu.RLock()
	defer f.mu.RUnlock()
	for _, n := range f.sortedNodeListLocked() {
		dst = append(dst, NodeState{Name: n.spec.Name, State: n.state})
	}
	return dst
}

// TaskInfo is a task placed at least once, as of its current attempt.
type TaskInfo struct {
	ID      string // the current attempt's task ID
	Group   string
	Index   int64
	Attempt int64
	State   api.TaskState
	Node    string
	// Host is where the task's Ports are reached: the node's host IP, or
	// when it registered none the host of its address ("" when it has
	// neither, or is gone); set by JobTasks.
	Host string
	// Ports are the attempt's ports as placed, in its pod's order; set
	// by JobTasks.
	Ports    []api.Port
	Reason   api.TaskReason
	ExitCode int32
	Updated  time.Time
	// Container is the name of the pod's first container (set by Task).
	Container string
}

// JobTasks returns up to limit (0: all) of a job's placed tasks in (group,
// index) order, starting after the task whose ID is after (any attempt of
// it; "" starts at the first). ok is false for an unknown job.
func (f *FSM) JobTasks(id, after string, limit int) (tasks []TaskInfo, ok bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	num, ok := parseJobID(id)
	j := f.mu.jobs.get(num)
	if !ok || j == nil {
		return nil, false
	}
	// Groups in order, and each group's tasks by index: key order.
	var from taskKey
	if k, _, ok := parseTaskID(after); ok && k.job == num {
		from = taskKey{num, k.group, k.index + 1}
		if k.index == math.MaxUint32 {
			from = taskKey{num, k.group + 1, 0}
		}
	}
	var ts []*task
	for _, g := range j.groups[min(int(from.group), len(j.groups)):] {
		gt := g.tasks
		if g.idx == from.group {
			gt = gt[min(int64(from.index), int64(len(gt))):]
		}
		if limit > 0 && len(ts)+len(gt) >= limit {
			ts = append(ts, gt[:limit-len(ts)]...)
			break
		}
		ts = append(ts, gt...)
	}
	tasks = make([]TaskInfo, len(ts))
	var lastNode, lastHost string
	for i, t := range ts {
		if t.node != lastNode {
			lastNode, lastHost = t.node, ""
			if n := f.mu.nodes[t.node]; n != nil {
				lastHost = listingHost(&n.spec)
			}
		}
		tasks[i] = TaskInfo{
			ID: taskID(t.key, t.attempt), Group: j.groups[t.key.group].name, Index: int64(t.key.index),
			Attempt: int64(t.attempt), State: t.state, Node: t.node, Host: lastHost, Reason: t.reason, ExitCode: t.exitCode,
			Updated: time.Unix(0, t.updated).UTC(),
		}
		if t.ports != nil {
			tasks[i].Ports = apiPorts(&j.specOf().Tasks[t.key.group].Pod, t.ports)
		}
	}
	return tasks, true
}

// JobChange is a job's number and the index of the command that last
// changed its counters or state (the applied index for a job unchanged
// since a Load).
type JobChange struct {
	Job, Index uint64
}

// AppendJobChanges appends every job's JobChange (capbox sets included),
// by number, and returns them with the last index all of whose commands
// are applied: where a view of job changes starts from.
func (f *FSM) AppendJobChanges(dst []JobChange) ([]JobChange, uint64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	for j := range f.mu.jobs.all() {
		dst = append(dst, JobChange{j.num, j.changed})
	}
	return dst, f.mu.complete
}

// AppendChangedJobs appends, for each job number of nums in order, that
// job's status and the index of its last change; a job that does not
// exist (or was forgotten) gets a zero ChangedJob.
func (f *FSM) AppendChangedJobs(dst []ChangedJob, nums []uint64) []ChangedJob {
	f.mu.RLock()
	defer f.mu.RUnlock()
	for _, num := range nums {
		if j := f.mu.jobs.get(num); j != nil && !j.forgotten {
			dst = append(dst, ChangedJob{Changed: j.changed, JobStatus: j.status()})
		} else {
			dst = append(dst, ChangedJob{})
		}
	}
	return dst
}

// ChangedJob is a job's status with the index of its last change.
type ChangedJob struct {
	Changed uint64
	JobStatus
}

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

// NodeTargetSince returns a node's target as the changes since the target
// of generation known, when the node's journal reaches back to it: the
// pods added (or possibly changed), by task ID order, and the task IDs of
// those removed (which may name pods the node no longer has). Otherwise,
// and for known 0, it returns the whole target, as NodeTarget, with whole
// set. The work is in proportion to the changes, not to the node's pods.
func (f *FSM) NodeTargetSince(name string, known uint64) (gen uint64, pods []api.TargetPod, removed []string, whole, ok bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	n := f.mu.nodes[name]
	if n == nil {
		return 0, nil, nil, false, false
	}
	if known == 0 || known < n.journalFrom || known > n.gen {
		return n.gen, f.targetLocked(n), nil, true, true
	}
	i := len(n.journal)
	for i > 0 && n.journal[i-1].gen > known {
		i--
	}
	changes := slices.Clone(n.journal[i:])
	slices.SortFunc(changes, func(a, b targetChange) int {
		return cmp.Or(cmpKey(a.key, b.key), cmp.Compare(a.attempt, b.attempt))
	})
	changes = slices.CompactFunc(changes, func(a, b targetChange) bool { return a.key == b.key && a.attempt == b.attempt })
	pods = make([]api.TargetPod, 0, len(changes)) // most changes add a pod
	for _, c := range changes {
		if t := f.taskLocked(c.key); t != nil && n.holds(t) && t.attempt == c.attempt && !t.stop {
			pods = f.appendPodsLocked(pods, t)
		} else {
			removed = append(removed, taskID(c.key, c.attempt))
		}
	}
	return n.gen, pods, removed, false, true
}

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

// RoundInput is a round's placement input that one reader, the leader's
// scheduling loop, keeps from round to round: ReadRoundInput reads again
// only the nodes whose part changed since the last read (and those with
// cached slots, whose TTLs run out), not every node of a large cluster
// every round. The zero value is ready to use. A RoundInput read from
// another FSM than before, or after another RoundInput was read, is read
// whole.
type RoundInput struct {
	// Input is the input as of the last read.
	placement.Input
	// Modified, set by the reader, says it changed the Input's nodes'
	// Free in place (the dispatcher's offline estimate lowers it): the
	// next read puts back what the FSM says for every node.
	Modified bool
	f        *FSM
	epoch    uint64
	// free is each input node's Free as read.
	free []api.Allocatable
	// timed are the nodes with cached slots, read every round; spare is
	// the memory of the list before.
	timed, spare []*node
}

// ReadRoundInput brings r up to date as PlacementInput(now, limit) would
// build it, and returns its Input. The Input is Kept (placement.Input)
// after a read of the changed nodes that follows Placed, with their
// positions appended to Changed, so that it lists the changes since the
// input a Placer last saw. After a read of every node it is not Kept
// until Placed.
func (f *FSM) ReadRoundInput(r *RoundInput, now time.Time, limit int64) *placement.Input {
	f.mu.Lock() // the changed nodes' marks are cleared
	defer f.mu.Unlock()
	in := &r.Input
	nowNS := now.UnixNano()
	f.readGroupsLocked(in, nowNS, limit)
	changed := f.mu.inputChanged
	if r.f != f || r.epoch != f.mu.inputEpoch || f.mu.inputReader != r {
		r.f, r.epoch, f.mu.inputReader = f, f.mu.inputEpoch, r
		clear(r.timed)
		in.Kept, in.Changed = false, in.Changed[:0]
		in.Nodes, r.timed = slices.Grow(in.Nodes[:0], len(f.mu.nodeList)), r.timed[:0]
		r.free = slices.Grow(r.free[:0], len(f.mu.nodeList))
		for _, n := range f.sortedNodeListLocked() {
			n.inputPos, n.inputTimed = -1, false
			if n.state != api.NodeReady {
				continue
			}
			n.inputPos = int32(len(in.Nodes))
			in.Nodes = append(in.Nodes, placement.Node{})
			r.free = append(r.free, api.Allocatable{})
			f.readRoundNodeLocked(r, n, nowNS)
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
		r.timed = r.spare[:0]
		for _, n := range timed {
			n.inputTimed = false
		}
		for _, n := range timed {
			f.readRoundNodeLocked(r, n, nowNS)
		}
		clear(timed)
		r.spare = timed[:0]
		for _, n := range changed {
			if n.inputPos >= 0 {
				f.readRoundNodeLocked(r, n, nowNS)
			}
		}
		if len(in.Changed) > len(in.Nodes) {
			// Read many times since a round placed it: bound the list.
			in.Kept, in.Changed = false, in.Changed[:0]
		}
	}
	for _, n := range changed {
		n.inputChanged = false
	}
	clear(changed)
	f.mu.inputChanged = changed[:0]
	r.Modified = false
	f.readQueuesLocked(in)
	return in
}

// Placed says that a Placer has seen r's Input: the next reads list
// their changes since, and the Input is Kept.
func (r *RoundInput) Placed() {
	r.Kept, r.Changed = true, r.Changed[:0]
}

// readRoundNodeLocked reads n into its place in r, and keeps it among
// the nodes read every round if it has cached slots.
func (f *FSM) readRoundNodeLocked(r *RoundInput, n *node, nowNS int64) {
	pn := &r.Nodes[n.inputPos]
	f.readNodeLocked(pn, n, nowNS)
	r.free[n.inputPos] = pn.Free
	if r.Kept {
		r.Changed = append(r.Changed, n.inputPos)
	}
	if len(n.slots) > 0 && !n.inputTimed {
		n.inputTimed = true
		r.timed = append(r.timed, n)
	}
}

// readGroupsLocked sets in's groups: those with tasks eligible at nowNS,
// highest priority first, then oldest job, at most limit tasks in all (0:
// no limit).
func (f *FSM) readGroupsLocked(in *placement.Input, nowNS int64, limit int64) {
	// The groups are ranked on copies of their keys: comparing through
	// each group's job, scattered in memory, made the sort most of a
	// round's read once a backlog of small jobs (a group each) built.
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

// dump writes the whole state, indexes included, in a canonical order, so
// that two FSMs can be compared (a live one and one loaded from its store).
func (f *FSM) dump() string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var b bytes.Buffer
	fmt.Fprintf(&b, "nextJob %d planTerm %d applied %d nextSlot %d\n", f.mu.nextJob, f.mu.planTerm, f.mu.applied, f.mu.nextSlot)
	for j := range f.mu.jobs.all() {
		fmt.Fprintf(&b, "job %s %s cancelled=%v submitted=%d queue=%s sets=%d idem=%q ended=%v", j.id, j.state(), j.cancelled, j.submitted, j.queue, len(j.sets()), j.idem, j.ended != 0)
		if j.sub != nil {
			fmt.Fprintf(&b, " submit=%d/%d/%d/%v", j.sub.first, j.sub.count, j.sub.live, j.sub.marked)
		}
		if j.owner() != nil {
			fmt.Fprintf(&b, " owner=%s gang=%v request=%s", j.owner().id, j.gang, j.link.request)
		}
		b.WriteByte('\n')
		for _, g := range j.groups {
			pend := g.pendingAt != 0
			fmt.Fprintf(&b, "  group %d count=%d next=%d requeue=%v active=%d ok=%d failed=%d killed=%d demand=%+v ports=%v static=%v pendingIndex=%v\n",
				g.idx, g.count, g.next, g.requeue, g.active, g.succeeded, g.failed, g.killed, g.demand, g.ports, g.static, pend)
		}
	}
	f.eachTaskLocked(func(t *task) {
		fmt.Fprintf(&b, "task %s %v node=%s stop=%v preempted=%v closed=%v exit=%d reason=%s updated=%d ports=%v\n",
			taskID(t.key, t.attempt), t.state, t.node, t.stop, t.preempted, t.closed, t.exitCode, t.reason, t.updated, t.ports)
		for _, c := range f.mu.captasks[t.key] {
			fmt.Fprintf(&b, "  captask %s %v stop=%v exit=%d reason=%s updated=%d demand=%+v\n",
				c.id(), c.state, c.stop, c.exitCode, c.reason, c.updated, c.demand)
		}
	})
	for _, n := range f.sortedNodeListLocked() {
		tk := make([]taskKey, 0, len(n.tasks))
		for _, t := range n.tasks {
			tk = append(tk, t.key)
		}
		slices.SortFunc(tk, cmpKey)
		jobs := make([]uint64, 0, len(n.jobs))
		for num := range n.jobs {
			jobs = append(jobs, num)
		}
		slices.Sort(jobs)
		fmt.Fprintf(&b, "node %s %s gen=%d used=%+v releasing=%+v cached=%+v distinct=%d tasks=%v", n.spec.Name, n.state, n.gen, n.used, n.releasing, n.cached, n.distinctJobs, tk)
		for _, s := range n.slots {
			fmt.Fprintf(&b, " slot=%s/%s/%+v/%d", s.id, s.qos, s.shape, s.expires)
		}
		for _, num := range jobs {
			fmt.Fprintf(&b, " j%d:%d", num, n.jobs[num])
		}
		if n.ports != nil {
			fmt.Fprintf(&b, " ports=%v inRange=%d", n.portsInUse(), n.ports.inRange)
		}
		b.WriteByte('\n')
	}
	for _, q := range slices.Sorted(maps.Keys(f.mu.queueUsed)) {
		fmt.Fprintf(&b, "queue %q used=%+v\n", q, f.mu.queueUsed[q])
	}
	for _, k := range slices.Sorted(maps.Keys(f.mu.idem)) {
		fmt.Fprintf(&b, "idem %s j%d\n", k, f.mu.idem[k])
	}
	return b.String()
}

// TaskDemand is what one task asks for, and the group it belongs to.
type TaskDemand struct {
	Group  placement.GroupKey
	Demand api.Capacity
	QoS    api.QoS
	// OK is false for an ID that names no task placed at least once.
	OK bool
}

// TaskDemands returns the demand of each task ids names (any attempt of
// it), in order, under one read of the state.
func (f *FSM) TaskDemands(ids []string) []TaskDemand {
	out := make([]TaskDemand, len(ids))
	f.mu.RLock()
	defer f.mu.RUnlock()
	for i, id := range ids {
		k, _, ok := parseTaskID(id)
		if !ok || f.taskLocked(k) == nil {
			continue
		}
		j := f.mu.jobs.get(k.job)
		g := j.groups[k.group]
		out[i] = TaskDemand{Group: g.key(), Demand: g.demand, QoS: j.qos, OK: true}
	}
	return out
}

// ForeignReport returns the index of the first of a node's reports that
// names the current attempt of a task placed on another node (of a capbox
// task: whose capbox is on another node), and true; or false when none
// does. Reports of other attempts, of unknown tasks and with malformed IDs
// are not foreign: an update command finds them stale or bad.
func (f *FSM) ForeignReport(node string, reports []api.TaskReport) (int, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	for i := range reports {
		id := reports[i].TaskID
		boxID, _, inBox := splitCapTaskID(id)
		if inBox {
			id = boxID
		}
		k, attempt, ok := parseTaskID(id)
		if !ok {
			continue
		}
		if t := f.taskLocked(k); t != nil && t.attempt == attempt && attempt != 0 && t.node != node {
			return i, true
		}
	}
	return 0, false
}

// Task returns the current attempt of the task that id names: any attempt's
// ID of it finds it, and a capbox task's ID finds that task (on its
// capbox's node). ok is false for a malformed ID or a task never placed.
func (f *FSM) Task(id string) (TaskInfo, bool) {
	boxID, name, inBox := splitCapTaskID(id)
	if inBox {
		id = boxID
	}
	k, _, ok := parseTaskID(id)
	if !ok {
		return TaskInfo{}, false
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	t, j := f.taskLocked(k), f.mu.jobs.get(k.job)
	if t == nil || t.attempt == 0 {
		return TaskInfo{}, false
	}
	g := j.groups[k.group]
	info := TaskInfo{
		ID: taskID(t.key, t.attempt), Group: g.name, Index: int64(k.index),
		Attempt: int64(t.attempt), State: t.state, Node: t.node, Reason: t.reason, ExitCode: t.exitCode,
		Updated: time.Unix(0, t.updated).UTC(), Container: g.podSpec().Containers[0].Name,
	}
	if inBox {
		c := f.findCapTaskLocked(k, name)
		if c == nil || j.owner() == nil {
			return TaskInfo{}, false
		}
		info.ID, info.Attempt, info.State, info.Reason, info.ExitCode = c.id(), 1, c.state, c.reason, c.exitCode
		info.Updated, info.Container = time.Unix(0, c.updated).UTC(), c.pod.Containers[0].Name
	}
	return info, true
}
