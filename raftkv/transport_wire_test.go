package raftkv_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/sluicehq/sluice/raftkv"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

func TestTCPFrameRoundTrip(t *testing.T) {
	frames := [][]*raftpb.Message{
		{tcpMsg(raftpb.MsgHeartbeat, 1, 2, 0)},
		{tcpApp(1, 2, 5, []byte("a"), nil, bytes.Repeat([]byte("b"), 70000)), tcpMsg(raftpb.MsgVote, 1, 2, 9), {}},
	}
	var stream []byte
	for _, f := range frames {
		stream = append(stream, raftkv.TCPTestFrame(f...)...)
	}
	got, err := raftkv.TCPTestReadFrames(stream, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(frames) {
		t.Fatalf("%d frames, want %d", len(got), len(frames))
	}
	for i := range frames {
		if len(got[i]) != len(frames[i]) {
			t.Fatalf("frame %d: %d messages, want %d", i, len(got[i]), len(frames[i]))
		}
		for j := range frames[i] {
			if !proto.Equal(got[i][j], frames[i][j]) {
				t.Errorf("frame %d message %d: got %v, want %v", i, j, got[i][j], frames[i][j])
			}
		}
	}
}

func TestTCPReadFrameRejects(t *testing.T) {
	good := raftkv.TCPTestFrame(tcpMsg(raftpb.MsgApp, 1, 2, 7), tcpMsg(raftpb.MsgApp, 1, 2, 8))
	payload := good[raftkv.TCPTestFrameHeaderLen:]
	mutate := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	msg, _ := proto.Marshal(tcpMsg(raftpb.MsgApp, 1, 2, 7))
	prefixed := binary.AppendUvarint(nil, uint64(len(msg)))
	prefixed = append(prefixed, msg...)
	for _, tc := range []struct {
		name string
		data []byte
		want error
	}{
		{"bad magic", mutate(func(b []byte) []byte { b[0] = 'X'; return b }), raftkv.ErrMalformed},
		{"version", mutate(func(b []byte) []byte { b[4] = 2; return b }), raftkv.ErrMalformed},
		{"flags", mutate(func(b []byte) []byte { b[5] = 1; return b }), raftkv.ErrMalformed},
		{"count zero", raftkv.TCPTestRawFrame(0, payload), raftkv.ErrMalformed},
		{"count beyond length", raftkv.TCPTestRawFrame(uint32(len(payload)+1), payload), raftkv.ErrMalformed},
		{"count too high", raftkv.TCPTestRawFrame(3, payload), raftkv.ErrMalformed},
		{"count too low", raftkv.TCPTestRawFrame(1, payload), raftkv.ErrMalformed},
		{"too large", mutate(func(b []byte) []byte { binary.BigEndian.PutUint32(b[12:16], 1<<20+1); return b }), raftkv.ErrFrameTooLarge},
		{"header checksum", mutate(func(b []byte) []byte { b[19] ^= 1; return b }), raftkv.ErrChecksumMismatch},
		{"payload bit flip", mutate(func(b []byte) []byte { b[len(b)-1] ^= 0x10; return b }), raftkv.ErrChecksumMismatch},
		{"count changed", mutate(func(b []byte) []byte { b[11] = 1; return b }), raftkv.ErrChecksumMismatch},
		{"truncated header", good[:10], io.ErrUnexpectedEOF},
		{"truncated payload", good[:len(good)-3], io.ErrUnexpectedEOF},
		{"length beyond data", mutate(func(b []byte) []byte { binary.BigEndian.PutUint32(b[12:16], 1<<19); return b }), io.ErrUnexpectedEOF},
		{"bad length prefix", raftkv.TCPTestRawFrame(1, []byte{0xff, 0xff}), raftkv.ErrMalformed},
		{"length prefix beyond payload", raftkv.TCPTestRawFrame(1, []byte{5, 1, 2}), raftkv.ErrMalformed},
		{"not a message", raftkv.TCPTestRawFrame(1, []byte{3, 0xff, 0xff, 0xff}), raftkv.ErrMalformed},
		{"trailing bytes", raftkv.TCPTestRawFrame(1, append(bytes.Clone(prefixed), 0)), raftkv.ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			frames, err := raftkv.TCPTestReadFrames(tc.data, 1<<20)
			if !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
			if len(frames) != 0 {
				t.Fatalf("%d frames decoded from a bad one", len(frames))
			}
		})
	}
}

