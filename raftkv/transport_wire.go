package raftkv

// The wire format of TCPTransport. Every integer is big-endian; every
// checksum is CRC-32C (Castagnoli).
//
// A connection starts with a hello from the dialer and a reply from the
// listener; what follows depends on the hello's kind.
//
// Hello (dialer → listener, 36 bytes):
//
//	 0  4  magic      "SLKH"
//	 4  1  version    tcpProtocolVersion
//	 5  1  kind       1 = message stream, 2 = snapshot
//	 6  2  reserved   0
//	 8  8  cluster ID
//	16  8  from       the dialer's node ID
//	24  8  to         the node ID the dialer means to reach
//	32  4  crc        of bytes 0..31
//
// Reply (listener → dialer, 28 bytes and a reason). It answers a hello, and
// answers a snapshot once the snapshot has been received and delivered:
//
//	 0  4  magic      "SLKA"
//	 4  1  version    tcpProtocolVersion
//	 5  1  status     0 = accepted, 1 = rejected
//	 6  2  reason length (at most tcpMaxReasonLen)
//	 8  8  cluster ID of the listener
//	16  8  node ID of the listener
//	24  4  crc        of bytes 0..23 followed by the reason
//	28  …  reason     UTF-8 text saying why the dialer was rejected
//
// Message stream: after an accepted hello of kind 1 the dialer sends frames
// until it closes the connection; the listener sends nothing more. A frame:
//
//	 0  4  magic      "SLKF"
//	 4  1  version    tcpProtocolVersion
//	 5  1  flags      0 (reserved)
//	 6  2  reserved   0
//	 8  4  count      number of messages, at least 1
//	12  4  length     payload length in bytes, at most the receiver's MaxFrameBytes
//	16  4  crc        of bytes 0..15 followed by the payload
//	20  …  payload    count × (uvarint message length ‖ protobuf raftpb.Message)
//
// Snapshot: after an accepted hello of kind 2 the dialer sends one header and
// one zstd stream holding one marshalled MsgSnap message, then waits for a
// reply (status 0 once the receiver has delivered it):
//
//	 0  4  magic      "SLKS"
//	 4  1  version    tcpProtocolVersion
//	 5  3  reserved   0
//	 8  8  length     of the marshalled message, uncompressed
//	16  4  data crc   of the marshalled message, uncompressed
//	20  4  crc        of bytes 0..19
//	24  …  zstd stream of the marshalled message

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

const (
	tcpProtocolVersion = 1

	tcpFrameMagic     = "SLKF"
	tcpHelloMagic     = "SLKH"
	tcpReplyMagic     = "SLKA"
	tcpSnapshotMagic  = "SLKS"
	tcpFrameHeaderLen = 20
	tcpHelloLen       = 36
	tcpReplyHeaderLen = 28
	tcpSnapHeaderLen  = 24
	tcpMaxReasonLen   = 1024

	// tcpKindStream and tcpKindSnapshot are the kinds of connection a hello
	// can open.
	tcpKindStream   = 1
	tcpKindSnapshot = 2

	// tcpStatusOK and tcpStatusRejected are the statuses of a reply.
	tcpStatusOK       = 0
	tcpStatusRejected = 1

	// tcpFrameLimit bounds TCPConfig.MaxFrameBytes: the length field is 32
	// bits and a frame is held in memory whole.
	tcpFrameLimit = 1 << 30
)

// tcpCRC is the CRC-32C table every checksum of the wire format uses.
var tcpCRC = crc32.MakeTable(crc32.Castagnoli)

// Errors of the wire format. Each is wrapped with what was being read.
var (
	// ErrFrameTooLarge is returned for a frame (or a message, or a snapshot)
	// larger than the configured maximum. A receiver closes the connection
	// that sent it; a sender drops the message.
	ErrFrameTooLarge = errors.New("raftkv: transport frame too large")
	// ErrChecksumMismatch is returned when a frame, a hello, a reply or a
	// snapshot fails its CRC-32C check. The receiver closes the connection
	// and delivers nothing from it.
	ErrChecksumMismatch = errors.New("raftkv: transport checksum mismatch")
	// ErrMalformed is returned for bytes from the network that do not follow
	// the wire format: wrong magic, unknown version or flags, inconsistent
	// lengths, messages that do not unmarshal.
	ErrMalformed = errors.New("raftkv: malformed transport data")
	// ErrHandshakeRejected is returned by a dial whose hello the listener
	// refused (another cluster, another node ID, another protocol version);
	// the error text carries the listener's reason.
	ErrHandshakeRejected = errors.New("raftkv: transport handshake rejected")
)

