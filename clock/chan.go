package clock

import (
	"context"
	"sync"
	"time"
)

// Sleep waits d on c. It returns nil when d has passed, or ctx.Err() if ctx
// ended first. A d <= 0 returns at once, with ctx.Err().
func Sleep(ctx context.Context, c Clock, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	a := NewAlarm(c)
	defer a.Stop()
	a.Set(d)
	select {
	case <-a.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Ticker delivers the time on its channel C every period of a Clock, as
// time.Ticker does on the system clock (and is, on System): ticks the
// reader is not ready for are dropped. Create one with NewTicker; Stop it
// when done.
type Ticker struct {
	// C receives the Clock's time at each tick.
	C <-chan time.Time

	// sys is the ticker on System; the fields below are for other Clocks.
	sys    *time.Ticker
	c      chan time.Time
	clock  Clock
	period time.Duration

	mu struct {
		sync.Mutex
		stopped bool
		// next is the time the armed tick is due.
		next  time.Time
		timer Timer
	}
}

// NewTicker returns a Ticker whose first tick comes period after now on c.
// It panics if period is not positive, as time.NewTicker does.
func NewTicker(c Clock, period time.Duration) *Ticker {
	if period <= 0 {
		panic("clock: NewTicker with a non-positive period")
	}
	if _, ok := c.(System); ok {
		tk := time.NewTicker(period)
		return &Ticker{C: tk.C, sys: tk}
	}
	ch := make(chan time.Time, 1)
	t := &Ticker{C: ch, c: ch, clock: c, period: period}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.mu.next = c.Now().Add(period)
	t.mu.timer = c.AfterFunc(period, t.tick)
	return t
}

// tick delivers one tick and arms the next, due one period after this
// one's due time, or one period from now when the Clock has moved past it.
func (t *Ticker) tick() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.stopped {
		return
	}
	now := t.clock.Now()
	select {
	case t.c <- now:
	default:
	}
	t.mu.next = t.mu.next.Add(t.period)
	if !t.mu.next.After(now) {
		t.mu.next = now.Add(t.period)
	}
	t.mu.timer = t.clock.AfterFunc(t.mu.next.Sub(now), t.tick)
}

// Stop turns the ticker off: after Stop returns, C receives nothing.
// Stopping again does nothing.
func (t *Ticker) Stop() {
	if t.sys != nil {
		t.sys.Stop() // since Go 1.23, no value is received after Stop
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.mu.stopped = true
	t.mu.timer.Stop()
	select {
	case <-t.c:
	default:
	}
}

// Alarm delivers the time on its channel C once, at the time it was last
// set for, on a Clock: a time.Timer (which it is, on System) that is
// created stopped. Create one with NewAlarm.
type Alarm struct {
	// C receives the Clock's time when the alarm goes off.
	C <-chan time.Time

	// sys is the timer on System; the fields below are for other Clocks.
	sys   *time.Timer
	c     chan time.Time
	clock Clock

	mu struct {
		sync.Mutex
		// gen numbers the settings; a call armed for an earlier one
		// delivers nothing.
		gen   uint64
		timer Timer
	}
}

// NewAlarm returns an Alarm on c that is not set.
func NewAlarm(c Clock) *Alarm {
	if _, ok := c.(System); ok {
		t := time.NewTimer(time.Hour)
		t.Stop()
		return &Alarm{C: t.C, sys: t}
	}
	ch := make(chan time.Time, 1)
	return &Alarm{C: ch, c: ch, clock: c}
}

// Set arms the alarm to go off d from now (at once on the Clock's next
// timer run if d <= 0), replacing any earlier setting: after Set returns,
// C receives nothing for an earlier setting.
func (a *Alarm) Set(d time.Duration) {
	if a.sys != nil {
		a.sys.Reset(d) // since Go 1.23, no value of an earlier setting is received after Reset
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	gen := a.disarmLocked()
	a.mu.timer = a.clock.AfterFunc(d, func() { a.ring(gen) })
}

// Stop disarms the alarm: after Stop returns, C receives nothing until the
// next Set.
func (a *Alarm) Stop() {
	if a.sys != nil {
		a.sys.Stop() // since Go 1.23, no value is received after Stop
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.disarmLocked()
}

// disarmLocked stops the armed call, drops an undelivered value and starts
// a new setting, whose number it returns.
func (a *Alarm) disarmLocked() uint64 {
	if a.mu.timer != nil {
		a.mu.timer.Stop()
		a.mu.timer = nil
	}
	select {
	case <-a.c:
	default:
	}
	a.mu.gen++
	return a.mu.gen
}

// ring delivers the alarm of setting gen, unless it was replaced or
// stopped since.
func (a *Alarm) ring(gen uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if gen != a.mu.gen {
		return
	}
	a.mu.timer = nil
	select {
	case a.c <- a.clock.Now():
	default:
	}
}
