package fsm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"unique"

	"github.com/sluicehq/sluice/api"
)

// JobState is where a job is, rolled up from its tasks.
type JobState uint8

// Job states.
const (
	JobPending   JobState = iota // no task has been placed yet
	JobRunning                   // some task is placed, running or done, and some is not done
	JobSucceeded                 // every task succeeded
	JobFailed                    // every task is done and at least one failed for good
	JobCancelled                 // cancelled by its user
)

var jobStateNames = []string{"pending", "running", "succeeded", "failed", "cancelled"}

func (s JobState) String() string {
	if int(s) < len(jobStateNames) {
		return jobStateNames[s]
	}
	return fmt.Sprintf("JobState(%d)", uint8(s))
}

// job is a submitted job. Its groups are in spec order. A job, its groups
// and its spec's encoding are allocated together with the other jobs of its
// submit command (see submitLocked): the memory is freed only when every
// job of the command is dropped.
type job struct {
	num       uint64
	id        string
	submitted int64 // unix nanoseconds, from the submit command
	cancelled bool
	gang      bool
	jobFields
	// specEnc, when not "", is the job's spec (defaults applied) as its
	// submit command encoded it, a substring of the command's shared copy:
	// apply copies out jobFields and leaves the rest encoded, since only the
	// leader's rounds and node targets and reads of the spec need it. spec
	// is it decoded, on first use (specOf). When specEnc is "", spec is set
	// when the job is made. The spec is never modified.
	specEnc string
	spec    atomic.Pointer[api.JobSpec]
	groups  []*group
	// changed is the index of the last command that changed the job's
	// counters or state (the applied index at Load).
	changed uint64
	// link ties capbox sets (capbox.go) to their appmaster; nil for a job
	// that is neither.
	link *capboxLink
	// idem is the job's idempotency key as FSM.mu.idem holds it ("":
	// none); sub is the submit record that holds its spec (nil for a
	// capbox set).
	idem string
	sub  *submitRecord
	// ended is when the job finished (see finished), by the clock of the
	// command that finished it; after a Load, its last task's last
	// change. 0 while it has not.
	ended int64
	// forgotten is set when ForgetJobs removes the job.
	forgotten bool
}

// submitRecord is a submit command's record (prefixSubmit): the jobs
// numbered first to first+count-1, of which live are not yet forgotten.
// Its key goes with its last job (count is then 0); until then a
// forgotten job of it has a marker (prefixForgotten), so that Load does
// not bring it back, and marked is set.
type submitRecord struct {
	first       uint64
	count, live int
	marked      bool
}

// capboxLink is an appmaster's capbox sets, oldest first; or a capbox set's
// appmaster (owner) and its request's JSON (defaults applied).
type capboxLink struct {
	sets    []*job
	owner   *job
	request []byte
}

// owner returns the appmaster of j, a capbox set; nil when j is not one.
func (j *job) owner() *job {
	if j.link == nil {
		return nil
	}
	return j.link.owner
}

// sets returns the capbox sets of j, an appmaster, oldest first.
func (j *job) sets() []*job {
	if j.link == nil {
		return nil
	}
	return j.link.sets
}

// jobFields are the fields of a job's spec that applying commands reads, on
// every replica.
type jobFields struct {
	queue     string
	qos       api.QoS
	priority  int32
	distinct  bool // DistinctNodes
	appmaster bool
	retry     api.RetryPolicy
	rules     *nodeRules // nil when the spec has none (most)
}

// nodeRules are a spec's pool and constraints: which nodes its tasks may
// run on.
type nodeRules struct {
	pool        string
	constraints []api.Constraint
}

func fieldsOf(s *api.JobSpec) jobFields {
	f := jobFields{queue: s.Queue, qos: s.QoS, priority: s.Priority, distinct: s.DistinctNodes,
		appmaster: s.Appmaster, retry: s.Retry}
	if s.Pool != "" || len(s.Constraints) > 0 {
		f.rules = &nodeRules{pool: s.Pool, constraints: s.Constraints}
	}
	return f
}

