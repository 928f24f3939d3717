package raftkv_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/sluicehq/sluice/raftkv"
)

// transportFactory makes the transport of replica id and says where it
// listens. The tests run over the in-memory network; running them over
// another transport is a matter of passing another factory to newCluster.
type transportFactory func(t testing.TB, id uint64) (raftkv.Transport, string)

// memTransports returns a factory of transports on one memNetwork.
func memTransports(nw *memNetwork) transportFactory {
	return func(t testing.TB, id uint64) (raftkv.Transport, string) {
		addr := fmt.Sprintf("mem-%d", id)
		return nw.transport(id, addr), addr
	}
}

// testLogger logs to stderr with RAFTKV_LOG=1 (RAFTKV_LOG=debug for more).
func testLogger() *slog.Logger {
	switch os.Getenv("RAFTKV_LOG") {
	case "":
		return slog.New(slog.DiscardHandler)
	case "debug":
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	default:
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
}

// cluster is a set of replicas in one process, on disk in t.TempDir().
type cluster struct {
	t       testing.TB
	net     *memNetwork // nil with another transport
	newTr   transportFactory
	base    string
	initial map[uint64]string // the bootstrap members
	addrs   map[uint64]string
	// configure adjusts every replica's config before Open.
	configure func(*raftkv.Config)

	mu    sync.Mutex
	nodes map[uint64]*raftkv.Node
	fs    map[uint64]vfs.FS
}

type clusterOpt func(*cluster)

// withConfig adjusts every replica's config.
func withConfig(f func(*raftkv.Config)) clusterOpt {
	return func(c *cluster) {
		prev := c.configure
		c.configure = func(cfg *raftkv.Config) { prev(cfg); f(cfg) }
	}
}

// withTransports replaces the in-memory network.
func withTransports(f transportFactory) clusterOpt {
	return func(c *cluster) { c.newTr, c.net = f, nil }
}

// fastConfig is the test default: 10ms ticks, small snapshots.
func fastConfig(cfg *raftkv.Config) {
	cfg.TickInterval = 10 * time.Millisecond
	cfg.ElectionTicks = 10
	cfg.HeartbeatTicks = 1
	cfg.Logger = testLogger().With("test", "")
}

// newCluster bootstraps n replicas (IDs 1..n) and waits for a leader.
func newCluster(t testing.TB, n int, opts ...clusterOpt) *cluster {
	t.Helper()
	nw := newMemNetwork()
	c := &cluster{
		t:         t,
		net:       nw,
		newTr:     memTransports(nw),
		base:      t.TempDir(),
		initial:   map[uint64]string{},
		addrs:     map[uint64]string{},
		configure: fastConfig,
		nodes:     map[uint64]*raftkv.Node{},
		fs:        map[uint64]vfs.FS{},
	}
	for _, o := range opts {
		o(c)
	}
	trs := map[uint64]raftkv.Transport{}
	for id := uint64(1); id <= uint64(n); id++ {
		tr, addr := c.newTr(t, id)
		trs[id] = tr
		c.initial[id] = addr
		c.addrs[id] = addr
	}
	for id := uint64(1); id <= uint64(n); id++ {
		c.openWith(id, trs[id], false)
	}
	t.Cleanup(c.closeAll)
	c.waitLeader(5 * time.Second)
	return c
}

func (c *cluster) config(id uint64, tr raftkv.Transport, join bool) raftkv.Config {
	cfg := raftkv.Config{
		ID:        id,
		Dir:       filepath.Join(c.base, fmt.Sprintf("r%d", id)),
		Peers:     c.initial,
		Join:      join,
		Transport: tr,
	}
	c.mu.Lock()
	if fs := c.fs[id]; fs != nil {
		cfg.FS = fs
	}
	c.mu.Unlock()
	c.configure(&cfg)
	return cfg
}

func (c *cluster) openWith(id uint64, tr raftkv.Transport, join bool) *raftkv.Node {
	c.t.Helper()
	n, err := raftkv.Open(c.config(id, tr, join))
	if err != nil {
		c.t.Fatalf("open replica %d: %v", id, err)
	}
	c.mu.Lock()
	c.nodes[id] = n
	c.mu.Unlock()
	return n
}

// start (re)opens replica id from its directory.
func (c *cluster) start(id uint64) *raftkv.Node {
	c.t.Helper()
	tr, addr := c.newTr(c.t, id)
	if want, ok := c.addrs[id]; ok && want != addr {
		c.t.Fatalf("replica %d came back at %s, not %s", id, addr, want)
	}
	c.addrs[id] = addr
	return c.openWith(id, tr, false)
}

// join starts a new empty replica id that waits to be added.
func (c *cluster) join(id uint64) (*raftkv.Node, string) {
	c.t.Helper()
	tr, addr := c.newTr(c.t, id)
	c.addrs[id] = addr
	return c.openWith(id, tr, true), addr
}

// stop closes replica id (abruptly: whatever is in flight is abandoned).
func (c *cluster) stop(id uint64) {
	c.t.Helper()
	c.mu.Lock()
	n := c.nodes[id]
	delete(c.nodes, id)
	c.mu.Unlock()
	if n == nil {
		return
	}
	if err := n.Close(); err != nil && n.Err() == nil {
		c.t.Errorf("close replica %d: %v", id, err)
	}
}

func (c *cluster) closeAll() {
	c.mu.Lock()
	ids := make([]uint64, 0, len(c.nodes))
	for id := range c.nodes {
		ids = append(ids, id)
	}
	c.mu.Unlock()
	for _, id := range ids {
		c.stop(id)
	}
}

func (c *cluster) node(id uint64) *raftkv.Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[id]
}

