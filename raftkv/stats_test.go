package raftkv_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/raftkv"
)

// TestStats checks the statistics a scrape reads: every log sync is timed
// in one bucket of SyncLatency, and the store reports the space it takes
// and its write amplification; a closed replica reports a zero store.
func TestStats(t *testing.T) {
	c := newCluster(t, 1)
	n := c.node(1)
	ctx := ctxTimeout(t, 10*time.Second)
	for i := range 50 {
		if _, err := n.Propose(ctx, raftkv.PutCommand(fmt.Appendf(nil, "k%03d", i), make([]byte, 1000))); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	h := n.SyncLatency()
	syncs := n.Metrics().Syncs
	if h.Count == 0 || h.Count != syncs {
		t.Errorf("SyncLatency().Count = %d, Metrics().Syncs = %d: want equal and positive", h.Count, syncs)
	}
	if len(h.Counts) != len(h.Bounds)+1 {
		t.Fatalf("%d counts for %d bounds", len(h.Counts), len(h.Bounds))
	}
	var sum uint64
	for i, c := range h.Counts {
		sum += c
		if i > 0 && i < len(h.Bounds) && h.Bounds[i] <= h.Bounds[i-1] {
			t.Errorf("bounds not ascending at %d: %v", i, h.Bounds)
		}
	}
	if sum != h.Count || h.Sum <= 0 {
		t.Errorf("buckets sum to %d, Count %d, Sum %v", sum, h.Count, h.Sum)
	}
	st := n.StoreStats()
	if st.DiskBytes == 0 || st.WALBytesIn < 50*1000 || st.WriteAmp < 0 {
		t.Errorf("StoreStats = %+v: want disk use, at least 50 kB through the WAL, a non-negative write amplification", st)
	}
	c.stop(1)
	if st := n.StoreStats(); st != (raftkv.StoreStats{}) {
		t.Errorf("StoreStats of a closed replica = %+v, want zero", st)
	}
}