func FuzzReadFrame(f *testing.F) {
	f.Add([]byte{})
	f.Add(raftkv.TCPTestFrame(tcpMsg(raftpb.MsgHeartbeat, 1, 2, 0)))
	f.Add(raftkv.TCPTestFrame(tcpApp(1, 2, 5, []byte("entry"), nil), tcpMsg(raftpb.MsgVoteResp, 1, 2, 3), tcpSnap(1, 2, 4, []byte("s"))))
	two := append(raftkv.TCPTestFrame(tcpMsg(raftpb.MsgApp, 1, 2, 1)), raftkv.TCPTestFrame(tcpMsg(raftpb.MsgApp, 1, 2, 2))...)
	f.Add(two)
	f.Add(two[:len(two)-1])
	f.Add(raftkv.TCPTestRawFrame(2, []byte{0, 0}))
	f.Add(raftkv.TCPTestRawFrame(1, []byte{3, 0xff, 0xff, 0xff}))
	f.Add(raftkv.TCPTestRawFrame(1, []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}))
	f.Fuzz(func(t *testing.T, data []byte) {
		frames, err := raftkv.TCPTestReadFrames(data, 1<<16)
		// What decodes must survive a round trip.
		for _, msgs := range frames {
			again, err2 := raftkv.TCPTestReadFrames(raftkv.TCPTestFrame(msgs...), 1<<20)
			if err2 != nil || len(again) != 1 || len(again[0]) != len(msgs) {
				t.Fatalf("re-encoded frame: %v, %d frames", err2, len(again))
			}
			for i := range msgs {
				if !proto.Equal(msgs[i], again[0][i]) {
					t.Fatalf("message %d changed in a round trip", i)
				}
			}
		}
		if err == nil && len(data) > 0 && len(frames) == 0 {
			t.Fatal("non-empty input decoded to nothing without error")
		}
	})
}

// tcpRawDial connects to tr and sends a hello, returning the connection and
// the listener's answer.
func tcpRawDial(t *testing.T, addr string, hello []byte) (net.Conn, bool, string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write(hello); err != nil {
		t.Fatal(err)
	}
	ok, reason, err := raftkv.TCPTestReadReply(conn)
	if err != nil {
		t.Fatalf("reading the reply: %v", err)
	}
	return conn, ok, reason
}

// tcpExpectClosed checks that the other end closes conn.
func tcpExpectClosed(t *testing.T, conn net.Conn) {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := conn.Read(make([]byte, 1))
	var ne net.Error
	if err == nil || (errors.As(err, &ne) && ne.Timeout()) {
		t.Fatalf("connection not closed by the receiver: %v", err)
	}
}

func TestTCPTransportRejectsCorruptFrame(t *testing.T) {
	b := newTCPNode(t, 2, func(c *raftkv.TCPConfig) { c.ClusterID = 7 })
	b.start(t)
	conn, ok, reason := tcpRawDial(t, b.tr.Addr(), raftkv.TCPTestHello(raftkv.TCPTestProtocolVersion, raftkv.TCPTestKindStream, 7, 1, 2))
	if !ok {
		t.Fatalf("hello rejected: %s", reason)
	}
	if _, err := conn.Write(raftkv.TCPTestFrame(tcpMsg(raftpb.MsgApp, 1, 2, 1), tcpMsg(raftpb.MsgApp, 1, 2, 2))); err != nil {
		t.Fatal(err)
	}
	tcpWaitFor(t, "the good frame", func() bool { return len(b.rec.received(1)) == 2 })

	bad := raftkv.TCPTestFrame(tcpMsg(raftpb.MsgApp, 1, 2, 3), tcpMsg(raftpb.MsgApp, 1, 2, 4))
	bad[len(bad)-2] ^= 0x01
	if _, err := conn.Write(bad); err != nil {
		t.Fatal(err)
	}
	tcpExpectClosed(t, conn)
	if n := len(b.rec.received(0)); n != 2 {
		t.Fatalf("%d messages delivered, want only the 2 of the good frame", n)
	}
	if s := b.tr.Stats(); s.ChecksumFailures != 1 || s.FramesReceived != 1 {
		t.Fatalf("stats %+v: want 1 checksum failure, 1 frame", s)
	}
}

