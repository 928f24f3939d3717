package raftkv_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/raftkv"
)

func TestSingleReplicaWriteReadRestart(t *testing.T) {
	c := newCluster(t, 1)
	n := c.node(1)
	ctx := ctxTimeout(t, 10*time.Second)
	for i := range 100 {
		if _, err := n.Propose(ctx, raftkv.PutCommand(fmt.Appendf(nil, "k%03d", i), fmt.Appendf(nil, "v%d", i))); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	v, err := n.LinearizableGet(ctx, []byte("k042"))
	if err != nil || string(v) != "v42" {
		t.Fatalf("get k042 = %q, %v; want v42", v, err)
	}
	if _, err := n.Get([]byte("nope")); !errors.Is(err, raftkv.ErrNotFound) {
		t.Fatalf("get of a missing key: %v, want ErrNotFound", err)
	}
	c.stop(1)
	n = c.start(1)
	c.waitLeader(5 * time.Second)
	for i := range 100 {
		v, err := n.LinearizableGet(ctx, fmt.Appendf(nil, "k%03d", i))
		if err != nil || string(v) != fmt.Sprintf("v%d", i) {
			t.Fatalf("after restart: get k%03d = %q, %v", i, v, err)
		}
	}
}

func TestThreeReplicasWriteReadRestart(t *testing.T) { testThreeReplicas(t) }

func testThreeReplicas(t *testing.T, opts ...clusterOpt) {
	c := newCluster(t, 3, opts...)
	ctx := ctxTimeout(t, 20*time.Second)
	l := c.waitLeader(5 * time.Second)
	for i := range 200 {
		if _, err := l.Propose(ctx, raftkv.PutCommand(fmt.Appendf(nil, "k%03d", i), fmt.Appendf(nil, "v%d", i))); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	// Linearizable reads on every replica, followers included.
	for _, n := range c.running() {
		v, err := n.LinearizableGet(ctx, []byte("k199"))
		if err != nil || string(v) != "v199" {
			t.Fatalf("replica %d: get k199 = %q, %v", n.Status().ID, v, err)
		}
	}
	// A follower refuses proposals and names the leader.
	for _, n := range c.running() {
		if n == l {
			continue
		}
		_, err := n.Propose(ctx, raftkv.PutCommand([]byte("x"), nil))
		var nl *raftkv.NotLeaderError
		if !errors.As(err, &nl) || !errors.Is(err, raftkv.ErrNotLeader) {
			t.Fatalf("propose on follower: %v, want NotLeaderError", err)
		}
		if ls := l.Status(); nl.LeaderID != ls.ID || nl.LeaderAddr != c.addrs[ls.ID] {
			t.Fatalf("NotLeaderError names %d at %q, want %d at %q", nl.LeaderID, nl.LeaderAddr, ls.ID, c.addrs[ls.ID])
		}
		break
	}
	st := l.Status()
	if len(st.Members) != 3 {
		t.Fatalf("members: %+v", st.Members)
	}
	for _, m := range st.Members {
		if m.Addr != c.addrs[m.ID] || m.Learner {
			t.Fatalf("member %+v, want address %q, voter", m, c.addrs[m.ID])
		}
	}
	for id := uint64(1); id <= 3; id++ {
		c.stop(id)
	}
	for id := uint64(1); id <= 3; id++ {
		c.start(id)
	}
	c.waitLeader(5 * time.Second)
	for _, n := range c.running() {
		for i := range 200 {
			v, err := n.LinearizableGet(ctx, fmt.Appendf(nil, "k%03d", i))
			if err != nil || string(v) != fmt.Sprintf("v%d", i) {
				t.Fatalf("after restart, replica %d: get k%03d = %q, %v", n.Status().ID, i, v, err)
			}
		}
	}
}

func TestConfigValidate(t *testing.T) {
	_, err := raftkv.Open(raftkv.Config{Peers: map[uint64]string{0: "x", 1: "y"}, ElectionTicks: 1, HeartbeatTicks: 2})
	if err == nil {
		t.Fatal("Open with a bad config succeeded")
	}
	for _, want := range []string{"replica ID", "Dir", "Transport", "ID 0", "ElectionTicks"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not mention %q: %v", want, err)
		}
	}
}

// TestSyncInterval checks that the log's syncs are spaced SyncInterval
// apart: one writer's commits, each of which waits for a sync, come at
// most one an interval.
func TestSyncInterval(t *testing.T) {
	const interval = 100 * time.Millisecond
	c := newCluster(t, 1, withConfig(func(cfg *raftkv.Config) { cfg.SyncInterval = interval }))
	n := c.node(1)
	ctx := ctxTimeout(t, 10*time.Second)
	start := time.Now()
	for i := range 4 {
		if _, err := n.Propose(ctx, raftkv.PutCommand(fmt.Appendf(nil, "k%d", i), []byte("v"))); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	if took := time.Since(start); took < 3*interval {
		t.Fatalf("4 commits one after another took %v: want at least 3 sync intervals (%v), a sync each", took, 3*interval)
	}
}
