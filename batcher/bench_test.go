package batcher_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/sluicehq/sluice/batcher"
	"github.com/sluicehq/sluice/clock"
)

// mix describes how benchmark items spread over queues and priorities.
type mix struct {
	name       string
	queues     int
	priorities int
}

var mixes = []mix{
	{"q=1,p=1", 1, 1},
	{"q=16,p=4", 16, 4},
	{"q=256,p=1", 256, 1},
}

// benchItems returns n items spread round-robin over the mix's queues and
// priorities, and the weights of the queues (1 to 4).
func benchItems(m mix, n int) ([]batcher.Item[int], map[string]int) {
	names := make([]string, m.queues)
	weights := make(map[string]int, m.queues)
	for i := range names {
		names[i] = fmt.Sprint("queue-", i)
		weights[names[i]] = 1 + i%4
	}
	items := make([]batcher.Item[int], n)
	for i := range items {
		items[i] = batcher.Item[int]{Value: i, Queue: names[i%m.queues], Priority: (i / m.queues) % m.priorities}
	}
	return items, weights
}

// BenchmarkThroughput measures items per second from Add to a round on the
// system clock, with rounds of up to 1000 items. One op is one item.
//
// In mode=sync one goroutine adds a batch, then takes every ready round: the
// CPU cost of an item. In mode=pipe the benchmark goroutine adds while a
// consumer goroutine takes rounds with Next, the way the dispatcher runs;
// the producer holds back while more than 64k items are pending, as the
// dispatcher's FSM would, so that the backlog stays bounded.
func BenchmarkThroughput(b *testing.B) {
	for _, mode := range []string{"sync", "pipe"} {
		for _, m := range mixes {
			for _, batch := range []int{1, 1000} {
				b.Run(fmt.Sprintf("mode=%s/%s/batch=%d", mode, m.name, batch), func(b *testing.B) {
					if mode == "sync" {
						benchSync(b, m, batch)
					} else {
						benchPipe(b, m, batch)
					}
					b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "items/s")
				})
			}
		}
	}
}

const benchMaxItems = 1000

// newBench returns a batcher on the system clock and a pool of items.
func newBench(b *testing.B, m mix) (*batcher.Batcher[int], []batcher.Item[int]) {
	pool, weights := benchItems(m, 64*1024)
	bt, err := batcher.New[int](batcher.Config{MaxItems: benchMaxItems, MaxWait: time.Millisecond, Weights: weights})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { bt.Close() })
	return bt, pool
}

func benchSync(b *testing.B, m mix, batch int) {
	bt, pool := newBench(b, m)
	b.ReportAllocs()
	b.ResetTimer()
	got := 0
	for i := 0; i < b.N; {
		off := i % len(pool)
		n := min(batch, b.N-i, len(pool)-off)
		if err := bt.Add(pool[off : off+n]...); err != nil {
			b.Fatal(err)
		}
		i += n
		if i%benchMaxItems < n || i == b.N {
			for {
				r, ok := bt.TryNext()
				if !ok {
					break
				}
				got += len(r.Items)
			}
		}
	}
	if rest := bt.Close(); got+len(rest) != b.N {
		b.Fatalf("%d items out, want %d", got+len(rest), b.N)
	}
	b.StopTimer()
}

func benchPipe(b *testing.B, m mix, batch int) {
	const maxPending = 64 * 1024
	bt, pool := newBench(b, m)
	done := make(chan error, 1)
	b.ReportAllocs()
	b.ResetTimer()
	go func() {
		got := 0
		for got < b.N {
			r, err := bt.Next(context.Background())
			if err != nil {
				done <- err
				return
			}
			got += len(r.Items)
		}
		done <- nil
	}()
	for i := 0; i < b.N; {
		if i%(16*benchMaxItems) < batch {
			for bt.Stats().Pending > maxPending {
				runtime.Gosched()
			}
		}
		off := i % len(pool)
		n := min(batch, b.N-i, len(pool)-off)
		if err := bt.Add(pool[off : off+n]...); err != nil {
			b.Fatal(err)
		}
		i += n
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
}

// BenchmarkRound measures the cost of forming one round as it grows: size
// items over 16 queues and 4 priorities are added (untimed), then taken as
// one round (timed).
func BenchmarkRound(b *testing.B) {
	for _, size := range []int{1000, 10_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("size=%s", humanSize(size)), func(b *testing.B) {
			items, weights := benchItems(mix{queues: 16, priorities: 4}, size)
			bt, err := batcher.New[int](batcher.Config{MaxItems: size, Weights: weights, Clock: clock.NewManual(time.Time{})})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				if err := bt.Add(items...); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				r, ok := bt.TryNext()
				if !ok || len(r.Items) != size {
					b.Fatalf("round of %d items, want %d", len(r.Items), size)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*size), "ns/item")
		})
	}
}

// humanSize writes 1000 as 1k and 1000000 as 1M.
func humanSize(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprint(n/1_000_000, "M")
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprint(n/1000, "k")
	default:
		return fmt.Sprint(n)
	}
}

// BenchmarkChannelAnchor is the in-run anchor for BenchmarkThroughput's pipe
// mode: the same items through a buffered Go channel (64k slots) from one
// producer to a consumer that drains up to 1000 at a time. A channel orders
// nothing (no priorities, shares or wait bounds), so it is the floor an
// in-process hand-off costs on this machine. One op is one item.
func BenchmarkChannelAnchor(b *testing.B) {
	items, _ := benchItems(mixes[0], 1<<16)
	ch := make(chan batcher.Item[int], 64*1024)
	done := make(chan struct{})
	b.ReportAllocs()
	b.ResetTimer()
	go func() {
		defer close(done)
		round := make([]batcher.Item[int], 0, benchMaxItems)
		for got := 0; got < b.N; {
			round = append(round[:0], <-ch)
			for len(round) < benchMaxItems && got+len(round) < b.N {
				select {
				case it := <-ch:
					round = append(round, it)
					continue
				default:
				}
				break
			}
			got += len(round)
		}
	}()
	for i := 0; i < b.N; i++ {
		ch <- items[i%len(items)]
	}
	<-done
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "items/s")
}