func TestTCPTransportRejectsBadStreams(t *testing.T) {
	b := newTCPNode(t, 2, func(c *raftkv.TCPConfig) { c.ClusterID = 7; c.MaxFrameBytes = 1 << 20 })
	b.start(t)
	hello := raftkv.TCPTestHello(raftkv.TCPTestProtocolVersion, raftkv.TCPTestKindStream, 7, 1, 2)

	t.Run("hellos", func(t *testing.T) {
		for _, tc := range []struct {
			name   string
			hello  []byte
			reason string
		}{
			{"other cluster", raftkv.TCPTestHello(raftkv.TCPTestProtocolVersion, raftkv.TCPTestKindStream, 8, 1, 2), "cluster ID mismatch"},
			{"other node", raftkv.TCPTestHello(raftkv.TCPTestProtocolVersion, raftkv.TCPTestKindStream, 7, 1, 3), "node ID mismatch"},
			{"other version", raftkv.TCPTestHello(9, raftkv.TCPTestKindStream, 7, 1, 2), "protocol version 9 not supported"},
			{"unknown kind", raftkv.TCPTestHello(raftkv.TCPTestProtocolVersion, 9, 7, 1, 2), "unknown connection kind"},
			{"from itself", raftkv.TCPTestHello(raftkv.TCPTestProtocolVersion, raftkv.TCPTestKindStream, 7, 2, 2), "invalid sender"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				conn, ok, reason := tcpRawDial(t, b.tr.Addr(), tc.hello)
				if ok || !strings.Contains(reason, tc.reason) {
					t.Fatalf("accepted %v, reason %q: want rejected for %q", ok, reason, tc.reason)
				}
				tcpExpectClosed(t, conn)
			})
		}
	})
	for _, tc := range []struct {
		name  string
		bytes []byte
	}{
		{"garbage hello", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n0123456789")},
		{"hello checksum", func() []byte { h := bytes.Clone(hello); h[20] ^= 1; return h }()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := b.tr.Stats().ProtocolErrors
			conn, err := net.Dial("tcp", b.tr.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.Write(tc.bytes)
			tcpExpectClosed(t, conn)
			tcpWaitFor(t, "a protocol error", func() bool { return b.tr.Stats().ProtocolErrors == before+1 })
		})
	}
	for _, tc := range []struct {
		name  string
		frame []byte
	}{
		{"oversized frame", func() []byte {
			f := raftkv.TCPTestRawFrame(1, []byte{0})
			binary.BigEndian.PutUint32(f[12:16], 1<<20+1)
			return f
		}()},
		{"bad magic", append([]byte("XXXX"), raftkv.TCPTestFrame(tcpMsg(raftpb.MsgApp, 1, 2, 1))[4:]...)},
		{"spoofed sender", raftkv.TCPTestFrame(tcpMsg(raftpb.MsgApp, 1, 2, 1), tcpMsg(raftpb.MsgApp, 3, 2, 1))},
		{"other recipient", raftkv.TCPTestFrame(tcpMsg(raftpb.MsgApp, 1, 5, 1))},
		{"not a message", raftkv.TCPTestRawFrame(1, []byte{2, 0xff, 0xff})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := b.tr.Stats().ProtocolErrors
			conn, ok, reason := tcpRawDial(t, b.tr.Addr(), hello)
			if !ok {
				t.Fatal(reason)
			}
			conn.Write(tc.frame)
			tcpExpectClosed(t, conn)
			tcpWaitFor(t, "a protocol error", func() bool { return b.tr.Stats().ProtocolErrors == before+1 })
		})
	}
	if n := len(b.rec.received(0)); n != 0 {
		t.Fatalf("%d messages delivered from bad streams", n)
	}
}

