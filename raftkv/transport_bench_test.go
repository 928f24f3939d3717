package raftkv_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/tlstest"
	"github.com/sluicehq/sluice/raftkv"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// tcpCounter is a Handler that only counts, for benchmarks.
type tcpCounter struct{ n atomic.Int64 }

func (c *tcpCounter) Receive(*raftpb.Message)                    { c.n.Add(1) }
func (c *tcpCounter) ReportUnreachable(uint64)                   {}
func (c *tcpCounter) ReportSnapshot(uint64, raft.SnapshotStatus) {}

// BenchmarkTCPTransportMsgApp streams MsgApp messages, each with one entry
// of size bytes, from one transport to another over loopback, handing Send
// batch messages at a time (raft hands over a Ready's worth at once), in
// plaintext and with mutual TLS. It reports messages per second; MB/s
// counts entry payload, wire-MB/s what went over the socket (TLS records'
// overhead not included).
func BenchmarkTCPTransportMsgApp(b *testing.B) {
	ca := tlstest.NewCA(b, "cluster CA")
	for _, c := range []struct{ batch, size int }{{1, 256}, {64, 256}, {1, 256 << 10}} {
		for _, withTLS := range []bool{false, true} {
			b.Run(fmt.Sprintf("batch=%d/size=%d/tls=%v", c.batch, c.size, withTLS), func(b *testing.B) {
				benchmarkMsgApp(b, c.batch, c.size, withTLS, ca)
			})
		}
	}
}

func benchmarkMsgApp(b *testing.B, batch, size int, withTLS bool, ca *tlstest.CA) {
	// Messages in flight at most, well under the queue: 16k of 256 bytes,
	// fewer of larger ones (at least 16).
	window := int64(max((1<<14)*256/size, 16))
	tweak := func(c *raftkv.TCPConfig) {
		c.QueueSize = 1 << 16
		if withTLS {
			c.TLS = tlstest.Config(ca, ca.Cert(b, "127.0.0.1"))
		}
	}
	src := newTCPNode(b, 1, tweak)
	dst := newTCPNode(b, 2, tweak)
	src.tr.AddPeer(2, dst.tr.Addr())
	cnt := &tcpCounter{}
	if err := src.tr.Start(src.rec); err != nil {
		b.Fatal(err)
	}
	if err := dst.tr.Start(cnt); err != nil {
		b.Fatal(err)
	}
	src.tr.Send([]*raftpb.Message{tcpMsg(raftpb.MsgHeartbeat, 1, 2, 0)})
	tcpWaitFor(b, "the connection", func() bool { return cnt.n.Load() == 1 })
	payload := make([]byte, size)
	base := src.tr.Stats()

	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	for sent := 0; sent < b.N; {
		for int64(sent)-(cnt.n.Load()-1) > window {
			time.Sleep(20 * time.Microsecond)
		}
		n := min(batch, b.N-sent)
		msgs := make([]*raftpb.Message, n)
		for i := range msgs {
			msgs[i] = tcpApp(1, 2, uint64(sent+i), payload)
		}
		src.tr.Send(msgs)
		sent += n
	}
	for cnt.n.Load()-1 < int64(b.N) {
		time.Sleep(20 * time.Microsecond)
	}
	b.StopTimer()
	s := src.tr.Stats()
	if d := s.MessagesDropped - base.MessagesDropped; d != 0 {
		b.Fatalf("%d messages dropped", d)
	}
	sec := b.Elapsed().Seconds()
	b.ReportMetric(float64(b.N)/sec, "msgs/s")
	b.ReportMetric(float64(s.BytesSent-base.BytesSent)/sec/1e6, "wire-MB/s")
	b.ReportMetric(float64(b.N)/float64(s.FramesSent-base.FramesSent), "msgs/frame")
}
