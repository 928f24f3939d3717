package fsm

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/raftkv"
)

// Errors callers act on. Each rejects its command whole: nothing of it is
// written and the FSM's state is unchanged.
var (
	// ErrNotFound: the command names a job or node that does not exist.
	ErrNotFound = errors.New("fsm: not found")
	// ErrStalePlan: the plan comes from a term older than a plan already
	// committed (a deposed leader's).
	ErrStalePlan = errors.New("fsm: plan from an older term")
	// ErrBadReport is wrapped by a *ReportError about a report that cannot
	// apply: a malformed or unknown task ID, or a state a node may not report.
	// Illegal transitions wrap api.ErrBadTransition instead.
	ErrBadReport = errors.New("fsm: bad task report")
)

// ReportError rejects an UpdateTasks command because of one report.
type ReportError struct {
	Index  int    // the report's index in the command
	TaskID string // as reported
	Err    error  // wraps ErrBadReport or api.ErrBadTransition
}

func (e *ReportError) Error() string {
	return fmt.Sprintf("fsm: report %d (task %s): %v", e.Index, e.TaskID, trimErr(e.Err.Error()))
}

func (e *ReportError) Unwrap() error { return e.Err }

// keyApplied holds the index of the last command applied.
var keyApplied = []byte(prefixMeta + "applied")

// writer is what Apply writes through: *raftkv.Batch, or a map in tests.
type writer interface {
	Set(key, value []byte)
	Delete(key []byte)
	// DeleteRange deletes the keys in [start, end).
	DeleteRange(start, end []byte)
}

// FSM is the dispatcher's state machine. Apply (the raftkv replica's apply
// goroutine) is its only writer; the read methods are safe to call
// concurrently with it.
type FSM struct {
	// slotTTL is the cached-slot TTL of the command being applied (0: it
	// caches nothing), in nanoseconds.
	slotTTL int64
	// version is the encoding version of the command being applied.
	version byte
	mu      struct {
		sync.RWMutex
		// Every field below is guarded by mu.
		applied uint64
		// complete is the last index whose every command has been applied
		// (raftkv says so through EntriesApplied): readers of the change
		// logs resume from it, since more commands of the entry at applied
		// may still come.
		complete uint64
		nextJob  uint64 // the number the next new job gets; from 1
		planTerm uint64 // the highest term of a committed plan
		jobs     jobTable
		idem     map[string]uint64 // idempotency key → job number
		nodes    map[string]*node
		// nodeList is nodes sorted by name: rounds and listings walk it
		// rather than sort 10,000 names each time.
		nodeList []*node
		// pending holds the groups with tasks waiting for placement (of
		// jobs not cancelled).
		pending pendingSet
		// queueUsed is what each queue's active tasks hold, both tiers
		// summed; a queue holding nothing has no entry.
		queueUsed map[string]api.Capacity
		// queueTasks counts each queue's active tasks; a queue with none
		// has no entry.
		queueTasks map[string]int64
		// queues holds the queues' settings (SetQueue); a queue without
		// has no entry.
		queues map[string]api.QueueSettings
		// slots holds every cached slot by expiry (and consumed ones until
		// they come due); nextSlot numbers the next.
		slots    slotHeap
		nextSlot uint64
		// captasks are the capbox tasks, by their capbox's task, by name.
		captasks map[taskKey][]*captask
		// anySets is true once a capbox set exists.
		anySets bool
		// finished lists the finished jobs not yet forgotten.
		finished finishedQueue
		// history holds the summaries of forgotten jobs (history.go).
		history history
	}
	// Scratch of Apply, used under mu's write lock: the groups and nodes
	// the command changed, each once (marked dirty while listed).
	dirtyGroups []*group
	dirtyNodes  []*node
	// dirtyTasks lists the tasks the command changed, each once (marked
	// listed while in it), and inputDirty the nodes whose part of a
	// round's input it changed (marked inputDirty), for its change set.
	dirtyTasks []*task
	inputDirty []*node
	// feed publishes each command's change set (changes.go).
	feed feed
	// unstored lists the tasks, groups and nodes whose records (task
	// records, group records, target generations) changed since the state
	// was last stored, each once (marked unstored while listed): they are
	// written when it is next stored (WriteDeferred), so a record that
	// changes many times in between reaches the store once.
	unstoredTasks  []*task
	unstoredGroups []*group
	unstoredNodes  []*node
	kbuf, vbuf     []byte
	sbuf           []byte // a submit record
	bbuf           []byte // a block of specs
	// reports is updateLocked's, kept for the next update command (every
	// replica applies a few hundred a second).
	reports []report
}

