package loadgen

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/seedtest"
)

func TestHistogramAccuracy(t *testing.T) {
	r := seedtest.Rand(t)
	var h histogram
	var exact []int64
	for range 100_000 {
		// Log-uniform from 1µs to 100s.
		us := int64(math.Exp(r.Float64() * math.Log(1e8)))
		k := 1 + r.Int64N(3)
		h.record(time.Duration(us)*time.Microsecond, k)
		for range k {
			exact = append(exact, us)
		}
	}
	slices.Sort(exact)
	for _, q := range []float64{0.01, 0.5, 0.9, 0.99, 0.999, 1} {
		want := exact[int(math.Ceil(q*float64(len(exact))))-1]
		got := h.quantile(q)
		if math.Abs(float64(got-want)) > 0.01*float64(want)+1 {
			t.Errorf("q%.3f = %dµs, want %dµs ± 1%%", q, got, want)
		}
	}
	if h.n != int64(len(exact)) || h.max != exact[len(exact)-1] {
		t.Errorf("n %d max %d, want %d %d", h.n, h.max, len(exact), exact[len(exact)-1])
	}
	for v := int64(0); v < 1<<20; v++ {
		b := bucketOf(v)
		if mid := bucketMid(b); math.Abs(float64(mid-v)) > 0.004*float64(v)+0.5 {
			t.Fatalf("value %d: bucket %d's middle %d", v, b, mid)
		}
	}
	var empty histogram
	if s := empty.stats(); s != (LatencyStats{}) {
		t.Errorf("empty stats %+v", s)
	}
}
