package fsm

import (
	"bytes"
	"cmp"
	"container/heap"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/dispatcher/placement"
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
		// slots holds every cached slot by expiry (and consumed ones until
		// they come due); nextSlot numbers the next.
		slots    slotHeap
		nextSlot uint64
		// inputChanged lists the nodes whose part of a round's input
		// (spec, resources, slots, distinct-node jobs) changed since the
		// kept RoundInput read them, each once; inputEpoch changes when
		// which nodes the input holds may have (a node joined or changed
		// state, a Load), and inputReader is the RoundInput read last.
		inputChanged []*node
		inputEpoch   uint64
		inputReader  *RoundInput
		// captasks are the capbox tasks, by their capbox's task, by name.
		captasks map[taskKey][]*captask
		// anySets is true once a capbox set exists.
		anySets bool
		// finished lists the finished jobs not yet forgotten.
		finished finishedQueue
	}
	// Scratch of Apply, used under mu's write lock: the groups and nodes
	// the command changed, each once (marked dirty while listed).
	dirtyGroups []*group
	dirtyNodes  []*node
	// dirtyTasks lists the tasks the command changed, each once (marked
	// listed while in it), for its change set.
	dirtyTasks []*task
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
	f.mu.inputChanged = nil
	f.mu.inputEpoch++
	f.mu.pending = pendingSet{}
	f.mu.queueUsed = map[string]api.Capacity{}
	f.mu.slots, f.mu.nextSlot = nil, 1
	// What was not stored belongs to the state being replaced.
	f.unstoredTasks, f.unstoredGroups, f.unstoredNodes = nil, nil, nil
	f.mu.captasks = map[taskKey][]*captask{}
	f.mu.anySets = false
	f.mu.finished = finishedQueue{}
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
	c := &f.feed.c
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
		c.Targets = append(c.Targets, n.spec.Name)
	}
	for _, t := range f.dirtyTasks {
		c.Tasks = append(c.Tasks, TaskRef{t.key.job, t.key.group, t.key.index})
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

// noteTargetLocked records that t, a task of j, may enter or leave n's
// target with this command, and marks n changed. A capbox's change
// restarts the journal: the pods of the tasks in it come and go with it.
func (f *FSM) noteTargetLocked(n *node, j *job, t *task) {
	if j.owner() != nil {
		f.restartJournalLocked(n)
		return
	}
	f.journalLocked(n, t)
	f.touchNode(n)
}

// journalLocked adds t to n's journal under n's next generation.
func (f *FSM) journalLocked(n *node, t *task) {
	n.journal = append(n.journal, targetChange{gen: n.gen + 1, key: t.key, attempt: t.attempt})
	if limit := minJournal + 4*len(n.tasks); len(n.journal) > limit {
		// Keep the newer half, cut where a generation starts.
		cut := len(n.journal) / 2
		for cut < len(n.journal) && n.journal[cut].gen == n.journal[cut-1].gen {
			cut++
		}
		n.journalFrom = n.journal[cut-1].gen
		n.journal = slices.Delete(n.journal, 0, cut)
	}
}

// noteEndedLocked records that t, a task of j, left n's target because n
// reported it ended. n knows that, so its target's generation does not
// change for it and its long-poll is not woken: the change is journaled
// under the next generation and reaches n with whatever changes its target
// next (a whole target leaves the task out at once). A task told to stop
// already left the target then. A capbox's end restarts the journal as
// any change of a capbox does.
func (f *FSM) noteEndedLocked(n *node, j *job, t *task) {
	switch {
	case j.owner() != nil:
		f.restartJournalLocked(n)
	case !t.stop:
		f.journalLocked(n, t)
	}
}

// minJournal is the fewest changes a node's journal keeps (a variable for
// the tests, which shrink it).
var minJournal = 64

// restartJournalLocked forgets n's target changes: from this command's
// generation on, a node gets its whole target once.
func (f *FSM) restartJournalLocked(n *node) {
	n.journal, n.journalFrom = n.journal[:0], n.gen+1
	f.touchNode(n)
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
	clear(f.dirtyGroups)
	clear(f.dirtyNodes)
	clear(f.dirtyTasks)
	f.dirtyGroups, f.dirtyNodes, f.dirtyTasks = f.dirtyGroups[:0], f.dirtyNodes[:0], f.dirtyTasks[:0]
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

func (f *FSM) submitLocked(w writer, now int64, d *dec) ([]byte, error) {
	// block is the command's block of specs, as the submit record keeps it.
	n, block, specs, fresh, err := readSpecs(d, "submit command")
	if err != nil {
		return nil, fmt.Errorf("fsm: submit: %w", err)
	}
	// The specs' strings share one copy of them: the block's own memory
	// when it was decompressed.
	var cd dec
	if fresh {
		cd = ownedDec(specs)
	} else {
		cd = sharedDec(specs)
	}
	if n > api.MaxItemsPerRequest {
		return nil, fmt.Errorf("fsm: submit: %w: more than %d jobs in one request", api.ErrTooLarge, api.MaxItemsPerRequest)
	}
	// Each spec is skimmed (skimSpec): the fields apply reads are copied
	// into its job, and the spec stays encoded in the command's shared copy
	// until something reads it (job.specOf). A corrupt spec rejects the
	// command before anything changes. The command's jobs and groups are
	// allocated together.
	jobs := make([]job, n)
	var idem []string // by spec, its idempotency key; nil when none has one
	// The command's task groups, in order, as the skim starts them; a job
	// has most often one.
	groups := make([]group, 0, n)
	tgEnd := make([]int, n)
	for i := range jobs {
		sd := cd.sub()
		if cd.err != nil {
			break
		}
		var (
			key string
			ok  bool
		)
		jobs[i].specEnc = sd.src
		jobs[i].jobFields, key, groups, ok = skimSpec(sd.src, groups)
		if !ok {
			return nil, fmt.Errorf("submit command: job %d: %w", i, specError(sd.src))
		}
		if key != "" {
			if idem == nil {
				idem = make([]string, n)
			}
			idem[i] = key
		}
		tgEnd[i] = len(groups)
	}
	if cap(groups) > len(groups)+len(groups)/4 { // grown for jobs of several groups: keep no more than they need
		groups = slices.Clone(groups)
	}
	if err := cd.done("submit command"); err != nil {
		return nil, err
	}
	if n == 0 {
		// A command of no jobs only stores the sequence.
		w.Set(keyJobSeq, binary.BigEndian.AppendUint64(nil, f.mu.nextJob))
		return (&SubmitResult{}).encode(), nil
	}
	// SubmitJobs defaulted and validated the specs before they were
	// proposed. Nothing below can fail.
	var existing []uint64 // by spec, the jobs that idempotency keys named (0: none)
	gptrs := make([]*group, len(groups))
	first, created := f.mu.nextJob, 0
	sub := &submitRecord{first: first}
	// The new jobs' IDs are cut from one string, made once below: "j" and
	// the number, back to back; idEnd[i] is where job i's ends (0: none).
	idBuf, idEnd := make([]byte, 0, n*8), make([]int, n)
	tgStart := 0
	for i := range jobs {
		jgroups := groups[tgStart:tgEnd[i]]
		tgStart = tgEnd[i]
		if k := keyOf(idem, i); k != "" {
			if num, ok := f.mu.idem[k]; ok {
				if existing == nil {
					existing = make([]uint64, n)
				}
				existing[i] = num
				continue
			}
		}
		num := f.mu.nextJob
		f.mu.nextJob++
		j := &jobs[i]
		j.num, j.submitted, j.sub = num, now, sub
		idBuf = strconv.AppendUint(append(idBuf, 'j'), num, 10)
		idEnd[i] = len(idBuf)
		ng := len(jgroups)
		j.groups, gptrs = gptrs[:ng:ng], gptrs[ng:]
		for gi := range jgroups {
			g := &jgroups[gi]
			g.job, g.idx = j, uint16(gi)
			j.groups[gi] = g
			f.touchGroup(g)
		}
		f.mu.jobs.put(j)
		created++
		if k := keyOf(idem, i); k != "" {
			f.mu.idem[k] = num
			j.idem = k
			w.Set(idemKey(k), binary.BigEndian.AppendUint64(nil, num))
		}
	}
	// The result is written as the IDs are cut.
	res := newResultEnc(n, len(idBuf))
	ids, start := string(idBuf), 0
	for i, end := range idEnd {
		if end > 0 {
			jobs[i].id, start = ids[start:end], end
			res.add(jobs[i].id, false)
		} else {
			res.add(jobID(existing[i]), true)
		}
	}
	// The new jobs' specs, as submitted, go to one submit record: one key
	// for the command, not one per job. When every job is new, the record
	// holds the command's own block of specs, compressed as it came.
	sub.count, sub.live = created, created
	if created > 0 {
		if created < n {
			rec := enc{b: f.vbuf[:0]}
			for i := range jobs {
				if jobs[i].num != 0 {
					rec.str(jobs[i].specEnc)
				}
			}
			f.vbuf = rec.b
			f.bbuf = appendSpecBlock(f.bbuf[:0], rec.b)
			block = f.bbuf
		}
		f.kbuf = appendSubmitKey(f.kbuf, first)
		f.sbuf = encodeSubmit(f.sbuf, now, created, block)
		w.Set(f.kbuf, f.sbuf)
	}
	w.Set(keyJobSeq, binary.BigEndian.AppendUint64(nil, f.mu.nextJob))
	return res.b, nil
}

// keyOf returns idem[i], or "" when idem is nil.
func keyOf(idem []string, i int) string {
	if idem == nil {
		return ""
	}
	return idem[i]
}

func (f *FSM) registerLocked(w writer, d *dec) ([]byte, error) {
	js := d.bytes()
	if err := d.done("register command"); err != nil {
		return nil, err
	}
	var spec api.NodeSpec
	if err := json.Unmarshal(js, &spec); err != nil {
		return nil, fmt.Errorf("%w: register command: %v", ErrCorrupt, err)
	}
	if err := spec.Validate(); err != nil {
		return nil, fmt.Errorf("fsm: register node %q: %w", spec.Name, err)
	}
	n, ok := f.mu.nodes[spec.Name]
	if !ok {
		n = &node{state: api.NodeReady, jobs: map[uint64]int{}}
		n.setSpec(spec)
		f.mu.nodes[spec.Name] = n
		i, _ := slices.BinarySearchFunc(f.mu.nodeList, n, byName)
		f.mu.nodeList = slices.Insert(f.mu.nodeList, i, n)
		f.mu.inputEpoch++
	}
	n.setSpec(spec)
	n.specJSON = bytes.Clone(js) // the command is only valid during Apply
	f.inputChangedLocked(n)
	if n.state == api.NodeDown {
		n.state = api.NodeReady
		f.mu.inputEpoch++
	}
	w.Set(nodeKey(spec.Name), encodeNode(n))
	return nil, nil
}

func (f *FSM) nodeStateLocked(w writer, now int64, d *dec) ([]byte, error) {
	name, state := d.str(), api.NodeState(d.str())
	if err := d.done("node state command"); err != nil {
		return nil, err
	}
	if !validNodeState(state) {
		return nil, fmt.Errorf("%w: node state %q", ErrCorrupt, state)
	}
	n, ok := f.mu.nodes[name]
	if !ok {
		return nil, fmt.Errorf("%w: node %q", ErrNotFound, name)
	}
	var res NodeStateResult
	if state == api.NodeDown {
		ts := slices.Clone(n.tasks)
		slices.SortFunc(ts, func(a, b *task) int { return cmpKey(a.key, b.key) })
		for _, t := range ts {
			res.Lost++
			if f.finishLocked(w, t, api.TaskLost, api.ReasonLost, 0, now, true) {
				res.Requeued++
			}
		}
		for len(n.slots) > 0 {
			f.removeSlotLocked(w, n.slots[0])
		}
	}
	if n.state != state {
		n.state = state
		f.mu.inputEpoch++
		w.Set(nodeKey(name), encodeNode(n))
	}
	return encodeUvarints(uint64(res.Lost), uint64(res.Requeued)), nil
}

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
		// Stopped for higher-priority work: it did nothing wrong.
		t.reason = api.ReasonPreempted
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
	ps := make([]placement.Preemption, d.count(4))
	for i := range ps {
		ps[i] = placement.Preemption{Task: d.str(), Node: d.str(), For: placement.GroupKey{Job: d.str(), Group: d.str()}}
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
func (f *FSM) liveGroupLocked(k placement.GroupKey) (*job, *group, RejectCode, string) {
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
func (f *FSM) preemptOneLocked(w writer, now int64, p *placement.Preemption) (RejectCode, string) {
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

// byName orders nodes by name.
func byName(a, b *node) int { return cmp.Compare(a.spec.Name, b.spec.Name) }

// sortedNodeListLocked returns the nodes sorted by name. The slice is the
// FSM's own: read it under the lock, never change it.
func (f *FSM) sortedNodeListLocked() []*node {
	return f.mu.nodeList
}

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
	j, g, code, detail := f.liveGroupLocked(placement.GroupKey{Job: a.job, Group: a.group})
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
	f.touchGroup(g)
	f.touchNode(n)
	return 0, ""
}

// cacheSlotLocked keeps the resources of a task of class q and demand d
// that ended on node n as a cached slot, when the command caches slots and
// the node is ready.
func (f *FSM) cacheSlotLocked(w writer, n *node, q api.QoS, d api.Capacity, now int64) {
	if f.slotTTL == 0 || n.state != api.NodeReady {
		return
	}
	s := &slot{id: "s" + strconv.FormatUint(f.mu.nextSlot, 10), node: n, qos: q, shape: d, expires: now + f.slotTTL}
	f.mu.nextSlot++
	w.Set(keySlotSeq, binary.BigEndian.AppendUint64(nil, f.mu.nextSlot))
	f.addSlotLocked(s)
	f.vbuf = encodeSlot(f.vbuf, s)
	w.Set(slotKey(n.spec.Name, s.id), f.vbuf)
}

// addSlotLocked puts s on its node (kept by expiry, then ID) and in the
// expiry heap.
func (f *FSM) addSlotLocked(s *slot) {
	n := s.node
	i, _ := slices.BinarySearchFunc(n.slots, s, func(a, b *slot) int {
		return cmp.Or(cmp.Compare(a.expires, b.expires), cmp.Compare(a.id, b.id))
	})
	n.slots = slices.Insert(n.slots, i, s)
	n.cached.AddTier(s.qos, s.shape, 1)
	f.inputChangedLocked(n)
	heap.Push(&f.mu.slots, s)
}

// removeSlotLocked drops a slot (consumed, expired, or its node down): its
// resources leave the node's cache. It stays in the expiry heap, marked
// gone, until it comes due.
func (f *FSM) removeSlotLocked(w writer, s *slot) {
	n := s.node
	n.slots = slices.DeleteFunc(n.slots, func(x *slot) bool { return x == s })
	n.cached.AddTier(s.qos, s.shape, -1)
	f.inputChangedLocked(n)
	w.Delete(slotKey(n.spec.Name, s.id))
	s.node = nil
}

// expireSlotsLocked drops the slots whose TTL ended by now.
func (f *FSM) expireSlotsLocked(w writer, now int64) {
	for len(f.mu.slots) > 0 && f.mu.slots[0].expires <= now {
		s := heap.Pop(&f.mu.slots).(*slot)
		if s.node != nil {
			f.removeSlotLocked(w, s)
		}
	}
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
}

// inputChangedLocked notes that n's part of a round's input changed,
// for the kept RoundInput.
func (f *FSM) inputChangedLocked(n *node) {
	if !n.inputChanged {
		n.inputChanged = true
		f.mu.inputChanged = append(f.mu.inputChanged, n)
	}
}

// taskLocked returns the task k names, or nil if it was never placed.
func (f *FSM) taskLocked(k taskKey) *task {
	j := f.mu.jobs.get(k.job)
	if j == nil || int(k.group) >= len(j.groups) {
		return nil
	}
	g := j.groups[k.group]
	if int64(k.index) >= int64(len(g.tasks)) {
		return nil
	}
	return g.tasks[k.index]
}

// eachTaskLocked calls fn for every task placed at least once, in key
// order.
func (f *FSM) eachTaskLocked(fn func(*task)) {
	for j := range f.mu.jobs.all() {
		for _, g := range j.groups {
			for _, t := range g.tasks {
				fn(t)
			}
		}
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

// report is a decoded report of an UpdateTasks command.
type report struct {
	node, id string
	state    api.TaskState
	reason   api.TaskReason
	exit     int32
	key      taskKey
	attempt  uint32
	action   uint8
	t        *task    // the task the report is about, found by pass 1
	ct       *captask // or the capbox task
}

const (
	actApply uint8 = iota
	actNoOp
	actStale
)

func (f *FSM) updateLocked(w writer, now int64, version byte, cmd *dec) ([]byte, error) {
	// The reports' node names and task IDs alias the command, which
	// outlives no apply: nothing keeps them but an error, which clones.
	// Reasons, which tasks keep, are the api's constants or copies.
	sd := viewDec(cmd.b)
	d := &sd
	// The reports refer to the command: none is kept past it, so every
	// report the memory held is zero again.
	rs := readReports(d, version, f.reports[:0])
	defer func() { clear(rs); f.reports = rs[:0] }()
	var slotTTL int64
	if len(d.b) > 0 {
		slotTTL = d.varint()
	}
	if err := d.done("update command"); err != nil {
		return nil, err
	}
	if slotTTL < 0 {
		return nil, fmt.Errorf("%w: slot TTL %d", ErrCorrupt, slotTTL)
	}
	f.slotTTL = slotTTL
	defer func() { f.slotTTL = 0 }()
	// Pass 1: check every report against the state the reports before it
	// leave (kept on the task, task.overlay), writing nothing.
	defer func() {
		for i := range rs {
			if t := rs[i].t; t != nil {
				t.overlaid, t.overlay = false, 0
			}
		}
	}()
	var ctOverlay map[*captask]api.TaskState
	for i := range rs {
		r := &rs[i]
		bad := func(err error) error { return &ReportError{Index: i, TaskID: strings.Clone(r.id), Err: err} }
		if _, _, ok := splitCapTaskID(r.id); ok {
			if ctOverlay == nil {
				ctOverlay = map[*captask]api.TaskState{}
			}
			var err error
			if r.ct, err = f.capTaskReport(r, ctOverlay); err != nil {
				return nil, bad(err)
			}
			continue
		}
		var ok bool
		if r.key, r.attempt, ok = parseTaskID(r.id); !ok {
			return nil, bad(fmt.Errorf("%w: malformed task ID", ErrBadReport))
		}
		t := f.taskLocked(r.key)
		if t == nil || t.attempt == 0 { // attempt 0: a capbox released before it was placed
			return nil, bad(fmt.Errorf("%w: no such task", ErrBadReport))
		}
		r.t = t
		cur := t.state
		if t.overlaid {
			cur = t.overlay
		}
		if err := r.classify(cur, r.attempt != t.attempt || r.node != t.node || t.closed); err != nil {
			return nil, bad(err)
		}
		if r.action == actApply {
			t.overlay, t.overlaid = r.state, true
		}
	}
	// Pass 2: apply; nothing can fail now.
	var res UpdateResult
	for i := range rs {
		r := &rs[i]
		switch r.action {
		case actNoOp:
			res.NoOp++
			continue
		case actStale:
			res.Stale++
			continue
		}
		res.Applied++
		if r.ct != nil {
			f.applyCapTaskReport(w, r.ct, r, now)
			continue
		}
		t := r.t
		if r.state.Done() {
			if f.finishLocked(w, t, r.state, r.reason, r.exit, now, false) {
				res.Requeued++
			}
			continue
		}
		t.state, t.reason, t.updated = r.state, r.reason, now
		f.writeTask(t)
		if j := f.mu.jobs.get(t.key.job); j.owner() != nil {
			// A capbox's appmaster watches for it to run: the change
			// goes in the set's change log.
			f.touchGroup(j.groups[t.key.group])
		}
	}
	return res.encode(), nil
}

// readReports reads an update command's reports, written by command
// version version, into rs's memory.
func readReports(d *dec, version byte, rs []report) []report {
	n := d.count(6)
	rs = slices.Grow(rs[:0], n)[:n]
	node := ""
	for i := range rs {
		r := &rs[i]
		if version == 5 { // UpdateTasksCaching's doc says what 6 changed
			r.node, r.id = d.str(), d.str()
			r.state, r.reason, r.exit = api.TaskState(d.byte()), internReason(d.bytes()), int32(d.varint())
			d.varint() // the nodelet's time
		} else {
			node = d.repeatStr(node)
			r.node, r.id = node, d.str()
			r.state, r.reason, r.exit = api.TaskState(d.byte()), readReason(d), int32(d.varint())
		}
		d.bytes() // message: not kept yet
	}
	return rs
}

// knownReasons are the reasons nodes report, for internReason and
// reasonCode. An update command carries a reason as its index here, so the
// order is part of the command format: append only.
// Code 9, api.ReasonImageDenied, is newer than version 6 itself: a log
// written before it spells that reason out after a 0, which internReason
// reads as this constant. Codes 10 to 12 came with version 7.
var knownReasons = [...]api.TaskReason{api.ReasonStarted, api.ReasonExited, api.ReasonOOMKilled, api.ReasonMemoryKiller,
	api.ReasonStartFailed, api.ReasonStopped, api.ReasonTimeLimit, api.ReasonLost, api.ReasonImageDenied,
	api.ReasonNetworkDenied, api.ReasonVolumeDenied, api.ReasonScratchFull}

// reasonCode is r's code in an update command: its index in knownReasons
// plus one, or 0 for a reason spelled out after it.
func reasonCode(r api.TaskReason) byte {
	for i, k := range knownReasons {
		if r == k {
			return byte(i + 1)
		}
	}
	return 0
}

// readReason reads a reason reasonCode wrote, and the spelling after a 0.
func readReason(d *dec) api.TaskReason {
	c := d.byte()
	switch {
	case c == 0:
		return internReason(d.bytes())
	case int(c) <= len(knownReasons):
		return knownReasons[c-1]
	}
	d.fail("reason code")
	return ""
}

// internReason returns the reason b spells: one of the api's constants,
// or a copy of b for another, so that a task keeping it keeps nothing else
// alive.
func internReason(b []byte) api.TaskReason {
	for _, r := range knownReasons {
		if string(b) == string(r) {
			return r
		}
	}
	return api.TaskReason(b)
}

// classify sets what to do with a report about a task in state cur
// (after the reports before it), stale when it is about an attempt or
// node the task has left; it returns the error that rejects the command
// for a state no node reports or a transition api forbids.
func (r *report) classify(cur api.TaskState, stale bool) error {
	if !r.state.Valid() || r.state == api.TaskPending || r.state == api.TaskAssigned {
		return fmt.Errorf("%w: nodes do not report state %v", ErrBadReport, r.state)
	}
	switch {
	case stale:
		r.action = actStale
	case r.state == cur:
		r.action = actNoOp
	case progress(r.state) < progress(cur):
		// Reports are at least once: a node whose acknowledgement was
		// lost sends an earlier state again after a later one was
		// committed. It says nothing new.
		r.action = actStale
	default:
		if err := api.CheckTaskTransition(cur, r.state); err != nil {
			return err
		}
		r.action = actApply
	}
	return nil
}

// progress orders the states a node reports along a task's life: assigned,
// starting, running, then any end.
func progress(s api.TaskState) int {
	switch s {
	case api.TaskAssigned:
		return 1
	case api.TaskStarting:
		return 2
	case api.TaskRunning:
		return 3
	case api.TaskPending:
		return 0
	default:
		return 4
	}
}

// markChangedLocked records that the command at index changed j.
func (f *FSM) markChangedLocked(j *job, index uint64) {
	j.changed = index
}
