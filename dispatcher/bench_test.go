package dispatcher_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/dispatcher"
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// BenchmarkSched is issue 6's scheduling benchmark in miniature: three
// raftkv replicas on loopback TCP (pebble, fsync on), N registered nodes
// that never report (placements only), M pending tasks in arrays of 1 to
// 10,000 tasks of a few shapes and both QoS classes. It reports committed
// placements per second from the first round to the last placement, the
// rounds' p50/p99 latency and solver share, and the heap bytes per pending
// task the submit added. SCHED_NODES and SCHED_TASKS set N and M
// (default 1,000 and 20,000).
func BenchmarkSched(b *testing.B) {
	nodes, tasks := envInt("SCHED_NODES", 1000), envInt("SCHED_TASKS", 20_000)
	for b.Loop() {
		runSched(b, nodes, tasks)
	}
}

func runSched(b *testing.B, nodes, tasks int) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := newClusterTB(b, 3, func(cfg *dispatcher.Config) {
		cfg.Period = time.Hour // rounds only on work
		cfg.NodeTTL = time.Hour
	})
	l := c.leader()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for i := range nodes {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			s := nodeSpec(fmt.Sprintf("n%05d", i), 64_000)
			if err := l.d.Register(ctx, s); err != nil {
				b.Error(err)
			}
		}()
	}
	wg.Wait()
	// Wait for the registration rounds to settle, then measure from the
	// first submit.
	time.Sleep(50 * time.Millisecond)
	before := l.d.RoundSummary()

	rng := rand.New(rand.NewPCG(1, 2))
	shapes := []int64{250, 500, 1000, 2000}
	var specs []api.JobSpec
	left := tasks
	for left > 0 {
		n := min(left, 1+rng.IntN(10_000))
		if rng.IntN(4) > 0 {
			n = min(left, 1+rng.IntN(200))
		}
		s := jobSpec(fmt.Sprint("j", len(specs)), int64(n), shapes[rng.IntN(len(shapes))], int32(rng.IntN(5)), time.Hour)
		if rng.IntN(3) == 0 {
			s.QoS = api.QoSOnline
		}
		specs = append(specs, s)
		left -= n
	}
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	start := time.Now()
	var ids []string
	for i := 0; i < len(specs); i += 100 {
		got, err := l.d.Submit(ctx, specs[i:min(i+100, len(specs))])
		if err != nil {
			b.Fatal(err)
		}
		ids = append(ids, got...)
	}
	runtime.ReadMemStats(&m1)
	placed := func() int64 { return l.d.RoundSummary().Placed - before.Placed }
	for placed() < int64(tasks) {
		if ctx.Err() != nil || time.Since(start) > 2*time.Minute {
			b.Fatalf("placed %d of %d; diagnosis %+v; summary %+v", placed(), tasks, l.d.Diagnosis(), l.d.RoundSummary())
		}
		time.Sleep(time.Millisecond)
	}
	el := time.Since(start)
	rs := l.d.Rounds()
	var sched []dispatcher.RoundStat
	for _, r := range rs {
		if r.Placed > 0 && r.Nodes == nodes {
			sched = append(sched, r)
		}
	}
	p50, p99, share := pct(sched)
	b.ReportMetric(float64(tasks)/el.Seconds(), "placements/s")
	b.ReportMetric(float64(p50.Microseconds())/1000, "round_p50_ms")
	b.ReportMetric(float64(p99.Microseconds())/1000, "round_p99_ms")
	b.ReportMetric(share, "solver_share")
	b.ReportMetric(float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc))/float64(tasks), "heap_B/pending_task")
	b.Logf("nodes %d tasks %d jobs %d: %d rounds in %v; submit took part of it", nodes, tasks, len(ids), len(sched), el)
	for _, r := range sched {
		b.Logf("round tasks %d groups %d placed %d rejected %d latency %v input %v build %v solve %v commit %v plan %dB",
			r.Tasks, r.Groups, r.Placed, r.Rejected, r.Latency, r.Input, r.Build, r.Solve, r.Commit, r.PlanBytes)
	}
}

func pct(rs []dispatcher.RoundStat) (p50, p99 time.Duration, share float64) {
	if len(rs) == 0 {
		return 0, 0, 0
	}
	lat := make([]time.Duration, len(rs))
	var tot, sol time.Duration
	for i, r := range rs {
		lat[i] = r.Latency
		tot += r.Latency
		sol += r.Build + r.Solve
	}
	slices.Sort(lat)
	return lat[(len(lat)-1)/2], lat[(len(lat)-1)*99/100], float64(sol) / float64(tot)
}