var (
	_ raftkv.StateMachine = (*FSM)(nil)
	_ raftkv.Loader       = (*FSM)(nil)
)

// New returns an empty FSM. Give it to raftkv as Config.StateMachine; the
// replica loads it from the store at Open.
func New() *FSM {
	f := &FSM{}
	f.resetLocked()
	return f
}

func (f *FSM) resetLocked() {
	f.mu.applied, f.mu.complete, f.mu.nextJob, f.mu.planTerm = 0, 0, 1, 0
	f.mu.jobs = jobTable{}
	f.mu.idem = map[string]uint64{}
	f.mu.nodes = map[string]*node{}
	f.mu.nodeList = nil
	f.mu.pending = pendingSet{}
	f.mu.queueUsed = map[string]api.Capacity{}
	f.mu.queueTasks = map[string]int64{}
	f.mu.queues = map[string]api.QueueSettings{}
	f.mu.slots, f.mu.nextSlot = nil, 1
	// What was not stored belongs to the state being replaced.
	f.unstoredTasks, f.unstoredGroups, f.unstoredNodes = nil, nil, nil
	f.mu.captasks = map[taskKey][]*captask{}
	f.mu.anySets = false
	f.mu.finished = finishedQueue{}
	f.mu.history = history{}
}

// Apply applies one committed command (see the command constructors). It is
// deterministic, and on error it has written nothing and changed nothing.
// Once applied, the command's change set is published to the subscribers
// (Subscribe), after the FSM's lock is released.
func (f *FSM) Apply(b *raftkv.Batch, index uint64, cmd []byte) ([]byte, error) {
	return f.apply(b, index, cmd)
}

func (f *FSM) apply(w writer, index uint64, cmd []byte) ([]byte, error) {
	if len(cmd) < 2 {
		return nil, fmt.Errorf("%w: command of %d bytes", ErrCorrupt, len(cmd))
	}
	if cmd[1] < oldestCommandVersion || cmd[1] > commandVersion {
		return nil, fmt.Errorf("%w: command version %d, want %d to %d", ErrCorrupt, cmd[1], oldestCommandVersion, commandVersion)
	}
	res, err := f.applyLocking(w, index, cmd)
	if err == nil {
		f.publish(&f.feed.c)
	}
	return res, err
}

// applyLocking applies cmd under the FSM's lock and leaves its change set
// in f.feed.c.
func (f *FSM) applyLocking(w writer, index uint64, cmd []byte) ([]byte, error) {
	d := &dec{b: cmd[2:]}
	now := d.varint()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.resetDirty()
	f.feed.c.reset(ChangeApplied, index)
	f.version = cmd[1]
	var res []byte
	var err error
	switch cmd[0] {
	case cmdSubmit:
		res, err = f.submitLocked(w, now, d)
	case cmdRegisterNode:
		res, err = f.registerLocked(w, d)
	case cmdNodeState:
		res, err = f.nodeStateLocked(w, now, d)
	case cmdPlan:
		res, err = f.planLocked(w, now, d)
	case cmdUpdateTasks:
		res, err = f.updateLocked(w, now, cmd[1], d)
	case cmdCancel:
		res, err = f.cancelLocked(w, now, d)
	case cmdPreempt:
		res, err = f.preemptLocked(w, now, d)
	case cmdCreateCapboxes:
		res, err = f.createCapboxesLocked(w, now, d)
	case cmdReleaseCapboxes:
		res, err = f.releaseCapboxesLocked(w, now, d)
	case cmdStartCapTasks:
		res, err = f.startCapTasksLocked(w, now, d)
	case cmdStopCapTasks:
		res, err = f.stopCapTasksLocked(w, now, d)
	case cmdForget:
		res, err = f.forgetLocked(w, d)
	case cmdDrainNode:
		res, err = f.drainLocked(w, now, d)
	case cmdUndrainNode:
		res, err = f.undrainLocked(w, d)
	case cmdRemoveNode:
		res, err = f.removeNodeLocked(w, d)
	case cmdEndDrain:
		res, err = f.endDrainCmdLocked(w, now, d)
	case cmdPruneHistory:
		res, err = f.pruneLocked(w, d)
	case cmdSetQueue:
		res, err = f.setQueueLocked(w, d)
	default:
		err = fmt.Errorf("%w: unknown command tag %d", ErrCorrupt, cmd[0])
	}
	if err != nil {
		return nil, err
	}
	f.endAppmastersLocked(w, now)
	f.expireSlotsLocked(w, now)
	f.flushLocked(index, now)
	f.mu.applied = index
	return res, nil
}