// tcpHello is the first thing a dialer sends.
type tcpHello struct {
	version   uint8
	kind      uint8
	clusterID uint64
	from      uint64
	to        uint64
}

// appendTo appends the encoded hello to b.
func (h tcpHello) appendTo(b []byte) []byte {
	start := len(b)
	b = append(b, tcpHelloMagic...)
	b = append(b, h.version, h.kind, 0, 0)
	b = binary.BigEndian.AppendUint64(b, h.clusterID)
	b = binary.BigEndian.AppendUint64(b, h.from)
	b = binary.BigEndian.AppendUint64(b, h.to)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b[start:], tcpCRC))
}

// readTCPHello reads and checks a hello. A hello of another version is
// returned without error so that the listener can say why it refuses it.
func readTCPHello(r io.Reader) (tcpHello, error) {
	var b [tcpHelloLen]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return tcpHello{}, fmt.Errorf("read hello: %w", err)
	}
	if string(b[0:4]) != tcpHelloMagic {
		return tcpHello{}, fmt.Errorf("read hello: %w: bad magic %q", ErrMalformed, b[0:4])
	}
	if got, want := binary.BigEndian.Uint32(b[32:36]), crc32.Checksum(b[:32], tcpCRC); got != want {
		return tcpHello{}, fmt.Errorf("read hello: %w", ErrChecksumMismatch)
	}
	return tcpHello{
		version:   b[4],
		kind:      b[5],
		clusterID: binary.BigEndian.Uint64(b[8:16]),
		from:      binary.BigEndian.Uint64(b[16:24]),
		to:        binary.BigEndian.Uint64(b[24:32]),
	}, nil
}

// tcpReply answers a hello or a snapshot.
type tcpReply struct {
	status    uint8
	clusterID uint64
	nodeID    uint64
	reason    string
}

// appendTo appends the encoded reply to b, cutting the reason to
// tcpMaxReasonLen bytes.
func (r tcpReply) appendTo(b []byte) []byte {
	reason := r.reason
	if len(reason) > tcpMaxReasonLen {
		reason = reason[:tcpMaxReasonLen]
	}
	start := len(b)
	b = append(b, tcpReplyMagic...)
	b = append(b, tcpProtocolVersion, r.status)
	b = binary.BigEndian.AppendUint16(b, uint16(len(reason)))
	b = binary.BigEndian.AppendUint64(b, r.clusterID)
	b = binary.BigEndian.AppendUint64(b, r.nodeID)
	crc := crc32.Checksum(b[start:], tcpCRC)
	crc = crc32.Update(crc, tcpCRC, []byte(reason))
	b = binary.BigEndian.AppendUint32(b, crc)
	return append(b, reason...)
}

// readTCPReply reads and checks a reply.
func readTCPReply(r io.Reader) (tcpReply, error) {
	var b [tcpReplyHeaderLen + tcpMaxReasonLen]byte
	if _, err := io.ReadFull(r, b[:tcpReplyHeaderLen]); err != nil {
		return tcpReply{}, fmt.Errorf("read reply: %w", err)
	}
	if string(b[0:4]) != tcpReplyMagic {
		return tcpReply{}, fmt.Errorf("read reply: %w: bad magic %q", ErrMalformed, b[0:4])
	}
	if b[4] != tcpProtocolVersion {
		return tcpReply{}, fmt.Errorf("read reply: %w: protocol version %d, want %d", ErrMalformed, b[4], tcpProtocolVersion)
	}
	n := int(binary.BigEndian.Uint16(b[6:8]))
	if n > tcpMaxReasonLen {
		return tcpReply{}, fmt.Errorf("read reply: %w: reason of %d bytes", ErrMalformed, n)
	}
	end := tcpReplyHeaderLen + n
	if _, err := io.ReadFull(r, b[tcpReplyHeaderLen:end]); err != nil {
		return tcpReply{}, fmt.Errorf("read reply: %w", err)
	}
	crc := crc32.Checksum(b[:24], tcpCRC)
	crc = crc32.Update(crc, tcpCRC, b[tcpReplyHeaderLen:end])
	if binary.BigEndian.Uint32(b[24:28]) != crc {
		return tcpReply{}, fmt.Errorf("read reply: %w", ErrChecksumMismatch)
	}
	return tcpReply{
		status:    b[5],
		clusterID: binary.BigEndian.Uint64(b[8:16]),
		nodeID:    binary.BigEndian.Uint64(b[16:24]),
		reason:    string(b[tcpReplyHeaderLen:end]),
	}, nil
}

