package dispatcher

import (
	"sync"

	"github.com/sluicehq/sluice/dispatcher/fsm"
)

// wakeups is the view of the FSM's change sets that wakes their waiters:
// the Changed waiters at every completion of raft entries, and a node's
// Target long-polls when a command moved its target generation. A node's
// wake-up waits for the completion of its command's entry too, so that
// whatever a woken reader reads is at least as new as what woke it (the
// views consume a change set before wakeups does).
//
// consume runs on the FSM's apply goroutine; the other methods on any.
type wakeups struct {
	// pending lists the nodes whose target changed since the last
	// completion, a name possibly more than once (consume's only).
	pending []string

	mu sync.Mutex
	// Every field below is guarded by mu.
	// changed is closed (and replaced) at the next completion, reset or
	// call of all.
	changed chan struct{}
	// nodes holds a channel per node with a Target long-poll, closed (and
	// removed) at the completion after that node's target changed, or at
	// a reset or call of all, so that an apply wakes only the polls it
	// concerns.
	nodes map[string]chan struct{}
}

func newWakeups() *wakeups {
	return &wakeups{changed: make(chan struct{}), nodes: map[string]chan struct{}{}}
}

// consume takes one change set of the FSM.
func (w *wakeups) consume(c *fsm.Changes) {
	switch c.Kind {
	case fsm.ChangeApplied:
		w.pending = append(w.pending, c.Targets...)
	case fsm.ChangeComplete:
		w.wake(w.pending)
		clear(w.pending)
		w.pending = w.pending[:0]
	case fsm.ChangeReset:
		clear(w.pending)
		w.pending = w.pending[:0]
		w.all()
	}
}

// all wakes every Target long-poll and every Changed waiter.
func (w *wakeups) all() {
	w.mu.Lock()
	defer w.mu.Unlock()
	close(w.changed)
	w.changed = make(chan struct{})
	for _, ch := range w.nodes {
		close(ch)
	}
	clear(w.nodes)
}

// wake wakes the Changed waiters and the long-polls of nodes.
func (w *wakeups) wake(nodes []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	close(w.changed)
	w.changed = make(chan struct{})
	for _, n := range nodes {
		if ch, ok := w.nodes[n]; ok {
			close(ch)
			delete(w.nodes, n)
		}
	}
}

// node returns a channel closed at the next change of node's target
// generation (once its entry is complete), reset or call of all.
func (w *wakeups) node(node string) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	ch, ok := w.nodes[node]
	if !ok {
		ch = make(chan struct{})
		w.nodes[node] = ch
	}
	return ch
}

// next returns a channel closed at the next completion, reset or call of
// all.
func (w *wakeups) next() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.changed
}
