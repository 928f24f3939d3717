package fsm

import (
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/sluicehq/sluice/api"
)

// Command tags: the first byte of every command. The second byte is the
// command's encoding version.
const (
	cmdSubmit       byte = 1
	cmdRegisterNode byte = 2
	cmdNodeState    byte = 3
	cmdPlan         byte = 4
	cmdUpdateTasks  byte = 5
	cmdCancel       byte = 6
	cmdPreempt      byte = 7
	// Capboxes: capbox.go.
	cmdCreateCapboxes  byte = 8
	cmdReleaseCapboxes byte = 9
	// Capbox tasks: captask.go.
	cmdStartCapTasks byte = 10
	cmdStopCapTasks  byte = 11
)

// commandVersion 10: a submit command's specs carry their layout
// (readSpecs; before, layout 0); 9: a plan records when it first places a task of each
// group (group.started; a plan of 8 or before does not, so that every
// replica, whether it replays the plan or loads a group record written
// before, agrees), and a forget command may end with flags
// (ForgetJobsToHistory); 8: a pod's sim bool became a flags byte that may announce
// a simulated pod's usage (appendSim); a spec of 5 to 7 decodes as it did;
// 7: a pod's share-PID bool became a flags byte that may
// announce its network mode, volumes and mounts (appendPodStorage), and
// reasons 10 to 12 have codes; a spec of 5 or 6 decodes as it did; 6: an
// update command's reports name their node only
// where it changes, carry their reason as a code (reasonCode), and not the
// nodelet's clock, which apply never read; 5: a submit command's specs are
// one block, compressed when large (appendSpecBlock); 4: specs carry
// JobSpec.Appmaster; 3: submit commands carry binary specs (2: NDJSON).
const commandVersion = 10

// oldestCommandVersion is the oldest version Apply reads, so that a log
// written by the releases before replays: version 5 commands differ from
// 6's only in the update command, whose decoder reads both, 6's from 7's
// only in what 7's specs and reasons may hold besides, and 7's from 8's
// only in what 8's specs may hold besides, 8's from 9's only in
// what a plan of 9 records and a forget of 9 may carry, and 9's from 10's
// only in the layout byte of 10's submit commands.
const oldestCommandVersion = 5

func newCommand(tag byte, now time.Time, size int) *enc {
	e := &enc{b: make([]byte, 0, size+12)}
	e.byte(tag)
	e.byte(commandVersion)
	e.varint(now.UnixNano())
	return e
}

// SubmitJobs returns the command that submits specs. It applies the specs'
// defaults (in place) and validates them with api.ValidateJobs; if any is
// invalid it returns no command and an *api.ValidationError naming every
// problem, so an invalid spec never reaches the log. The FSM trusts what the
// log holds: it does not validate a submit again, on any replica (which also
// keeps a replay deterministic across versions whose validation differs). A
// job whose idempotency key was committed before (or earlier in the same
// command) is answered with the first job's ID and not created again. The
// result decodes with DecodeSubmitResult.
func SubmitJobs(now time.Time, specs []api.JobSpec) ([]byte, error) {
	for i := range specs {
		specs[i].SetDefaults()
	}
	if err := api.ValidateJobs(specs); err != nil {
		return nil, fmt.Errorf("fsm: submit: %w", err)
	}
	// The specs' layout, a count, then the specs as one block
	// (appendSpecBlock): each in the binary encoding of spec_codec.go,
	// length-prefixed, so that apply keeps the block as the submit record
	// without encoding anything again.
	plain, block := blockPool.Get().(*[]byte), blockPool.Get().(*[]byte)
	defer blockPool.Put(plain)
	defer blockPool.Put(block)
	all := enc{b: (*plain)[:0]}
	var s enc
	for i := range specs {
		s.b = s.b[:0]
		appendSpec(&s, &specs[i])
		all.bytes(s.b)
	}
	*plain = all.b
	*block = appendSpecBlock((*block)[:0], all.b)
	e := newCommand(cmdSubmit, now, 11+len(*block))
	e.byte(specLayout)
	e.uvarint(uint64(len(specs)))
	e.b = append(e.b, *block...)
	return e.b, nil
}

// blockPool holds the buffers SubmitJobs encodes and compresses specs in.
var blockPool = sync.Pool{New: func() any { return new([]byte) }}