// tcpSnapHeader precedes the compressed snapshot message.
type tcpSnapHeader struct {
	length  uint64 // of the marshalled message, uncompressed
	dataCRC uint32 // of the marshalled message, uncompressed
}

// appendTo appends the encoded header to b.
func (h tcpSnapHeader) appendTo(b []byte) []byte {
	start := len(b)
	b = append(b, tcpSnapshotMagic...)
	b = append(b, tcpProtocolVersion, 0, 0, 0)
	b = binary.BigEndian.AppendUint64(b, h.length)
	b = binary.BigEndian.AppendUint32(b, h.dataCRC)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b[start:], tcpCRC))
}

// readTCPSnapHeader reads and checks a snapshot header.
func readTCPSnapHeader(r io.Reader) (tcpSnapHeader, error) {
	var b [tcpSnapHeaderLen]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return tcpSnapHeader{}, fmt.Errorf("read snapshot header: %w", err)
	}
	if string(b[0:4]) != tcpSnapshotMagic {
		return tcpSnapHeader{}, fmt.Errorf("read snapshot header: %w: bad magic %q", ErrMalformed, b[0:4])
	}
	if binary.BigEndian.Uint32(b[20:24]) != crc32.Checksum(b[:20], tcpCRC) {
		return tcpSnapHeader{}, fmt.Errorf("read snapshot header: %w", ErrChecksumMismatch)
	}
	if b[4] != tcpProtocolVersion || b[5] != 0 || b[6] != 0 || b[7] != 0 {
		return tcpSnapHeader{}, fmt.Errorf("read snapshot header: %w: version %d, reserved % x", ErrMalformed, b[4], b[5:8])
	}
	return tcpSnapHeader{
		length:  binary.BigEndian.Uint64(b[8:16]),
		dataCRC: binary.BigEndian.Uint32(b[16:20]),
	}, nil
}

// tcpFrameEncoder builds frames in a buffer it reuses: reset, add messages,
// then finish returns the frame's bytes.
type tcpFrameEncoder struct {
	buf   []byte
	count int
}

// reset starts a new, empty frame.
func (e *tcpFrameEncoder) reset() {
	var zero [tcpFrameHeaderLen]byte
	e.buf = append(e.buf[:0], zero[:]...)
	e.count = 0
}

// payloadLen is the length of the frame's payload so far.
func (e *tcpFrameEncoder) payloadLen() int { return len(e.buf) - tcpFrameHeaderLen }

// tcpEncodedLen is the room a message of size bytes takes in a payload.
func tcpEncodedLen(size int) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutUvarint(b[:], uint64(size)) + size
}

// add appends m, whose proto.Size is size (computed just before, so that
// marshalling reuses the cached sizes). On error the frame is left as it was.
func (e *tcpFrameEncoder) add(m *raftpb.Message, size int) error {
	mark := len(e.buf)
	e.buf = binary.AppendUvarint(e.buf, uint64(size))
	start := len(e.buf)
	var err error
	e.buf, err = proto.MarshalOptions{UseCachedSize: true}.MarshalAppend(e.buf, m)
	if err == nil && len(e.buf)-start != size {
		err = fmt.Errorf("marshalled %d bytes, expected %d (message changed after Send?)", len(e.buf)-start, size)
	}
	if err != nil {
		e.buf = e.buf[:mark]
		return fmt.Errorf("marshal %v to %d: %w", m.GetType(), m.GetTo(), err)
	}
	e.count++
	return nil
}

// finish fills in the header and returns the whole frame. It is valid until
// the next reset.
func (e *tcpFrameEncoder) finish() []byte {
	h := e.buf[:tcpFrameHeaderLen]
	copy(h[0:4], tcpFrameMagic)
	h[4], h[5], h[6], h[7] = tcpProtocolVersion, 0, 0, 0
	binary.BigEndian.PutUint32(h[8:12], uint32(e.count))
	binary.BigEndian.PutUint32(h[12:16], uint32(e.payloadLen()))
	crc := crc32.Checksum(h[:16], tcpCRC)
	crc = crc32.Update(crc, tcpCRC, e.buf[tcpFrameHeaderLen:])
	binary.BigEndian.PutUint32(h[16:20], crc)
	return e.buf
}

// tcpFrameReader reads frames from a stream, reusing its payload buffer.
type tcpFrameReader struct {
	r          io.Reader
	maxPayload int
	buf        []byte
}

