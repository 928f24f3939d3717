package api_test

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
)

// TestSimUsageAt checks the base and peak of a simulated pod's usage at
// the edges of a period counted from the Unix epoch, before it too.
func TestSimUsageAt(t *testing.T) {
	u := &api.SimUsage{CPU: 100, Memory: 1 << 20, Peak: &api.SimPeak{CPU: 900, Memory: 8 << 20,
		Period: api.Duration(time.Minute), Length: api.Duration(20 * time.Second)}}
	base, peak := api.Usage{CPU: 100, Memory: 1 << 20}, api.Usage{CPU: 900, Memory: 8 << 20}
	epochMinute := time.Unix(1_800_000_000-1_800_000_000%60, 0)
	for _, c := range []struct {
		at   time.Time
		want api.Usage
	}{
		{epochMinute, peak},
		{epochMinute.Add(20*time.Second - 1), peak},
		{epochMinute.Add(20 * time.Second), base},
		{epochMinute.Add(time.Minute - 1), base},
		{epochMinute.Add(time.Minute), peak},
		{time.Unix(-60, 0), peak},
		{time.Unix(-40, 0), base},
		{time.Unix(-41, 0), peak},
	} {
		if got := u.At(c.at); got != c.want {
			t.Errorf("At(%v) = %+v, want %+v", c.at.UTC(), got, c.want)
		}
	}
	flat := &api.SimUsage{CPU: 5, Memory: 6}
	if got := flat.At(epochMinute); got != (api.Usage{CPU: 5, Memory: 6}) {
		t.Errorf("without a peak: %+v", got)
	}
	var none *api.SimUsage
	if got := none.At(epochMinute); got != (api.Usage{}) {
		t.Errorf("nil usage: %+v", got)
	}
}
