package dispatcher

import (
	"testing"

	"github.com/sluicehq/sluice/dispatcher/fsm"
)

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestWakeupsAtCompletion: a node's long-poll wakes once the entry of a
// command that changed its target is complete, with the commands of the
// entry after the first too; other nodes' polls do not wake; Changed wakes
// at every completion.
func TestWakeupsAtCompletion(t *testing.T) {
	w := newWakeups()
	n1, n2, n3, changed := w.node("n1"), w.node("n2"), w.node("n3"), w.next()
	w.consume(&fsm.Changes{Kind: fsm.ChangeApplied, Index: 4, Targets: []string{"n1"}})
	if isClosed(n1) || isClosed(changed) {
		t.Fatal("woken before the entry is complete")
	}
	w.consume(&fsm.Changes{Kind: fsm.ChangeApplied, Index: 4, Targets: []string{"n2", "n1"}})
	w.consume(&fsm.Changes{Kind: fsm.ChangeComplete, Index: 4})
	if !isClosed(n1) || !isClosed(n2) || !isClosed(changed) {
		t.Fatalf("after completion: n1 %v, n2 %v, changed %v, want all woken", isClosed(n1), isClosed(n2), isClosed(changed))
	}
	if isClosed(n3) {
		t.Fatal("n3 woken, its target did not change")
	}
	// The next waits are for the next changes.
	n1, changed = w.node("n1"), w.next()
	w.consume(&fsm.Changes{Kind: fsm.ChangeComplete, Index: 5})
	if isClosed(n1) || !isClosed(changed) {
		t.Fatalf("a completion without n1's change: n1 %v, changed %v", isClosed(n1), isClosed(changed))
	}
}

// TestWakeupsReset: a reset (a Load) wakes every poll, and forgets the
// changes of an entry left incomplete.
func TestWakeupsReset(t *testing.T) {
	w := newWakeups()
	w.consume(&fsm.Changes{Kind: fsm.ChangeApplied, Index: 4, Targets: []string{"n1"}})
	n1, n2, changed := w.node("n1"), w.node("n2"), w.next()
	w.consume(&fsm.Changes{Kind: fsm.ChangeReset, Index: 9})
	if !isClosed(n1) || !isClosed(n2) || !isClosed(changed) {
		t.Fatal("a reset left a waiter asleep")
	}
	if len(w.pending) != 0 {
		t.Fatalf("pending after a reset: %v", w.pending)
	}
}
