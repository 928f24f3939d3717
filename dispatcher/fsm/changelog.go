package fsm

import "sort"

// changeLog is FSM.mu.changes: jobs in the order of their changes, each
// with the index of the command that changed it. It holds an entry for
// every job the FSM knows, so it is paged.
type changeLog struct {
	entries paged[jobChange]
	stale   int // entries whose job changed again later
}

// jobChange is an entry of a changeLog.
type jobChange struct {
	index uint64
	j     *job
}

func (l *changeLog) len() int { return l.entries.len() }

func (l *changeLog) at(i int) jobChange { return *l.entries.at(i) }

func (l *changeLog) add(c jobChange) { l.entries.push(c) }

// search returns the position of the first entry of index at least index.
func (l *changeLog) search(index uint64) int {
	return sort.Search(l.len(), func(i int) bool { return l.at(i).index >= index })
}

// current reports whether entry c is its job's last change (and the job
// is not forgotten).
func (c jobChange) current() bool { return c.index == c.j.changed && !c.j.forgotten }

// compact drops the stale entries, keeping the others in order.
func (l *changeLog) compact() {
	w := 0
	for i := range l.len() {
		if c := l.at(i); c.current() {
			*l.entries.at(w) = c
			w++
		}
	}
	l.entries.resize(w)
	l.stale = 0
}

func (l *changeLog) reset() { *l = changeLog{} }
