package raftkv

import (
	"sync/atomic"
	"time"
)

// SyncBounds are the upper bounds of the buckets of SyncLatency: from
// 100µs, each twice the last, to about 3.3s.
var SyncBounds = func() []time.Duration {
	b := make([]time.Duration, 16)
	for i := range b {
		b[i] = 100 * time.Microsecond << i
	}
	return b
}()

// Histogram counts durations in fixed buckets.
type Histogram struct {
	// Bounds are the buckets' upper bounds, ascending. Counts[i] counts
	// the durations in (Bounds[i-1], Bounds[i]], and Counts[len(Bounds)]
	// those above the last bound (len(Counts) == len(Bounds)+1).
	Bounds []time.Duration
	Counts []uint64
	// Count is the sum of Counts, Sum the sum of the durations.
	Count uint64
	Sum   time.Duration
}

// latencies is a Histogram over SyncBounds that many goroutines may
// observe into and read at once. A read taken while observations go on
// may count one of them in Counts and not yet in Sum, or the other way
// round; Count is always the sum of Counts.
type latencies struct {
	counts [17]atomic.Uint64 // len(SyncBounds)+1
	sum    atomic.Int64      // nanoseconds
}

func (l *latencies) observe(d time.Duration) {
	i := 0
	for i < len(SyncBounds) && d > SyncBounds[i] {
		i++
	}
	l.counts[i].Add(1)
	l.sum.Add(int64(d))
}

func (l *latencies) read() Histogram {
	h := Histogram{Bounds: SyncBounds, Counts: make([]uint64, len(l.counts))}
	for i := range l.counts {
		h.Counts[i] = l.counts[i].Load()
		h.Count += h.Counts[i]
	}
	h.Sum = time.Duration(l.sum.Load())
	return h
}

// SyncLatency returns the time each sync of the replica's log (one per
// Metrics.Syncs) took since Open.
func (n *Node) SyncLatency() Histogram { return n.syncLatency.read() }

// StoreStats describe the replica's pebble store.
type StoreStats struct {
	// DiskBytes is the space the store's files take on disk: tables,
	// write-ahead logs, manifests.
	DiskBytes uint64
	// WALBytesIn counts the bytes written to the write-ahead log since
	// Open (StoreBytes).
	WALBytesIn uint64
	// WriteAmp is the store's write amplification since Open: the bytes
	// flushed and compacted over the bytes flushed, over every level.
	WriteAmp float64
	// Flushes and Compactions count those pebble ran since Open.
	Flushes, Compactions int64
	// ReadAmp is the number of sublevels and levels a read may visit.
	ReadAmp int
}

// StoreStats returns the store's statistics; the zero value once the
// replica is closed. It asks pebble for its metrics, which takes locks
// of pebble's and allocates: for a scrape, not for a hot path.
func (n *Node) StoreStats() StoreStats {
	n.dbMu.RLock()
	defer n.dbMu.RUnlock()
	if n.dbClosed {
		return StoreStats{}
	}
	m := n.db.Metrics()
	total := m.Total()
	return StoreStats{
		DiskBytes: m.DiskSpaceUsage(), WALBytesIn: m.WAL.BytesIn, WriteAmp: total.WriteAmp(),
		Flushes: m.Flush.Count, Compactions: m.Compact.Count, ReadAmp: m.ReadAmp(),
	}
}