// specOf returns j's spec, decoding it on first use (safe under the read
// lock: concurrent first uses may each decode, and one result is kept).
func (j *job) specOf() *api.JobSpec {
	if p := j.spec.Load(); p != nil {
		return p
	}
	// Apply's skimSpec accepted these bytes, and the decoder accepts the
	// same (FuzzSkim), so this cannot fail.
	p := new(api.JobSpec)
	sd := specDecoder{layout: specLayout}
	d := stringDec(j.specEnc)
	sd.decodeInto(&d, p)
	j.spec.CompareAndSwap(nil, p)
	return j.spec.Load()
}

// setSpec makes s j's spec, decoded.
func (j *job) setSpec(s *api.JobSpec) {
	j.jobFields = fieldsOf(s)
	j.spec.Store(s)
}

// requeued is a task index waiting to be retried, not before a time.
type requeued struct {
	index     uint32
	notBefore int64 // unix nanoseconds
}

// group is a task group's counters. Its tasks are, at all times, exactly
// one of: fresh (index ≥ next, never placed), requeued (waiting for a
// retry), active (assigned, starting or running: holding resources on a
// node), succeeded, failed (for good) or killed (for good). So
//
//	(count - next) + len(requeue) + active + succeeded + failed + killed == count
type group struct {
	job   *job
	idx   uint16
	dirty bool // listed in FSM.dirtyGroups
	// unstored: listed in FSM.unstoredGroups.
	unstored bool
	// pendingAt is 1 + the group's place in FSM.mu.pending, 0 when not
	// there.
	pendingAt int
	demand    api.Capacity
	// ports are the pod's ports in order (a dynamic one numbered 0),
	// static its static ones sorted; nil without ports (ports.go).
	ports, static []api.PortKey
	count         int64
	next          int64
	requeue       []requeued
	// tasks are the group's tasks placed at least once, by index: tasks
	// are first placed in index order, so they are always indexes
	// [0, len(tasks)).
	tasks     []*task
	active    int64 // derived from task records at Load
	succeeded int64
	failed    int64
	killed    int64
	name      string // the spec's
	// started is when a task of the group was first placed (the plan
	// command's clock, unix nanoseconds); 0 before, or when a plan of a
	// version before startedVersion placed it first.
	started int64
}

// podSpec returns g's pod.
func (g *group) podSpec() *api.PodSpec { return &g.job.specOf().Tasks[g.idx].Pod }

func (g *group) key() GroupKey {
	return GroupKey{Job: g.job.id, Group: g.name}
}

// initial reports whether no task of g was ever placed, dropped or
// requeued: the state submit leaves it in, which its record would only
// repeat. next never goes down, so a group that leaves this state never
// comes back to it.
func (g *group) initial() bool {
	return g.next == 0 && len(g.requeue) == 0 && g.succeeded == 0 && g.failed == 0 && g.killed == 0
}

// pending counts the tasks waiting for placement, eligible now or not.
func (g *group) pending() int64 { return g.count - g.next + int64(len(g.requeue)) }

// eligible counts the tasks that may be placed at time now.
func (g *group) eligible(now int64) int64 {
	n := g.count - g.next
	for _, r := range g.requeue {
		if r.notBefore <= now {
			n++
		}
	}
	return n
}

// task is a task that has been placed at least once.
type task struct {
	key     taskKey
	attempt uint32 // 1 for the first placement
	state   api.TaskState
	node    string // the node of the current or last attempt
	stop    bool   // the job was cancelled or the task preempted: the task leaves its node's target
	// preempted: stopped for higher-priority work; requeued when it ends.
	preempted bool
	closed    bool // the dispatcher ended the current attempt (lost, cancelled)
	unstored  bool // listed in FSM.unstoredTasks
	listed    bool // listed in FSM.dirtyTasks
	// overlaid is set, during an update command's checks, once a report
	// of the command was found to change the task: overlay is the state
	// the reports so far leave it in.
	overlaid bool
	overlay  api.TaskState
	// ports are the numbers the current attempt has on its node, in its
	// group's port order; nil for a group without ports.
	ports []uint16
	// at is the task's place in its node's tasks while it is active.
	at       int32
	exitCode int32
	reason   api.TaskReason
	updated  int64 // unix nanoseconds
}

// active reports whether the task holds resources on its node.
func (t *task) active() bool {
	return t.state == api.TaskAssigned || t.state == api.TaskStarting || t.state == api.TaskRunning
}

// addTask adds t, which became active on n, to n's tasks.
func (n *node) addTask(t *task) {
	t.at = int32(len(n.tasks))
	n.tasks = append(n.tasks, t)
}

