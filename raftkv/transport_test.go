package raftkv_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/raftkv"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// tcpRecorder is a Handler that records what it is given. onReceive, if
// set, runs before a message is recorded (and may block, to stall a
// receiver).
type tcpRecorder struct {
	onReceive func(m *raftpb.Message)

	mu          sync.Mutex
	msgs        []*raftpb.Message
	unreachable map[uint64]int
	snaps       []tcpSnapEvent
}

type tcpSnapEvent struct {
	id     uint64
	status raft.SnapshotStatus
}

func newTCPRecorder() *tcpRecorder {
	return &tcpRecorder{unreachable: map[uint64]int{}}
}

func (r *tcpRecorder) Receive(m *raftpb.Message) {
	if r.onReceive != nil {
		r.onReceive(m)
	}
	r.mu.Lock()
	r.msgs = append(r.msgs, m)
	r.mu.Unlock()
}

func (r *tcpRecorder) ReportUnreachable(id uint64) {
	r.mu.Lock()
	r.unreachable[id]++
	r.mu.Unlock()
}

func (r *tcpRecorder) ReportSnapshot(id uint64, status raft.SnapshotStatus) {
	r.mu.Lock()
	r.snaps = append(r.snaps, tcpSnapEvent{id, status})
	r.mu.Unlock()
}

// received returns the messages received so far from sender from (any
// sender if 0).
func (r *tcpRecorder) received(from uint64) []*raftpb.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*raftpb.Message
	for _, m := range r.msgs {
		if from == 0 || m.GetFrom() == from {
			out = append(out, m)
		}
	}
	return out
}

func (r *tcpRecorder) count(typ raftpb.MessageType) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, m := range r.msgs {
		if m.GetType() == typ {
			n++
		}
	}
	return n
}

func (r *tcpRecorder) unreachableCount(id uint64) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.unreachable[id]
}

func (r *tcpRecorder) snapshots() []tcpSnapEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]tcpSnapEvent(nil), r.snaps...)
}

// tcpWaitFor polls cond until it holds, failing the test after 10 s.
func tcpWaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// tcpNode is one transport and its recorder.
type tcpNode struct {
	id  uint64
	tr  *raftkv.TCPTransport
	rec *tcpRecorder
}

// newTCPNode creates a transport on a free loopback port; tweak may change
// its config. It is closed when the test ends; it is not started.
func newTCPNode(t testing.TB, id uint64, tweak func(*raftkv.TCPConfig)) *tcpNode {
	t.Helper()
	cfg := raftkv.TCPConfig{ID: id, ListenAddr: "127.0.0.1:0"}
	if tweak != nil {
		tweak(&cfg)
	}
	tr, err := raftkv.NewTCPTransport(cfg)
	if err != nil {
		t.Fatalf("NewTCPTransport: %v", err)
	}
	t.Cleanup(func() {
		if err := tr.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return &tcpNode{id: id, tr: tr, rec: newTCPRecorder()}
}

func (n *tcpNode) start(t testing.TB) {
	t.Helper()
	if err := n.tr.Start(n.rec); err != nil {
		t.Fatalf("Start: %v", err)
	}
}

// newTCPCluster creates n started transports, IDs 1..n, that know each
// other.
func newTCPCluster(t testing.TB, n int, tweak func(*raftkv.TCPConfig)) []*tcpNode {
	t.Helper()
	nodes := make([]*tcpNode, n)
	for i := range nodes {
		nodes[i] = newTCPNode(t, uint64(i+1), tweak)
	}
	for _, a := range nodes {
		for _, b := range nodes {
			if a != b {
				a.tr.AddPeer(b.id, b.tr.Addr())
			}
		}
	}
	for _, a := range nodes {
		a.start(t)
	}
	return nodes
}

func tcpMsg(typ raftpb.MessageType, from, to, index uint64) *raftpb.Message {
	return &raftpb.Message{
		Type:  typ.Enum(),
		From:  proto.Uint64(from),
		To:    proto.Uint64(to),
		Term:  proto.Uint64(3),
		Index: proto.Uint64(index),
	}
}

// tcpApp is a MsgApp carrying one entry per data slice.
func tcpApp(from, to, index uint64, data ...[]byte) *raftpb.Message {
	m := tcpMsg(raftpb.MsgApp, from, to, index)
	for i, d := range data {
		m.Entries = append(m.Entries, &raftpb.Entry{
			Term:  proto.Uint64(3),
			Index: proto.Uint64(index + uint64(i) + 1),
			Type:  raftpb.EntryNormal.Enum(),
			Data:  d,
		})
	}
	return m
}

func tcpSnap(from, to, index uint64, data []byte) *raftpb.Message {
	m := tcpMsg(raftpb.MsgSnap, from, to, 0)
	m.Snapshot = &raftpb.Snapshot{
		Data: data,
		Metadata: &raftpb.SnapshotMetadata{
			Index:     proto.Uint64(index),
			Term:      proto.Uint64(3),
			ConfState: &raftpb.ConfState{Voters: []uint64{1, 2, 3}},
		},
	}
	return m
}

// tcpRandomBytes returns n bytes, the first half seeded-random and the rest
// a repeating pattern, so that compression has something to do.
func tcpRandomBytes(seed uint64, n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, seed))
	for i := range b[:n/2] {
		b[i] = byte(r.Uint32())
	}
	for i := n / 2; i < n; i++ {
		b[i] = byte(i % 251)
	}
	return b
}

