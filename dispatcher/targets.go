package dispatcher

import (
	"cmp"
	"slices"
	"sync"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/dispatcher/fsm"
)

// targetSource is what a targetJournal reads from the FSM: *fsm.FSM.
type targetSource interface {
	// NodeGeneration returns the generation of a node's target.
	NodeGeneration(name string) (gen uint64, ok bool)
	// NodeTarget returns a node's whole target and its generation,
	// read together.
	NodeTarget(name string) (gen uint64, pods []api.TargetPod, ok bool)
	// NodeTargetChanges returns the pods of the task attempts named that
	// are in a node's target, and the task IDs of the others.
	NodeTargetChanges(name string, changes []fsm.TaskAttempt) (gen uint64, pods []api.TargetPod, removed []string, ok bool)
}

// minJournal is the fewest changes a node's journal keeps (a variable for
// the tests, which shrink it).
var minJournal = 64

// targetJournal is the view of the FSM's change sets that keeps each
// node's target journal (fsm.TargetChange), so that a node's long-poll is
// answered with the changes since the target it holds, at a cost in
// proportion to them and not to the node's pods: a node packed with
// hundreds of short tasks sees its target change hundreds of times a
// second. A journal is bounded by its node's tasks: past minJournal and
// four entries per task, its older half goes, cut where a generation
// starts. A reset forgets every journal: each node is then answered with
// its whole target once.
//
// Invariants, under mu, for each node's journal j:
//
//   - j.changes holds, in the order consumed, every change of the node
//     journaled under a generation above j.from since j started (its
//     node's first change after the last reset, or a restart), and no
//     other: j.from is the first change's generation (not the one
//     before: a change of an ended task journaled under the same
//     generation may have come before the subscription), a restart's,
//     or where a trim cut.
//   - j.gen, the generation the journal covers, is the node's generation
//     as of the last change set consumed that moved it (0 before one):
//     every change journaled under a generation up to j.gen is consumed,
//     since a change is journaled under the node's generation after its
//     command, or the next one.
//
// Consistency. The view consumes a change set after the FSM applied it,
// so the FSM may be ahead of it, never behind. An answer as changes is
// the journal's changes since the node's generation, whose pods (or
// absence) are read from the FSM, and carries the generation the view
// covers for the node, not the FSM's newer one: a change the view has not
// consumed yet is journaled under a generation above the answer's, and so
// sent at the next poll. That a pod read from the newer state is sent
// with an older generation is harmless, as are sending a change twice or
// removing a pod the node does not have: a node applies an added pod as
// wanted and a removed ID as not wanted (nodelet's owner.changeTarget).
// A whole answer takes the generation and the pods from the FSM together,
// under its one read lock. A poll waits (since returns ok false) while
// there is nothing to send, so that it neither spins nor gets its whole
// target at every poll:
//
//   - the node holds the generation the view covers, its journal
//     reaching back to it, or the FSM's (0, a target never changed,
//     included);
//   - the node holds a generation above the view's, up to the FSM's, and
//     the view consumed a move of the node's generation since its
//     journal started: it then consumes every later one, up to the
//     node's, and the node's wake-up (wakeups) follows that consumption.
//
// A node that holds a generation above the one the view covers got it
// whole from the FSM while the view lagged; answered whole again, it would
// be ahead of the view again at its next poll, and get its whole target at
// every change while the view lags. Waiting costs it the view's lag: the
// publication of the change sets already applied. Otherwise (no journal
// reaching back to the node's generation, or a generation the FSM never
// had) the node gets its whole target.
//
// consume runs on the FSM's apply goroutine; since on any.
type targetJournal struct {
	src targetSource

	mu sync.Mutex
	// nodes are the journals by node name (a name is the FSM's string);
	// named are those of a change set's TargetNodes, by place, while
	// consume takes it. Guarded by mu.
	nodes map[string]*nodeJournal
	named []*nodeJournal
}

// nodeJournal is one node's journal (see targetJournal).
type nodeJournal struct {
	from, gen uint64
	changes   []journalEntry
}

// journalEntry is a task attempt journaled under generation gen.
type journalEntry struct {
	gen uint64
	fsm.TaskAttempt
}

func newTargetJournal(src targetSource) *targetJournal {
	return &targetJournal{src: src, nodes: map[string]*nodeJournal{}}
}