// RegisterNode returns the command that registers a node, or updates the
// spec of a registered one. A node that was down becomes ready; a draining
// node stays draining.
func RegisterNode(now time.Time, spec api.NodeSpec) ([]byte, error) {
	js, err := json.Marshal(&spec)
	if err != nil {
		return nil, fmt.Errorf("fsm: encoding node: %w", err)
	}
	e := newCommand(cmdRegisterNode, now, len(js)+8)
	e.bytes(js)
	return e.b, nil
}

// SetNodeState returns the command that moves a node to state. Moving a node
// down ends its active tasks as lost; they are retried per their job's retry
// policy. The result decodes with DecodeNodeStateResult.
func SetNodeState(now time.Time, name string, state api.NodeState) []byte {
	e := newCommand(cmdNodeState, now, len(name)+16)
	e.str(name)
	e.str(string(state))
	return e.b
}

// CancelJob returns the command that cancels a job: its pending tasks are
// dropped and its active tasks leave their nodes' targets (they free their
// resources when their nodes report them stopped). Cancelling a cancelled
// job changes nothing. The result decodes with DecodeCancelResult.
func CancelJob(now time.Time, id string) []byte {
	e := newCommand(cmdCancel, now, len(id)+8)
	e.str(id)
	return e.b
}

// GroupKey names a task group by its job's ID and its name.
type GroupKey struct {
	Job   string
	Group string
}

func (k GroupKey) String() string { return k.Job + "/" + k.Group }

// Assignment places Count tasks of Group on Node; Slots are the cached
// slots they reuse (at most Count; the rest take free resources).
type Assignment struct {
	Group GroupKey
	Node  string
	Count int64
	Slots []string
}

// Preemption stops a running task to make room for a group's tasks.
type Preemption struct {
	// Task is the running task's ID (with its attempt), on Node.
	Task string
	Node string
	// For is the higher-priority group it makes room for.
	For GroupKey
}

// Plan is a scheduling round's outcome as the leader proposes it.
type Plan struct {
	// Term is the proposing leader's raft term. A plan from a term older
	// than one already committed is rejected whole (a deposed leader's).
	Term uint64
	// Index is the applied index of the state the plan was computed from.
	Index uint64
	// Now is the leader's clock when it proposed the plan.
	Now time.Time
	// Assignments are applied in order; each is checked against the state as
	// the ones before it left it.
	Assignments []Assignment
}

// CommitPlan returns the command that commits a plan. The result decodes with
// DecodePlanResult.
func CommitPlan(p *Plan) []byte {
	e := newCommand(cmdPlan, p.Now, 16+len(p.Assignments)*32)
	e.uvarint(p.Term)
	e.uvarint(p.Index)
	e.uvarint(uint64(len(p.Assignments)))
	for i := range p.Assignments {
		a := &p.Assignments[i]
		e.str(a.Group.Job)
		e.str(a.Group.Group)
		e.str(a.Node)
		e.varint(a.Count)
		e.uvarint(uint64(len(a.Slots)))
		for _, s := range a.Slots {
			e.str(s)
		}
	}
	return e.b
}

// PreemptTasks returns the command that preempts running tasks for
// higher-priority groups, proposed by the leader of term. Each preemption is
// checked alone against the state the ones before it left (the task is the
// current attempt, active and not already stopping, on the node named, of
// an offline job; the group it makes room for exists with pending tasks,
// offline, of a strictly higher priority) and applied or rejected with a
// RejectCode. An applied one stops the task: it leaves its node's target,
// its resources are freed when the node reports it stopped, and it is then
// requeued at once whatever its attempts, with reason preempted. A command
// from a term older than a committed plan's is rejected whole. The result
// decodes with DecodePreemptResult.
func PreemptTasks(now time.Time, term uint64, ps []Preemption) []byte {
	e := newCommand(cmdPreempt, now, 8+len(ps)*40)
	e.uvarint(term)
	e.uvarint(uint64(len(ps)))
	for _, p := range ps {
		e.str(p.Task)
		e.str(p.Node)
		e.str(p.For.Job)
		e.str(p.For.Group)
	}
	return e.b
}

// Report is a task report with the node that sent it. It points at the
// report: the dispatcher batches thousands of them, the node's own.
type Report struct {
	Node string
	*api.TaskReport
}

// UpdateTasks returns the command that applies nodelet reports, in order.
// The result decodes with DecodeUpdateResult. Reports' Usage is not carried.
func UpdateTasks(now time.Time, reports []Report) []byte {
	return UpdateTasksCaching(now, reports, 0)
}