// tcpFreeAddr returns a loopback address nothing listens on.
func tcpFreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// tcpLogBuffer collects log output for assertions.
type tcpLogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *tcpLogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *tcpLogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestTCPTransportExchange(t *testing.T) {
	const perPair = 3000
	nodes := newTCPCluster(t, 3, nil)
	var wg sync.WaitGroup
	for _, a := range nodes {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(a.id, 1))
			next := map[uint64]uint64{}
			for sent := 0; sent < 2*perPair; {
				var batch []*raftpb.Message
				for range 1 + r.IntN(50) {
					to := nodes[r.IntN(len(nodes))].id
					if to == a.id || next[to] == perPair {
						continue
					}
					next[to]++
					batch = append(batch, tcpMsg(raftpb.MsgApp, a.id, to, next[to]))
					sent++
				}
				a.tr.Send(batch)
				if r.IntN(10) == 0 {
					time.Sleep(time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	for _, n := range nodes {
		tcpWaitFor(t, fmt.Sprintf("node %d to receive everything", n.id), func() bool {
			return len(n.rec.received(0)) == 2*perPair
		})
	}
	for _, n := range nodes {
		for _, from := range nodes {
			if from == n {
				continue
			}
			msgs := n.rec.received(from.id)
			if len(msgs) != perPair {
				t.Fatalf("node %d got %d messages from %d, want %d", n.id, len(msgs), from.id, perPair)
			}
			for i, m := range msgs {
				if m.GetIndex() != uint64(i+1) || m.GetTo() != n.id {
					t.Fatalf("node %d: message %d from %d has index %d to %d: order not kept", n.id, i, from.id, m.GetIndex(), m.GetTo())
				}
			}
		}
		s := n.tr.Stats()
		if s.MessagesDropped != 0 || s.MessagesSent != 2*perPair || s.MessagesReceived != 2*perPair {
			t.Errorf("node %d stats %+v: want 0 dropped and %d sent and received", n.id, s, 2*perPair)
		}
	}
}

func TestTCPTransportBatching(t *testing.T) {
	t.Run("small messages share frames", func(t *testing.T) {
		nodes := newTCPCluster(t, 2, nil)
		a, b := nodes[0], nodes[1]
		a.tr.Send([]*raftpb.Message{tcpMsg(raftpb.MsgHeartbeat, 1, 2, 0)})
		tcpWaitFor(t, "the connection", func() bool { return len(b.rec.received(1)) == 1 })
		const total = 2000
		for i := range total / 100 {
			batch := make([]*raftpb.Message, 100)
			for j := range batch {
				batch[j] = tcpMsg(raftpb.MsgHeartbeat, 1, 2, uint64(i*100+j+1))
			}
			a.tr.Send(batch)
		}
		tcpWaitFor(t, "all messages", func() bool {
			return len(b.rec.received(1)) == total+1 && a.tr.Stats().MessagesSent == total+1
		})
		sa, sb := a.tr.Stats(), b.tr.Stats()
		if sb.FramesReceived*10 > total {
			t.Errorf("%d messages came in %d frames: want at least 10 per frame", total, sb.FramesReceived)
		}
		if sa.FramesSent != sb.FramesReceived || sa.BytesSent != sb.BytesReceived || sa.MessagesSent != total+1 {
			t.Errorf("sender %+v and receiver %+v disagree", sa, sb)
		}
		t.Logf("%d messages in %d frames, %d bytes", total, sb.FramesReceived, sb.BytesReceived)
	})
	t.Run("frames close at MaxBatchBytes", func(t *testing.T) {
		nodes := newTCPCluster(t, 2, func(c *raftkv.TCPConfig) { c.MaxBatchBytes = 4096 })
		a, b := nodes[0], nodes[1]
		batch := make([]*raftpb.Message, 100)
		for i := range batch {
			batch[i] = tcpApp(1, 2, uint64(i+1), make([]byte, 1000))
		}
		a.tr.Send(batch)
		tcpWaitFor(t, "all messages", func() bool { return len(b.rec.received(1)) == len(batch) })
		// About 4 messages fit in a frame.
		if f := b.tr.Stats().FramesReceived; f < 20 || f > 50 {
			t.Errorf("100 messages of 1 kB came in %d frames with MaxBatchBytes 4096, want 20..50", f)
		}
	})
}

func TestTCPTransportLargeMessages(t *testing.T) {
	nodes := newTCPCluster(t, 2, func(c *raftkv.TCPConfig) {
		if c.ID == 1 {
			c.MaxFrameBytes = 8 << 20
		}
	})
	a, b := nodes[0], nodes[1]
	var data [][]byte
	for i := range 6 {
		data = append(data, tcpRandomBytes(uint64(i), 1<<20))
	}
	big := tcpApp(1, 2, 10, data...)
	a.tr.Send([]*raftpb.Message{big})
	tcpWaitFor(t, "the 6 MiB message", func() bool { return len(b.rec.received(1)) == 1 })
	if got := b.rec.received(1)[0]; !proto.Equal(got, big) {
		t.Fatalf("the 6 MiB message changed on the way")
	}

	// Over the sender's MaxFrameBytes: dropped, reported, and the stream
	// goes on.
	tooBig := tcpApp(1, 2, 20, append(data, data[:3]...)...)
	a.tr.Send([]*raftpb.Message{tooBig, tcpMsg(raftpb.MsgHeartbeat, 1, 2, 30)})
	tcpWaitFor(t, "the heartbeat after the oversized message", func() bool { return len(b.rec.received(1)) == 2 })
	if got := b.rec.received(1)[1]; got.GetType() != raftpb.MsgHeartbeat {
		t.Fatalf("got %v, want the heartbeat", got.GetType())
	}
	tcpWaitFor(t, "an unreachable report", func() bool { return a.rec.unreachableCount(2) >= 1 })
	if s := a.tr.Stats(); s.MessagesDropped != 1 {
		t.Errorf("MessagesDropped = %d, want 1", s.MessagesDropped)
	}
}

func TestTCPTransportUnreachable(t *testing.T) {
	addr := tcpFreeAddr(t)
	clk := clock.NewManual(time.Time{})
	a := newTCPNode(t, 1, func(c *raftkv.TCPConfig) {
		c.Peers = map[uint64]string{2: addr}
		c.ReconnectBackoff = 20 * time.Millisecond
		c.MaxReconnectBackoff = 200 * time.Millisecond
		c.DialTimeout = 500 * time.Millisecond
		c.Clock = clk
	})
	a.start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// Each failed dial is counted (and reported at most once, however
	// many messages wait: reports not yet delivered merge), and the next
	// comes after the backoff, doubling up to its cap, plus up to a
	// quarter of jitter.
	const perRound = 100
	backoffs := []time.Duration{20, 40, 80, 160, 200, 200}
	for i, b := range backoffs {
		b *= time.Millisecond
		batch := make([]*raftpb.Message, perRound)
		for j := range batch {
			batch[j] = tcpMsg(raftpb.MsgApp, 1, 2, uint64(i*perRound+j+1))
		}
		a.tr.Send(batch)
		if err := clk.WaitTimers(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if n := a.tr.Stats().DialFailures; n != uint64(i+1) {
			t.Fatalf("%d dial failures counted after %d failed dials", n, i+1)
		}
		d, _ := clk.Next()
		if d < b || d > b+b/4 {
			t.Fatalf("wait after failed dial %d = %v, want %v to %v", i+1, d, b, b+b/4)
		}
		clk.Advance(d)
	}
	if err := clk.WaitTimers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	failed := len(backoffs) + 1
	tcpWaitFor(t, "an unreachable report", func() bool { return a.rec.unreachableCount(2) >= 1 })
	s := a.tr.Stats()
	if n := a.rec.unreachableCount(2); n > failed || s.DialFailures != uint64(failed) {
		t.Errorf("%d unreachable reports and %d dial failures after %d failed dials: want at most one report a failure", n, s.DialFailures, failed)
	}
	if s.MessagesDropped != uint64(len(backoffs)*perRound) || s.MessagesSent != 0 {
		t.Errorf("stats %+v: want every message dropped, nothing sent", s)
	}

	// The peer comes up: messages flow once the next dial is due.
	b := newTCPNode(t, 2, func(c *raftkv.TCPConfig) { c.ListenAddr = addr })
	b.start(t)
	tcpWaitFor(t, "messages to flow once the peer is up", func() bool {
		a.tr.Send([]*raftpb.Message{tcpMsg(raftpb.MsgHeartbeat, 1, 2, 1)})
		clk.Advance(250 * time.Millisecond)
		return b.rec.count(raftpb.MsgHeartbeat) > 0
	})

	// A snapshot to a peer nobody listens for fails.
	a.tr.AddPeer(3, tcpFreeAddr(t))
	a.tr.Send([]*raftpb.Message{tcpSnap(1, 3, 5, []byte("state"))})
	tcpWaitFor(t, "the snapshot to fail", func() bool {
		s := a.rec.snapshots()
		return len(s) == 1 && s[0] == tcpSnapEvent{3, raft.SnapshotFailure}
	})

	// Messages to an unknown peer are reported too.
	a.tr.Send([]*raftpb.Message{tcpMsg(raftpb.MsgApp, 1, 9, 1)})
	tcpWaitFor(t, "unknown peer reported", func() bool { return a.rec.unreachableCount(9) == 1 })
}

func TestTCPTransportBoundedQueue(t *testing.T) {
	release := make(chan struct{})
	nodes := make([]*tcpNode, 2)
	nodes[0] = newTCPNode(t, 1, func(c *raftkv.TCPConfig) { c.QueueSize = 8 })
	nodes[1] = newTCPNode(t, 2, nil)
	a, b := nodes[0], nodes[1]
	var stalled atomic.Bool
	b.rec.onReceive = func(*raftpb.Message) {
		stalled.Store(true)
		<-release
	}
	t.Cleanup(func() { close(release) }) // before the transports close
	a.tr.AddPeer(2, b.tr.Addr())
	a.start(t)
	b.start(t)

	payload := make([]byte, 16<<10)
	var slowest time.Duration
	const total = 3000
	for i := range total {
		m := tcpMsg(raftpb.MsgApp, 1, 2, uint64(i+1))
		m.Context = payload
		start := time.Now()
		a.tr.Send([]*raftpb.Message{m})
		slowest = max(slowest, time.Since(start))
	}
	if slowest > 100*time.Millisecond {
		t.Errorf("the slowest Send took %v with a stalled receiver: Send must not block", slowest)
	}
	tcpWaitFor(t, "the receiver to stall", stalled.Load)
	tcpWaitFor(t, "drops and an unreachable report", func() bool {
		return a.tr.Stats().MessagesDropped > 0 && a.rec.unreachableCount(2) > 0
	})
	s := a.tr.Stats()
	if s.MessagesDropped < total/2 {
		t.Errorf("only %d of %d messages dropped with a stalled receiver and a queue of 8", s.MessagesDropped, total)
	}
	if n := a.rec.unreachableCount(2); n > 20 {
		t.Errorf("%d unreachable reports: want them rate-limited", n)
	}
	t.Logf("stalled receiver: %d dropped, %d unreachable reports, slowest Send %v", s.MessagesDropped, a.rec.unreachableCount(2), slowest)
}

func TestTCPTransportSnapshotWhileHeartbeats(t *testing.T) {
	a := newTCPNode(t, 1, nil)
	b := newTCPNode(t, 2, nil)
	var heartbeats atomic.Int64
	var starved atomic.Bool
	b.rec.onReceive = func(m *raftpb.Message) {
		switch m.GetType() {
		case raftpb.MsgHeartbeat:
			heartbeats.Add(1)
		case raftpb.MsgSnap:
			// The snapshot is not confirmed until heartbeats have flowed
			// beside it: were they behind it, this would time out.
			deadline := time.Now().Add(10 * time.Second)
			for heartbeats.Load() < 20 {
				if time.Now().After(deadline) {
					starved.Store(true)
					return
				}
				time.Sleep(time.Millisecond)
			}
		}
	}
	a.tr.AddPeer(2, b.tr.Addr())
	a.start(t)
	b.start(t)

	data := tcpRandomBytes(7, 8<<20)
	snap := tcpSnap(1, 2, 1000, data)
	a.tr.Send([]*raftpb.Message{snap})
	for i := uint64(1); len(a.rec.snapshots()) == 0; i++ {
		a.tr.Send([]*raftpb.Message{tcpMsg(raftpb.MsgHeartbeat, 1, 2, i)})
		time.Sleep(time.Millisecond)
		if i > 20000 {
			t.Fatal("no snapshot report")
		}
	}
	if starved.Load() {
		t.Fatal("heartbeats did not flow while the snapshot was in flight")
	}
	if got := a.rec.snapshots(); len(got) != 1 || got[0] != (tcpSnapEvent{2, raft.SnapshotFinish}) {
		t.Fatalf("snapshot reports %v, want one SnapshotFinish for 2", got)
	}
	var got *raftpb.Message
	for _, m := range b.rec.received(1) {
		if m.GetType() == raftpb.MsgSnap {
			got = m
		}
	}
	if got == nil || !proto.Equal(got, snap) {
		t.Fatal("the snapshot did not arrive intact")
	}
	sa, sb := a.tr.Stats(), b.tr.Stats()
	if sa.SnapshotsSent != 1 || sb.SnapshotsReceived != 1 || sa.SnapshotBytesSent != sb.SnapshotBytesReceived {
		t.Errorf("sender %+v, receiver %+v", sa, sb)
	}
	if sa.SnapshotBytesSent >= uint64(len(data)) {
		t.Errorf("%d bytes on the wire for an %d-byte, half-compressible snapshot", sa.SnapshotBytesSent, len(data))
	}
	t.Logf("snapshot of %d bytes sent as %d, %d heartbeats meanwhile", len(data), sa.SnapshotBytesSent, heartbeats.Load())
}

func TestTCPTransportSnapshotOneAtATime(t *testing.T) {
	a := newTCPNode(t, 1, nil)
	b := newTCPNode(t, 2, nil)
	entered := make(chan struct{})
	release := make(chan struct{})
	b.rec.onReceive = func(m *raftpb.Message) {
		if m.GetType() == raftpb.MsgSnap {
			close(entered)
			<-release
		}
	}
	a.tr.AddPeer(2, b.tr.Addr())
	a.start(t)
	b.start(t)

	a.tr.Send([]*raftpb.Message{tcpSnap(1, 2, 10, []byte("first"))})
	<-entered
	a.tr.Send([]*raftpb.Message{tcpSnap(1, 2, 20, []byte("second"))})
	tcpWaitFor(t, "the second snapshot to be refused", func() bool { return len(a.rec.snapshots()) == 1 })
	close(release)
	tcpWaitFor(t, "the first snapshot to finish", func() bool { return len(a.rec.snapshots()) == 2 })
	want := []tcpSnapEvent{{2, raft.SnapshotFailure}, {2, raft.SnapshotFinish}}
	if got := a.rec.snapshots(); got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("snapshot reports %v, want %v", got, want)
	}
	if n := b.rec.count(raftpb.MsgSnap); n != 1 {
		t.Fatalf("%d snapshots delivered, want 1", n)
	}
}

func TestTCPTransportFilter(t *testing.T) {
	nodes := newTCPCluster(t, 2, nil)
	a, b := nodes[0], nodes[1]
	a.tr.SetFilter(func(m *raftpb.Message) bool { return m.GetType() == raftpb.MsgApp })
	var batch []*raftpb.Message
	for i := range uint64(100) {
		batch = append(batch, tcpMsg(raftpb.MsgHeartbeat, 1, 2, i), tcpMsg(raftpb.MsgApp, 1, 2, i))
	}
	a.tr.Send(batch)
	a.tr.Send([]*raftpb.Message{tcpSnap(1, 2, 5, []byte("x"))})
	tcpWaitFor(t, "the appends", func() bool { return b.rec.count(raftpb.MsgApp) == 100 })
	if n := b.rec.count(raftpb.MsgHeartbeat); n != 0 {
		t.Fatalf("%d filtered heartbeats delivered", n)
	}
	// A filtered snapshot fails, as it would across a partition.
	tcpWaitFor(t, "the filtered snapshot to fail", func() bool { return len(a.rec.snapshots()) == 1 })
	if s := a.tr.Stats(); s.MessagesFiltered != 101 || s.MessagesDropped != 0 {
		t.Errorf("stats %+v: want 101 filtered, 0 dropped", s)
	}
	if n := a.rec.unreachableCount(2); n != 0 {
		t.Errorf("filtered messages reported unreachable %d times", n)
	}

	a.tr.SetFilter(nil)
	a.tr.Send([]*raftpb.Message{tcpMsg(raftpb.MsgHeartbeat, 1, 2, 1000)})
	tcpWaitFor(t, "a heartbeat once the filter is gone", func() bool { return b.rec.count(raftpb.MsgHeartbeat) == 1 })

	// Changing the filter while sending is safe.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if i%2 == 0 {
				a.tr.SetFilter(func(*raftpb.Message) bool { return false })
			} else {
				a.tr.SetFilter(nil)
			}
		}
	})
	for i := range uint64(1000) {
		a.tr.Send([]*raftpb.Message{tcpMsg(raftpb.MsgApp, 1, 2, 1000+i)})
	}
	close(stop)
	wg.Wait()
}

