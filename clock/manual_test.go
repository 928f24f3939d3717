package clock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/clock"
)

var (
	_ clock.Clock  = (*clock.Manual)(nil)
	_ clock.Clock  = clock.System{}
	_ clock.Sincer = clock.System{}
)

func TestNewManual(t *testing.T) {
	if got := clock.NewManual(time.Time{}).Now(); !got.Equal(clock.Epoch()) {
		t.Fatalf("NewManual(zero).Now() = %v, want Epoch %v", got, clock.Epoch())
	}
	start := time.Date(2030, 5, 6, 7, 8, 9, 0, time.UTC)
	if got := clock.NewManual(start).Now(); !got.Equal(start) {
		t.Fatalf("NewManual(start).Now() = %v, want %v", got, start)
	}
}

func TestAdvanceFiresInOrder(t *testing.T) {
	c := clock.NewManual(time.Time{})
	start := c.Now()
	var log []string
	arm := func(name string, d time.Duration) clock.Timer {
		return c.AfterFunc(d, func() { log = append(log, fmt.Sprintf("%s@%v", name, c.Now().Sub(start))) })
	}
	arm("c", 30*time.Millisecond)
	arm("a", 10*time.Millisecond)
	arm("b", 10*time.Millisecond)
	stopped := arm("x", 20*time.Millisecond)
	c.AfterFunc(15*time.Millisecond, func() {
		log = append(log, "chain")
		arm("d", 5*time.Millisecond)  // due at 20ms: fires in this Advance
		arm("e", 50*time.Millisecond) // due at 65ms: does not
	})
	if !stopped.Stop() {
		t.Fatal("Stop of an armed timer returned false")
	}
	if stopped.Stop() {
		t.Fatal("second Stop returned true")
	}
	c.Advance(30 * time.Millisecond)
	want := []string{"a@10ms", "b@10ms", "chain", "d@20ms", "c@30ms"}
	if !slices.Equal(log, want) {
		t.Fatalf("fired %v, want %v", log, want)
	}
	if got := c.Now().Sub(start); got != 30*time.Millisecond {
		t.Fatalf("Now after Advance = %v, want 30ms", got)
	}
	if n := c.Timers(); n != 1 {
		t.Fatalf("Timers() = %d, want 1", n)
	}
}

func TestZeroDurationFiresOnNextAdvance(t *testing.T) {
	c := clock.NewManual(time.Time{})
	fired := 0
	tm := c.AfterFunc(0, func() { fired++ })
	if fired != 0 {
		t.Fatal("AfterFunc called f before returning")
	}
	c.Advance(0)
	if fired != 1 {
		t.Fatalf("fired %d times, want 1", fired)
	}
	if tm.Stop() {
		t.Fatal("Stop after firing returned true")
	}
	c.Advance(time.Hour)
	if fired != 1 {
		t.Fatalf("fired %d times, want 1", fired)
	}
}

func TestNext(t *testing.T) {
	c := clock.NewManual(time.Time{})
	if d, ok := c.Next(); ok {
		t.Fatalf("Next() = %v, true with no timer armed", d)
	}
	c.AfterFunc(time.Hour, func() {})
	stopped := c.AfterFunc(time.Minute, func() {})
	c.AfterFunc(2*time.Minute, func() {})
	stopped.Stop()
	if d, ok := c.Next(); !ok || d != 2*time.Minute {
		t.Fatalf("Next() = %v, %v; want 2m, true", d, ok)
	}
	c.Advance(90 * time.Second)
	if d, ok := c.Next(); !ok || d != 30*time.Second {
		t.Fatalf("Next() after 90s = %v, %v; want 30s, true", d, ok)
	}
}

func TestAdvanceNegativePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("Advance(-1) did not panic")
		}
	}()
	clock.NewManual(time.Time{}).Advance(-1)
}

func TestWaitTimers(t *testing.T) {
	c := clock.NewManual(time.Time{})
	armed := make(chan struct{})
	go func() {
		defer close(armed)
		c.AfterFunc(time.Second, func() {})
		c.AfterFunc(time.Second, func() {})
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.WaitTimers(ctx, 2); err != nil {
		t.Fatalf("WaitTimers(2): %v", err)
	}
	<-armed
	if n := c.Timers(); n != 2 {
		t.Fatalf("Timers() = %d after WaitTimers(2), want 2", n)
	}
}

func TestWaitTimersGivesUp(t *testing.T) {
	c := clock.NewManual(time.Time{})
	c.AfterFunc(time.Second, func() {})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := c.WaitTimers(ctx, 2)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitTimers(2) with one timer and a canceled context = %v, want context.Canceled", err)
	}
}