// removeTask removes t, active on n until now, from n's tasks.
func (n *node) removeTask(t *task) {
	last := n.tasks[len(n.tasks)-1]
	n.tasks[t.at], last.at = last, t.at
	n.tasks[len(n.tasks)-1] = nil
	n.tasks = n.tasks[:len(n.tasks)-1]
}

// holds reports whether t is active on n.
func (n *node) holds(t *task) bool {
	return t.active() && int(t.at) < len(n.tasks) && n.tasks[t.at] == t
}

// node is a registered node. used is what its active tasks hold per tier.
type node struct {
	dirty    bool // listed in FSM.dirtyNodes
	unstored bool // listed in FSM.unstoredNodes
	spec     api.NodeSpec
	specJSON []byte // spec as registered, written with the node's state without encoding it again
	state    api.NodeState
	// drain says an operator drained the node (DrainNode): it is draining
	// while not down, and comes back draining; drainDeadline is when its
	// active tasks are stopped (unix nanoseconds; 0: never).
	drain         bool
	drainDeadline int64
	gen           uint64
	used          api.Allocatable
	// releasing is what of used the active tasks told to stop (cancelled,
	// preempted) hold: free once the node reports them stopped.
	releasing api.Allocatable
	// slots are the node's cached slots, oldest first; cached what they
	// hold per tier (not in used, not free).
	slots  []*slot
	cached api.Allocatable
	tasks  []*task        // active tasks, in no order (task.at is each one's place)
	jobs   map[uint64]int // active tasks per job
	// distinctJobs counts the jobs in jobs that want distinct nodes, so
	// that a round looks for them only on the nodes that have some.
	distinctJobs int
	// inputDirty says the node is listed in FSM.inputDirty: its part of
	// a round's input changed with the command being applied.
	inputDirty bool
	// targetAt is the node's place in the TargetNodes of the change set
	// numbered targetSeq (journal.go).
	targetAt  int32
	targetSeq uint64
	// num numbers the node densely from 0 in the order the FSM took it in
	// (a removed node's number goes to the last); a Load numbers them
	// afresh.
	num int32
	// ports are the ports in use on the node; nil while none is
	// (ports.go).
	ports *nodePorts
	// pool is the spec's pool made canonical (setSpec): a round's filters
	// compare it with every class's, and equal strings that share their
	// bytes compare without reading them. The handle keeps the canonical
	// copy alive.
	pool unique.Handle[string]
}

// setSpec sets n's spec, its pool canonical.
func (n *node) setSpec(spec api.NodeSpec) {
	n.pool = unique.Make(spec.Pool)
	spec.Pool = n.pool.Value()
	n.spec = spec
	n.recountPorts()
}

// addJobTasks counts delta more (or, negative, fewer) active tasks of j on
// n.
func (n *node) addJobTasks(j *job, delta int) {
	before := n.jobs[j.num]
	after := before + delta
	if after == 0 {
		delete(n.jobs, j.num)
	} else {
		n.jobs[j.num] = after
	}
	if j.distinct && (before == 0) != (after == 0) {
		if after == 0 {
			n.distinctJobs--
		} else {
			n.distinctJobs++
		}
	}
}

func (n *node) free(q api.QoS) api.Capacity {
	if q == api.QoSOnline {
		return n.spec.Allocatable.Online.Plus(n.used.Online, -1).Plus(n.cached.Online, -1)
	}
	return n.spec.Allocatable.Offline.Plus(n.used.Offline, -1).Plus(n.cached.Offline, -1)
}

// slot is a cached slot: the resources of a task that ended, kept on its
// node for a task of the same shape and class until expires.
type slot struct {
	id      string
	node    *node
	qos     api.QoS
	shape   api.Capacity
	expires int64 // unix nanoseconds
}

// slotHeap orders slots by expiry, then ID; consumed slots stay until they
// come due and are skipped then.
type slotHeap []*slot

func (h slotHeap) Len() int { return len(h) }
func (h slotHeap) Less(i, j int) bool {
	return h[i].expires < h[j].expires || h[i].expires == h[j].expires && h[i].id < h[j].id
}
func (h slotHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *slotHeap) Push(x any)   { *h = append(*h, x.(*slot)) }
func (h *slotHeap) Pop() any {
	old := *h
	s := old[len(old)-1]
	*h = old[:len(old)-1]
	return s
}

