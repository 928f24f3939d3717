package raftkv_test

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/raftkv"
)

func TestMembershipChangesUnderLoad(t *testing.T) { testMembership(t) }

func testMembership(t *testing.T, opts ...clusterOpt) {
	c := newCluster(t, 3, append(opts, withCounting(), withConfig(func(cfg *raftkv.Config) {
		cfg.SnapshotEntries, cfg.SnapshotCatchUpEntries = 50, 10
	}))...)
	ctx := ctxTimeout(t, 30*time.Second)
	w := startWriters(c, 8)
	// Enough writes that the log was truncated: the new replica must start
	// from a snapshot.
	for deadline := time.Now().Add(5 * time.Second); w.ackedCount() < 200 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	n4, addr4 := c.join(4)
	if err := c.onLeader(ctx, func(l *raftkv.Node) error { return l.AddMember(ctx, 4, addr4, true) }); err != nil {
		t.Fatalf("add learner 4: %v", err)
	}
	// The learner catches up while the writes go on.
	for deadline := time.Now().Add(10 * time.Second); ; {
		l := c.waitLeader(time.Second)
		if n4.Status().Applied+20 >= l.Status().Applied && n4.Status().Applied > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("learner stuck at %d, leader at %d", n4.Status().Applied, l.Status().Applied)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if m := n4.Metrics(); m.SnapshotsRestored == 0 {
		t.Fatalf("the new replica caught up without a snapshot: %+v", m)
	}
	if err := c.onLeader(ctx, func(l *raftkv.Node) error { return l.PromoteMember(ctx, 4) }); err != nil {
		t.Fatalf("promote 4: %v", err)
	}
	// Remove a replica that does not lead (then the leader, below).
	var victim uint64
	if err := c.onLeader(ctx, func(l *raftkv.Node) error {
		victim = 1
		if l.Status().ID == 1 {
			victim = 2
		}
		return l.RemoveMember(ctx, victim)
	}); err != nil {
		t.Fatalf("remove %d: %v", victim, err)
	}
	c.stop(victim)
	// Removing the leader: it steps down and another takes over.
	l := c.waitLeader(2 * time.Second)
	lid := l.Status().ID
	if err := l.RemoveMember(ctx, lid); err != nil {
		t.Fatalf("remove the leader %d: %v", lid, err)
	}
	c.stop(lid)
	nl := c.waitLeader(3 * time.Second)
	st := nl.Status()
	if len(st.Members) != 2 {
		t.Fatalf("members after two removals: %+v", st.Members)
	}
	for _, m := range st.Members {
		if m.ID == victim || m.ID == lid || m.Learner || m.Addr != c.addrs[m.ID] {
			t.Fatalf("member %+v after the changes", m)
		}
	}
	// The new replica restarts knowing its peers from its own disk.
	c.stop(4)
	c.start(4)
	time.Sleep(200 * time.Millisecond)
	w.halt(t)
	converge(t, c, 10*time.Second)
	checkCounts(t, c, w)
	t.Logf("%d writes acknowledged; replica 4: %+v", w.ackedCount(), c.node(4).Metrics())
}

func TestMembershipErrors(t *testing.T) {
	c := newCluster(t, 3)
	ctx := ctxTimeout(t, 10*time.Second)
	l := c.waitLeader(time.Second)
	if err := l.PromoteMember(ctx, 2); err == nil {
		t.Fatal("promoting a voter succeeded")
	}
	if err := l.RemoveMember(ctx, 9); err == nil {
		t.Fatal("removing a stranger succeeded")
	}
	if err := l.AddMember(ctx, 2, "x", false); err == nil {
		t.Fatal("adding a member twice succeeded")
	}
	for _, n := range c.running() {
		if n != l {
			if err := n.AddMember(ctx, 7, "x", true); !isNotLeader(err) {
				t.Fatalf("membership change on a follower: %v", err)
			}
			break
		}
	}
}