func TestTCPTransportRemoveAndAddPeer(t *testing.T) {
	nodes := newTCPCluster(t, 2, nil)
	a, b := nodes[0], nodes[1]
	a.tr.Send([]*raftpb.Message{tcpMsg(raftpb.MsgApp, 1, 2, 1)})
	tcpWaitFor(t, "the first message", func() bool { return len(b.rec.received(1)) == 1 })

	a.tr.RemovePeer(2)
	a.tr.RemovePeer(2) // unknown now: no-op
	for i := range uint64(10) {
		a.tr.Send([]*raftpb.Message{tcpMsg(raftpb.MsgApp, 1, 2, 100+i)})
	}
	tcpWaitFor(t, "the removed peer reported", func() bool { return a.rec.unreachableCount(2) >= 1 })

	a.tr.AddPeer(2, b.tr.Addr())
	a.tr.AddPeer(2, b.tr.Addr()) // same address: no-op
	a.tr.Send([]*raftpb.Message{tcpMsg(raftpb.MsgApp, 1, 2, 2)})
	tcpWaitFor(t, "a message after AddPeer", func() bool { return len(b.rec.received(1)) == 2 })
	for _, m := range b.rec.received(1) {
		if m.GetIndex() >= 100 {
			t.Fatalf("message %d, sent while the peer was removed, was delivered", m.GetIndex())
		}
	}
	if s := a.tr.Stats(); s.MessagesDropped != 10 {
		t.Errorf("MessagesDropped = %d, want 10", s.MessagesDropped)
	}

	// A third node joins at run time.
	c := newTCPNode(t, 3, func(cfg *raftkv.TCPConfig) { cfg.Peers = map[uint64]string{1: a.tr.Addr()} })
	c.start(t)
	a.tr.AddPeer(3, c.tr.Addr())
	a.tr.Send([]*raftpb.Message{tcpMsg(raftpb.MsgApp, 1, 3, 1)})
	c.tr.Send([]*raftpb.Message{tcpMsg(raftpb.MsgAppResp, 3, 1, 1)})
	tcpWaitFor(t, "1 → 3", func() bool { return len(c.rec.received(1)) == 1 })
	tcpWaitFor(t, "3 → 1", func() bool { return len(a.rec.received(3)) == 1 })
}