func encodeSlot(buf []byte, s *slot) []byte {
	e := enc{b: buf[:0]}
	e.byte(recordVersion)
	e.str(string(s.qos))
	for _, v := range []int64{s.shape.CPU, s.shape.Memory, s.shape.GPUs, s.shape.Disk, s.shape.Ports, s.expires} {
		e.varint(v)
	}
	return e.b
}

func decodeSlot(id string, n *node, b []byte) (*slot, error) {
	d := dec{b: b}
	if v := d.byte(); v != recordVersion {
		return nil, fmt.Errorf("%w: slot record version %d", ErrCorrupt, v)
	}
	s := &slot{id: id, node: n, qos: api.QoS(d.str())}
	s.shape = api.Capacity{CPU: d.varint(), Memory: d.varint(), GPUs: d.varint(), Disk: d.varint(), Ports: d.varint()}
	s.expires = d.varint()
	if err := d.done("slot record"); err != nil {
		return nil, err
	}
	if s.qos != api.QoSOnline && s.qos != api.QoSOffline {
		return nil, fmt.Errorf("%w: slot %s of QoS %q", ErrCorrupt, id, s.qos)
	}
	return s, nil
}

func (n *node) hold(q api.QoS, d api.Capacity, k int64) { n.used.AddTier(q, d, k) }

// release adds k tasks of demand d, told to stop, to what the node is
// releasing (k = -1 once one is gone).
func (n *node) release(q api.QoS, d api.Capacity, k int64) { n.releasing.AddTier(q, d, k) }

// shortfall names the first dimension in which k tasks of demand d do not
// fit in free, or returns "".
func shortfall(free, d api.Capacity, k int64) string {
	for _, c := range [...]struct {
		name       string
		have, need int64
	}{
		{"cpu", free.CPU, d.CPU}, {"memory", free.Memory, d.Memory}, {"gpus", free.GPUs, d.GPUs},
		{"disk", free.Disk, d.Disk}, {"ports", free.Ports, d.Ports},
	} {
		if c.need > 0 && (c.have < 0 || c.have/c.need < k) {
			return fmt.Sprintf("%s: %d free, %d tasks need %d", c.name, c.have, k, k*c.need)
		}
	}
	return ""
}

// matches reports whether a node satisfies a job's pool and constraints
// (r, nil for none).
func matches(r *nodeRules, n *api.NodeSpec) string {
	if r == nil {
		return ""
	}
	if r.pool != "" && r.pool != n.Pool {
		return fmt.Sprintf("node is in pool %q, job wants %q", n.Pool, r.pool)
	}
	for _, c := range r.constraints {
		v, ok := n.Labels[c.Key]
		var good bool
		switch c.Op {
		case api.OpIn:
			good = ok && slices.Contains(c.Values, v)
		case api.OpNotIn:
			good = !ok || !slices.Contains(c.Values, v)
		case api.OpExists:
			good = ok
		case api.OpNotExists:
			good = !ok
		}
		if !good {
			return fmt.Sprintf("node label %q fails constraint %s %v", c.Key, c.Op, c.Values)
		}
	}
	return ""
}

// jobState rolls a job's groups up into its state.
func (j *job) state() JobState {
	if j.cancelled {
		return JobCancelled
	}
	var count, done, failed, touched int64
	for _, g := range j.groups {
		count += g.count
		done += g.succeeded + g.failed + g.killed
		failed += g.failed + g.killed
		touched += g.next
	}
	switch {
	case count == 0:
		return JobRunning // an appmaster in client mode: until cancelled
	case done == count && failed == 0:
		return JobSucceeded
	case done == count:
		return JobFailed
	case touched > 0:
		return JobRunning
	}
	return JobPending
}

// Records. Every stored value starts with recordVersion (a job record with
// jobRecordVersion).

// encodeJob encodes j's record into buf: its spec's layout, then the spec
// in the binary encoding of spec_codec.go (defaults applied; Load applies
// them again, which changes nothing).
func encodeJob(buf []byte, j *job) []byte {
	e := enc{b: buf[:0]}
	e.byte(jobRecordVersion)
	e.varint(j.submitted)
	e.bool(j.cancelled)
	e.byte(specLayout) // a kept encoding is of the current layout (submitBatch.read)
	if j.specEnc != "" {
		e.str(j.specEnc) // the encoding is canonical: appendSpec would write the same
		return e.b
	}
	var s enc
	appendSpec(&s, j.specOf())
	e.bytes(s.b)
	return e.b
}

