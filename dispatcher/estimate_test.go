package dispatcher

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
)

// TestUsageEstimateFollowsPeaks: a larger sample raises the estimate at
// once; smaller ones lower it a fifth of the way per EstimateDecayEvery.
func TestUsageEstimateFollowsPeaks(t *testing.T) {
	const every = DefaultEstimateDecayEvery
	var e usageEstimate
	at := time.Unix(1_800_000_000, 0)
	for i, tc := range []struct {
		after    time.Duration // since the sample before
		sample   api.Usage
		cpu, mem float64
	}{
		{0, api.Usage{CPU: 500, Memory: 1000}, 500, 1000},
		{every, api.Usage{CPU: 900, Memory: 0}, 900, 800},
		{every, api.Usage{CPU: 400, Memory: 800}, 800, 800},
		{every / 2, api.Usage{CPU: 400, Memory: 2000}, 760, 2000},
		{0, api.Usage{CPU: 0, Memory: 0}, 760, 2000},
		{10 * every, api.Usage{CPU: 660, Memory: 0}, 740, 1600},
	} {
		at = at.Add(tc.after)
		e.add(tc.sample, at, every)
		if e.cpu != tc.cpu || e.mem != tc.mem || !e.at.Equal(at) {
			t.Fatalf("after sample %d %+v: estimate %.0f m, %.0f B at %v; want %.0f, %.0f", i, tc.sample, e.cpu, e.mem, e.at, tc.cpu, tc.mem)
		}
	}
}

// TestUsageEstimateDecaysByTime: the samples of a group's many tasks over
// one heartbeat period lower its estimate about as one sample a period
// would, not to the trough.
func TestUsageEstimateDecaysByTime(t *testing.T) {
	const every = DefaultEstimateDecayEvery
	at := time.Unix(1_800_000_000, 0)
	e := usageEstimate{cpu: 900, mem: 900, at: at}
	const samples = 10_000
	for i := range samples {
		e.add(api.Usage{CPU: 400, Memory: 400}, at.Add(time.Duration(i+1)*every/samples), every)
	}
	// (1-0.2/n)^n of the difference is left: e^-0.2 for large n.
	if e.cpu < 805 || e.cpu > 815 {
		t.Errorf("after %d samples of 400 m over %v: estimate %.1f m, want about %.0f", samples, every, e.cpu, 400+500*0.8187)
	}
}
