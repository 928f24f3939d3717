package sim

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/nodelet/runtime"
)

// TestClock checks the host's clock: pods end in the order their run
// times are over, whatever order they started in, and not before; a pod
// stopped sooner is dropped from the queue before the ended ones are
// more than half of it (and more than maxStale); Close ends the rest and
// stops the clock goroutine.
func TestClock(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(uint64(seed), 0))
	h := NewHost()
	rt := New(h)
	ctx := context.Background()
	spec := func(id string, run time.Duration) runtime.PodSpec {
		return runtime.PodSpec{ID: id, Sim: &runtime.SimSpec{RunTime: run, ExitCode: 3},
			Containers: []runtime.ContainerSpec{{Name: "c0", Image: api.Image{Rootfs: "/x"}, Args: []string{"x"}}}}
	}
	var (
		mu   sync.Mutex
		ends []time.Time // of the pods as they ended
		wg   sync.WaitGroup
	)
	const n = 40
	perm := r.Perm(n)
	for _, i := range perm { // started out of order; pod i runs (i+1)*2ms
		id := fmt.Sprintf("p%d", i)
		if err := rt.Start(ctx, spec(id, time.Duration(i+1)*2*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		if err := rt.Notify(id, func(e runtime.Exit) {
			defer wg.Done()
			if e.Code != 3 {
				t.Errorf("%s ended with %d, want 3", id, e.Code)
			}
			h.mu.Lock()
			p := h.mu.pods[id]
			h.mu.Unlock()
			over := p.started.Add(p.spec.Sim.RunTime)
			if p.finished.Before(over) {
				t.Errorf("%s ended at %v, before its run time was over at %v", id, p.finished, over)
			}
			mu.Lock()
			ends = append(ends, over)
			mu.Unlock()
		}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 10 {
		if err := rt.Start(ctx, spec(fmt.Sprintf("long%d", i), time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	// A run time whose end is past what the queue's clock can count.
	if err := rt.Start(ctx, spec("forever", time.Duration(math.MaxInt64))); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := rt.Stop(ctx, fmt.Sprintf("long%d", i), 0); err != nil {
			t.Fatal(err)
		}
	}
	waited := make(chan struct{})
	go func() { wg.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(10 * time.Second):
		t.Fatalf("the short pods had not all ended 10 s after they started")
	}
	if !slices.IsSortedFunc(ends, time.Time.Compare) || len(ends) != n {
		t.Errorf("%d pods ended, with run times over at %v; want %d, in that order", len(ends), ends, n)
	}
	checkQueue := func(running int) {
		t.Helper()
		h.mu.Lock()
		defer h.mu.Unlock()
		live := 0
		for _, e := range h.mu.ends {
			if !e.p.ended {
				live++
			}
		}
		stale := len(h.mu.ends) - live
		if live != running || stale != h.mu.stale || (stale > maxStale && 2*stale > len(h.mu.ends)) {
			t.Errorf("queue of %d: %d running (want %d), %d ended (counted %d; at most %d or half)",
				len(h.mu.ends), live, running, stale, h.mu.stale, maxStale)
		}
	}
	h.mu.Lock()
	forever := h.mu.pods["forever"]
	ended, exit := forever.ended, forever.exit
	h.mu.Unlock()
	if ended {
		t.Errorf("the pod that runs for centuries ended: %+v", exit)
	}
	checkQueue(6) // the short ones ended, 5 of the 10 long ones were stopped
	for i := 10; i < 400; i++ {
		if err := rt.Start(ctx, spec(fmt.Sprintf("long%d", i), time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	for i := 10; i < 390; i++ {
		if err := rt.Stop(ctx, fmt.Sprintf("long%d", i), 0); err != nil {
			t.Fatal(err)
		}
		if i%50 == 0 {
			checkQueue(6 + 399 - i)
		}
	}
	checkQueue(16)
	h.Close()
	select {
	case <-h.clockDone:
	default:
		t.Fatal("Close returned before the clock goroutine did")
	}
	for i := range 400 {
		if e, err := rt.Wait(ctx, fmt.Sprintf("long%d", i)); err != nil || (e.Code != 137 && e.Code != 143) {
			t.Errorf("long%d: %+v, %v; want ended by Stop (143) or Close (137)", i, e, err)
		}
	}
}
