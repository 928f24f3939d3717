// Package batchertest provides test helpers for package batcher: a manual
// Clock whose time moves only when the test says so.
package batchertest

import (
	"slices"
	"sync"
	"time"

	"github.com/sluicehq/sluice/batcher"
)

// Epoch returns the time a Clock starts at when NewClock is given the zero
// time.
func Epoch() time.Time { return time.Date(2025, time.January, 1, 0, 0, 0, 0, time.UTC) }

// Clock is a batcher.Clock whose time stands still until Advance moves it.
// Timers armed with AfterFunc fire inside Advance, in the goroutine that
// calls it, in deadline order. It is safe for concurrent use.
type Clock struct {
	mu struct {
		sync.Mutex
		now    time.Time
		seq    uint64
		timers []*timer
	}
}

// NewClock returns a Clock reading start, or Epoch if start is zero (the
// batcher treats a zero time as "not set").
func NewClock(start time.Time) *Clock {
	if start.IsZero() {
		start = Epoch()
	}
	c := &Clock{}
	c.mu.now = start
	return c
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.now
}

// AfterFunc arms a timer that calls f during the first Advance that reaches
// Now()+d. A timer with d <= 0 fires in the next Advance, even Advance(0).
func (c *Clock) AfterFunc(d time.Duration, f func()) batcher.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.seq++
	t := &timer{c: c, when: c.mu.now.Add(max(d, 0)), seq: c.mu.seq, f: f}
	c.mu.timers = append(c.mu.timers, t)
	return t
}

// Advance moves the clock forward by d, firing due timers in deadline order
// (ties in arming order). While a timer's function runs, Now reads that
// timer's deadline; the function may arm and stop timers, and those falling
// due within d fire too. Advance panics if d is negative.
func (c *Clock) Advance(d time.Duration) {
	if d < 0 {
		panic("batchertest: Advance with a negative duration")
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
	c.mu.now = target
	c.mu.Unlock()
}

// Timers returns the number of armed timers that have neither fired nor been
// stopped.
func (c *Clock) Timers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.mu.timers)
}

// dueLocked returns the index of the earliest timer due by target, or -1.
func (c *Clock) dueLocked(target time.Time) int {
	best := -1
	for i, t := range c.mu.timers {
		if t.when.After(target) {
			continue
		}
		if best < 0 || t.when.Before(c.mu.timers[best].when) ||
			(t.when.Equal(c.mu.timers[best].when) && t.seq < c.mu.timers[best].seq) {
			best = i
		}
	}
	return best
}

// timer is a pending call of a Clock.
type timer struct {
	c    *Clock
	when time.Time
	seq  uint64
	f    func()
}

// Stop disarms the timer. It reports whether the timer was armed: false
// means it already fired (or its function is running) or was stopped.
func (t *timer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	i := slices.Index(t.c.mu.timers, t)
	if i < 0 {
		return false
	}
	t.c.mu.timers = slices.Delete(t.c.mu.timers, i, i+1)
	return true
}
