package fsm

import (
	"bytes"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/sluicehq/sluice/api"
)

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
	// History is set for the summary of a forgotten job
	// (ForgetJobsToHistory): its Spec holds only its name, queue and
	// labels, Groups is nil and Totals counts its tasks as they ended
	// (none pending or active). Started (zero when no task was placed, or
	// not known), Ended (its last task's last report, or its submit for a
	// job none of whose tasks was placed) and FirstFailure (the task that
	// failed for good first: failed, lost, or killed but not by a cancel;
	// nil when none did) are set for a summary only.
	History      bool
	Totals       GroupStatus
	Started      time.Time
	Ended        time.Time
	FirstFailure *TaskFailure
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
	// History selects live jobs, forgotten jobs' summaries, or both
	// (the zero value).
	History HistoryScope
	// After lists only jobs with a larger ID number (for paging).
	After string
	// Limit bounds how many jobs are returned.
	Limit int
}

// HistoryScope says whether a listing holds live jobs, summaries of
// forgotten ones (JobStatus.History), or both.
type HistoryScope uint8

// History scopes.
const (
	WithHistory HistoryScope = iota // live jobs and summaries
	NoHistory                       // live jobs only
	OnlyHistory                     // summaries only
)

// Jobs returns the jobs the filter selects, live and summaries of
// forgotten ones together, by number (oldest first). Capbox sets are not
// listed (Capboxes lists them by appmaster).
func (f *FSM) Jobs(filter JobFilter) []JobStatus {
	f.mu.RLock()
	defer f.mu.RUnlock()
	after, _ := parseJobID(filter.After)
	if after == math.MaxUint64 {
		return nil
	}
	var out []JobStatus
	full := func() bool { return filter.Limit > 0 && len(out) == filter.Limit }
	hist := f.mu.history.byNum
	h := len(hist)
	if filter.History != NoHistory {
		h = f.mu.history.from(after)
	}
	// Summaries before num, in number order, until the page is full.
	summariesBefore := func(num uint64) {
		for ; h < len(hist) && hist[h].num < num && !full(); h++ {
			if filter.selectsSummary(&hist[h]) {
				out = append(out, hist[h].status())
			}
		}
	}
	if filter.History != OnlyHistory {
		for j := range f.mu.jobs.from(after + 1) {
			if summariesBefore(j.num); full() {
				return out
			}
			if j.owner() != nil || filter.Queue != "" && j.queue != filter.Queue {
				continue
			}
			if len(filter.States) > 0 && !slices.Contains(filter.States, j.state()) {
				continue
			}
			out = append(out, j.status())
			if full() {
				return out
			}
		}
	}
	summariesBefore(math.MaxUint64)
	return out
}

// NodeInfo is a node as the FSM knows it.
type NodeInfo struct {
	Spec  api.NodeSpec
	State api.NodeState
	// Drained says an operator drained the node: it is draining, or down
	// and comes back draining. DrainDeadline is when its active tasks are
	// stopped (zero: never).
	Drained       bool
	DrainDeadline time.Time
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
		out = append(out, n.info())
	}
	return out
}

// Node returns the registered node named name.
func (f *FSM) Node(name string) (NodeInfo, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if n := f.mu.nodes[name]; n != nil {
		return n.info(), true
	}
	return NodeInfo{}, false
}

// info is n as Nodes lists it.
func (n *node) info() NodeInfo {
	return NodeInfo{
		Spec: n.spec, State: n.state, Drained: n.drain, DrainDeadline: unixTime(n.drainDeadline),
		Generation: n.gen, Used: n.used, Releasing: n.releasing,
		Free:  api.Allocatable{Online: n.free(api.QoSOnline), Offline: n.free(api.QoSOffline)},
		Tasks: len(n.tasks),
	}
}

// NodeState is a node's name and state, and what the leader needs to
// enforce its drain: its deadline (zero: none, or not drained) and how
// many tasks are active on it.
type NodeState struct {
	Name          string
	State         api.NodeState
	DrainDeadline time.Time
	Tasks         int
}

// AppendNodeStates appends every node's name and state to dst, by name:
// what a liveness check needs, without copying each node's spec.
func (f *FSM) AppendNodeStates(dst []NodeState) []NodeState {
	f.mu.RLock()
	defer f.mu.RUnlock()
	for _, n := range f.sortedNodeListLocked() {
		st := NodeState{Name: n.spec.Name, State: n.state, Tasks: len(n.tasks)}
		if n.drain {
			st.DrainDeadline = unixTime(n.drainDeadline)
		}
		dst = append(dst, st)
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
	for i := range f.mu.history.byNum {
		s := &f.mu.history.byNum[i]
		dst = append(dst, JobChange{s.num, s.changed})
	}
	return dst, f.mu.complete
}

// AppendChangedJobs appends, for each job number of nums in order, that
// job's status and the index of its last change, or, for a job forgotten
// with a summary, the summary's status (History) and the index of the
// command that forgot it; a job that does not exist, or whose summary is
// gone, gets a zero ChangedJob.
func (f *FSM) AppendChangedJobs(dst []ChangedJob, nums []uint64) []ChangedJob {
	f.mu.RLock()
	defer f.mu.RUnlock()
	for _, num := range nums {
		if j := f.mu.jobs.get(num); j != nil && !j.forgotten {
			dst = append(dst, ChangedJob{Changed: j.changed, JobStatus: j.status()})
		} else if i, ok := f.mu.history.find(num); ok {
			s := &f.mu.history.byNum[i]
			dst = append(dst, ChangedJob{Changed: s.changed, JobStatus: s.status()})
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
			fmt.Fprintf(&b, "  group %d count=%d next=%d requeue=%v active=%d ok=%d failed=%d killed=%d demand=%+v ports=%v static=%v pendingIndex=%v started=%d\n",
				g.idx, g.count, g.next, g.requeue, g.active, g.succeeded, g.failed, g.killed, g.demand, g.ports, g.static, pend, g.started)
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
		fmt.Fprintf(&b, "node %s %s drain=%v/%d gen=%d used=%+v releasing=%+v cached=%+v distinct=%d tasks=%v", n.spec.Name, n.state, n.drain, n.drainDeadline, n.gen, n.used, n.releasing, n.cached, n.distinctJobs, tk)
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
		fmt.Fprintf(&b, "queue %q used=%+v tasks=%d\n", q, f.mu.queueUsed[q], f.mu.queueTasks[q])
	}
	for _, q := range slices.Sorted(maps.Keys(f.mu.queues)) {
		fmt.Fprintf(&b, "queue %q settings=%+v\n", q, f.mu.queues[q])
	}
	for _, s := range f.mu.history.byNum {
		st := s.status()
		fmt.Fprintf(&b, "summary j%d ended=%d state=%s queue=%s name=%q labels=%v submitted=%v started=%v ended=%v totals=%+v",
			s.num, s.ended, s.state, s.queue, st.Spec.Name, st.Spec.Labels, st.Submitted, st.Started, st.Ended, st.Totals)
		if st.FirstFailure != nil {
			fmt.Fprintf(&b, " failure=%+v", *st.FirstFailure)
		}
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "history by end %v\n", f.mu.history.byEnd)
	for _, k := range slices.Sorted(maps.Keys(f.mu.idem)) {
		fmt.Fprintf(&b, "idem %s j%d\n", k, f.mu.idem[k])
	}
	return b.String()
}

// TaskDemand is what one task asks for, and the group it belongs to.
type TaskDemand struct {
	Group  GroupKey
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