// decodeJob decodes a job record, carving its spec's slices from sd's.
func decodeJob(sd *specDecoder, num uint64, b []byte) (*job, error) {
	d := dec{b: b}
	v := d.byte()
	if v < oldestJobRecordVersion || v > jobRecordVersion {
		return nil, fmt.Errorf("%w: job %d record version %d", ErrCorrupt, num, v)
	}
	submitted := d.varint()
	cancelled := d.bool()
	var layout byte
	if v >= 6 {
		layout = d.byte()
	}
	spec := d.bytes()
	if err := d.done("job record"); err != nil {
		return nil, fmt.Errorf("job %d: %w", num, err)
	}
	if layout > specLayout {
		return nil, fmt.Errorf("%w: job %d record: spec layout %d, newer than this release's %d", ErrCorrupt, num, layout, specLayout)
	}
	sd.layout = layout
	return loadedJob(sd, num, submitted, cancelled, spec)
}

// encodeSubmit encodes the record of the new jobs of one submit command,
// numbered from its key's on: their submit time, their specs' layout (the
// current one: submitBatch.read converts older ones), their number, then
// their specs as submitted (a block of specs: appendSpecBlock).
func encodeSubmit(buf []byte, submitted int64, n int, block []byte) []byte {
	e := enc{b: buf[:0]}
	e.byte(submitRecordVersion)
	e.varint(submitted)
	e.byte(specLayout)
	e.uvarint(uint64(n))
	e.b = append(e.b, block...)
	return e.b
}

// decodeSubmit decodes a submit record whose first job is first, calling
// fn with each of its jobs in number order.
func decodeSubmit(sd *specDecoder, first uint64, b []byte, fn func(*job) error) error {
	d := dec{b: b}
	v := d.byte()
	if v < oldestSubmitRecordVersion || v > submitRecordVersion {
		return fmt.Errorf("%w: submit record of job %d: version %d", ErrCorrupt, first, v)
	}
	submitted := d.varint()
	blk, err := readSpecs(&d, fmt.Sprintf("submit record of job %d", first), v >= 5)
	if err != nil {
		return err
	}
	n, specs := blk.n, blk.specs
	sd.layout = blk.layout
	if n == 0 {
		return fmt.Errorf("%w: submit record of job %d: no jobs", ErrCorrupt, first)
	}
	sdec := dec{b: specs}
	for i := range uint64(n) {
		spec := sdec.bytes()
		if sdec.err != nil {
			break
		}
		j, err := loadedJob(sd, first+i, submitted, false, spec)
		if err != nil {
			return err
		}
		if err := fn(j); err != nil {
			return err
		}
	}
	return sdec.done("submit record")
}

// loadedJob builds job num from its stored spec, carving the spec's slices
// from sd's.
func loadedJob(sd *specDecoder, num uint64, submitted int64, cancelled bool, spec []byte) (*job, error) {
	j := &job{num: num, id: jobID(num), submitted: submitted, cancelled: cancelled}
	sdec := sharedDec(spec) // copies: a Scan value is only valid during the call
	specs := []api.JobSpec{sd.decode(&sdec)}
	if err := sdec.done("job spec"); err != nil {
		return nil, fmt.Errorf("job %d: %w", num, err)
	}
	specs[0].SetDefaults()
	if err := api.ValidateJobs(specs); err != nil {
		return nil, fmt.Errorf("%w: job %d spec: %v", ErrCorrupt, num, err)
	}
	j.setSpec(&specs[0])
	initGroups(j)
	return j, nil
}

// initGroups makes j's groups, with no task placed, from its decoded spec.
func initGroups(j *job) {
	s := j.specOf()
	j.groups = make([]*group, len(s.Tasks))
	for i := range s.Tasks {
		t := &s.Tasks[i]
		j.groups[i] = &group{job: j, idx: uint16(i), name: t.Name, count: t.Count, demand: t.Pod.Demand()}
		j.groups[i].setPorts(podPorts(&t.Pod))
	}
}

