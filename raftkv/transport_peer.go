package raftkv

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/clock"
)

// tcpPeer is the outbound side of one peer: a bounded queue, drained by one
// goroutine (run) that owns the peer's message connection, and at most one
// snapshot sender at a time.
type tcpPeer struct {
	t      *TCPTransport
	id     uint64
	addr   string
	queue  chan *raftpb.Message
	ctx    context.Context // cancelled by RemovePeer, AddPeer replacing it, or Close
	cancel context.CancelFunc

	// backoff is the current reconnect wait in nanoseconds: the window in
	// which at most one unreachable report is made for queue overflows.
	backoff atomic.Int64
	// snapBusy is set while a snapshot is being sent to the peer.
	snapBusy atomic.Bool

	// Owned by run.
	enc   tcpFrameEncoder
	batch []*raftpb.Message
}

func (t *TCPTransport) newPeer(id uint64, addr string) *tcpPeer {
	p := &tcpPeer{
		t:     t,
		id:    id,
		addr:  addr,
		queue: make(chan *raftpb.Message, t.cfg.QueueSize),
	}
	p.ctx, p.cancel = context.WithCancel(t.ctx)
	p.backoff.Store(int64(t.cfg.ReconnectBackoff))
	return p
}

// startPeerLocked starts p's goroutine. t.mu must be held.
func (t *TCPTransport) startPeerLocked(p *tcpPeer) {
	t.wg.Add(1)
	go p.run()
}

// window is the interval within which queue overflows are reported once.
func (p *tcpPeer) window() time.Duration { return time.Duration(p.backoff.Load()) }

// run connects to the peer and streams its queue until the peer is removed
// or the transport closes, reconnecting with backoff. Messages queued while
// the peer cannot be reached are dropped at each failed attempt, so that a
// peer coming back does not get a burst of stale ones.
func (p *tcpPeer) run() {
	t := p.t
	defer t.wg.Done()
	defer p.discard()
	log := t.log.With("peer", p.id, "addr", p.addr)
	backoff := t.cfg.ReconnectBackoff
	failures := 0
	for {
		if p.ctx.Err() != nil {
			return
		}
		conn, err := t.dial(p.ctx, p.id, p.addr, tcpKindStream)
		if err != nil {
			if p.ctx.Err() != nil {
				return
			}
			failures++
			t.stats.dialFailures.Add(1)
			if errors.Is(err, ErrHandshakeRejected) {
				t.stats.handshakesRejected.Add(1)
			}
			if failures == 1 {
				log.Warn("peer unreachable", "err", err)
			} else {
				log.Debug("peer still unreachable", "err", err, "attempts", failures)
			}
			p.backoff.Store(int64(backoff))
			p.discard()
			t.rep.unreachable(p.id, 0)
			if !p.sleep(backoff) {
				return
			}
			backoff = min(2*backoff, t.cfg.MaxReconnectBackoff)
			continue
		}
		if failures > 0 {
			log.Info("peer reachable again", "failed_attempts", failures)
		} else {
			log.Debug("connected to peer")
		}
		failures = 0
		backoff = t.cfg.ReconnectBackoff
		p.backoff.Store(int64(backoff))

		err = p.stream(conn)
		conn.Close()
		if p.ctx.Err() != nil {
			return
		}
		log.Warn("connection to peer lost", "err", err)
		t.rep.unreachable(p.id, 0)
		// Do not spin if the peer accepts and drops us at once.
		if !p.sleep(backoff) {
			return
		}
	}
}

// sleep waits about d (with jitter) and reports false if the peer stopped.
func (p *tcpPeer) sleep(d time.Duration) bool {
	d += rand.N(d/4 + 1)
	return clock.Sleep(p.ctx, p.t.cfg.Clock, d) == nil
}

// discard drops every queued message.
func (p *tcpPeer) discard() {
	for {
		select {
		case <-p.queue:
			p.t.stats.messagesDropped.Add(1)
		default:
			return
		}
	}
}

// stream writes queued messages to conn, in frames, until a write fails,
// the peer closes the connection or p stops.
func (p *tcpPeer) stream(conn net.Conn) error {
	t := p.t
	stop := context.AfterFunc(p.ctx, func() { conn.Close() })
	defer stop()

	// The peer never writes after its reply: a read returning means the
	// connection is gone, which a writer with nothing to write would not
	// notice otherwise. The goroutine ends when run closes conn.
	gone := make(chan error, 1)
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		var b [1]byte
		_, err := conn.Read(b[:])
		if err == nil {
			err = fmt.Errorf("%w: peer wrote on a message stream", ErrMalformed)
		}
		gone <- err
	}()

	bw := bufio.NewWriterSize(conn, 64<<10)
	for {
		var m *raftpb.Message
		select {
		case <-p.ctx.Done():
			return p.ctx.Err()
		case err := <-gone:
			return fmt.Errorf("connection closed by peer: %w", err)
		case m = <-p.queue:
		}
		batch := append(p.batch[:0], m)
	drain:
		for len(batch) < cap(p.queue) {
			select {
			case m := <-p.queue:
				batch = append(batch, m)
			default:
				break drain
			}
		}
		err := p.writeBatch(conn, bw, batch)
		clear(batch) // let the messages be collected
		p.batch = batch[:0]
		if err != nil {
			return err
		}
	}
}

