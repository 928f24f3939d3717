package raftkv_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/seedtest"
	"github.com/sluicehq/sluice/raftkv"
)

// writers runs concurrent clients that each propose count commands with
// fresh IDs (never retrying an ID) until stop is closed, and records which
// were acknowledged.
type writers struct {
	mu    sync.Mutex
	acked map[uint64]bool
	wg    sync.WaitGroup
	stop  chan struct{}
	// errs counts the errors by kind, for the log.
	errs sync.Map
}

// writeIDs hands out write IDs unique across all writers of a test binary.
var writeIDs atomic.Uint64

func startWriters(c *cluster, n int) *writers {
	w := &writers{acked: map[uint64]bool{}, stop: make(chan struct{})}
	for range n {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			for {
				select {
				case <-w.stop:
					return
				default:
				}
				l := c.leaderAmong()
				if l == nil {
					time.Sleep(2 * time.Millisecond)
					continue
				}
				id := writeIDs.Add(1)
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				_, err := l.Propose(ctx, countCommand(id))
				cancel()
				if err == nil {
					w.mu.Lock()
					w.acked[id] = true
					w.mu.Unlock()
					continue
				}
				kind := "other: " + err.Error()
				for _, e := range []error{raftkv.ErrNotLeader, raftkv.ErrStopped, raftkv.ErrProposalDropped, raftkv.ErrTimeout, raftkv.ErrOutcomeUnknown} {
					if errors.Is(err, e) {
						kind = e.Error()
						break
					}
				}
				if errors.Is(err, raftkv.ErrNotLeader) || errors.Is(err, raftkv.ErrProposalDropped) {
					time.Sleep(time.Millisecond)
				}
				v, _ := w.errs.LoadOrStore(kind, new(atomic.Int64))
				v.(*atomic.Int64).Add(1)
			}
		}()
	}
	return w
}

func (w *writers) ackedCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked)
}

func (w *writers) halt(t testing.TB) {
	close(w.stop)
	w.wg.Wait()
	w.errs.Range(func(k, v any) bool {
		t.Logf("writer errors %q: %d", k, v.(*atomic.Int64).Load())
		return true
	})
}

// checkCounts checks on every running replica that every acknowledged write
// was applied exactly once and no write more than once.
func checkCounts(t testing.TB, c *cluster, w *writers) {
	t.Helper()
	for _, n := range c.running() {
		v, err := n.Get(totalKey)
		if err != nil && !errors.Is(err, raftkv.ErrNotFound) {
			t.Fatalf("replica %d: total: %v", n.Status().ID, err)
		}
		got, err := counts(n)
		if err != nil {
			t.Fatalf("replica %d: counts: %v", n.Status().ID, err)
		}
		sum := 0
		for _, k := range got {
			sum += k
		}
		if total, _ := strconv.Atoi(string(v)); total != sum {
			t.Errorf("replica %d: the deferred total of count commands is %d, the counts sum to %d", n.Status().ID, total, sum)
		}
		w.mu.Lock()
		for id := range w.acked {
			if got[id] != 1 {
				t.Errorf("replica %d: acknowledged write %d applied %d times", n.Status().ID, id, got[id])
			}
		}
		w.mu.Unlock()
		for id, k := range got {
			if k > 1 {
				t.Errorf("replica %d: write %d applied %d times", n.Status().ID, id, k)
			}
		}
	}
}

// converge waits until every running replica applied what the leader did.
func converge(t testing.TB, c *cluster, timeout time.Duration) {
	t.Helper()
	l := c.waitLeader(timeout)
	// A write through the leader makes its applied index cover everything
	// committed before.
	ctx := ctxTimeout(t, timeout)
	if _, err := c.propose(ctx, raftkv.PutCommand([]byte("converge"), nil)); err != nil {
		t.Fatalf("converge: %v", err)
	}
	c.waitApplied(timeout, l.Status().Applied)
}

func TestLeaderKilledUnderLoad(t *testing.T) { testLeaderKilled(t) }

func testLeaderKilled(t *testing.T, opts ...clusterOpt) {
	r := seedtest.Rand(t)
	c := newCluster(t, 3, append(opts, withCounting())...)
	w := startWriters(c, 16)
	time.Sleep(time.Duration(100+r.IntN(200)) * time.Millisecond)
	old := c.waitLeader(time.Second)
	oldID := old.Status().ID
	before := w.ackedCount()
	killed := time.Now()
	c.stop(oldID)
	nl := c.waitLeader(2 * time.Second)
	if took := time.Since(killed); took > 2*time.Second {
		t.Fatalf("new leader after %v", took)
	} else {
		t.Logf("replica %d leads %v after replica %d was killed (%d writes acknowledged before)", nl.Status().ID, took, oldID, before)
	}
	deadline := time.Now().Add(5 * time.Second)
	for w.ackedCount() < before+100 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := w.ackedCount(); got < before+100 {
		t.Fatalf("only %d writes acknowledged after the new leader took over", got-before)
	}
	c.start(oldID)
	time.Sleep(100 * time.Millisecond)
	w.halt(t)
	converge(t, c, 10*time.Second)
	checkCounts(t, c, w)
	t.Logf("%d writes acknowledged", w.ackedCount())
}