// startedVersion is the first command version whose plans set
// group.started.
const startedVersion = 9

// groupRecordVersion is the first byte of a group record. 2: the record
// ends with the group's start (group.started); Load reads 1 as a group
// without one.
const groupRecordVersion = 2

func encodeGroup(buf []byte, g *group) []byte {
	e := enc{b: buf[:0]}
	e.byte(groupRecordVersion)
	e.uvarint(uint64(g.next))
	e.uvarint(uint64(len(g.requeue)))
	for _, r := range g.requeue {
		e.uvarint(uint64(r.index))
		e.varint(r.notBefore)
	}
	e.uvarint(uint64(g.succeeded))
	e.uvarint(uint64(g.failed))
	e.uvarint(uint64(g.killed))
	e.varint(g.started)
	return e.b
}

func decodeGroupInto(g *group, b []byte) error {
	d := dec{b: b}
	v := d.byte()
	if v != groupRecordVersion && v != groupRecordVersion-1 {
		return fmt.Errorf("%w: group record version %d", ErrCorrupt, v)
	}
	g.next = int64(d.uvarint())
	n := d.count(2)
	g.requeue = make([]requeued, n)
	for i := range g.requeue {
		g.requeue[i] = requeued{uint32(d.uvarint()), d.varint()}
	}
	g.succeeded = int64(d.uvarint())
	g.failed = int64(d.uvarint())
	g.killed = int64(d.uvarint())
	if v == groupRecordVersion {
		g.started = d.varint()
	}
	return d.done("group record")
}

const (
	flagStop      = 1 << 0
	flagClosed    = 1 << 1
	flagPreempted = 1 << 2
	// flagPorts: the task's ports follow its other fields (a count and
	// the numbers); a task without ports costs no byte for them.
	flagPorts = 1 << 3
)

// encodeTasks writes the record of ts, consecutive tasks of one group
// from a multiple of taskChunk on (taskRecord), over buf: the task record
// version, how many tasks, the names of their nodes (in the order the
// tasks name them, each once unless the tasks spread wide), and each
// task, its node as an index into those names and its update time as the
// difference from the previous task's. A group's tasks mostly share a
// few nodes (bin-packing) and the times of the commands that placed or
// ended them together: BenchmarkEncodeTasks, ten tasks to a node, 16
// bytes a task, half of what naming each task's node and time in full
// takes.
func encodeTasks(buf []byte, ts []*task) []byte {
	e := enc{b: buf[:0]}
	e.byte(taskRecordVersion)
	e.uvarint(uint64(len(ts)))
	// Index the names first: the table precedes the tasks. A task's node
	// is looked up among the last few names only (a name may then repeat
	// in a record whose tasks are spread wide, which costs bytes, not
	// time). A record holds at most taskChunk tasks, so both slices stay
	// on the stack.
	const lookBack = 4
	names, idx := make([]string, 0, taskChunk), make([]int, 0, taskChunk)
	for i, t := range ts {
		if i > 0 && t.node == ts[i-1].node { // placed together, mostly
			idx = append(idx, idx[i-1])
			continue
		}
		from := max(len(names)-lookBack, 0)
		at := slices.Index(names[from:], t.node)
		if at < 0 {
			at = len(names)
			names = append(names, t.node)
		} else {
			at += from
		}
		idx = append(idx, at)
	}
	e.uvarint(uint64(len(names)))
	for _, n := range names {
		e.str(n)
	}
	var prev int64
	for i, t := range ts {
		e.uvarint(uint64(t.attempt))
		e.byte(byte(t.state))
		var flags byte
		if t.stop {
			flags |= flagStop
		}
		if t.closed {
			flags |= flagClosed
		}
		if t.preempted {
			flags |= flagPreempted
		}
		if len(t.ports) > 0 {
			flags |= flagPorts
		}
		e.byte(flags)
		e.uvarint(uint64(idx[i]))
		e.varint(int64(t.exitCode))
		e.str(string(t.reason))
		e.varint(t.updated - prev)
		prev = t.updated
		if len(t.ports) > 0 {
			e.uvarint(uint64(len(t.ports)))
			for _, p := range t.ports {
				e.uvarint(uint64(p))
			}
		}
	}
	return e.b
}

// minTaskBytes is the fewest bytes a task of a task record takes.
const minTaskBytes = 7