func TestTCPTransportHandshakeRejected(t *testing.T) {
	logs := &tcpLogBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	a := newTCPNode(t, 1, func(c *raftkv.TCPConfig) { c.ClusterID = 1; c.Logger = logger })
	b := newTCPNode(t, 2, func(c *raftkv.TCPConfig) { c.ClusterID = 2; c.Logger = logger })
	c := newTCPNode(t, 3, func(c *raftkv.TCPConfig) { c.ClusterID = 1; c.Logger = logger })
	a.tr.AddPeer(2, b.tr.Addr()) // another cluster
	a.tr.AddPeer(4, c.tr.Addr()) // node 3 is not node 4
	a.start(t)
	b.start(t)
	c.start(t)
	a.tr.Send([]*raftpb.Message{tcpMsg(raftpb.MsgApp, 1, 2, 1), tcpMsg(raftpb.MsgApp, 1, 4, 1)})
	tcpWaitFor(t, "both peers reported unreachable", func() bool {
		return a.rec.unreachableCount(2) > 0 && a.rec.unreachableCount(4) > 0
	})
	tcpWaitFor(t, "both rejections counted", func() bool {
		return b.tr.Stats().HandshakesRejected > 0 && c.tr.Stats().HandshakesRejected > 0
	})
	if len(b.rec.received(0))+len(c.rec.received(0)) != 0 {
		t.Fatal("messages delivered across a rejected handshake")
	}
	out := logs.String()
	for _, want := range []string{
		"cluster ID mismatch: node 1 of cluster 1 dialled node 2, which belongs to cluster 2",
		"node ID mismatch: node 1 dialled node 4, but reached node 3",
		"handshake rejected",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("logs do not say %q:\n%s", want, out)
		}
	}
}