// flushLocked settles the groups, nodes and tasks the command at index
// changed: it marks the groups' jobs changed (and finished, when they did,
// at now), keeps the pending index in step, bumps the nodes' target
// generations, lists the groups' records and the generations for
// WriteDeferred, and fills the command's change set.
func (f *FSM) flushLocked(index uint64, now int64) {
	defer f.resetDirty()
	// The change set's lists grow once, to what the command changed.
	c := &f.feed.c
	c.Jobs, c.Groups = slices.Grow(c.Jobs, len(f.dirtyGroups)), slices.Grow(c.Groups, len(f.dirtyGroups))
	c.Targets, c.Tasks = slices.Grow(c.Targets, len(f.dirtyNodes)), slices.Grow(c.Tasks, len(f.dirtyTasks))
	c.TargetGens = slices.Grow(c.TargetGens, len(f.dirtyNodes))
	c.Nodes = slices.Grow(c.Nodes, len(f.inputDirty))
	slices.SortFunc(f.dirtyGroups, func(a, b *group) int {
		return cmp.Or(cmp.Compare(a.job.num, b.job.num), cmp.Compare(a.idx, b.idx))
	})
	slices.SortFunc(f.dirtyNodes, func(a, b *node) int { return cmp.Compare(a.spec.Name, b.spec.Name) })
	for i, g := range f.dirtyGroups {
		f.markChangedLocked(g.job, index)
		if !g.unstored {
			g.unstored = true
			f.unstoredGroups = append(f.unstoredGroups, g)
		}
		f.syncPendingLocked(g)
		c.Groups = append(c.Groups, GroupRef{g.job.num, g.idx})
		if i+1 == len(f.dirtyGroups) || f.dirtyGroups[i+1].job != g.job {
			f.noteFinishedLocked(g.job, now) // once a job: its groups are together
			if !g.job.forgotten {
				c.Jobs = append(c.Jobs, g.job.num)
				if g.job.owner() != nil {
					c.Capboxes = append(c.Capboxes, g.job.num)
				}
			}
		}
	}
	for _, n := range f.dirtyNodes {
		n.gen++
		if !n.unstored {
			n.unstored = true
			f.unstoredNodes = append(f.unstoredNodes, n)
		}
		c.Targets, c.TargetGens = append(c.Targets, n.spec.Name), append(c.TargetGens, n.gen)
	}
	for _, t := range f.dirtyTasks {
		c.Tasks = append(c.Tasks, TaskRef{t.key.job, t.key.group, t.key.index})
	}
	for _, n := range f.inputDirty {
		c.Nodes = append(c.Nodes, n.spec.Name)
	}
}

// WriteDeferred writes the records changed since the state was last stored
// (raftkv.Deferrer): the task records, the group records and the target
// generations, each as it is now, and the applied index. Records of jobs
// forgotten since were deleted with them and are not written again.
func (f *FSM) WriteDeferred(b *raftkv.Batch) { f.writeDeferred(b) }

