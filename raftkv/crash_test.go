package raftkv_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/sluicehq/sluice/internal/seedtest"
	"github.com/sluicehq/sluice/raftkv"
)

// TestCrashRecovery runs writers against replicas on pebble's crashable
// in-memory filesystem, isolates the replicas and takes a crash image of
// every replica's disk (what was synced survives, a random part of the rest
// too), restarts the cluster
// from the images and checks that every write acknowledged before the crash
// is there exactly once and nothing is applied twice.
//
// It runs with the applied state written with every Ready, after the
// default interval, and only when the log's truncation needs it (an
// interval of an hour): a crash loses more of the applied state the
// longer it waits in memory, and the restart must apply it again from
// the log.
func TestCrashRecovery(t *testing.T) {
	for _, tc := range []struct {
		name     string
		size     int
		interval time.Duration
	}{
		{"one-replica", 1, 0},
		{"three-replicas", 3, 0},
		{"three-replicas/state-written-every-ready", 3, -1},
		{"three-replicas/state-written-for-truncations", 3, time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			size := tc.size
			r := seedtest.Rand(t)
			fss := map[uint64]*vfs.MemFS{}
			opts := []clusterOpt{withCounting(), withConfig(func(cfg *raftkv.Config) {
				cfg.SnapshotEntries, cfg.SnapshotCatchUpEntries = 100, 20
				cfg.ApplyWriteInterval = tc.interval
			})}
			c := newClusterFS(t, size, func(id uint64) vfs.FS {
				fss[id] = vfs.NewCrashableMem()
				return fss[id]
			}, opts...)
			for round := range 3 {
				w := startWriters(c, 8)
				time.Sleep(time.Duration(50+r.IntN(150)) * time.Millisecond)
				// Everything acknowledged now was synced on a majority.
				w.mu.Lock()
				before := map[uint64]bool{}
				for id := range w.acked {
					before[id] = true
				}
				w.mu.Unlock()
				// The images are taken one after another while the replicas
				// run, so cut every link first: else a replica imaged late
				// could hold a commit index learned from entries that the
				// replicas imaged earlier synced only after their images,
				// which no crash at one instant can produce. Cut off, each
				// replica's image is that of a crash after a partition.
				c.net.partition(ids(size)...)
				crashed := map[uint64]*vfs.MemFS{}
				for id := uint64(1); id <= uint64(size); id++ {
					crashed[id] = fss[id].CrashClone(vfs.CrashCloneCfg{
						UnsyncedDataPercent: unsynced(r),
						RNG:                 rand.New(rand.NewPCG(r.Uint64(), r.Uint64())),
					})
				}
				w.halt(t)
				for id := uint64(1); id <= uint64(size); id++ {
					c.stop(id)
				}
				for id := uint64(1); id <= uint64(size); id++ {
					fss[id] = crashed[id]
					c.setFS(id, crashed[id])
					c.start(id)
				}
				c.net.heal()
				w.acked = before
				converge(t, c, 10*time.Second)
				checkCounts(t, c, w)
				t.Logf("round %d: %d writes acknowledged before the crash", round, len(before))
			}
		})
	}
}

// ids returns one group per replica 1..n, for memNetwork.partition.
func ids(n int) [][]uint64 {
	out := make([][]uint64, n)
	for i := range out {
		out[i] = []uint64{uint64(i + 1)}
	}
	return out
}

