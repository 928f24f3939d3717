package raftkv

import (
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// Handler receives what the transport delivers. Implemented by Node.
type Handler interface {
	// Receive delivers one inbound raft message. It must not block for long.
	Receive(m *raftpb.Message)
	// ReportUnreachable tells raft that a message to id could not be sent.
	ReportUnreachable(id uint64)
	// ReportSnapshot tells raft how sending a snapshot to id ended.
	ReportSnapshot(id uint64, status raft.SnapshotStatus)
}

// Transport carries raft messages between replicas.
type Transport interface {
	// Start begins accepting inbound messages and delivering them to h.
	Start(h Handler) error
	// Send queues messages for their peers without blocking; messages that cannot be
	// queued are dropped and reported through Handler.ReportUnreachable
	// (MsgSnap failures through ReportSnapshot(id, raft.SnapshotFailure)).
	Send(msgs []*raftpb.Message)
	// AddPeer and RemovePeer change the set of peers messages can be sent to.
	AddPeer(id uint64, addr string)
	RemovePeer(id uint64)
	// Close stops all goroutines and closes all connections.
	Close() error
}
