package raftkv

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/sluicehq/sluice/clock"
)

// acceptLoop accepts connections until the listener is closed, serving
// each on a goroutine of its own.
func (t *TCPTransport) acceptLoop(h Handler) {
	defer t.wg.Done()
	var delay time.Duration
	for {
		conn, err := t.ln.Accept()
		if err != nil {
			if t.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: wait, as net/http does.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			t.log.Error("accept failed", "err", err, "retry_in", delay)
			if clock.Sleep(t.ctx, t.cfg.Clock, delay) != nil {
				return
			}
			continue
		}
		delay = 0
		t.mu.Lock()
		if t.mu.closed {
			t.mu.Unlock()
			conn.Close()
			return
		}
		t.mu.inbound[conn] = struct{}{}
		t.wg.Add(1)
		t.mu.Unlock()
		go t.serveConn(conn, h)
	}
}

// serveConn completes the TLS handshake of an inbound connection when the
// transport has TLS, checks its hello, answers it, and reads what follows
// until the connection ends. Nothing reaches the Handler from a connection
// whose handshakes failed.
func (t *TCPTransport) serveConn(raw net.Conn, h Handler) {
	defer t.wg.Done()
	defer func() {
		raw.Close()
		t.mu.Lock()
		delete(t.mu.inbound, raw)
		t.mu.Unlock()
	}()
	conn := raw // with TLS, the TLS connection over raw
	log := t.log.With("remote", raw.RemoteAddr().String())

	// The TLS handshake and the hello share one deadline, so that a slow
	// or silent dialer holds this goroutine at most DialTimeout.
	if err := conn.SetDeadline(time.Now().Add(t.cfg.DialTimeout)); err != nil {
		return
	}
	if t.serverTLS != nil {
		tc, err := t.serverHandshake(conn)
		if err != nil {
			log.Warn("inbound connection refused: TLS handshake failed", "err", err)
			return
		}
		conn = tc
	}
	br := bufio.NewReaderSize(conn, 64<<10)
	hello, err := readTCPHello(br)
	if err != nil {
		if !errors.Is(err, io.EOF) {
			t.stats.protocolErrors.Add(1)
			log.Warn("inbound connection closed: bad hello", "err", err)
		}
		return
	}
	log = log.With("peer", hello.from)
	if reason := t.checkHello(hello); reason != "" {
		t.stats.handshakesRejected.Add(1)
		log.Warn("inbound connection rejected", "reason", reason)
		t.writeReply(conn, tcpStatusRejected, reason)
		return
	}
	if err := t.writeReply(conn, tcpStatusOK, ""); err != nil {
		log.Debug("inbound connection lost during handshake", "err", err)
		return
	}
	if err := conn.SetDeadline(time.Time{}); err != nil {
		return
	}
	switch hello.kind {
	case tcpKindStream:
		t.readStream(conn, br, hello.from, h, log)
	case tcpKindSnapshot:
		t.receiveSnapshot(conn, br, hello.from, h, log)
	}
}

// checkHello returns why a hello is refused, or "" if it is accepted.
func (t *TCPTransport) checkHello(h tcpHello) string {
	switch {
	case h.version != tcpProtocolVersion:
		return fmt.Sprintf("protocol version %d not supported (node %d speaks version %d)", h.version, t.cfg.ID, tcpProtocolVersion)
	case h.clusterID != t.cfg.ClusterID:
		return fmt.Sprintf("cluster ID mismatch: node %d of cluster %d dialled node %d, which belongs to cluster %d",
			h.from, h.clusterID, t.cfg.ID, t.cfg.ClusterID)
	case h.to != t.cfg.ID:
		return fmt.Sprintf("node ID mismatch: node %d dialled node %d, but reached node %d", h.from, h.to, t.cfg.ID)
	case h.from == 0 || h.from == t.cfg.ID:
		return fmt.Sprintf("invalid sender node ID %d", h.from)
	case h.kind != tcpKindStream && h.kind != tcpKindSnapshot:
		return fmt.Sprintf("unknown connection kind %d", h.kind)
	}
	return ""
}

// writeReply sends a reply, within WriteTimeout.
func (t *TCPTransport) writeReply(conn net.Conn, status uint8, reason string) error {
	if err := conn.SetWriteDeadline(time.Now().Add(t.cfg.WriteTimeout)); err != nil {
		return err
	}
	r := tcpReply{status: status, clusterID: t.cfg.ClusterID, nodeID: t.cfg.ID, reason: reason}
	_, err := conn.Write(r.appendTo(nil))
	return err
}

// readStream delivers the messages of each frame from peer from, in order,
// until the connection ends or breaks the wire format.
func (t *TCPTransport) readStream(conn net.Conn, br *bufio.Reader, from uint64, h Handler, log *slog.Logger) {
	t.mu.Lock()
	if old := t.mu.streams[from]; old != nil {
		old.Close()
	}
	t.mu.streams[from] = conn
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		if t.mu.streams[from] == conn {
			delete(t.mu.streams, from)
		}
		t.mu.Unlock()
	}()

	fr := tcpFrameReader{r: br, maxPayload: t.cfg.MaxFrameBytes}
	for {
		msgs, n, err := fr.readFrame()
		if err == nil {
			err = t.checkSenders(msgs, from)
		}
		if err != nil {
			switch {
			case errors.Is(err, ErrChecksumMismatch):
				t.stats.checksumFailures.Add(1)
				log.Warn("inbound stream closed", "err", err)
			case errors.Is(err, ErrMalformed) || errors.Is(err, ErrFrameTooLarge):
				t.stats.protocolErrors.Add(1)
				log.Warn("inbound stream closed", "err", err)
			default: // EOF, reset, closed by us
				log.Debug("inbound stream ended", "err", err)
			}
			return
		}
		t.stats.framesReceived.Add(1)
		t.stats.bytesReceived.Add(uint64(n))
		for _, m := range msgs {
			h.Receive(m)
		}
		t.stats.messagesReceived.Add(uint64(len(msgs)))
	}
}

// checkSenders checks that every message is from the peer the hello named
// and to this node.
func (t *TCPTransport) checkSenders(msgs []*raftpb.Message, from uint64) error {
	for _, m := range msgs {
		if m.GetFrom() != from || m.GetTo() != t.cfg.ID {
			return fmt.Errorf("%w: %v from %d to %d on the stream from %d to %d",
				ErrMalformed, m.GetType(), m.GetFrom(), m.GetTo(), from, t.cfg.ID)
		}
	}
	return nil
}