func TestTCPTransportRejectsBadSnapshot(t *testing.T) {
	b := newTCPNode(t, 2, nil)
	b.start(t)
	hello := raftkv.TCPTestHello(raftkv.TCPTestProtocolVersion, raftkv.TCPTestKindSnapshot, 0, 1, 2)
	data, _ := proto.Marshal(tcpSnap(1, 2, 5, []byte("state")))
	compress := func(b []byte) []byte {
		var out bytes.Buffer
		zw, _ := zstd.NewWriter(&out)
		zw.Write(b)
		zw.Close()
		return out.Bytes()
	}
	notSnap, _ := proto.Marshal(tcpMsg(raftpb.MsgApp, 1, 2, 5))
	for _, tc := range []struct {
		name   string
		stream []byte
		reason string
	}{
		{"data checksum", append(raftkv.TCPTestSnapHeader(uint64(len(data)), raftkv.TCPTestCRC(data)^1), compress(data)...), "checksum mismatch"},
		{"too large", raftkv.TCPTestSnapHeader(1<<40, 0), "too large"},
		{"not zstd", append(raftkv.TCPTestSnapHeader(uint64(len(data)), raftkv.TCPTestCRC(data)), bytes.Repeat([]byte("junk"), 100)...), "malformed"},
		{"not a snapshot", append(raftkv.TCPTestSnapHeader(uint64(len(notSnap)), raftkv.TCPTestCRC(notSnap)), compress(notSnap)...), "got MsgApp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, ok, reason := tcpRawDial(t, b.tr.Addr(), hello)
			if !ok {
				t.Fatal(reason)
			}
			conn.Write(tc.stream)
			ok, reason, err := raftkv.TCPTestReadReply(conn)
			if err != nil || ok || !strings.Contains(reason, tc.reason) {
				t.Fatalf("reply ok=%v reason=%q err=%v: want a rejection for %q", ok, reason, err, tc.reason)
			}
		})
	}
	if n := len(b.rec.received(0)); n != 0 {
		t.Fatalf("%d messages delivered from bad snapshots", n)
	}
	if s := b.tr.Stats(); s.ChecksumFailures != 1 || s.ProtocolErrors != 3 {
		t.Errorf("stats %+v: want 1 checksum failure and 3 protocol errors", s)
	}

	// And a good one, by hand, is delivered and confirmed.
	conn, ok, reason := tcpRawDial(t, b.tr.Addr(), hello)
	if !ok {
		t.Fatal(reason)
	}
	conn.Write(append(raftkv.TCPTestSnapHeader(uint64(len(data)), raftkv.TCPTestCRC(data)), compress(data)...))
	if ok, reason, err := raftkv.TCPTestReadReply(conn); err != nil || !ok {
		t.Fatalf("good snapshot: ok=%v reason=%q err=%v", ok, reason, err)
	}
	if n := b.rec.count(raftpb.MsgSnap); n != 1 {
		t.Fatalf("%d snapshots delivered, want 1", n)
	}
}

func TestTCPTransportSnapshotPeerDiesMidStream(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	// The fake peer keeps message streams open and dies 256 kB into a
	// snapshot.
	read := make(chan int, 1)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				hello := make([]byte, raftkv.TCPTestHelloLen)
				if _, err := io.ReadFull(conn, hello); err != nil {
					return
				}
				conn.Write(raftkv.TCPTestReply(true, 0, 2, ""))
				if hello[5] != raftkv.TCPTestKindSnapshot {
					io.Copy(io.Discard, conn)
					return
				}
				n, _ := io.ReadFull(conn, make([]byte, 256<<10))
				read <- n
			}()
		}
	}()

	a := newTCPNode(t, 1, func(c *raftkv.TCPConfig) { c.Peers = map[uint64]string{2: ln.Addr().String()} })
	a.start(t)
	data := tcpRandomBytes(3, 4<<20) // compressed, far above 256 kB
	a.tr.Send([]*raftpb.Message{tcpSnap(1, 2, 50, data)})
	tcpWaitFor(t, "a snapshot report", func() bool { return len(a.rec.snapshots()) > 0 })
	if n := <-read; n != 256<<10 {
		t.Fatalf("the fake peer read %d bytes before dying", n)
	}
	if got := a.rec.snapshots(); got[0] != (tcpSnapEvent{2, raft.SnapshotFailure}) {
		t.Fatalf("reports %v, want SnapshotFailure for 2", got)
	}
	if s := a.tr.Stats(); s.SnapshotsFailed != 1 || s.SnapshotsSent != 0 {
		t.Fatalf("stats %+v", s)
	}
}