// UpdateTasksCaching is UpdateTasks that keeps the resources of each task
// that ends on its own (succeeded or failed) as a cached slot on its node
// for slotTTL (Capos' offer cache): tasks of the same shape and class may
// reuse it (a plan's Assignment.Slots) until then, and other work may not;
// after it the resources return to the node's free pool. A slotTTL of 0
// caches nothing.
//
// A report is its node (enc.repeatStr: a node's reports come together, and
// its name is written once for them), task ID, state, reason (reasonCode),
// exit code and message; its Time is not carried, as the command's clock
// is the one apply uses.
func UpdateTasksCaching(now time.Time, reports []Report, slotTTL time.Duration) []byte {
	e := newCommand(cmdUpdateTasks, now, len(reports)*24+8)
	e.uvarint(uint64(len(reports)))
	node := ""
	for i := range reports {
		r := &reports[i]
		e.repeatStr(r.Node, node)
		node = r.Node
		e.str(r.TaskID)
		e.byte(byte(r.State))
		c := reasonCode(r.Reason)
		e.byte(c)
		if c == 0 {
			e.str(string(r.Reason))
		}
		e.varint(int64(r.ExitCode))
		e.str(r.Message)
	}
	if slotTTL > 0 {
		e.varint(int64(slotTTL)) // absent in commands that cache nothing
	}
	return e.b
}

// SubmitResult answers a submit command: one entry per spec, in order.
type SubmitResult struct {
	Jobs []SubmittedJob
}

// SubmittedJob is the outcome of one spec of a submit.
type SubmittedJob struct {
	ID string
	// Existing is true when the spec's idempotency key named a job
	// committed before, whose ID this is.
	Existing bool
}

// DecodeSubmitResult decodes the result of a SubmitJobs command. The IDs
// share one copy of b.
func DecodeSubmitResult(b []byte) (SubmitResult, error) {
	d := sharedDec(b)
	var r SubmitResult
	r.Jobs = make([]SubmittedJob, d.count(2))
	for i := range r.Jobs {
		r.Jobs[i] = SubmittedJob{ID: d.str(), Existing: d.bool()}
	}
	return r, d.done("submit result")
}

func (r *SubmitResult) encode() []byte {
	e := newResultEnc(len(r.Jobs), 10*len(r.Jobs))
	for _, j := range r.Jobs {
		e.add(j.ID, j.Existing)
	}
	return e.b
}

// resultEnc writes a SubmitResult's encoding a job at a time, for a caller
// that has no SubmitResult to encode (submit cuts its IDs as it writes).
type resultEnc struct{ enc }

// newResultEnc starts the result of n jobs, with room for idBytes bytes of
// IDs.
func newResultEnc(n, idBytes int) resultEnc {
	r := resultEnc{enc{b: make([]byte, 0, idBytes+2*n+4)}}
	r.uvarint(uint64(n))
	return r
}

// add writes the next job's ID and whether it existed before.
func (r *resultEnc) add(id string, existing bool) {
	r.str(id)
	r.bool(existing)
}

// RejectCode says why the FSM rejected an assignment of a plan.
type RejectCode uint8

// Reasons an assignment is rejected. Every one is stale state, not a bad
// command: the scheduling loop requeues the tasks for a later round.
const (
	RejectJobNotFound   RejectCode = iota + 1 // no such job
	RejectJobCancelled                        // the job was cancelled
	RejectGroupNotFound                       // the job has no such group
	RejectBadCount                            // count below 1
	RejectNotPending                          // the group has fewer eligible pending tasks
	RejectNodeNotFound                        // no such node
	RejectNodeNotReady                        // the node is draining or down
	RejectNoFit                               // the node's free capacity for the job's tier is short
	RejectConstraint                          // the node no longer matches the job's pool or constraints
	RejectDistinct                            // the job's distinct-nodes rule
	RejectSlot                                // a named cached slot is not on the node, or cannot hold the task
	RejectTaskNotFound                        // preemption: no such task attempt on the node
	RejectNotActive                           // preemption: the task is not running or already stopping
	RejectPriority                            // preemption: the task is online or not of a lower priority
	RejectPorts                               // the node has no port range, a static port is in use, or too few dynamic ports are free
	RejectQuota                               // the tasks would take their queue past one of its caps
)

var rejectNames = []string{"", "job not found", "job cancelled", "group not found", "bad count",
	"not enough pending tasks", "node not found", "node not ready", "does not fit", "constraint",
	"distinct nodes", "slot not found", "task not found", "task not active", "priority", "ports", "quota"}

