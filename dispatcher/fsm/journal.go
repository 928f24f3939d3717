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
		Node:        n.spec.Name,
		TaskAttempt: TaskAttempt{Task: TaskRef{t.key.job, t.key.group, t.key.index}, Attempt: t.attempt},
		Gen:         n.gen + 1,
		Tasks:       int32(len(n.tasks)),
	})
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

// restartJournalLocked restarts n's journal, in the command's change set,
// from the generation the command moves n to: from it on, a node gets its
// whole target once.
func (f *FSM) restartJournalLocked(n *node) {
	f.feed.c.TargetChanges = append(f.feed.c.TargetChanges, TargetChange{Node: n.spec.Name, Gen: n.gen + 1, Restart: true})
	f.touchNode(n)
}
