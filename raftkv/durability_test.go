package raftkv_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/sluicehq/sluice/raftkv"
)

// durableTransport checks, as each message leaves a replica, that the term
// it carries (and a vote request's self-vote) is already durable there: a
// vote request sent before its candidate's term is synced, then lost in a
// crash, lets one term have two leaders.
type durableTransport struct {
	raftkv.Transport
	t    testing.TB
	id   uint64
	node func() *raftkv.Node

	mu   sync.Mutex
	sent int
}

func (d *durableTransport) Send(msgs []*raftpb.Message) {
	if n := d.node(); n != nil {
		term, vote := raftkv.PersistedTermVote(n)
		for _, m := range msgs {
			switch m.GetType() {
			case raftpb.MsgPreVote, raftpb.MsgPreVoteResp:
				continue // a pre-vote carries the term it would campaign in
			}
			if m.GetTerm() > term {
				d.t.Errorf("replica %d sent %v at term %d with term %d durable", d.id, m.GetType(), m.GetTerm(), term)
			}
			if m.GetType() == raftpb.MsgVote && vote != d.id {
				d.t.Errorf("replica %d asked for votes in term %d before its own vote was durable (durable vote %d)", d.id, m.GetTerm(), vote)
			}
			d.mu.Lock()
			d.sent++
			d.mu.Unlock()
		}
	}
	d.Transport.Send(msgs)
}

func TestMessagesLeaveAfterTheirTermIsDurable(t *testing.T) {
	var cp atomic.Pointer[cluster] // set once the cluster is built
	var trs []*durableTransport
	c := newCluster(t, 3, func(cl *cluster) {
		inner := cl.newTr
		cl.newTr = func(tb testing.TB, id uint64) (raftkv.Transport, string) {
			tr, addr := inner(tb, id)
			d := &durableTransport{Transport: tr, t: t, id: id, node: func() *raftkv.Node {
				if c := cp.Load(); c != nil {
					return c.node(id)
				}
				return nil
			}}
			trs = append(trs, d)
			return d, addr
		}
	})
	cp.Store(c)
	// Elections: stop the leader twice and bring it back.
	for range 2 {
		l := c.waitLeader(3 * time.Second)
		id := l.Status().ID
		c.stop(id)
		c.waitLeader(3 * time.Second)
		c.start(id)
	}
	converge(t, c, 10*time.Second)
	checked := 0
	for _, d := range trs {
		d.mu.Lock()
		checked += d.sent
		d.mu.Unlock()
	}
	if checked == 0 {
		t.Fatal("no message was checked")
	}
}