func (c RejectCode) String() string {
	if int(c) < len(rejectNames) && c > 0 {
		return rejectNames[c]
	}
	return fmt.Sprintf("RejectCode(%d)", uint8(c))
}

// Rejection is an assignment of a plan that was not applied.
type Rejection struct {
	// Index is the assignment's index in the plan.
	Index  int
	Code   RejectCode
	Detail string
}

func (r Rejection) String() string {
	return fmt.Sprintf("assignment %d: %s: %s", r.Index, r.Code, r.Detail)
}

// PlanResult answers a CommitPlan command.
type PlanResult struct {
	// Placed counts the tasks placed.
	Placed int64
	// Rejected lists the assignments not applied, in plan order.
	Rejected []Rejection
}

func (r *PlanResult) encode() []byte { return encodeCountRejections(r.Placed, r.Rejected) }

// DecodePlanResult decodes the result of a CommitPlan command.
func DecodePlanResult(b []byte) (PlanResult, error) {
	n, rej, err := decodeCountRejections(b, "plan result")
	return PlanResult{Placed: n, Rejected: rej}, err
}

// PreemptResult answers a PreemptTasks command.
type PreemptResult struct {
	// Preempted counts the tasks now stopping.
	Preempted int64
	// Rejected lists the preemptions not applied, in command order
	// (Rejection.Index is the preemption's index).
	Rejected []Rejection
}

func (r *PreemptResult) encode() []byte { return encodeCountRejections(r.Preempted, r.Rejected) }

// DecodePreemptResult decodes the result of a PreemptTasks command.
func DecodePreemptResult(b []byte) (PreemptResult, error) {
	n, rej, err := decodeCountRejections(b, "preempt result")
	return PreemptResult{Preempted: n, Rejected: rej}, err
}

func encodeCountRejections(n int64, rej []Rejection) []byte {
	e := enc{}
	e.uvarint(uint64(n))
	e.uvarint(uint64(len(rej)))
	for _, x := range rej {
		e.uvarint(uint64(x.Index))
		e.byte(byte(x.Code))
		e.str(x.Detail)
	}
	return e.b
}

func decodeCountRejections(b []byte, what string) (int64, []Rejection, error) {
	d := dec{b: b}
	n := int64(d.uvarint())
	var rej []Rejection
	if k := d.count(3); k > 0 {
		rej = make([]Rejection, k)
	}
	for i := range rej {
		rej[i] = Rejection{Index: int(d.uvarint()), Code: RejectCode(d.byte()), Detail: d.str()}
	}
	return n, rej, d.done(what)
}

// UpdateResult answers an UpdateTasks command: how the reports were used.
type UpdateResult struct {
	Applied  int // moved a task to a new state
	NoOp     int // repeated the task's current state
	Stale    int // about an attempt or node the task has left
	Requeued int // of the applied: failures that will be retried
}

func (r *UpdateResult) encode() []byte {
	e := enc{}
	for _, v := range []int{r.Applied, r.NoOp, r.Stale, r.Requeued} {
		e.uvarint(uint64(v))
	}
	return e.b
}

// DecodeUpdateResult decodes the result of an UpdateTasks command.
func DecodeUpdateResult(b []byte) (UpdateResult, error) {
	d := dec{b: b}
	r := UpdateResult{int(d.uvarint()), int(d.uvarint()), int(d.uvarint()), int(d.uvarint())}
	return r, d.done("update result")
}

// NodeStateResult answers a SetNodeState command.
type NodeStateResult struct {
	Lost     int // active tasks that ended as lost
	Requeued int // of those, the ones that will be retried
}

// DecodeNodeStateResult decodes the result of a SetNodeState command.
func DecodeNodeStateResult(b []byte) (NodeStateResult, error) {
	d := dec{b: b}
	r := NodeStateResult{int(d.uvarint()), int(d.uvarint())}
	return r, d.done("node state result")
}

// CancelResult answers a CancelJob command.
type CancelResult struct {
	Dropped  int64 // pending tasks dropped
	Stopping int64 // active tasks asked to stop
}

// DecodeCancelResult decodes the result of a CancelJob command.
func DecodeCancelResult(b []byte) (CancelResult, error) {
	d := dec{b: b}
	r := CancelResult{int64(d.uvarint()), int64(d.uvarint())}
	return r, d.done("cancel result")
}

func encodeUvarints(vs ...uint64) []byte {
	e := enc{}
	for _, v := range vs {
		e.uvarint(v)
	}
	return e.b
}
