package raftkv_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

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
// of 256 bytes, from one transport to another over loopback, handing Send
// batch messages at a time (raft hands over a Ready's worth at once). It
// reports messages per second; MB/s counts entry payload, wire-MB/s what
// went over the socket.
func BenchmarkTCPTransportMsgApp(b *testing.B) {
	for _, batch := range []int{1, 64} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			const window = 1 << 14 // messages in flight at most, well under the queue
			tweak := func(c *raftkv.TCPConfig) { c.QueueSize = 1 << 16 }
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
			payload := make([]byte, 256)
			base := src.tr.Stats()

			b.SetBytes(256)
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
		})
	}
}
