package fsm

import "sort"

// changeChunk is how many entries a changeLog chunk holds.
const changeChunk = 4096

// changeLog is FSM.mu.changes: jobs in the order of their changes, each
// with the index of the command that changed it. It is kept in chunks of
// changeChunk entries, so that it grows by a chunk at a time instead of
// copying itself whole (it holds an entry for every job the FSM knows).
type changeLog struct {
	chunks [][]jobChange // every chunk full but the last
	n      int
	stale  int // entries whose job changed again later
}

// jobChange is an entry of a changeLog.
type jobChange struct {
	index uint64
	j     *job
}

func (l *changeLog) len() int { return l.n }

func (l *changeLog) at(i int) jobChange { return l.chunks[i/changeChunk][i%changeChunk] }

func (l *changeLog) add(c jobChange) {
	if l.n%changeChunk == 0 {
		l.chunks = append(l.chunks, make([]jobChange, 0, changeChunk))
	}
	last := &l.chunks[len(l.chunks)-1]
	*last = append(*last, c)
	l.n++
}

// search returns the position of the first entry of index at least index.
func (l *changeLog) search(index uint64) int {
	return sort.Search(l.n, func(i int) bool { return l.at(i).index >= index })
}

// current reports whether entry c is its job's last change.
func (c jobChange) current() bool { return c.index == c.j.changed }

// compact drops the stale entries, keeping the others in order.
func (l *changeLog) compact() {
	w := 0
	for i := range l.n {
		if c := l.at(i); c.current() {
			l.chunks[w/changeChunk][w%changeChunk] = c
			w++
		}
	}
	// Chunks past w keep no entry; the last kept one is cut to length.
	keep := (w + changeChunk - 1) / changeChunk
	clear(l.chunks[keep:])
	l.chunks = l.chunks[:keep]
	if keep > 0 {
		last := l.chunks[keep-1]
		end := w - (keep-1)*changeChunk
		clear(last[end:])
		l.chunks[keep-1] = last[:end]
	}
	l.n, l.stale = w, 0
}

func (l *changeLog) reset() { *l = changeLog{} }