// settledApplied waits until n has applied everything it knows committed
// and that stays so for a while (messages sent before a partition may still
// arrive), and returns its applied index.
func settledApplied(t *testing.T, n *raftkv.Node) uint64 {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	last := n.Status()
	for stable := 0; stable < 10; {
		if time.Now().After(deadline) {
			t.Fatalf("replica %d did not settle: %+v", last.ID, last)
		}
		time.Sleep(10 * time.Millisecond)
		s := n.Status()
		if s.Applied == s.Commit && s.Applied == last.Applied {
			stable++
		} else {
			stable = 0
		}
		last = s
	}
	return last.Applied
}

func TestPartition(t *testing.T) {
	for _, tc := range []struct {
		name     string
		snapshot bool
	}{{"catch-up-by-log", false}, {"catch-up-by-snapshot", true}} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, 3, withConfig(func(cfg *raftkv.Config) {
				if tc.snapshot {
					cfg.SnapshotEntries, cfg.SnapshotCatchUpEntries = 20, 5
				}
			}))
			ctx := ctxTimeout(t, 30*time.Second)
			l := c.waitLeader(time.Second)
			for i := range 10 {
				if _, err := l.Propose(ctx, raftkv.PutCommand(fmt.Appendf(nil, "a%d", i), []byte("x"))); err != nil {
					t.Fatal(err)
				}
			}
			oldID := l.Status().ID
			var others []uint64
			for id := uint64(1); id <= 3; id++ {
				if id != oldID {
					others = append(others, id)
				}
			}
			c.net.partition([]uint64{oldID}, others)
			applied := settledApplied(t, l)

			// The isolated leader accepts a proposal it can never commit.
			lost := make(chan error, 1)
			go func() {
				_, err := l.Propose(ctx, raftkv.PutCommand([]byte("lost"), []byte("x")))
				lost <- err
			}()

			nl := c.waitLeader(2*time.Second, others...)
			for i := range 100 {
				if _, err := nl.Propose(ctx, raftkv.PutCommand(fmt.Appendf(nil, "b%d", i), []byte("y"))); err != nil {
					t.Fatal(err)
				}
			}
			// CheckQuorum deposes the isolated leader within two election
			// timeouts of the partition, which the majority's election and
			// proposals need not have outlasted.
			for deadline := time.Now().Add(time.Second); l.Status().IsLeader && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
			}
			if s := l.Status(); s.Applied != applied || s.IsLeader {
				t.Fatalf("the minority moved: applied %d → %d, leader %v", applied, s.Applied, s.IsLeader)
			}
			if _, err := l.Get([]byte("b0")); !errors.Is(err, raftkv.ErrNotFound) {
				t.Fatalf("the minority has b0: %v", err)
			}
			// The minority cannot serve a linearizable read.
			rctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			_, err := l.LinearizableGet(rctx, []byte("a0"))
			cancel()
			if !errors.Is(err, raftkv.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("linearizable read on the minority: %v, want ErrTimeout", err)
			}
			if s := nl.Status(); s.FirstIndex <= applied+1 && tc.snapshot {
				t.Fatalf("the majority's log was not truncated: first index %d", s.FirstIndex)
			}

			c.net.heal()
			c.waitApplied(5*time.Second, nl.Status().Applied)
			for i := range 100 {
				if v, err := l.Get(fmt.Appendf(nil, "b%d", i)); err != nil || string(v) != "y" {
					t.Fatalf("healed replica: b%d = %q, %v", i, v, err)
				}
			}
			select {
			case err := <-lost:
				if !errors.Is(err, raftkv.ErrProposalDropped) && !errors.Is(err, raftkv.ErrOutcomeUnknown) {
					t.Fatalf("the isolated leader's proposal: %v, want dropped or unknown", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the isolated leader's proposal is still waiting")
			}
			for _, n := range c.running() {
				if _, err := n.Get([]byte("lost")); !errors.Is(err, raftkv.ErrNotFound) {
					t.Fatalf("replica %d applied the minority's write: %v", n.Status().ID, err)
				}
			}
			restored := l.Metrics().SnapshotsRestored
			if tc.snapshot != (restored > 0) {
				t.Fatalf("the healed replica restored %d snapshots", restored)
			}
		})
	}
}
