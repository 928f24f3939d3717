package raftkv

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"go.etcd.io/raft/v3/raftpb"
)

// ProposeEncoded proposes an already encoded command (header included), so
// that tests can feed apply what no honest proposer would.
func ProposeEncoded(ctx context.Context, n *Node, enc []byte) ([]byte, error) {
	if n.leader.Load() != n.id {
		return nil, n.notLeader()
	}
	p := &proposal{cmd: enc, done: make(chan result, 1)}
	select {
	case n.propc <- p:
	case <-ctx.Done():
		return nil, timeoutErr(ctx)
	}
	return n.wait(ctx, p)
}

// ProposeRawEntry appends data as a normal log entry, bypassing the entry
// encoding.
func ProposeRawEntry(ctx context.Context, n *Node, data []byte) error {
	return n.do(ctx, func() error {
		return n.rn.Step(&raftpb.Message{Type: raftpb.MsgProp.Enum(), From: new(n.id), Entries: []*raftpb.Entry{{Data: data}}})
	})
}

// HoldLoop runs on n's loop: it closes holding, then keeps the loop until
// release is closed, so that requests queue up meanwhile.
func HoldLoop(ctx context.Context, n *Node, holding, release chan struct{}) error {
	return n.do(ctx, func() error {
		close(holding)
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	})
}

// QueuedReads is how many reads wait for n's loop to take them.
func QueuedReads(n *Node) int { return len(n.readc) }

// EncodeCommand is encodeCommand.
func EncodeCommand(cmd []byte, threshold int) []byte { return encodeCommand(cmd, threshold) }

// Flush flushes the replica's memtables to sstables.
func Flush(n *Node) error { return n.db.Flush() }

// Progress describes the leader's view of each follower (state, match,
// next, pending snapshot, paused), for failure messages; "" on a follower.
func Progress(ctx context.Context, n *Node) string {
	var out string
	_ = n.do(ctx, func() error {
		st := n.rn.Status()
		for _, id := range slices.Sorted(maps.Keys(st.Progress)) {
			out += fmt.Sprintf(" %d:{%v}", id, st.Progress[id])
		}
		return nil
	})
	return out
}

// Durable returns the term, vote and last log index this replica has made
// durable.
func Durable(n *Node) (term, vote, last uint64) {
	n.st.mu.Lock()
	defer n.st.mu.Unlock()
	d := n.st.mu.durable
	return d.hardState.GetTerm(), d.hardState.GetVote(), d.lastIndex
}
