package raftkv_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
	const meta4 = "http://replica-4.example:8004"
	if err := c.onLeader(ctx, func(l *raftkv.Node) error {
		return l.AddMember(ctx, raftkv.Member{ID: 4, Addr: addr4, Meta: meta4, Learner: true})
	}); err != nil {
		t.Fatalf("add learner 4: %v", err)
	}
	// The learner catches up while the writes go on.
	if err := c.onLeader(ctx, func(l *raftkv.Node) error { return l.CatchUp(ctx, 4) }); err != nil {
		t.Fatalf("catch up 4: %v", err)
	}
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
		if want := map[uint64]string{4: meta4}[m.ID]; m.Meta != want {
			t.Fatalf("member %d has meta %q, want %q", m.ID, m.Meta, want)
		}
	}
	// The new replica restarts knowing its peers, and their metadata,
	// from its own disk: its config's Peers are the initial members only,
	// two of which are gone.
	c.stop(4)
	n4 = c.start(4)
	if ms := n4.Status().Members; len(ms) != 2 || !slices.ContainsFunc(ms, func(m raftkv.Member) bool { return m.ID == 4 && m.Meta == meta4 }) {
		t.Fatalf("replica 4 restarted with members %+v", ms)
	}
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
	lid := l.Status().ID
	other := c.addrs[lid%3+1]
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"promote a voter", l.PromoteMember(ctx, 2), raftkv.ErrNotMember},
		{"remove a stranger", l.RemoveMember(ctx, 9), raftkv.ErrNotMember},
		{"add a member twice", l.AddMember(ctx, raftkv.Member{ID: 2, Addr: "x:1"}), raftkv.ErrMemberExists},
		{"add at a member's address", l.AddMember(ctx, raftkv.Member{ID: 8, Addr: other, Learner: true}), raftkv.ErrMemberExists},
		{"add without an address", l.AddMember(ctx, raftkv.Member{ID: 8}), raftkv.ErrBadAddress},
		{"catch up a stranger", l.CatchUp(ctx, 9), raftkv.ErrNotMember},
	} {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, tc.err, tc.want)
		}
	}
	for _, n := range c.running() {
		if n != l {
			if err := n.AddMember(ctx, raftkv.Member{ID: 7, Addr: "x:1", Learner: true}); !isNotLeader(err) {
				t.Fatalf("membership change on a follower: %v", err)
			}
			if err := n.CatchUp(ctx, 1); !isNotLeader(err) {
				t.Fatalf("catch up on a follower: %v", err)
			}
			break
		}
	}
	if ms := l.Status().Members; len(ms) != 3 {
		t.Fatalf("members after the refusals: %+v", ms)
	}
}

// TestRemoveLastVoter shrinks a cluster to one voter, which cannot be
// removed.
func TestRemoveLastVoter(t *testing.T) {
	c := newCluster(t, 2)
	ctx := ctxTimeout(t, 10*time.Second)
	l := c.waitLeader(time.Second)
	lid := l.Status().ID
	if err := l.RemoveMember(ctx, 3-lid); err != nil {
		t.Fatalf("remove %d: %v", 3-lid, err)
	}
	if ms := l.Status().Members; len(ms) != 1 || ms[0].ID != lid {
		t.Fatalf("members once the removal returned: %+v", ms)
	}
	c.stop(3 - lid)
	if err := l.RemoveMember(ctx, lid); !errors.Is(err, raftkv.ErrLastVoter) {
		t.Fatalf("removing the last voter: %v, want ErrLastVoter", err)
	}
	if _, err := l.Propose(ctx, raftkv.PutCommand([]byte("k"), []byte("v"))); err != nil {
		t.Fatalf("the last voter does not serve: %v", err)
	}
}

