package clock

import "time"

// Clock is a source of time and of timed calls.
//
// A Clock may also implement Sincer; callers on hot paths then use Since
// instead of Now. The system clock does, because time.Since reads only the
// monotonic clock, which is cheaper than time.Now.
//
// Implementations must be safe for concurrent use.
type Clock interface {
	// Now returns the current time. Successive calls never go backwards.
	Now() time.Time
	// AfterFunc arranges for f to be called once, in any goroutine, when at
	// least d has passed, unless the returned Timer is stopped first.
	// AfterFunc must not call f before it returns, and must not hold any lock
	// of its own while f runs: f may take its caller's locks and may call the
	// Clock again.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending call armed by Clock.AfterFunc.
type Timer interface {
	// Stop prevents the call from happening. It reports whether it did so:
	// false means the call already happened or is under way. Callers must
	// tolerate a call that happens after Stop returned false.
	Stop() bool
}

// Sincer is the optional capability of a Clock described in its doc: Since
// returns Now().Sub(t) for a time t the Clock returned.
type Sincer interface {
	Since(t time.Time) time.Duration
}

// Since returns the time elapsed on c since t, through c's Since method if
// it has one.
func Since(c Clock, t time.Time) time.Duration {
	if s, ok := c.(Sincer); ok {
		return s.Since(t)
	}
	return c.Now().Sub(t)
}

// System is the operating system's clock, through package time. Its zero
// value is ready to use.
type System struct{}

var _ Sincer = System{}

// Now returns time.Now().
func (System) Now() time.Time { return time.Now() }

// Since returns time.Since(t).
func (System) Since(t time.Time) time.Duration { return time.Since(t) }

// AfterFunc wraps time.AfterFunc.
func (System) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// OrSystem returns c, or System if c is nil: the default of the Clock
// fields of configs.
func OrSystem(c Clock) Clock {
	if c == nil {
		return System{}
	}
	return c
}
