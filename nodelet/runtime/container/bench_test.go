package container_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/nodelet/runtime"
)

// BenchmarkPodStart measures Start (create the sandbox and the container,
// until the process runs) of a one-container pod, at several
// concurrencies. It reports p50 and p99 latency and starts per second;
// stopping and removing pods is not timed.
func BenchmarkPodStart(b *testing.B) {
	needRoot(b)
	for _, conc := range []int{1, 4} {
		b.Run(fmt.Sprintf("conc=%d", conc), func(b *testing.B) {
			benchStart(b, conc, func(id string) runtime.PodSpec { return pod(id, []string{"/payload", "sleep", "60s"}) })
		})
	}
}

// BenchmarkPodStartSharePID measures Start of a two-container pod, with
// and without a shared PID namespace, one start at a time.
func BenchmarkPodStartSharePID(b *testing.B) {
	needRoot(b)
	for _, share := range []bool{false, true} {
		b.Run(fmt.Sprintf("share_pid=%v", share), func(b *testing.B) {
			benchStart(b, 1, func(id string) runtime.PodSpec {
				s := pod(id, []string{"/payload", "sleep", "60s"}, []string{"/payload", "sleep", "60s"})
				s.SharePID = share
				return s
			})
		})
	}
}

// BenchmarkPodStartScratch measures Start of a one-container pod without
// a volume and with a 256 MiB scratch volume mounted, one start at a time:
// the cost of making (fallocate, mkfs.ext4, loop device, mount) a scratch
// filesystem.
func BenchmarkPodStartScratch(b *testing.B) {
	needRoot(b)
	for _, size := range []int64{0, 256 << 20} {
		b.Run(fmt.Sprintf("scratch=%d", size), func(b *testing.B) {
			benchStart(b, 1, func(id string) runtime.PodSpec {
				s := pod(id, []string{"/payload", "sleep", "60s"})
				if size > 0 {
					s.Volumes = []runtime.Volume{{Name: "work", ScratchSize: size}}
					s.Containers[0].Mounts = []runtime.Mount{{Volume: "work", Path: "/work"}}
				}
				return s
			})
		})
	}
}

// benchStart starts b.N pods of spec, conc at a time, and reports p50 and
// p99 latency and starts per second.
func benchStart(b *testing.B, conc int, spec func(id string) runtime.PodSpec) {
	rt := newRuntime(b, b.TempDir())
	defer rt.Close()
	ctx := context.Background()
	var (
		mu    sync.Mutex
		lats  []time.Duration
		next  atomic.Int64
		ids   []string
		start = time.Now()
	)
	b.ResetTimer()
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				id := fmt.Sprintf("bench-%d", i)
				t0 := time.Now()
				err := rt.Start(ctx, spec(id))
				d := time.Since(t0)
				if err != nil {
					b.Error(err)
					return
				}
				mu.Lock()
				lats = append(lats, d)
				ids = append(ids, id)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	for _, id := range ids {
		_ = rt.Stop(ctx, id, 0)
		_ = rt.Remove(ctx, id)
	}
	if len(lats) == 0 {
		return
	}
	slices.Sort(lats)
	b.ReportMetric(float64(lats[len(lats)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lats[len(lats)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(len(lats))/elapsed.Seconds(), "starts/s")
}
