package clock

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Epoch returns the time a Manual starts at when NewManual is given the
// zero time.
func Epoch() time.Time { return time.Date(2025, time.January, 1, 0, 0, 0, 0, time.UTC) }

// Manual is a Clock whose time stands still until Advance moves it: tests
// drive the code under test through time without sleeping. Timers armed
// with AfterFunc fire inside Advance, in the goroutine that calls it, in
// deadline order. It is safe for concurrent use.
type Manual struct {
	mu struct {
		sync.Mutex
		now    time.Time
		seq    uint64
		timers []*manualTimer
		// armed, when not nil, is closed at the next AfterFunc, to wake
		// WaitTimers.
		armed chan struct{}
	}
}

// NewManual returns a Manual reading start, or Epoch if start is zero (code
// taking a Clock may treat a zero time as "not set").
func NewManual(start time.Time) *Manual {
	if start.IsZero() {
		start = Epoch()
	}
	c := &Manual{}
	c.mu.now = start
	return c
}

// Now returns the clock's time.
func (c *Manual) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.now
}

// AfterFunc arms a timer that calls f during the first Advance that reaches
// Now()+d. A timer with d <= 0 fires in the next Advance, even Advance(0).
func (c *Manual) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.seq++
	t := &manualTimer{c: c, when: c.mu.now.Add(max(d, 0)), seq: c.mu.seq, f: f}
	c.mu.timers = append(c.mu.timers, t)
	if c.mu.armed != nil {
		close(c.mu.armed)
		c.mu.armed = nil
	}
	return t
}

// Advance moves the clock forward by d, firing due timers in deadline order
// (ties in arming order). While a timer's function runs, Now reads that
// timer's deadline; the function may arm and stop timers, and those falling
// due within d fire too. Advances that overlap (one called from a timer's
// function, or from another goroutine) each take the clock to at least
// their own target, and Now never goes backwards; the order above holds
// within each, and their timers' functions may run at the same time.
// Advance panics if d is negative.
func (c *Manual) Advance(d time.Duration) {
	if d < 0 {
		panic("clock: Manual.Advance with a negative duration")
	}
	c.mu.Lock()
	target := c.mu.now.Add(d)
	for {
		i := c.dueLocked(target)
		if i < 0 {
			break
		}
		t := c.mu.timers[i]
		c.mu.timers = slices.Delete(c.mu.timers, i, i+1)
		if t.when.After(c.mu.now) {
			c.mu.now = t.when
		}
		c.mu.Unlock()
		t.f()
		c.mu.Lock()
	}
	if target.After(c.mu.now) {
		c.mu.now = target
	}
	c.mu.Unlock()
}

// Timers returns the number of armed timers that have neither fired nor been
// stopped.
func (c *Manual) Timers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.mu.timers)
}

// Next returns how long after Now the earliest armed timer is due, and
// whether any is armed: what the code under test waits for.
func (c *Manual) Next() (time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := c.earliestLocked()
	if i < 0 {
		return 0, false
	}
	return c.mu.timers[i].when.Sub(c.mu.now), true
}

// WaitTimers waits until at least n timers are armed, so that a test
// advances the clock only once the goroutine under test waits on it. It
// returns an error wrapping ctx.Err() if ctx ends first.
func (c *Manual) WaitTimers(ctx context.Context, n int) error {
	for {
		c.mu.Lock()
		have := len(c.mu.timers)
		if have >= n {
			c.mu.Unlock()
			return nil
		}
		if c.mu.armed == nil {
			c.mu.armed = make(chan struct{})
		}
		armed := c.mu.armed
		c.mu.Unlock()
		select {
		case <-armed:
		case <-ctx.Done():
			return fmt.Errorf("clock: waiting for %d timers, %d armed: %w", n, have, ctx.Err())
		}
	}
}

// dueLocked returns the index of the earliest timer due by target, or -1.
func (c *Manual) dueLocked(target time.Time) int {
	i := c.earliestLocked()
	if i < 0 || c.mu.timers[i].when.After(target) {
		return -1
	}
	return i
}

// earliestLocked returns the index of the earliest timer (the first armed
// among those due together), or -1 if none is armed.
func (c *Manual) earliestLocked() int {
	best := -1
	for i, t := range c.mu.timers {
		if best < 0 || t.when.Before(c.mu.timers[best].when) ||
			(t.when.Equal(c.mu.timers[best].when) && t.seq < c.mu.timers[best].seq) {
			best = i
		}
	}
	return best
}

// manualTimer is a pending call of a Manual.
type manualTimer struct {
	c    *Manual
	when time.Time
	seq  uint64
	f    func()
}

// Stop disarms the timer. It reports whether the timer was armed: false
// means it already fired (or its function is running) or was stopped.
func (t *manualTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	i := slices.Index(t.c.mu.timers, t)
	if i < 0 {
		return false
	}
	t.c.mu.timers = slices.Delete(t.c.mu.timers, i, i+1)
	return true
}
