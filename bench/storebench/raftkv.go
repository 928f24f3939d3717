package storebench

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/sluicehq/sluice/raftkv"
)

// RaftKV is a local raftkv cluster started for a benchmark: every replica in
// this process, each with its own pebble directory (fsync on) and its own
// TCP transport on loopback.
type RaftKV struct {
	Nodes []*raftkv.Node
	// peers are the replicas' raft addresses.
	peers map[uint64]string
}

// RaftKVOptions tunes StartRaftKV. The zero value is a plaintext cluster.
type RaftKVOptions struct {
	// PeerTLS makes the replicas speak mutual TLS 1.3 to each other, with
	// a throwaway CA and one certificate per replica written under the
	// cluster's directory and loaded as a dispatcher loads its own.
	PeerTLS bool
}

// StartRaftKV starts a cluster of members replicas under dir and waits for a
// leader. Close stops it.
func StartRaftKV(ctx context.Context, dir string, members int, opts RaftKVOptions) (*RaftKV, error) {
	if members < 1 {
		return nil, fmt.Errorf("start raftkv: %d members: want at least 1", members)
	}
	ports, err := FreePorts(members)
	if err != nil {
		return nil, fmt.Errorf("start raftkv: %w", err)
	}
	peers := map[uint64]string{}
	for i := range members {
		peers[uint64(i+1)] = fmt.Sprintf("127.0.0.1:%d", ports[i])
	}
	var peerTLS map[uint64]*tls.Config
	if opts.PeerTLS && members > 1 {
		if peerTLS, err = writePeerCerts(filepath.Join(dir, "tls"), peers); err != nil {
			return nil, fmt.Errorf("start raftkv: %w", err)
		}
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	c := &RaftKV{peers: peers}
	for i := range members {
		id := uint64(i + 1)
		var tr raftkv.Transport
		if members > 1 {
			t, err := raftkv.NewTCPTransport(raftkv.TCPConfig{ID: id, ListenAddr: peers[id], Peers: peers, TLS: peerTLS[id], Logger: quiet})
			if err != nil {
				c.Close()
				return nil, fmt.Errorf("start raftkv replica %d: %w", id, err)
			}
			tr = t
		}
		n, err := raftkv.Open(raftkv.Config{ID: id, Dir: filepath.Join(dir, fmt.Sprint("r", id)), Peers: peers, Transport: tr, Logger: quiet})
		if err != nil {
			if tr != nil {
				_ = tr.Close()
			}
			c.Close()
			return nil, fmt.Errorf("start raftkv replica %d: %w", id, err)
		}
		c.Nodes = append(c.Nodes, n)
	}
	deadline := time.Now().Add(30 * time.Second)
	for c.leader() == nil {
		if ctx.Err() != nil || time.Now().After(deadline) {
			c.Close()
			return nil, errors.New("start raftkv: no leader elected within 30s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return c, nil
}

// leader returns the replica that leads, or nil.
func (c *RaftKV) leader() *raftkv.Node {
	for _, n := range c.Nodes {
		if n.Status().IsLeader {
			return n
		}
	}
	return nil
}

// Put proposes a write on the leader and returns once it is applied.
func (c *RaftKV) Put(ctx context.Context, key string, value []byte) error {
	return c.Propose(ctx, raftkv.PutCommand([]byte(key), value))
}

// Propose proposes cmd on the leader, following a change of leader.
func (c *RaftKV) Propose(ctx context.Context, cmd []byte) error {
	for {
		n := c.leader()
		if n == nil {
			if err := ctx.Err(); err != nil {
				return err
			}
			time.Sleep(5 * time.Millisecond)
			continue
		}
		_, err := n.Propose(ctx, cmd)
		if !errors.Is(err, raftkv.ErrNotLeader) {
			return err
		}
	}
}

// Close stops every replica.
func (c *RaftKV) Close() {
	for _, n := range c.Nodes {
		_ = n.Close()
	}
	c.Nodes = nil
}