// writeBatch writes batch as frames of up to MaxBatchBytes and flushes.
// Messages too large for a frame, or that fail to marshal, are dropped and
// logged. On a write error the whole batch counts as dropped.
func (p *tcpPeer) writeBatch(conn net.Conn, bw *bufio.Writer, batch []*raftpb.Message) error {
	t := p.t
	cfg := &t.cfg
	var frames, bytes, msgs uint64
	writeFrame := func() error {
		frame := p.enc.finish()
		if err := conn.SetWriteDeadline(time.Now().Add(cfg.WriteTimeout)); err != nil {
			return err
		}
		if _, err := bw.Write(frame); err != nil {
			return err
		}
		frames++
		bytes += uint64(len(frame))
		msgs += uint64(p.enc.count)
		return nil
	}
	fail := func(err error) error {
		t.stats.messagesDropped.Add(uint64(len(batch)))
		return fmt.Errorf("write to peer %d: %w", p.id, err)
	}
	p.enc.reset()
	for _, m := range batch {
		size := proto.Size(m)
		n := tcpEncodedLen(size)
		if n > cfg.MaxFrameBytes {
			t.stats.messagesDropped.Add(1)
			t.log.Error("message dropped", "peer", p.id, "type", m.GetType(),
				"err", fmt.Errorf("%w: %v of %d bytes, MaxFrameBytes %d", ErrFrameTooLarge, m.GetType(), size, cfg.MaxFrameBytes))
			t.rep.unreachable(p.id, p.window())
			continue
		}
		if p.enc.count > 0 && p.enc.payloadLen()+n > cfg.MaxBatchBytes {
			if err := writeFrame(); err != nil {
				return fail(err)
			}
			p.enc.reset()
		}
		if err := p.enc.add(m, size); err != nil {
			t.stats.messagesDropped.Add(1)
			t.log.Error("message dropped", "peer", p.id, "err", err)
		}
	}
	if p.enc.count > 0 {
		if err := writeFrame(); err != nil {
			return fail(err)
		}
	}
	if err := conn.SetWriteDeadline(time.Now().Add(cfg.WriteTimeout)); err != nil {
		return fail(err)
	}
	if err := bw.Flush(); err != nil {
		return fail(err)
	}
	if cap(p.enc.buf) > tcpKeepBuffer {
		p.enc.buf = nil
	}
	t.stats.framesSent.Add(frames)
	t.stats.bytesSent.Add(bytes)
	t.stats.messagesSent.Add(msgs)
	return nil
}

// dial connects to peer id at addr and completes the handshakes (TLS when
// configured, then the hello) for a connection of the given kind, within
// DialTimeout. ctx cancels it at any point.
func (t *TCPTransport) dial(ctx context.Context, id uint64, addr string, kind uint8) (net.Conn, error) {
	d := net.Dialer{Timeout: t.cfg.DialTimeout, KeepAlive: 15 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("raftkv: dial peer %d at %s: %w", id, addr, err)
	}
	// The raw connection, not conn, which the TLS handshake replaces: the
	// callback may run while it does.
	raw := conn
	stop := context.AfterFunc(ctx, func() { raw.Close() })
	defer stop()
	fail := func(err error) (net.Conn, error) {
		conn.Close()
		return nil, err
	}
	if err := conn.SetDeadline(time.Now().Add(t.cfg.DialTimeout)); err != nil {
		return fail(fmt.Errorf("raftkv: handshake with peer %d at %s: %w", id, addr, err))
	}
	if t.clientTLS != nil {
		tc, err := t.clientHandshake(ctx, conn, id, addr)
		if err != nil {
			return fail(err)
		}
		conn = tc
	}
	hello := tcpHello{version: tcpProtocolVersion, kind: kind, clusterID: t.cfg.ClusterID, from: t.cfg.ID, to: id}
	if _, err := conn.Write(hello.appendTo(nil)); err != nil {
		return fail(fmt.Errorf("raftkv: handshake with peer %d at %s: send hello: %w", id, addr, err))
	}
	reply, err := readTCPReply(conn)
	if err != nil {
		return fail(fmt.Errorf("raftkv: handshake with peer %d at %s: %w", id, addr, err))
	}
	if reply.status != tcpStatusOK {
		return fail(fmt.Errorf("%w by peer %d at %s: %s", ErrHandshakeRejected, id, addr, reply.reason))
	}
	if reply.clusterID != t.cfg.ClusterID || reply.nodeID != id {
		return fail(fmt.Errorf("raftkv: handshake with peer %d at %s: %w: accepted by node %d of cluster %d",
			id, addr, ErrMalformed, reply.nodeID, reply.clusterID))
	}
	if err := conn.SetDeadline(time.Time{}); err != nil {
		return fail(fmt.Errorf("raftkv: handshake with peer %d at %s: %w", id, addr, err))
	}
	return conn, nil
}