// tcpKeepBuffer is the largest payload buffer a frame reader keeps between
// frames; a larger one, needed for a large frame, is dropped after it.
const tcpKeepBuffer = 4 << 20

// readFrame reads one frame and returns its messages and its size on the
// wire. It returns io.EOF if the stream ends cleanly before a frame. Nothing
// is returned from a frame that fails any check: the caller closes the
// stream. Memory grows with the bytes actually received, not with the
// length a header claims.
func (fr *tcpFrameReader) readFrame() ([]*raftpb.Message, int, error) {
	var h [tcpFrameHeaderLen]byte
	if _, err := io.ReadFull(fr.r, h[:]); err != nil {
		if err == io.EOF {
			return nil, 0, io.EOF
		}
		return nil, 0, fmt.Errorf("read frame header: %w", err)
	}
	if string(h[0:4]) != tcpFrameMagic {
		return nil, 0, fmt.Errorf("read frame: %w: bad magic %q", ErrMalformed, h[0:4])
	}
	if h[4] != tcpProtocolVersion || h[5] != 0 || h[6] != 0 || h[7] != 0 {
		return nil, 0, fmt.Errorf("read frame: %w: version %d, flags %d, reserved % x", ErrMalformed, h[4], h[5], h[6:8])
	}
	count := binary.BigEndian.Uint32(h[8:12])
	length := binary.BigEndian.Uint32(h[12:16])
	if uint64(length) > uint64(fr.maxPayload) {
		return nil, 0, fmt.Errorf("read frame: %w: payload of %d bytes, limit %d", ErrFrameTooLarge, length, fr.maxPayload)
	}
	// Every message takes at least its one-byte length prefix.
	if count == 0 || count > length {
		return nil, 0, fmt.Errorf("read frame: %w: %d messages in %d bytes", ErrMalformed, count, length)
	}
	payload, err := fr.readPayload(int(length))
	if err != nil {
		return nil, 0, fmt.Errorf("read frame payload: %w", err)
	}
	defer func() {
		if cap(fr.buf) > tcpKeepBuffer {
			fr.buf = nil
		}
	}()
	crc := crc32.Checksum(h[:16], tcpCRC)
	crc = crc32.Update(crc, tcpCRC, payload)
	if got := binary.BigEndian.Uint32(h[16:20]); got != crc {
		return nil, 0, fmt.Errorf("read frame: %w: header says %08x, payload has %08x", ErrChecksumMismatch, got, crc)
	}
	msgs, err := tcpDecodePayload(payload, int(count))
	if err != nil {
		return nil, 0, fmt.Errorf("read frame: %w", err)
	}
	return msgs, tcpFrameHeaderLen + int(length), nil
}

// readPayload reads n bytes into fr.buf, growing it as data arrives.
func (fr *tcpFrameReader) readPayload(n int) ([]byte, error) {
	buf := fr.buf[:0]
	for len(buf) < n {
		step := n - len(buf)
		if n > cap(buf) {
			// Grow no faster than the data arrives.
			step = min(step, max(len(buf), 64<<10))
			buf = slices.Grow(buf, step)
		}
		if _, err := io.ReadFull(fr.r, buf[len(buf):len(buf)+step]); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			fr.buf = buf
			return nil, err
		}
		buf = buf[:len(buf)+step]
	}
	fr.buf = buf
	return buf, nil
}

// tcpDecodePayload unmarshals count length-prefixed messages that must fill
// payload exactly.
func tcpDecodePayload(payload []byte, count int) ([]*raftpb.Message, error) {
	msgs := make([]*raftpb.Message, 0, min(count, 1024))
	p := payload
	for i := range count {
		n, k := binary.Uvarint(p)
		if k <= 0 {
			return nil, fmt.Errorf("%w: message %d of %d: bad length prefix", ErrMalformed, i, count)
		}
		p = p[k:]
		if n > uint64(len(p)) {
			return nil, fmt.Errorf("%w: message %d of %d: length %d, %d bytes left", ErrMalformed, i, count, n, len(p))
		}
		m := new(raftpb.Message)
		if err := proto.Unmarshal(p[:n], m); err != nil {
			return nil, fmt.Errorf("%w: message %d of %d: %v", ErrMalformed, i, count, err)
		}
		msgs = append(msgs, m)
		p = p[n:]
	}
	if len(p) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after %d messages", ErrMalformed, len(p), count)
	}
	return msgs, nil
}
