package loadgen_test

import (
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/internal/seedtest"
	"github.com/sluicehq/sluice/loadgen"
)

func mustGen(t *testing.T, w loadgen.Workload) *loadgen.Generator {
	t.Helper()
	g, err := loadgen.NewGenerator(w)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func all(t *testing.T, w loadgen.Workload) []loadgen.Item {
	t.Helper()
	g := mustGen(t, w)
	var out []loadgen.Item
	for {
		it, ok := g.Next()
		if !ok {
			return out
		}
		out = append(out, it)
		if len(out) > 10_000_000 {
			t.Fatal("endless stream")
		}
	}
}

func mixed(seed uint64) loadgen.Workload {
	return loadgen.Workload{
		Seed:      seed,
		Arrival:   loadgen.Arrival{Process: loadgen.ArrivalPoisson, Rate: 1000},
		Duration:  api.Duration(2 * time.Second),
		ArraySize: loadgen.IntDist{Kind: loadgen.KindZipf, Min: 1, Max: 1000, S: 1.5},
		Shapes: []loadgen.Shape{
			{CPU: 500, Memory: 512 << 20, Weight: 3},
			{CPU: 2000, Memory: 4 << 30, Weight: 1},
		},
		RunTime:        loadgen.DurationDist{Kind: loadgen.KindUniform, Min: 100 * time.Millisecond, Max: 2 * time.Second},
		OnlineFraction: 0.2,
		Queues:         []loadgen.Queue{{Name: "batch", Weight: 4}, {Name: "adhoc"}},
		Priorities:     []loadgen.Priority{{Priority: 0, Weight: 9}, {Priority: 100, Weight: 1}},
	}
}

func TestDeterministic(t *testing.T) {
	seed := seedtest.Rand(t).Uint64()
	a, b := all(t, mixed(seed)), all(t, mixed(seed))
	if len(a) == 0 || !reflect.DeepEqual(a, b) {
		t.Fatalf("same seed, different streams (%d and %d jobs)", len(a), len(b))
	}
	for i, it := range b {
		if it.Seq != int64(i) || i > 0 && it.At < b[i-1].At {
			t.Fatalf("item %d: seq %d at %v after %v", i, it.Seq, it.At, b[i-1].At)
		}
		j := it.Job // b's own: SetDefaults changes its slices
		j.SetDefaults()
		if err := api.ValidateJobs([]api.JobSpec{j}); err != nil {
			t.Fatalf("item %d: %v", i, err)
		}
	}
	c := all(t, mixed(seed+1))
	if reflect.DeepEqual(a, c) {
		t.Error("different seeds, same stream")
	}
	// The jobs do not depend on the arrival process.
	w := mixed(seed)
	w.Arrival = loadgen.Arrival{Process: loadgen.ArrivalConstant, Rate: 1000}
	d := all(t, w)
	for i := range min(len(a), len(d)) {
		if !reflect.DeepEqual(a[i].Job, d[i].Job) {
			t.Fatalf("job %d changed with the arrival process", i)
		}
	}
}

// within fails unless got is within tol (relative) of want.
func within(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol*math.Abs(want) {
		t.Errorf("%s = %.4g, want %.4g ± %.0f%%", what, got, want, tol*100)
	} else {
		t.Logf("%s = %.4g (want %.4g)", what, got, want)
	}
}

func TestDistributions(t *testing.T) {
	w := mixed(seedtest.Rand(t).Uint64())
	w.Duration = 0
	w.Jobs = 50_000
	w.Arrival = loadgen.Arrival{Rate: 1e6}
	items := all(t, w)
	if len(items) != 50_000 {
		t.Fatalf("%d jobs, want 50000", len(items))
	}
	n := float64(len(items))
	var ones, size, big, online, batch, prio100 float64
	var runSum time.Duration
	for _, it := range items {
		j := it.Job
		c := j.Tasks[0].Count
		if c < 1 || c > 1000 {
			t.Fatalf("array size %d out of 1..1000", c)
		}
		if c == 1 {
			ones++
		}
		size += float64(c)
		if j.Tasks[0].Pod.Containers[0].Resources.CPU == 2000 {
			big++
		}
		if j.QoS == api.QoSOnline {
			online++
		}
		if j.Queue == "batch" {
			batch++
		}
		if j.Priority == 100 {
			prio100++
		}
		rt := j.Tasks[0].Pod.Sim.RunTime.Std()
		if rt < 100*time.Millisecond || rt > 2*time.Second {
			t.Fatalf("run time %v out of range", rt)
		}
		runSum += rt
	}
	// Zipf(1.5) on 1..1000: P(1) = 1/H where H = sum k^-1.5.
	var h float64
	for k := 1; k <= 1000; k++ {
		h += math.Pow(float64(k), -1.5)
	}
	within(t, "P(size 1)", ones/n, 1/h, 0.05)
	within(t, "mean size", size/n, w.ArraySize.Mean(), 0.15)
	within(t, "share of the 2-CPU shape", big/n, 0.25, 0.05)
	within(t, "online share", online/n, 0.2, 0.05)
	within(t, "batch share", batch/n, 0.8, 0.02)
	within(t, "priority 100 share", prio100/n, 0.1, 0.1)
	within(t, "mean run time (s)", (runSum / time.Duration(len(items))).Seconds(), 1.05, 0.02)

	u := loadgen.Workload{Jobs: 20_000, Arrival: loadgen.Arrival{Rate: 1e6},
		ArraySize: loadgen.IntDist{Kind: loadgen.KindUniform, Min: 10, Max: 20}, Seed: w.Seed}
	seen := map[int64]int{}
	for _, it := range all(t, u) {
		seen[it.Job.Tasks[0].Count]++
	}
	for v := int64(10); v <= 20; v++ {
		within(t, "uniform frequency", float64(seen[v]), 20_000.0/11, 0.15)
	}
	if len(seen) != 11 {
		t.Errorf("uniform:10,20 drew %d distinct values", len(seen))
	}
}

func TestArrivals(t *testing.T) {
	seed := seedtest.Rand(t).Uint64()
	t.Run("constant", func(t *testing.T) {
		items := all(t, loadgen.Workload{Seed: seed, Arrival: loadgen.Arrival{Rate: 3}, Duration: api.Duration(10 * time.Second)})
		if len(items) != 30 {
			t.Fatalf("%d jobs in 10s at 3/s, want 30", len(items))
		}
		for i, it := range items {
			want := time.Duration(math.Round(float64(i) / 3 * 1e9))
			if it.At != want {
				t.Fatalf("job %d at %v, want %v", i, it.At, want)
			}
		}
	})
	t.Run("poisson", func(t *testing.T) {
		items := all(t, loadgen.Workload{Seed: seed, Arrival: loadgen.Arrival{Process: loadgen.ArrivalPoisson, Rate: 2000},
			Duration: api.Duration(10 * time.Second)})
		within(t, "jobs in 10s at 2000/s", float64(len(items)), 20_000, 0.05)
		// Exponential gaps: mean = standard deviation = 1/rate.
		var sum, sq float64
		for i := 1; i < len(items); i++ {
			g := (items[i].At - items[i-1].At).Seconds()
			sum += g
			sq += g * g
		}
		m := float64(len(items) - 1)
		mean := sum / m
		within(t, "mean gap", mean, 1.0/2000, 0.05)
		within(t, "gap sd", math.Sqrt(sq/m-mean*mean), 1.0/2000, 0.1)
	})
	t.Run("bursts", func(t *testing.T) {
		items := all(t, loadgen.Workload{Seed: seed, Arrival: loadgen.Arrival{Process: loadgen.ArrivalBursts, Burst: 5,
			Period: api.Duration(time.Second)}, Duration: api.Duration(3500 * time.Millisecond)})
		if len(items) != 20 {
			t.Fatalf("%d jobs, want 4 bursts of 5", len(items))
		}
		for i, it := range items {
			if want := time.Duration(i/5) * time.Second; it.At != want {
				t.Fatalf("job %d at %v, want %v", i, it.At, want)
			}
		}
	})
	t.Run("jobs ends first", func(t *testing.T) {
		items := all(t, loadgen.Workload{Seed: seed, Arrival: loadgen.Arrival{Rate: 100}, Duration: api.Duration(time.Hour), Jobs: 7})
		if len(items) != 7 {
			t.Fatalf("%d jobs, want 7", len(items))
		}
	})
}