// TestMembershipJoinsInTurn adds two replicas one after the other, with
// no log truncation in between: each starts from a snapshot (the log of a
// bootstrapped cluster does not reach back to index 1), and the second
// must get one whose conf state has it, not the first one's.
func TestMembershipJoinsInTurn(t *testing.T) {
	c := newCluster(t, 3)
	ctx := ctxTimeout(t, 20*time.Second)
	for _, id := range []uint64{4, 5} {
		if err := c.onLeader(ctx, func(l *raftkv.Node) error {
			_, err := l.Propose(ctx, raftkv.PutCommand(fmt.Appendf(nil, "before-%d", id), []byte("v")))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		n, addr := c.join(id)
		if err := c.onLeader(ctx, func(l *raftkv.Node) error {
			return l.AddMember(ctx, raftkv.Member{ID: id, Addr: addr, Learner: true})
		}); err != nil {
			t.Fatalf("add %d: %v", id, err)
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := c.onLeader(cctx, func(l *raftkv.Node) error { return l.CatchUp(cctx, id) })
		cancel()
		if err != nil {
			t.Fatalf("replica %d does not catch up: %v", id, err)
		}
		if err := c.onLeader(ctx, func(l *raftkv.Node) error { return l.PromoteMember(ctx, id) }); err != nil {
			t.Fatalf("promote %d: %v", id, err)
		}
		if m := n.Metrics(); m.SnapshotsRestored != 1 {
			t.Fatalf("replica %d restored %d snapshots, want 1", id, m.SnapshotsRestored)
		}
		if _, err := n.Get(fmt.Appendf(nil, "before-%d", id)); err != nil {
			t.Fatalf("replica %d: %v", id, err)
		}
	}
}

// TestMembershipKeepsQuorum: with a voter down, removing a live one, or
// adding a voter, would leave too few voters answering for a quorum, and
// is refused; removing the silent one, or adding a learner, is not.
// TransferLeadership(0) picks a live voter.
func TestMembershipKeepsQuorum(t *testing.T) {
	c := newCluster(t, 3)
	ctx := ctxTimeout(t, 10*time.Second)
	l := c.waitLeader(time.Second)
	lid := l.Status().ID
	down, live := lid%3+1, (lid+1)%3+1
	c.stop(down)
	// Until an election timeout (10 ticks of 10ms) passes, the stopped
	// replica still counts as heard from.
	time.Sleep(300 * time.Millisecond)
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"remove a live voter", l.RemoveMember(ctx, live)},
		{"add a voter", l.AddMember(ctx, raftkv.Member{ID: 9, Addr: "h:9"})},
	} {
		if !errors.Is(tc.err, raftkv.ErrQuorumAtRisk) {
			t.Errorf("%s with voter %d down: %v, want ErrQuorumAtRisk", tc.name, down, tc.err)
		}
	}
	if err := l.AddMember(ctx, raftkv.Member{ID: 9, Addr: "h:9", Learner: true}); err != nil {
		t.Fatalf("add a learner: %v", err)
	}
	if err := l.PromoteMember(ctx, 9); !errors.Is(err, raftkv.ErrQuorumAtRisk) {
		t.Errorf("promote a silent learner: %v, want ErrQuorumAtRisk", err)
	}
	if err := l.RemoveMember(ctx, 9); err != nil {
		t.Fatalf("remove the learner: %v", err)
	}
	if err := l.TransferLeadership(ctx, 0); err != nil {
		t.Fatalf("transfer leadership to any voter: %v", err)
	}
	nl := c.waitLeader(2 * time.Second)
	if got := nl.Status().ID; got != live {
		t.Fatalf("leadership went to %d, want the live voter %d", got, live)
	}
	if err := nl.RemoveMember(ctx, down); err != nil {
		t.Fatalf("remove the silent voter %d: %v", down, err)
	}
	if ms := nl.Status().Members; len(ms) != 2 {
		t.Fatalf("members: %+v", ms)
	}
	if _, err := nl.Propose(ctx, raftkv.PutCommand([]byte("k"), []byte("v"))); err != nil {
		t.Fatalf("the two voters left do not commit: %v", err)
	}
}
