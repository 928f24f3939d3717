package raftkv

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/zstd"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// tcpMaxSnapshotWindow bounds the zstd window a snapshot receiver accepts
// (the sender's is far smaller), and so the decoder's memory.
const tcpMaxSnapshotWindow = 64 << 20

// sendSnapshotLocked starts streaming m, a MsgSnap, to p on a connection of
// its own. If a snapshot to p is already in flight, or the transport has
// not started, m fails at once. t.mu is held, for reading at least.
func (t *TCPTransport) sendSnapshotLocked(p *tcpPeer, m *raftpb.Message) {
	if !t.mu.started || !p.snapBusy.CompareAndSwap(false, true) {
		t.stats.messagesDropped.Add(1)
		t.stats.snapshotsFailed.Add(1)
		t.log.Debug("snapshot refused: one already in flight or transport not started", "peer", p.id)
		t.rep.snapshot(p.id, raft.SnapshotFailure)
		return
	}
	t.wg.Add(1)
	go p.sendSnapshot(m)
}

// sendSnapshot streams m and reports the outcome.
func (p *tcpPeer) sendSnapshot(m *raftpb.Message) {
	t := p.t
	defer t.wg.Done()
	start := time.Now()
	n, err := p.streamSnapshot(m)
	// Free the slot before reporting, so that raft may send the next one.
	p.snapBusy.Store(false)
	if err != nil {
		t.stats.messagesDropped.Add(1)
		t.stats.snapshotsFailed.Add(1)
		t.log.Warn("snapshot send failed", "peer", p.id, "index", m.GetSnapshot().GetMetadata().GetIndex(), "err", err)
		t.rep.snapshot(p.id, raft.SnapshotFailure)
		return
	}
	t.stats.messagesSent.Add(1)
	t.stats.snapshotsSent.Add(1)
	t.log.Info("snapshot sent", "peer", p.id, "index", m.GetSnapshot().GetMetadata().GetIndex(),
		"bytes", n, "duration", time.Since(start))
	t.rep.snapshot(p.id, raft.SnapshotFinish)
}

// streamSnapshot sends m and waits for the peer to confirm delivery. It
// returns the marshalled size.
func (p *tcpPeer) streamSnapshot(m *raftpb.Message) (int, error) {
	t := p.t
	data, err := proto.Marshal(m)
	if err != nil {
		return 0, fmt.Errorf("marshal snapshot: %w", err)
	}
	if int64(len(data)) > t.cfg.MaxSnapshotBytes {
		return 0, fmt.Errorf("%w: snapshot of %d bytes, MaxSnapshotBytes %d", ErrFrameTooLarge, len(data), t.cfg.MaxSnapshotBytes)
	}
	conn, err := t.dial(p.ctx, p.id, p.addr, tcpKindSnapshot)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	stop := context.AfterFunc(p.ctx, func() { conn.Close() })
	defer stop()

	w := &tcpTimeoutConn{conn: conn, timeout: t.cfg.WriteTimeout, count: &t.stats.snapshotBytesSent}
	bw := bufio.NewWriterSize(w, 256<<10)
	hdr := tcpSnapHeader{length: uint64(len(data)), dataCRC: crc32.Checksum(data, tcpCRC)}
	if _, err := bw.Write(hdr.appendTo(nil)); err != nil {
		return 0, fmt.Errorf("send snapshot: %w", err)
	}
	zw, err := zstd.NewWriter(bw, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedFastest))
	if err != nil {
		return 0, fmt.Errorf("send snapshot: zstd: %w", err)
	}
	if _, err := zw.Write(data); err != nil {
		zw.Close()
		return 0, fmt.Errorf("send snapshot: %w", err)
	}
	if err := zw.Close(); err != nil {
		return 0, fmt.Errorf("send snapshot: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return 0, fmt.Errorf("send snapshot: %w", err)
	}
	// The receiver replies once it has decoded and delivered the snapshot;
	// give it time in proportion to the size.
	wait := t.cfg.WriteTimeout + time.Duration(len(data)/(16<<20))*time.Second
	if err := conn.SetReadDeadline(time.Now().Add(wait)); err != nil {
		return 0, fmt.Errorf("send snapshot: %w", err)
	}
	reply, err := readTCPReply(conn)
	if err != nil {
		return 0, fmt.Errorf("send snapshot: wait for receipt: %w", err)
	}
	if reply.status != tcpStatusOK {
		return 0, fmt.Errorf("send snapshot: peer %d refused it: %s", p.id, reply.reason)
	}
	return len(data), nil
}

