package clock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/clock"
)

// recv returns what ch holds now, without waiting.
func recv(ch <-chan time.Time) (time.Time, bool) {
	select {
	case v := <-ch:
		return v, true
	default:
		return time.Time{}, false
	}
}

func TestTickerOnManual(t *testing.T) {
	c := clock.NewManual(time.Time{})
	start := c.Now()
	tk := clock.NewTicker(c, 10*time.Millisecond)
	c.Advance(9 * time.Millisecond)
	if v, ok := recv(tk.C); ok {
		t.Fatalf("tick at %v, before the period", v.Sub(start))
	}
	c.Advance(time.Millisecond)
	if v, ok := recv(tk.C); !ok || v.Sub(start) != 10*time.Millisecond {
		t.Fatalf("first tick = %v, %v; want at 10ms", v.Sub(start), ok)
	}
	// Ticks the reader misses are dropped; the phase is kept.
	c.Advance(35 * time.Millisecond)
	if v, ok := recv(tk.C); !ok || v.Sub(start) != 20*time.Millisecond {
		t.Fatalf("tick after missing some = %v, %v; want the one at 20ms held", v.Sub(start), ok)
	}
	if _, ok := recv(tk.C); ok {
		t.Fatal("C held more than one tick")
	}
	c.Advance(5 * time.Millisecond)
	if v, ok := recv(tk.C); !ok || v.Sub(start) != 50*time.Millisecond {
		t.Fatalf("next tick = %v, %v; want at 50ms", v.Sub(start), ok)
	}
	c.Advance(10 * time.Millisecond) // a tick left in C
	tk.Stop()
	tk.Stop()
	c.Advance(time.Second)
	if v, ok := recv(tk.C); ok {
		t.Fatalf("tick at %v after Stop", v.Sub(start))
	}
	if n := c.Timers(); n != 0 {
		t.Fatalf("%d timers armed after Stop", n)
	}
}

func TestTickerRefusesNonPositivePeriod(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("NewTicker(0) did not panic")
		}
	}()
	clock.NewTicker(clock.NewManual(time.Time{}), 0)
}

func TestTickerOnSystem(t *testing.T) {
	tk := clock.NewTicker(clock.System{}, time.Millisecond)
	defer tk.Stop()
	for range 3 {
		select {
		case <-tk.C:
		case <-time.After(10 * time.Second):
			t.Fatal("no tick in 10s from a 1ms ticker")
		}
	}
}

func TestAlarmOnSystem(t *testing.T) {
	a := clock.NewAlarm(clock.System{})
	a.Set(time.Hour)
	a.Set(time.Millisecond)
	select {
	case <-a.C:
	case <-time.After(10 * time.Second):
		t.Fatal("an alarm set for 1ms did not go off in 10s")
	}
	a.Set(time.Millisecond)
	a.Stop()
	a.Set(time.Hour)
	if _, ok := recv(a.C); ok {
		t.Fatal("C holds the value of a stopped setting")
	}
	a.Stop()
}

func TestAlarm(t *testing.T) {
	c := clock.NewManual(time.Time{})
	a := clock.NewAlarm(c)
	c.Advance(time.Hour)
	if _, ok := recv(a.C); ok {
		t.Fatal("an alarm never set went off")
	}
	start := c.Now()
	a.Set(10 * time.Millisecond)
	c.Advance(10 * time.Millisecond)
	if v, ok := recv(a.C); !ok || v.Sub(start) != 10*time.Millisecond {
		t.Fatalf("alarm = %v, %v; want at 10ms", v.Sub(start), ok)
	}
	c.Advance(time.Hour)
	if _, ok := recv(a.C); ok {
		t.Fatal("the alarm went off twice for one Set")
	}

	// Set replaces an earlier setting, whether it went off or not.
	start = c.Now()
	a.Set(5 * time.Millisecond)
	c.Advance(5 * time.Millisecond) // goes off; not received
	a.Set(20 * time.Millisecond)
	if _, ok := recv(a.C); ok {
		t.Fatal("C holds the value of a replaced setting")
	}
	a.Set(30 * time.Millisecond)
	c.Advance(25 * time.Millisecond)
	if v, ok := recv(a.C); ok {
		t.Fatalf("the replaced setting went off at %v", v.Sub(start))
	}
	c.Advance(10 * time.Millisecond)
	if v, ok := recv(a.C); !ok || v.Sub(start) != 35*time.Millisecond {
		t.Fatalf("alarm = %v, %v; want at 35ms", v.Sub(start), ok)
	}

	// Stop disarms, and drops an undelivered value.
	a.Set(time.Millisecond)
	a.Stop()
	c.Advance(time.Hour)
	if _, ok := recv(a.C); ok {
		t.Fatal("a stopped alarm went off")
	}
	a.Set(time.Millisecond)
	c.Advance(time.Millisecond)
	a.Stop()
	if _, ok := recv(a.C); ok {
		t.Fatal("C holds a value after Stop")
	}
	if n := c.Timers(); n != 0 {
		t.Fatalf("%d timers armed after Stop", n)
	}
}

func TestSleep(t *testing.T) {
	c := clock.NewManual(time.Time{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- clock.Sleep(ctx, c, time.Minute) }()
	if err := c.WaitTimers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	c.Advance(59 * time.Second)
	select {
	case err := <-done:
		t.Fatalf("Sleep(1m) returned %v after 59s", err)
	default:
	}
	c.Advance(time.Second)
	if err := <-done; err != nil {
		t.Fatalf("Sleep(1m) after 1m = %v", err)
	}

	if err := clock.Sleep(ctx, c, 0); err != nil {
		t.Fatalf("Sleep(0) = %v", err)
	}
	cctx, ccancel := context.WithCancel(context.Background())
	ccancel()
	if err := clock.Sleep(cctx, c, time.Minute); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep with a canceled context = %v, want context.Canceled", err)
	}
	if n := c.Timers(); n != 0 {
		t.Fatalf("%d timers armed after a canceled Sleep", n)
	}
}

// TestStopWhileAdvancing stops tickers and alarms while another goroutine
// fires them (run it with -race): once Stop has returned, C receives
// nothing, however the two interleave.
func TestStopWhileAdvancing(t *testing.T) {
	c := clock.NewManual(time.Time{})
	for i := range 200 {
		tk := clock.NewTicker(c, time.Millisecond)
		a := clock.NewAlarm(c)
		a.Set(time.Duration(i%3) * time.Millisecond)
		done := make(chan struct{})
		go func() {
			defer close(done)
			for range 5 {
				c.Advance(time.Millisecond)
			}
		}()
		tk.Stop()
		a.Stop()
		<-done
		if v, ok := recv(tk.C); ok {
			t.Fatalf("round %d: tick at %v after Stop", i, v)
		}
		if v, ok := recv(a.C); ok {
			t.Fatalf("round %d: alarm at %v after Stop", i, v)
		}
	}
	if n := c.Timers(); n != 0 {
		t.Fatalf("%d timers armed after every ticker and alarm stopped", n)
	}
}
