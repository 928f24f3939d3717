package fsm

import (
	"slices"
)

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
