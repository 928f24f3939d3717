package raftkv

import (
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// appender is the replica's log writer: raft's LocalAppendThread, as raft
// runs with AsyncStorageWrites. The Ready loop hands it each
// MsgStorageAppend (log entries, hard state, snapshot) and goes on; it
// writes them in order, syncs once for all that queued up meanwhile (group
// commit across Readys), and only then delivers their responses — to peers
// through the transport, to this replica through the loop — so that
// nothing that depends on a write leaves before the write is durable.
//
// It is the only writer of the log; the loop writes applies and
// truncations (see storage). It never drops a message and never reorders
// them: raft requires both of the append thread.
type appender struct {
	n *Node

	mu struct {
		sync.Mutex
		in      []*raftpb.Message // queued by the loop
		out     []localResponse   // durable, for the loop to step, in order
		writing bool              // a batch taken from in is being written
	}
	wake  chan struct{} // cap 1: in grew
	ready chan struct{} // cap 1: a write ended; the loop waits on it
}

// localResponse is a response addressed to this replica, to be stepped by
// the loop once its write is durable. snap is the decoded snapshot a
// MsgStorageAppendResp acknowledges, which the loop takes in before raft
// hears of it.
type localResponse struct {
	m    *raftpb.Message
	snap *restoredSnapshot
}

func newAppender(n *Node) *appender {
	return &appender{
		n:     n,
		wake:  make(chan struct{}, 1),
		ready: make(chan struct{}, 1),
	}
}

// push queues a MsgStorageAppend. Called by the loop only.
func (a *appender) push(m *raftpb.Message) {
	a.mu.Lock()
	a.mu.in = append(a.mu.in, m)
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// busy reports whether a write is queued or under way. The loop holds new
// proposals back while it is (see Node.propose).
func (a *appender) busy() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.mu.writing || len(a.mu.in) > 0
}

// take returns the durable responses for this replica, in order, reusing buf.
func (a *appender) take(buf []localResponse) []localResponse {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := append(buf[:0], a.mu.out...)
	clear(a.mu.out)
	a.mu.out = a.mu.out[:0]
	return out
}

// run writes what the loop queues until the replica stops or fails. A
// storage error fails the replica: nothing after it is written or
// acknowledged.
func (a *appender) run() {
	defer a.n.guard.enter()()
	var batch []*raftpb.Message
	for {
		select {
		case <-a.wake:
		case <-a.n.stopc:
			return
		case <-a.n.failc:
			return
		}
		a.mu.Lock()
		batch = append(batch[:0], a.mu.in...)
		clear(a.mu.in)
		a.mu.in = a.mu.in[:0]
		a.mu.writing = true
		a.mu.Unlock()
		if err := a.write(batch); err != nil {
			a.n.fail(err)
			return
		}
		clear(batch)
	}
}

// write persists batch in order and then delivers its responses. The
// messages are committed to pebble one by one without sync, then the WAL is
// synced once if any of them carries a response (raft needs durability
// only before responses: a MsgStorageAppend without any, a commit index
// moving forward, may be lost in a crash).
func (a *appender) write(batch []*raftpb.Message) (err error) {
	defer recoverFatal(&err, "append")
	n := a.n
	snaps := make([]*restoredSnapshot, len(batch))
	needSync := false
	for i, m := range batch {
		if sn := m.GetSnapshot(); sn != nil && !raft.IsEmptySnap(sn) {
			if snaps[i], err = decodeSnapshot(sn); err != nil {
				return err
			}
		}
		if err := n.st.save(snaps[i], m.GetEntries(), hardStateOf(m)); err != nil {
			return err
		}
		needSync = needSync || len(m.GetResponses()) > 0
	}
	if needSync {
		start := time.Now()
		if err := n.db.LogData(nil, pebble.Sync); err != nil {
			return storageError("sync log", err)
		}
		n.syncLatency.observe(time.Since(start))
		n.st.synced()
		n.metrics.syncs.Add(1)
	}
	var peers []*raftpb.Message
	var local []localResponse
	for i, m := range batch {
		for _, r := range m.GetResponses() {
			if r.GetTo() != n.id {
				peers = append(peers, r)
				continue
			}
			lr := localResponse{m: r}
			if r.GetType() == raftpb.MsgStorageAppendResp {
				lr.snap = snaps[i]
			}
			local = append(local, lr)
		}
	}
	n.send(peers)
	a.mu.Lock()
	a.mu.out = append(a.mu.out, local...)
	a.mu.writing = false
	a.mu.Unlock()
	select {
	case a.ready <- struct{}{}:
	default:
	}
	return nil
}

// hardStateOf returns the hard state a MsgStorageAppend carries, or nil:
// raft sets its Term, Vote and Commit only when the hard state changed.
func hardStateOf(m *raftpb.Message) *raftpb.HardState {
	if m.Term == nil && m.Vote == nil && m.Commit == nil {
		return nil
	}
	return &raftpb.HardState{Term: new(m.GetTerm()), Vote: new(m.GetVote()), Commit: new(m.GetCommit())}
}

// stepLocal steps the durable responses the appender handed back, taking in
// a snapshot before raft learns it is applied. Called by the loop only.
func (n *Node) stepLocal() error {
	n.localBuf = n.app.take(n.localBuf)
	defer clear(n.localBuf)
	for _, lr := range n.localBuf {
		if lr.snap != nil {
			if err := n.restored(lr.snap); err != nil {
				return err
			}
		}
		if err := n.rn.Step(lr.m); err != nil {
			// A replica removed from the cluster has no progress of its
			// own left to acknowledge.
			n.log.Debug("step local response", "type", lr.m.GetType(), "err", err)
		}
	}
	return nil
}