func TestSince(t *testing.T) {
	c := clock.NewManual(time.Time{})
	t0 := c.Now()
	c.Advance(3 * time.Second)
	if got := clock.Since(c, t0); got != 3*time.Second {
		t.Fatalf("Since on a Manual = %v, want 3s", got)
	}
	if got := clock.Since(clock.System{}, time.Now().Add(-time.Hour)); got < time.Hour {
		t.Fatalf("Since on System of an hour ago = %v", got)
	}
}

func TestOrSystem(t *testing.T) {
	if _, ok := clock.OrSystem(nil).(clock.System); !ok {
		t.Fatal("OrSystem(nil) is not System")
	}
	m := clock.NewManual(time.Time{})
	if clock.OrSystem(m) != clock.Clock(m) {
		t.Fatal("OrSystem(m) is not m")
	}
}

// TestOverlappingAdvances: an Advance from a timer's function, or from
// another goroutine while a timer's function runs, takes the clock past
// the outer Advance's target, and the outer one does not take it back.
func TestOverlappingAdvances(t *testing.T) {
	c := clock.NewManual(time.Time{})
	start := c.Now()
	c.AfterFunc(8*time.Millisecond, func() { c.Advance(5 * time.Millisecond) })
	c.Advance(10 * time.Millisecond)
	if got := c.Now().Sub(start); got != 13*time.Millisecond {
		t.Fatalf("Now after Advance(10ms) whose timer at 8ms advanced 5ms = %v, want 13ms", got)
	}

	start = c.Now()
	entered, release := make(chan struct{}), make(chan struct{})
	c.AfterFunc(8*time.Millisecond, func() {
		close(entered)
		<-release
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Advance(10 * time.Millisecond)
	}()
	<-entered
	c.Advance(5 * time.Millisecond)
	close(release)
	<-done
	if got := c.Now().Sub(start); got != 13*time.Millisecond {
		t.Fatalf("Now after Advance(10ms) and, from 8ms, Advance(5ms) = %v, want 13ms", got)
	}
}

// TestManualConcurrent arms, stops and fires timers and reads the time
// from several goroutines at once (run it with -race): Now never goes
// backwards, a timer fires at most once and not before its deadline, and
// one whose Stop returned true never fires.
func TestManualConcurrent(t *testing.T) {
	c := clock.NewManual(time.Time{})
	const workers, rounds = 4, 200
	var wg sync.WaitGroup
	errs := make(chan error, workers*(rounds+1))
	for w := range workers {
		wg.Go(func() {
			last := c.Now()
			for i := range rounds {
				var fired atomic.Int32
				firedOnce := make(chan struct{})
				due := c.Now().Add(time.Duration(i%5) * time.Millisecond)
				tm := c.AfterFunc(time.Duration(i%5)*time.Millisecond, func() {
					if now := c.Now(); now.Before(due) {
						errs <- fmt.Errorf("worker %d: timer due at %v fired at %v", w, due, now)
					}
					if fired.Add(1) == 1 {
						close(firedOnce)
					}
				})
				c.Advance(time.Duration(w) * time.Millisecond)
				stopped := i%3 == 0 && tm.Stop()
				c.Advance(5 * time.Millisecond)
				if !stopped {
					// Due now; another goroutine's Advance may be firing it.
					select {
					case <-firedOnce:
					case <-time.After(10 * time.Second):
					}
				}
				if n := fired.Load(); n > 1 || (stopped && n != 0) || (!stopped && n != 1) {
					errs <- fmt.Errorf("worker %d round %d: fired %d times, Stop returned %v", w, i, n, stopped)
					return
				}
				now := c.Now()
				if now.Before(last) {
					errs <- fmt.Errorf("worker %d: Now went from %v back to %v", w, last, now)
					return
				}
				last = now
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := c.Timers(); n != 0 {
		t.Errorf("%d timers armed after every one fired or was stopped", n)
	}
}