// TestDiskFailure injects write errors into the leader's WAL: the replica
// must stop with an error that says so, refuse to serve anything, and the
// others must go on.
func TestDiskFailure(t *testing.T) {
	var broken, unreadable atomic.Uint64 // the replicas whose WAL writes, sstable reads fail
	c := newClusterFS(t, 3, func(id uint64) vfs.FS {
		return errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
			if broken.Load() == id && strings.HasSuffix(op.Path, ".log") &&
				(op.Kind == errorfs.OpFileWrite || op.Kind == errorfs.OpFileSync || op.Kind == errorfs.OpFileSyncData) {
				return errorfs.ErrInjected
			}
			if unreadable.Load() == id && strings.HasSuffix(op.Path, ".sst") &&
				(op.Kind == errorfs.OpFileRead || op.Kind == errorfs.OpFileReadAt || op.Kind == errorfs.OpOpen) {
				return errorfs.ErrInjected
			}
			return nil
		}))
	})
	ctx := ctxTimeout(t, 20*time.Second)
	for i := range 20 {
		if _, err := c.propose(ctx, raftkv.PutCommand([]byte{byte(i)}, []byte("v"))); err != nil {
			t.Fatal(err)
		}
	}
	l := c.waitLeader(time.Second)
	id := l.Status().ID
	broken.Store(id)
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	_, err := l.Propose(pctx, raftkv.PutCommand([]byte("after"), []byte("v")))
	cancel()
	if !errors.Is(err, raftkv.ErrStorage) {
		t.Fatalf("propose on a replica whose disk fails: %v, want ErrStorage", err)
	}
	if !errors.Is(l.Err(), raftkv.ErrStorage) || !errors.Is(l.Err(), errorfs.ErrInjected) {
		t.Fatalf("Err() = %v, want ErrStorage wrapping the injected error", l.Err())
	}
	t.Logf("the failed replica says: %v", l.Err())
	select {
	case <-l.Failed():
	default:
		t.Fatal("Failed() is not closed on a replica stopped by a storage error")
	}
	if s := l.Status(); s.Err == nil || s.IsLeader {
		t.Fatalf("status of the failed replica: %+v", s)
	}
	if _, err := l.Get([]byte{0}); !errors.Is(err, raftkv.ErrStorage) {
		t.Fatalf("Get on the failed replica: %v, want ErrStorage", err)
	}
	if _, err := l.Propose(ctx, raftkv.PutCommand([]byte("x"), nil)); !errors.Is(err, raftkv.ErrStorage) {
		t.Fatalf("a second propose: %v", err)
	}
	if err := l.ReadIndex(ctx); !errors.Is(err, raftkv.ErrStorage) {
		t.Fatalf("ReadIndex on the failed replica: %v", err)
	}
	// The others elect a leader and go on.
	var rest []uint64
	for i := uint64(1); i <= 3; i++ {
		if i != id {
			rest = append(rest, i)
		}
	}
	nl := c.waitLeader(3*time.Second, rest...)
	if _, err := nl.Propose(ctx, raftkv.PutCommand([]byte("later"), []byte("v"))); err != nil {
		t.Fatalf("the healthy majority: %v", err)
	}
	select {
	case <-nl.Failed():
		t.Fatal("Failed() is closed on a healthy replica")
	default:
	}
	c.stop(id) // Close after a failure must return (an error is fine).
	broken.Store(0)
	c.start(id)
	converge(t, c, 10*time.Second)
	if v, err := c.node(id).Get([]byte("later")); err != nil || string(v) != "v" {
		t.Fatalf("the repaired replica: later = %q, %v", v, err)
	}

	// Reads that fail, from sstables with a cold cache. A read error must
	// stop the replica, never look like a missing key. Enough data that the
	// key read sits in a block nothing else read.
	for i := range 300 {
		if _, err := c.propose(ctx, raftkv.PutCommand(fmt.Appendf(nil, "big%03d", i), bytes.Repeat([]byte{byte(i)}, 1024))); err != nil {
			t.Fatal(err)
		}
	}
	c.waitApplied(5*time.Second, c.waitLeader(time.Second).Status().Applied, id)
	if err := raftkv.Flush(c.node(id)); err != nil {
		t.Fatal(err)
	}
	c.stop(id)
	c.start(id)
	n := c.node(id)
	unreadable.Store(id)
	_, err = n.Get([]byte("big150"))
	if !errors.Is(err, raftkv.ErrStorage) {
		t.Fatalf("Get with failing reads: %v, want ErrStorage", err)
	}
	if !errors.Is(n.Err(), raftkv.ErrStorage) {
		t.Fatalf("after a read error, Err() = %v", n.Err())
	}
	if _, err := n.Get([]byte("later")); !errors.Is(err, raftkv.ErrStorage) {
		t.Fatalf("a failed replica served a read: %v", err)
	}
	unreadable.Store(0)
}

func unsynced(r interface{ IntN(int) int }) int {
	if v := os.Getenv("RAFTKV_UNSYNCED"); v != "" {
		n, _ := strconv.Atoi(v)
		return n
	}
	return r.IntN(100)
}