func (f *FSM) writeDeferred(w writer) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, t := range f.unstoredTasks {
		if !t.unstored {
			continue // written with an earlier task of its record
		}
		t.unstored = false
		j := f.mu.jobs.get(t.key.job)
		if j == nil || j.forgotten {
			continue
		}
		ts := taskRecord(j.groups[t.key.group].tasks, t.key.index)
		for _, u := range ts {
			u.unstored = false
		}
		f.kbuf = taskRecordKey(f.kbuf, ts[0].key)
		f.vbuf = encodeTasks(f.vbuf, ts)
		w.Set(f.kbuf, f.vbuf)
	}
	for _, g := range f.unstoredGroups {
		g.unstored = false
		// A group in its initial state has no record (Load starts every
		// group so): a submit writes one key per job, not one per group
		// too.
		if !g.job.forgotten && !g.initial() {
			f.kbuf = appendGroupKey(f.kbuf, g.job.num, g.idx)
			f.vbuf = encodeGroup(f.vbuf, g)
			w.Set(f.kbuf, f.vbuf)
		}
	}
	for _, n := range f.unstoredNodes {
		n.unstored = false
		f.kbuf = appendGenKey(f.kbuf, n.spec.Name)
		w.Set(f.kbuf, binary.BigEndian.AppendUint64(f.vbuf[:0], n.gen))
	}
	clear(f.unstoredTasks)
	clear(f.unstoredGroups)
	clear(f.unstoredNodes)
	f.unstoredTasks, f.unstoredGroups, f.unstoredNodes = f.unstoredTasks[:0], f.unstoredGroups[:0], f.unstoredNodes[:0]
	w.Set(keyApplied, binary.BigEndian.AppendUint64(f.vbuf[:0], f.mu.applied))
}

// EntriesApplied records that every command of the raft entries up to
// index has been applied (raftkv.EntryAware).
// Subscribers are told (ChangeComplete).
func (f *FSM) EntriesApplied(index uint64) {
	f.mu.Lock()
	f.mu.complete = max(f.mu.complete, index)
	complete := f.mu.complete
	f.mu.Unlock()
	f.publishControl(ChangeComplete, complete)
}

// CompleteIndex returns the last index all of whose commands are applied. It may be ahead of Applied, past entries that carry no command.
func (f *FSM) CompleteIndex() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.mu.complete
}

// touchGroup and touchNode list a group or node the command changed, once,
// for flushLocked to write.
func (f *FSM) touchGroup(g *group) {
	if !g.dirty {
		g.dirty = true
		f.dirtyGroups = append(f.dirtyGroups, g)
	}
}

func (f *FSM) touchNode(n *node) {
	if !n.dirty {
		n.dirty = true
		f.dirtyNodes = append(f.dirtyNodes, n)
	}
}

// resetDirty empties the lists of changed groups and nodes.
func (f *FSM) resetDirty() {
	for _, g := range f.dirtyGroups {
		g.dirty = false
	}
	for _, n := range f.dirtyNodes {
		n.dirty = false
	}
	for _, t := range f.dirtyTasks {
		t.listed = false
	}
	for _, n := range f.inputDirty {
		n.inputDirty = false
	}
	clear(f.dirtyGroups)
	clear(f.dirtyNodes)
	clear(f.dirtyTasks)
	clear(f.inputDirty)
	f.dirtyGroups, f.dirtyNodes, f.dirtyTasks, f.inputDirty = f.dirtyGroups[:0], f.dirtyNodes[:0], f.dirtyTasks[:0], f.inputDirty[:0]
}

func (f *FSM) syncPendingLocked(g *group) {
	if !g.job.cancelled && g.pending() > 0 {
		f.mu.pending.add(g)
	} else {
		f.mu.pending.remove(g)
	}
}

// pendingSet is a set of groups: a paged list, and each group's place in it
// (group.pendingAt, 0 when absent), so that adding and removing cost no
// hashing.
type pendingSet struct{ gs paged[*group] }

func (s *pendingSet) add(g *group) {
	if g.pendingAt == 0 {
		s.gs.push(g)
		g.pendingAt = s.gs.len()
	}
}

func (s *pendingSet) remove(g *group) {
	if g.pendingAt == 0 {
		return
	}
	n := s.gs.len()
	last := *s.gs.at(n - 1)
	*s.gs.at(g.pendingAt - 1), last.pendingAt = last, g.pendingAt
	s.gs.resize(n - 1)
	g.pendingAt = 0
}

// writeTask lists t's record for writing when the state is next stored
// (WriteDeferred): a task changes a few times within a second (placed,
// running, ended), and its record then reaches the store once.
// It lists t in the command's change set too.
func (f *FSM) writeTask(t *task) {
	if !t.unstored {
		t.unstored = true
		f.unstoredTasks = append(f.unstoredTasks, t)
	}
	if !t.listed {
		t.listed = true
		f.dirtyTasks = append(f.dirtyTasks, t)
	}
}

// markChangedLocked records that the command at index changed j.
func (f *FSM) markChangedLocked(j *job, index uint64) {
	j.changed = index
}
