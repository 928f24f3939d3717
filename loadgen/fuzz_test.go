package loadgen_test

import (
	"testing"

	"github.com/sluicehq/sluice/loadgen"
)

// FuzzDecodeWorkload: no input makes decoding, validation or generation
// panic, and what validates generates jobs.
func FuzzDecodeWorkload(f *testing.F) {
	f.Add([]byte(goodFile))
	f.Add([]byte(`{"arrival": {"process": "bursts", "burst": 3, "period": "1ms"}, "jobs": 10, "run_time": "uniform:0s,1h"}`))
	f.Add([]byte(`{"arrival": null, "shapes": [null, {}], "array_size": "zipf:1.01,1"}`))
	f.Add([]byte(`{"jobs": 1e3, "array_size": -4, "duration": "-1s", "queues": [{"name": "q", "weight": 1e308}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		w, err := loadgen.DecodeWorkload(b)
		if err != nil {
			return
		}
		if w.Jobs == 0 || w.Jobs > 100 {
			w.Jobs = 100
		}
		g, err := loadgen.NewGenerator(w)
		if err != nil {
			return
		}
		for range 100 {
			if _, ok := g.Next(); !ok {
				break
			}
		}
	})
}