// consume takes one change set of the FSM.
func (v *targetJournal) consume(c *fsm.Changes) {
	switch c.Kind {
	case fsm.ChangeReset:
		v.mu.Lock()
		defer v.mu.Unlock()
		clear(v.nodes)
	case fsm.ChangeApplied:
		if len(c.TargetChanges) == 0 && len(c.Targets) == 0 {
			return
		}
		v.mu.Lock()
		defer v.mu.Unlock()
		// The journals of the nodes the changes name, looked up once a
		// command (consume's own).
		v.named = slices.Grow(v.named[:0], len(c.TargetNodes))[:len(c.TargetNodes)]
		clear(v.named)
		for i := range c.TargetChanges {
			tc := &c.TargetChanges[i]
			j := v.named[tc.Node]
			if j == nil {
				j = v.journalLocked(c.TargetNodes[tc.Node].Name, tc.Gen)
				v.named[tc.Node] = j
			}
			if tc.Restart {
				// The node's generation before the command: a node new
				// to the FSM may have had a journal under its name.
				clear(j.changes)
				j.changes, j.from, j.gen = j.changes[:0], tc.Gen, tc.Gen-1
				continue
			}
			j.changes = append(j.changes, journalEntry{tc.Gen, tc.TaskAttempt()})
			if limit := minJournal + 4*int(c.TargetNodes[tc.Node].Tasks); len(j.changes) > limit {
				j.trim()
			}
		}
		for i, name := range c.Targets {
			v.journalLocked(name, c.TargetGens[i]).gen = c.TargetGens[i]
		}
	}
}

// journalLocked returns node's journal, started from gen if it had none.
func (v *targetJournal) journalLocked(node string, gen uint64) *nodeJournal {
	j := v.nodes[node]
	if j == nil {
		j = &nodeJournal{from: gen}
		v.nodes[node] = j
	}
	return j
}

// trim keeps the newer half of j, cut where a generation starts.
func (j *nodeJournal) trim() {
	cut := len(j.changes) / 2
	for cut < len(j.changes) && j.changes[cut].gen == j.changes[cut-1].gen {
		cut++
	}
	j.from = j.changes[cut-1].gen
	j.changes = slices.Delete(j.changes, 0, cut)
}

// since answers a poll of node, which holds the target of generation
// known (0: none), with the changes since it when asChanges is set and
// the journal reaches back to it, and otherwise with the whole target.
// ok false says there is nothing to send yet: wait for the node's next
// wake-up. The error is ErrUnknownNode.
func (v *targetJournal) since(node string, known uint64, asChanges bool) (t Target, ok bool, err error) {
	var list []fsm.TaskAttempt
	v.mu.Lock()
	j := v.nodes[node]
	var covered uint64
	var followed, incremental bool
	if j != nil {
		covered = j.gen
		followed = covered != 0
		incremental = asChanges && known != 0 && j.from <= known && known <= covered
	}
	if incremental && known < covered {
		i := len(j.changes)
		for i > 0 && j.changes[i-1].gen > known {
			i--
		}
		list = make([]fsm.TaskAttempt, len(j.changes)-i)
		for k, e := range j.changes[i:] {
			list[k] = e.TaskAttempt
		}
	}
	v.mu.Unlock()

	if incremental {
		if known == covered {
			return Target{}, false, nil
		}
		slices.SortFunc(list, func(a, b fsm.TaskAttempt) int {
			return cmp.Or(cmp.Compare(a.Task.Job, b.Task.Job), cmp.Compare(a.Task.Group, b.Task.Group),
				cmp.Compare(a.Task.Index, b.Task.Index), cmp.Compare(a.Attempt, b.Attempt))
		})
		list = slices.Compact(list)
		_, pods, removed, ok := v.src.NodeTargetChanges(node, list)
		if !ok {
			return Target{}, false, ErrUnknownNode
		}
		return Target{Generation: covered, Base: known, Pods: pods, Removed: removed}, true, nil
	}
	// Read after the view: the FSM's generation is at least the one the
	// view covers.
	gen, ok := v.src.NodeGeneration(node)
	switch {
	case !ok:
		return Target{}, false, ErrUnknownNode
	case known == gen,
		asChanges && followed && covered < known && known <= gen:
		return Target{}, false, nil
	}
	gen, pods, ok := v.src.NodeTarget(node)
	if !ok {
		return Target{}, false, ErrUnknownNode
	}
	return Target{Generation: gen, Pods: pods}, true, nil
}
