package raftkv_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/sluicehq/sluice/raftkv"
)

// durableTransport checks, as each message leaves a replica, that what a
// vote or an acknowledgement vouches for is already durable there: a vote
// granted and then lost in a crash lets the voter vote twice in one term
// (two leaders); an append acknowledged and then lost lets a committed
// entry vanish. Other messages may leave before the state they carry is
// synced (raft's rule: only these responses wait; a candidate's own vote
// counts only once it is durable).
type durableTransport struct {
	raftkv.Transport
	t    testing.TB
	id   uint64
	node func() *raftkv.Node

	mu      sync.Mutex
	checked int
}

func (d *durableTransport) Send(msgs []*raftpb.Message) {
	if n := d.node(); n != nil {
		term, vote, last := raftkv.Durable(n)
		for _, m := range msgs {
			if m.GetReject() {
				continue
			}
			switch m.GetType() {
			case raftpb.MsgVoteResp:
				if m.GetTerm() > term || m.GetTerm() == term && vote != m.GetTo() {
					d.t.Errorf("replica %d granted its vote to %d in term %d with term %d, vote %d durable", d.id, m.GetTo(), m.GetTerm(), term, vote)
				}
			case raftpb.MsgAppResp:
				if m.GetTerm() > term || m.GetIndex() > last {
					d.t.Errorf("replica %d acknowledged index %d in term %d with term %d, last index %d durable", d.id, m.GetIndex(), m.GetTerm(), term, last)
				}
			default:
				continue
			}
			d.mu.Lock()
			d.checked++
			d.mu.Unlock()
		}
	}
	d.Transport.Send(msgs)
}

func TestVotesAndAcksLeaveAfterTheirStateIsDurable(t *testing.T) {
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
		checked += d.checked
		d.mu.Unlock()
	}
	if checked == 0 {
		t.Fatal("no message was checked")
	}
}
