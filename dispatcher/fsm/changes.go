package fsm

import "sync"

// ChangeKind says what a Changes reports.
type ChangeKind uint8

const (
	// ChangeApplied: the command at Index applied and changed what the
	// lists name. A raft entry may carry several commands, each
	// published with the entry's index.
	ChangeApplied ChangeKind = iota + 1
	// ChangeComplete: every command of the raft entries up to Index is
	// applied, so no later change set has an index at most Index. The
	// lists are empty.
	ChangeComplete
	// ChangeReset: the state was replaced (Load, at Open or after a
	// snapshot restore), as of Index, or a subscriber was just added
	// (Subscribe). What a subscriber derived from earlier change sets is
	// void: it reads what it needs from the FSM again. The lists are
	// empty.
	ChangeReset
)

// GroupRef names a task group: its job's number and its index in the job.
type GroupRef struct {
	Job   uint64
	Group uint16
}

// TaskRef names a task (not an attempt): its job's number, its group's
// index in the job and its index in the group.
type TaskRef struct {
	Job   uint64
	Group uint16
	Index uint32
}

// TaskAttempt names an attempt of a task.
type TaskAttempt struct {
	Task    TaskRef
	Attempt uint32
}

// TargetChange is one entry of a node's target journal, which the FSM
// does not keep: that of the task attempt named, whose presence in the
// node's target may have changed, journaled under generation Gen, or,
// with Restart, the start of a journal afresh from Gen. Job, Group and
// Index name the task (TaskAttempt), Attempt its attempt; Node is the
// node's place in the change set's TargetNodes. A journal holds the
// TargetChanges of a node in the order published; a node that holds the
// target of a generation g, from the journal's start on, is brought to
// the FSM's by the task attempts journaled under a generation above g
// (NodeTargetChanges gives their pods).
//
// Gen is the node's generation when the change was made, plus one: the
// generation the command moves the node to. A task its node reported
// ended leaves the target without moving it (the node knows): that change
// reaches the node with the next change of its target. A capbox's change
// restarts the journal and moves the generation: the pods of the tasks in
// it come and go with it, and the node gets its whole target.
//
// It holds no pointer and packs in 32 bytes: a plan journals one per task
// placed.
type TargetChange struct {
	Gen     uint64
	Job     uint64
	Index   uint32
	Attempt uint32
	Node    int32
	Group   uint16
	Restart bool
}

// TaskAttempt returns the task attempt c names.
func (c *TargetChange) TaskAttempt() TaskAttempt {
	return TaskAttempt{Task: TaskRef{Job: c.Job, Group: c.Group, Index: c.Index}, Attempt: c.Attempt}
}

// TargetNode is a node whose target journal a change set names.
type TargetNode struct {
	Name string
	// Tasks is how many tasks were active on the node at its last change
	// in the command, to bound its journal by.
	Tasks int32
}

// Changes is what one applied command changed, named, not copied, in the
// spirit of raft's Ready: a subscriber reads from the FSM what it needs of
// the jobs, groups, tasks and nodes named. It is valid only during the
// call that receives it: its slices are the FSM's, reused by the next
// command.
type Changes struct {
	Kind ChangeKind
	// Index is the applied command's raft index (ChangeApplied), the index
	// every command up to which is applied (ChangeComplete), or the applied
	// index of the state a ChangeReset starts from.
	Index uint64
	// Jobs are the numbers of the jobs (capbox sets included) whose
	// counters or state the command changed, ascending; Capboxes are
	// those of them that are capbox sets. A job forgotten by the command
	// is in Forgotten instead (ascending), with its capbox sets, and so
	// is a job whose summary the command pruned. Summarized are the jobs
	// of Forgotten that the command left a summary of (ascending): their
	// summaries are what the FSM answers for them now (AppendChangedJobs).
	Jobs, Capboxes, Forgotten, Summarized []uint64
	// Groups are the groups whose counters or pending tasks the command
	// changed, by job number, then index.
	Groups []GroupRef
	// Tasks are the tasks whose state, attempt or node the command
	// changed, each once, in the order of their first change (a capbox
	// task started in a capbox is not a task: its capbox's set is in
	// Capboxes).
	Tasks []TaskRef
	// Targets are the nodes whose target generation the command moved,
	// by name, and TargetGens their generations now, in the same order.
	Targets    []string
	TargetGens []uint64
	// TargetChanges are the entries of the nodes' target journals the
	// command made, in the order it made them, and TargetNodes the nodes
	// they name, each once.
	TargetChanges []TargetChange
	TargetNodes   []TargetNode
	// Nodes are the nodes whose part of a round's input (spec, state,
	// held and releasing resources, cached slots, distinct-node jobs) the
	// command changed, each once, in no order. NodeSet says that which
	// nodes are ready may have changed (a node joined or changed state).
	Nodes   []string
	NodeSet bool
	// seq numbers the change sets reset for a command, so that a node
	// knows whether it is in TargetNodes (node.targetSeq).
	seq uint64
}