// decodeTasks reads the task record under k, whose index is the first of
// its tasks.
func decodeTasks(k taskKey, b []byte) ([]*task, error) {
	d := sharedDec(b)
	v := d.byte()
	if v != taskRecordVersion && v != taskRecordVersion-1 {
		return nil, fmt.Errorf("%w: task record j%d/%d/%d: version %d", ErrCorrupt, k.job, k.group, k.index, v)
	}
	n := d.count(minTaskBytes)
	if d.err == nil && (n == 0 || n > taskChunk || k.index%taskChunk != 0) {
		return nil, fmt.Errorf("%w: task record j%d/%d/%d: %d tasks (want 1 to %d, from an index that is a multiple of %[6]d)",
			ErrCorrupt, k.job, k.group, k.index, n, taskChunk)
	}
	names := make([]string, d.count(1))
	for i := range names {
		names[i] = d.str()
	}
	ts := make([]*task, n)
	var prev int64
	for i := range ts {
		t := &task{key: k}
		t.key.index += uint32(i)
		t.attempt = uint32(d.uvarint())
		t.state = api.TaskState(d.byte())
		flags := d.byte()
		t.stop, t.closed, t.preempted = flags&flagStop != 0, flags&flagClosed != 0, flags&flagPreempted != 0
		at := d.uvarint()
		t.exitCode = int32(d.varint())
		t.reason = api.TaskReason(d.str())
		t.updated = prev + d.varint()
		prev = t.updated
		if flags&flagPorts != 0 && v == taskRecordVersion {
			np := d.count(1)
			if np == 0 && d.err == nil {
				return nil, fmt.Errorf("%w: task %s: ports flagged, none given", ErrCorrupt, taskID(t.key, t.attempt))
			}
			t.ports = make([]uint16, np)
			for i := range t.ports {
				p := d.uvarint()
				if p == 0 || p > 65535 {
					return nil, fmt.Errorf("%w: task %s: port %d", ErrCorrupt, taskID(t.key, t.attempt), p)
				}
				t.ports[i] = uint16(p)
			}
		}
		if d.err != nil {
			break
		}
		if !t.state.Valid() {
			return nil, fmt.Errorf("%w: task %s: state %d", ErrCorrupt, taskID(t.key, t.attempt), t.state)
		}
		if at >= uint64(len(names)) {
			return nil, fmt.Errorf("%w: task %s: node %d of %d named", ErrCorrupt, taskID(t.key, t.attempt), at, len(names))
		}
		t.node = names[at]
		ts[i] = t
	}
	if err := d.done("task record"); err != nil {
		return nil, err
	}
	return ts, nil
}

func encodeNode(n *node) []byte {
	spec := n.specJSON
	e := enc{b: make([]byte, 0, len(spec)+16)}
	e.byte(nodeRecordVersion)
	e.str(string(n.state))
	e.bytes(spec)
	e.bool(n.drain)
	e.varint(n.drainDeadline)
	return e.b
}

func decodeNode(b []byte) (*node, error) {
	d := dec{b: b}
	v := d.byte()
	if v != nodeRecordVersion && v != nodeRecordVersion-1 {
		return nil, fmt.Errorf("%w: node record version %d", ErrCorrupt, v)
	}
	n := &node{jobs: map[uint64]int{}}
	n.state = api.NodeState(d.str())
	spec := d.bytes()
	if v == nodeRecordVersion {
		n.drain, n.drainDeadline = d.bool(), d.varint()
	} else {
		n.drain = n.state == api.NodeDraining
	}
	if err := d.done("node record"); err != nil {
		return nil, err
	}
	var ns api.NodeSpec
	if err := json.Unmarshal(spec, &ns); err != nil {
		return nil, fmt.Errorf("%w: node spec: %v", ErrCorrupt, err)
	}
	n.setSpec(ns)
	n.specJSON = bytes.Clone(spec) // a Scan value is only valid during the call
	return n, nil
}

// nodeStates lists the node states a command may set.
var nodeStates = []api.NodeState{api.NodeReady, api.NodeDraining, api.NodeDown}

func validNodeState(s api.NodeState) bool { return slices.Contains(nodeStates, s) }

func trimErr(s string) string { return strings.TrimPrefix(s, "fsm: ") }