func (c *cluster) running() []*raftkv.Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*raftkv.Node, 0, len(c.nodes))
	for _, n := range c.nodes {
		out = append(out, n)
	}
	return out
}

// leaderAmong returns the replica that leads among ids (all running replicas
// when ids is empty) and that a majority of them agree on, or nil.
func (c *cluster) leaderAmong(ids ...uint64) *raftkv.Node {
	nodes := c.running()
	if len(ids) > 0 {
		nodes = slices.DeleteFunc(nodes, func(n *raftkv.Node) bool { return !slices.Contains(ids, n.Status().ID) })
	}
	for _, n := range nodes {
		s := n.Status()
		if !s.IsLeader {
			continue
		}
		agree := 0
		for _, m := range nodes {
			if m.Status().Leader == s.ID {
				agree++
			}
		}
		if 2*agree > len(nodes) {
			return n
		}
	}
	return nil
}

// waitLeader waits for a leader among ids.
func (c *cluster) waitLeader(timeout time.Duration, ids ...uint64) *raftkv.Node {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if l := c.leaderAmong(ids...); l != nil {
			return l
		}
		time.Sleep(5 * time.Millisecond)
	}
	c.t.Fatalf("no leader among %v within %v", ids, timeout)
	return nil
}

// propose proposes cmd on whichever replica leads, retrying NotLeader and
// dropped proposals until ctx ends. Only use it for commands that are safe to
// apply twice (a retry after an unknown outcome may apply it again).
func (c *cluster) propose(ctx context.Context, cmd []byte) ([]byte, error) {
	for {
		l := c.leaderAmong()
		if l != nil {
			res, err := l.Propose(ctx, cmd)
			if err == nil || !(errors.Is(err, raftkv.ErrNotLeader) || errors.Is(err, raftkv.ErrProposalDropped) ||
				errors.Is(err, raftkv.ErrStopped) || errors.Is(err, raftkv.ErrOutcomeUnknown)) {
				return res, err
			}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// waitApplied waits until every running replica (or those in ids) applied
// index.
func (c *cluster) waitApplied(timeout time.Duration, index uint64, ids ...uint64) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		behind := ""
		for _, n := range c.running() {
			s := n.Status()
			if len(ids) > 0 && !slices.Contains(ids, s.ID) {
				continue
			}
			if s.Applied < index {
				behind += fmt.Sprintf(" %d@%d", s.ID, s.Applied)
			}
		}
		if behind == "" {
			return
		}
		if time.Now().After(deadline) {
			var all []string
			for _, n := range c.running() {
				s := n.Status()
				all = append(all, fmt.Sprintf("%d: %s term %d leader %d commit %d applied %d log %d..%d err %v%s",
					s.ID, s.State, s.Term, s.Leader, s.Commit, s.Applied, s.FirstIndex, s.LastIndex, s.Err,
					raftkv.Progress(ctxTimeout(c.t, time.Second), n)))
			}
			c.t.Fatalf("replicas behind index %d after %v:%s\n%s", index, timeout, behind, strings.Join(all, "\n"))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func ctxTimeout(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// withCounting gives every replica a countingSM.
func withCounting() clusterOpt {
	return withConfig(func(cfg *raftkv.Config) { cfg.StateMachine = &countingSM{} })
}

// onLeader runs f on the leader, retrying while the leadership moves or
// raft drops the request, until ctx ends.
func (c *cluster) onLeader(ctx context.Context, f func(l *raftkv.Node) error) error {
	for {
		var err error
		if l := c.leaderAmong(); l != nil {
			err = f(l)
			if err == nil || !(errors.Is(err, raftkv.ErrNotLeader) || errors.Is(err, raftkv.ErrProposalDropped)) {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func isNotLeader(err error) bool { return errors.Is(err, raftkv.ErrNotLeader) }

// newClusterFS is newCluster with each replica on the filesystem fs(id).
func newClusterFS(t testing.TB, n int, fs func(id uint64) vfs.FS, opts ...clusterOpt) *cluster {
	return newCluster(t, n, append([]clusterOpt{func(c *cluster) {
		for id := uint64(1); id <= uint64(n); id++ {
			c.fs[id] = fs(id)
		}
	}}, opts...)...)
}

func (c *cluster) setFS(id uint64, fs vfs.FS) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fs[id] = fs
}