// reset empties c's lists for the command at index, keeping their memory.
func (c *Changes) reset(kind ChangeKind, index uint64) {
	clear(c.Targets)
	clear(c.TargetNodes)
	clear(c.Nodes)
	c.Kind, c.Index, c.NodeSet = kind, index, false
	c.Nodes = c.Nodes[:0]
	c.Jobs, c.Capboxes, c.Forgotten, c.Summarized = c.Jobs[:0], c.Capboxes[:0], c.Forgotten[:0], c.Summarized[:0]
	c.Groups, c.Tasks, c.Targets = c.Groups[:0], c.Tasks[:0], c.Targets[:0]
	c.TargetGens, c.TargetChanges, c.TargetNodes = c.TargetGens[:0], c.TargetChanges[:0], c.TargetNodes[:0]
	c.seq++
}

// feed is the FSM's subscribers and the change sets it publishes to them.
type feed struct {
	// mu is held while the subscribers are called, and to add or remove
	// one, so that a subscriber sees every change set after its reset,
	// in order, one at a time.
	mu   sync.Mutex
	subs []*subscriber
	// c is the change set of the command being applied, and ctl the one
	// of a completion or reset; both are used on the apply goroutine only.
	c, ctl Changes
}

type subscriber struct{ fn func(*Changes) }

// Subscribe calls fn with every change set the FSM publishes from now
// on, until the returned function is called; that function waits for a
// call of fn in progress to return, so fn must not call it. fn is first
// called, before Subscribe returns, with a ChangeReset at the applied
// index, and then, in order and one at a time, on the goroutine that
// applies commands (raftkv's), after each command that applied (not one
// that failed: it changed nothing), each completion of raft entries, and
// each Load. Publishing happens outside the FSM's lock: fn may read the
// FSM, whose state is then at least as new as the change set (a change
// set may come after a reset whose reads already saw it, so what a
// subscriber derives must tolerate a change named twice). fn must not
// call Subscribe or block: the next command waits for it.
func (f *FSM) Subscribe(fn func(*Changes)) (unsubscribe func()) {
	s := &subscriber{fn: fn}
	f.feed.mu.Lock()
	defer f.feed.mu.Unlock()
	f.feed.subs = append(f.feed.subs, s)
	// The reset is its own value: the apply goroutine may be filling
	// the feed's.
	fn(&Changes{Kind: ChangeReset, Index: f.Applied()})
	return func() {
		f.feed.mu.Lock()
		defer f.feed.mu.Unlock()
		for i, x := range f.feed.subs {
			if x == s {
				f.feed.subs = append(f.feed.subs[:i:i], f.feed.subs[i+1:]...)
				return
			}
		}
	}
}

// publish calls the subscribers with c.
func (f *FSM) publish(c *Changes) {
	f.feed.mu.Lock()
	defer f.feed.mu.Unlock()
	for _, s := range f.feed.subs {
		s.fn(c)
	}
}

// publishControl publishes a completion or reset at index.
func (f *FSM) publishControl(kind ChangeKind, index uint64) {
	f.feed.ctl.reset(kind, index)
	f.publish(&f.feed.ctl)
}
