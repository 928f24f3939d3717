package dispatcher

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
)

// TestUsageEstimateFollowsPeaks: a larger sample raises the estimate at
// once; smaller ones lower it a fifth of the way each.
func TestUsageEstimateFollowsPeaks(t *testing.T) {
	var e usageEstimate
	at := time.Unix(1_800_000_000, 0)
	for i, tc := range []struct {
		sample   api.Usage
		cpu, mem float64
	}{
		{api.Usage{CPU: 500, Memory: 1000}, 500, 1000},
		{api.Usage{CPU: 900, Memory: 0}, 900, 800},
		{api.Usage{CPU: 400, Memory: 800}, 800, 800},
		{api.Usage{CPU: 400, Memory: 2000}, 720, 2000},
	} {
		e.add(tc.sample, at.Add(time.Duration(i)*time.Second))
		if e.cpu != tc.cpu || e.mem != tc.mem || !e.at.Equal(at.Add(time.Duration(i)*time.Second)) {
			t.Fatalf("after sample %d %+v: estimate %.0f m, %.0f B at %v; want %.0f, %.0f", i, tc.sample, e.cpu, e.mem, e.at, tc.cpu, tc.mem)
		}
	}
}
