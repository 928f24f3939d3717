package raftkv_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/raftkv"
)

func TestTransferLeadership(t *testing.T) {
	c := newCluster(t, 3, withCounting())
	ctx := ctxTimeout(t, 10*time.Second)
	w := startWriters(c, 4)
	defer w.halt(t)
	for range 3 {
		l := c.waitLeader(time.Second)
		to := l.Status().ID%3 + 1
		if err := l.TransferLeadership(ctx, to); err != nil {
			t.Fatalf("transfer %d → %d: %v", l.Status().ID, to, err)
		}
		if nl := c.waitLeader(time.Second); nl.Status().ID != to {
			t.Fatalf("leader is %d after the transfer to %d", nl.Status().ID, to)
		}
	}
	if err := c.node(1).TransferLeadership(ctx, 9); err == nil {
		t.Fatal("transfer to a stranger succeeded")
	}
}

// TestGroupCommit checks that concurrent proposals share entries and fsyncs,
// and concurrent reads share ReadIndex round trips.
func TestGroupCommit(t *testing.T) {
	c := newCluster(t, 3)
	ctx := ctxTimeout(t, 20*time.Second)
	l := c.waitLeader(time.Second)
	before, storedBefore := l.Metrics(), l.StoreBytes()
	const writers, each = 64, 20
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range each {
				if _, err := l.Propose(ctx, raftkv.PutCommand(fmt.Appendf(nil, "w%d-%d", i, j), []byte("v"))); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	m := l.Metrics()
	props, ents, syncs := m.Proposals-before.Proposals, m.ProposedEntries-before.ProposedEntries, m.Syncs-before.Syncs
	t.Logf("%d proposals in %d entries and %d leader fsyncs", props, ents, syncs)
	if props != writers*each || ents*4 > props || syncs*4 > props {
		t.Fatalf("proposals were not batched: %d proposals, %d entries, %d fsyncs", props, ents, syncs)
	}
	// Each proposal's key and value reach the store, in the log at least.
	if stored, least := l.StoreBytes()-storedBefore, uint64(writers*each*len("w0-0v")); stored < least {
		t.Fatalf("store bytes grew by %d, want %d or more", stored, least)
	}

	// The reads queue up while the leader's loop is held, so that they
	// reach it together however the goroutines are scheduled (with the
	// host busy, each could otherwise reach an idle loop alone).
	before = l.Metrics()
	holding, release, held := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() { held <- raftkv.HoldLoop(ctx, l, holding, release) }()
	select {
	case <-holding:
	case err := <-held:
		t.Fatalf("hold the leader's loop: %v", err)
	}
	for range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := l.LinearizableGet(ctx, []byte("w1-1")); err != nil {
				t.Error(err)
			}
		}()
	}
	for raftkv.QueuedReads(l) < 200 && ctx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
	close(release)
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	m = l.Metrics()
	reads, rounds := m.Reads-before.Reads, m.ReadIndexRequests-before.ReadIndexRequests
	t.Logf("%d reads in %d ReadIndex rounds", reads, rounds)
	if reads != 200 || rounds*2 > reads {
		t.Fatalf("reads were not batched: %d reads, %d rounds", reads, rounds)
	}
}

// TestLeadershipChanged checks that a transfer wakes the old leader's and
// the new leader's subscribers, whose Status then tells the change, and
// that closing the leader wakes its own.
func TestLeadershipChanged(t *testing.T) {
	c := newCluster(t, 3)
	ctx := ctxTimeout(t, 10*time.Second)
	l := c.waitLeader(time.Second)
	from := l.Status()
	to := c.node(from.ID%3 + 1)
	oldCh, newCh := l.LeadershipChanged(), to.LeadershipChanged()
	select {
	case <-oldCh:
		t.Fatal("the leader's channel closed before anything changed")
	default:
	}
	if err := l.TransferLeadership(ctx, to.Status().ID); err != nil {
		t.Fatalf("transfer: %v", err)
	}
	for name, ch := range map[string]<-chan struct{}{"old leader": oldCh, "new leader": newCh} {
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("the %s's channel did not close on the transfer", name)
		}
	}
	if s := l.Status(); s.IsLeader {
		t.Fatalf("old leader still leads after its channel closed: %+v", s)
	}
	// The new leader's channel may close before its Status shows the term
	// it leads in; wait for the status through the channel, not a sleep.
	for {
		ch := to.LeadershipChanged()
		if s := to.Status(); s.IsLeader {
			if s.Term <= from.Term {
				t.Fatalf("new leader's term %d, want above %d", s.Term, from.Term)
			}
			break
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatal("the new leader never reported leading")
		}
	}
	closing := to.LeadershipChanged()
	c.stop(to.Status().ID)
	select {
	case <-closing:
	case <-ctx.Done():
		t.Fatal("closing the leader did not close its channel")
	}
	if to.Status().IsLeader {
		t.Fatal("a closed replica reports leading")
	}
}