// receiveSnapshot reads one snapshot from peer from, delivers it and
// confirms it.
func (t *TCPTransport) receiveSnapshot(conn net.Conn, br *bufio.Reader, from uint64, h Handler, log *slog.Logger) {
	r := &tcpTimeoutConn{conn: conn, r: br, timeout: t.cfg.WriteTimeout, count: &t.stats.snapshotBytesReceived}
	refuse := func(err error) {
		switch {
		case errors.Is(err, ErrChecksumMismatch):
			t.stats.checksumFailures.Add(1)
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed),
			errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, errTCPConn):
			log.Debug("snapshot stream ended", "err", err)
			return
		default:
			t.stats.protocolErrors.Add(1)
		}
		log.Warn("snapshot refused", "err", err)
		t.writeReply(conn, tcpStatusRejected, err.Error())
	}
	hdr, err := readTCPSnapHeader(r)
	if err != nil {
		refuse(err)
		return
	}
	if hdr.length > uint64(t.cfg.MaxSnapshotBytes) || hdr.length > math.MaxInt {
		refuse(fmt.Errorf("%w: snapshot of %d bytes, MaxSnapshotBytes %d", ErrFrameTooLarge, hdr.length, t.cfg.MaxSnapshotBytes))
		return
	}
	dec, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(tcpMaxSnapshotWindow))
	if err != nil {
		refuse(fmt.Errorf("zstd: %w", err))
		return
	}
	defer dec.Close()
	fr := tcpFrameReader{r: &tcpZstdErrors{dec}}
	data, err := fr.readPayload(int(hdr.length))
	if err != nil {
		refuse(fmt.Errorf("read snapshot: %w", err))
		return
	}
	if crc := crc32.Checksum(data, tcpCRC); crc != hdr.dataCRC {
		refuse(fmt.Errorf("read snapshot: %w: header says %08x, data has %08x", ErrChecksumMismatch, hdr.dataCRC, crc))
		return
	}
	m := new(raftpb.Message)
	if err := proto.Unmarshal(data, m); err != nil {
		refuse(fmt.Errorf("read snapshot: %w: %v", ErrMalformed, err))
		return
	}
	if m.GetType() != raftpb.MsgSnap {
		refuse(fmt.Errorf("read snapshot: %w: got %v", ErrMalformed, m.GetType()))
		return
	}
	if err := t.checkSenders([]*raftpb.Message{m}, from); err != nil {
		refuse(fmt.Errorf("read snapshot: %w", err))
		return
	}
	data = nil
	h.Receive(m)
	t.stats.messagesReceived.Add(1)
	t.stats.snapshotsReceived.Add(1)
	log.Info("snapshot received", "index", m.GetSnapshot().GetMetadata().GetIndex(), "bytes", hdr.length)
	if err := t.writeReply(conn, tcpStatusOK, ""); err != nil {
		log.Debug("snapshot receipt not sent", "err", err)
	}
}

// errTCPConn marks errors of the connection under a zstd stream, as opposed
// to errors in the stream itself.
var errTCPConn = errors.New("connection error")

// tcpTimeoutConn reads (from r) or writes (to conn) with a deadline renewed
// at every call, so that a transfer fails only after timeout without
// progress, and counts the bytes.
type tcpTimeoutConn struct {
	conn    net.Conn
	r       io.Reader
	timeout time.Duration
	count   *atomic.Uint64
}

func (c *tcpTimeoutConn) Read(b []byte) (int, error) {
	if err := c.conn.SetReadDeadline(time.Now().Add(c.timeout)); err != nil {
		return 0, fmt.Errorf("%w: %w", errTCPConn, err)
	}
	n, err := c.r.Read(b)
	c.count.Add(uint64(n))
	if err != nil && err != io.EOF {
		err = fmt.Errorf("%w: %w", errTCPConn, err)
	}
	return n, err
}

func (c *tcpTimeoutConn) Write(b []byte) (int, error) {
	if err := c.conn.SetWriteDeadline(time.Now().Add(c.timeout)); err != nil {
		return 0, err
	}
	n, err := c.conn.Write(b)
	c.count.Add(uint64(n))
	return n, err
}

// tcpZstdErrors marks the errors of a zstd decoder that do not come from the
// connection as malformed data.
type tcpZstdErrors struct{ r io.Reader }

func (z *tcpZstdErrors) Read(b []byte) (int, error) {
	n, err := z.r.Read(b)
	if err != nil && err != io.EOF && !errors.Is(err, errTCPConn) && !errors.Is(err, io.ErrUnexpectedEOF) {
		err = fmt.Errorf("%w: zstd: %w", ErrMalformed, err)
	}
	return n, err
}