func TestTCPTransportLifecycle(t *testing.T) {
	// Settle what earlier tests left (their transports are closed; a few
	// runtime goroutines may still be on their way out).
	before := runtime.NumGoroutine()

	func() {
		nodes := make([]*tcpNode, 3)
		for i := range nodes {
			cfg := raftkv.TCPConfig{ID: uint64(i + 1), ListenAddr: "127.0.0.1:0"}
			tr, err := raftkv.NewTCPTransport(cfg)
			if err != nil {
				t.Fatal(err)
			}
			nodes[i] = &tcpNode{id: cfg.ID, tr: tr, rec: newTCPRecorder()}
		}
		for _, a := range nodes {
			for _, b := range nodes {
				if a != b {
					a.tr.AddPeer(b.id, b.tr.Addr())
				}
			}
			a.tr.AddPeer(9, tcpFreeAddr(t)) // always in backoff
			if err := a.tr.Start(a.rec); err != nil {
				t.Fatal(err)
			}
		}
		if err := nodes[0].tr.Start(nodes[0].rec); err == nil {
			t.Error("second Start succeeded")
		}
		for _, a := range nodes {
			for _, b := range nodes {
				if a != b {
					a.tr.Send([]*raftpb.Message{tcpMsg(raftpb.MsgApp, a.id, b.id, 1), tcpMsg(raftpb.MsgApp, a.id, 9, 1)})
				}
			}
		}
		// A snapshot in flight when Close comes.
		nodes[0].tr.Send([]*raftpb.Message{tcpSnap(1, 2, 5, tcpRandomBytes(1, 4<<20))})
		for _, n := range nodes {
			tcpWaitFor(t, "messages", func() bool { return len(n.rec.received(0)) >= 2 })
		}
		var wg sync.WaitGroup
		for _, n := range nodes {
			wg.Go(func() {
				if err := n.tr.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			wg.Go(func() { n.tr.Close() }) // concurrent Close
		}
		wg.Wait()
		for _, n := range nodes {
			if err := n.tr.Close(); err != nil {
				t.Errorf("second Close: %v", err)
			}
			s := n.tr.Stats()
			n.tr.Send([]*raftpb.Message{tcpMsg(raftpb.MsgApp, n.id, 1, 2)}) // no-op
			n.tr.AddPeer(7, "127.0.0.1:1")                                  // no-op
			n.tr.RemovePeer(2)
			if s2 := n.tr.Stats(); s2 != s {
				t.Errorf("Send after Close changed stats: %+v → %+v", s, s2)
			}
			if err := n.tr.Start(n.rec); !errors.Is(err, raftkv.ErrTransportClosed) {
				t.Errorf("Start after Close: %v, want ErrTransportClosed", err)
			}
		}
	}()

	// Close before Start frees the port.
	tr, err := raftkv.NewTCPTransport(raftkv.TCPConfig{ID: 1, ListenAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	addr := tr.Addr()
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	tr2, err := raftkv.NewTCPTransport(raftkv.TCPConfig{ID: 1, ListenAddr: addr})
	if err != nil {
		t.Fatalf("port not freed by Close before Start: %v", err)
	}
	tr2.Close()

	var after int
	deadline := time.Now().Add(5 * time.Second)
	for {
		after = runtime.NumGoroutine()
		if after <= before || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if after > before {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines before, %d after Close:\n%s", before, after, buf[:runtime.Stack(buf, true)])
	}
}

func TestTCPConfigValidate(t *testing.T) {
	err := raftkv.TCPConfig{
		Peers:               map[uint64]string{0: "x:1", 2: ""},
		QueueSize:           -1,
		MaxFrameBytes:       2 << 30,
		ReconnectBackoff:    time.Second,
		MaxReconnectBackoff: time.Millisecond,
	}.Validate()
	if err == nil {
		t.Fatal("invalid config accepted")
	}
	for _, want := range []string{"ID must not be zero", "ListenAddr is required", "node ID 0", "Peers[2]: empty address",
		"QueueSize -1", "MaxFrameBytes", "MaxReconnectBackoff"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
	if _, err := raftkv.NewTCPTransport(raftkv.TCPConfig{}); err == nil {
		t.Error("NewTCPTransport accepted an empty config")
	}
	if err := (raftkv.TCPConfig{ID: 1, ListenAddr: ":0"}).Validate(); err != nil {
		t.Errorf("minimal config: %v", err)
	}
	if _, err := raftkv.NewTCPTransport(raftkv.TCPConfig{ID: 1, ListenAddr: "256.0.0.1:bad"}); err == nil || !strings.Contains(err.Error(), "listen") {
		t.Errorf("bad ListenAddr: %v", err)
	}
}
