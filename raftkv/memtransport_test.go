package raftkv_test

import (
	"fmt"
	"sync"

	"github.com/sluicehq/sluice/raftkv"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// memNetwork connects memTransports in one process. Messages are marshaled
// and unmarshaled as on a real wire, delivered in order per pair of
// replicas, and dropped on the links the test cut.
type memNetwork struct {
	mu      sync.Mutex
	byAddr  map[string]*memTransport
	blocked map[[2]uint64]bool // from → to
}

func newMemNetwork() *memNetwork {
	return &memNetwork{byAddr: map[string]*memTransport{}, blocked: map[[2]uint64]bool{}}
}

// transport returns a transport for replica id listening at addr.
func (nw *memNetwork) transport(id uint64, addr string) *memTransport {
	return &memTransport{nw: nw, id: id, addr: addr, peers: map[uint64]string{}, queues: map[uint64]chan []byte{}}
}

// partition cuts every link between replicas of different groups.
func (nw *memNetwork) partition(groups ...[]uint64) {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	for i, a := range groups {
		for j, b := range groups {
			if i == j {
				continue
			}
			for _, x := range a {
				for _, y := range b {
					nw.blocked[[2]uint64{x, y}] = true
				}
			}
		}
	}
}

// heal restores every link.
func (nw *memNetwork) heal() {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	clear(nw.blocked)
}

func (nw *memNetwork) linkOK(from, to uint64) bool {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	return !nw.blocked[[2]uint64{from, to}]
}

func (nw *memNetwork) lookup(addr string) *memTransport {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	return nw.byAddr[addr]
}

// memTransport implements raftkv.Transport over a memNetwork.
type memTransport struct {
	nw   *memNetwork
	id   uint64
	addr string

	mu     sync.Mutex
	h      raftkv.Handler
	peers  map[uint64]string
	queues map[uint64]chan []byte
	closed bool
	wg     sync.WaitGroup
}

var _ raftkv.Transport = (*memTransport)(nil)

func (t *memTransport) Start(h raftkv.Handler) error {
	t.nw.mu.Lock()
	defer t.nw.mu.Unlock()
	if old := t.nw.byAddr[t.addr]; old != nil && old != t {
		return fmt.Errorf("memtransport: address %s in use", t.addr)
	}
	t.mu.Lock()
	t.h = h
	t.mu.Unlock()
	t.nw.byAddr[t.addr] = t
	return nil
}

func (t *memTransport) handler() raftkv.Handler {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	return t.h
}

func (t *memTransport) AddPeer(id uint64, addr string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	t.peers[id] = addr
	if _, ok := t.queues[id]; !ok {
		q := make(chan []byte, 8192)
		t.queues[id] = q
		t.wg.Add(1)
		go t.deliver(id, q)
	}
}

func (t *memTransport) RemovePeer(id uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.peers, id)
	if q, ok := t.queues[id]; ok {
		close(q)
		delete(t.queues, id)
	}
}

func (t *memTransport) Send(msgs []*raftpb.Message) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	for _, m := range msgs {
		to := m.GetTo()
		q, ok := t.queues[to]
		isSnap := m.GetType() == raftpb.MsgSnap
		if ok && t.nw.linkOK(t.id, to) {
			b, err := proto.Marshal(m)
			if err == nil {
				select {
				case q <- b:
					continue
				default:
				}
			}
		}
		t.reportFailure(to, isSnap)
	}
}

// reportFailure tells the handler, off the caller's goroutine order but
// without blocking it (the handler only queues).
func (t *memTransport) reportFailure(to uint64, isSnap bool) {
	if isSnap {
		t.h.ReportSnapshot(to, raft.SnapshotFailure)
	} else {
		t.h.ReportUnreachable(to)
	}
}

func (t *memTransport) deliver(to uint64, q chan []byte) {
	defer t.wg.Done()
	for b := range q {
		m := &raftpb.Message{}
		if err := proto.Unmarshal(b, m); err != nil {
			panic(err)
		}
		isSnap := m.GetType() == raftpb.MsgSnap
		t.mu.Lock()
		addr := t.peers[to]
		t.mu.Unlock()
		var dh raftkv.Handler
		if dst := t.nw.lookup(addr); dst != nil && t.nw.linkOK(t.id, to) {
			dh = dst.handler()
		}
		h := t.handler()
		if dh == nil {
			if h != nil {
				if isSnap {
					h.ReportSnapshot(to, raft.SnapshotFailure)
				} else {
					h.ReportUnreachable(to)
				}
			}
			continue
		}
		dh.Receive(m)
		if isSnap && h != nil {
			h.ReportSnapshot(to, raft.SnapshotFinish)
		}
	}
}

func (t *memTransport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	for id, q := range t.queues {
		close(q)
		delete(t.queues, id)
	}
	t.mu.Unlock()
	t.wg.Wait()
	t.nw.mu.Lock()
	if t.nw.byAddr[t.addr] == t {
		delete(t.nw.byAddr, t.addr)
	}
	t.nw.mu.Unlock()
	return nil
}
