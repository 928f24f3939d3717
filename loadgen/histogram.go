package loadgen

import (
	"math"
	"math/bits"
	"time"
)

// histogram counts durations in log-linear buckets of microseconds:
// exact below 256µs, then 128 buckets per power of two, so a percentile
// is within 0.8% of the true value. It takes weighted samples (k tasks
// with one latency) in constant memory, whatever the count. Not safe for
// concurrent use.
type histogram struct {
	counts   []int64
	n        int64
	sum      float64 // µs
	min, max int64   // µs
}

const (
	histLinear = 256 // values below are their own bucket
	histSub    = 128 // buckets per power of two above
)

func bucketOf(v int64) int {
	if v < histLinear {
		return int(v)
	}
	shift := bits.Len64(uint64(v)) - 8
	return histLinear + (shift-1)*histSub + int(v>>shift) - histSub
}

// bucketMid returns the middle of bucket i's range.
func bucketMid(i int) int64 {
	if i < histLinear {
		return int64(i)
	}
	shift := (i-histLinear)/histSub + 1
	m := int64((i-histLinear)%histSub + histSub)
	return m<<shift + (int64(1)<<shift)/2
}

// record adds k samples of d; negative durations count as 0.
func (h *histogram) record(d time.Duration, k int64) {
	if k <= 0 {
		return
	}
	us := max(d.Microseconds(), 0)
	b := bucketOf(us)
	if b >= len(h.counts) {
		h.counts = append(h.counts, make([]int64, b+1-len(h.counts))...)
	}
	if h.n == 0 || us < h.min {
		h.min = us
	}
	h.max = max(h.max, us)
	h.counts[b] += k
	h.n += k
	h.sum += float64(us) * float64(k)
}

// quantile returns the q-quantile (0 < q <= 1) in µs.
func (h *histogram) quantile(q float64) int64 {
	if h.n == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(h.n)))
	rank = min(max(rank, 1), h.n)
	var cum int64
	for i, c := range h.counts {
		cum += c
		if cum >= rank {
			return min(max(bucketMid(i), h.min), h.max)
		}
	}
	return h.max
}

// LatencyStats summarizes one latency over every task it was measured
// for, in milliseconds. Percentiles are within 1% of the exact value.
type LatencyStats struct {
	// Count is the tasks (for Lag: the jobs) measured.
	Count  int64   `json:"count"`
	MeanMs float64 `json:"mean_ms"`
	P50Ms  float64 `json:"p50_ms"`
	P90Ms  float64 `json:"p90_ms"`
	P99Ms  float64 `json:"p99_ms"`
	MaxMs  float64 `json:"max_ms"`
}

func (h *histogram) stats() LatencyStats {
	if h.n == 0 {
		return LatencyStats{}
	}
	ms := func(us int64) float64 { return float64(us) / 1000 }
	return LatencyStats{
		Count:  h.n,
		MeanMs: h.sum / float64(h.n) / 1000,
		P50Ms:  ms(h.quantile(0.50)),
		P90Ms:  ms(h.quantile(0.90)),
		P99Ms:  ms(h.quantile(0.99)),
		MaxMs:  ms(h.max),
	}
}
