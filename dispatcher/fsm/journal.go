package fsm

// noteTargetLocked records that t, a task of j, may enter or leave n's
// target with this command, and marks n changed. A capbox's change
// restarts n's journal: the pods of the tasks in it come and go with it.
func (f *FSM) noteTargetLocked(n *node, j *job, t *task) {
	if j.owner() != nil {
		f.restartJournalLocked(n)
		return
	}
	f.journalLocked(n, t)
	f.touchNode(n)
}

// journalLocked journals t, in the command's change set, under n's next
// generation.
func (f *FSM) journalLocked(n *node, t *task) {
	f.feed.c.TargetChanges = append(f.feed.c.TargetChanges, TargetChange{
		Gen: n.gen + 1, Job: t.key.job, Index: t.key.index, Attempt: t.attempt, Node: f.targetNodeLocked(n), Group: t.key.group,
	})
}

// targetNodeLocked returns n's place in the command's TargetNodes, listing
// it there first if it is not, with its count of active tasks now.
func (f *FSM) targetNodeLocked(n *node) int32 {
	c := &f.feed.c
	if n.targetSeq != c.seq {
		n.targetSeq, n.targetAt = c.seq, int32(len(c.TargetNodes))
		c.TargetNodes = append(c.TargetNodes, TargetNode{Name: n.spec.Name})
	}
	c.TargetNodes[n.targetAt].Tasks = int32(len(n.tasks))
	return n.targetAt
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

// newJournalLocked starts the journal of n, a node new to the FSM, in the
// command's change set, without moving its generation: a view may hold
// the journal of a node of the same name removed before (RemoveNode).
func (f *FSM) newJournalLocked(n *node) {
	f.feed.c.TargetChanges = append(f.feed.c.TargetChanges, TargetChange{Gen: n.gen + 1, Node: f.targetNodeLocked(n), Restart: true})
}

// restartJournalLocked restarts n's journal, in the command's change set,
// from the generation the command moves n to: from it on, a node gets its
// whole target once.
func (f *FSM) restartJournalLocked(n *node) {
	f.newJournalLocked(n)
	f.touchNode(n)
}
