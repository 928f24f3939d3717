package batcher

import "time"

// Clock is the batcher's source of time. It is injected through Config.Clock
// so that tests can drive time by hand (see package batchertest); the default
// is the system clock.
//
// A Clock may also have a method Since(t time.Time) time.Duration returning
// Now().Sub(t) for the times it returned; the batcher then uses it instead of
// Now on hot paths. The system clock does, because time.Since reads only the
// monotonic clock, which is cheaper than time.Now.
//
// Implementations must be safe for concurrent use.
type Clock interface {
	// Now returns the current time. Successive calls never go backwards.
	Now() time.Time
	// AfterFunc arranges for f to be called once, in any goroutine, when at
	// least d has passed, unless the returned Timer is stopped first.
	// AfterFunc must not call f before it returns, and must not hold any lock
	// of its own while f runs: f takes the batcher's lock.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending call armed by Clock.AfterFunc.
type Timer interface {
	// Stop prevents the call from happening. It reports whether it did so:
	// false means the call already happened or is under way. The batcher
	// tolerates a call that happens after Stop returned false.
	Stop() bool
}

// sinceClock is the optional capability of a Clock described in its doc.
type sinceClock interface {
	Since(t time.Time) time.Duration
}

// systemClock is the Clock used when Config.Clock is nil.
type systemClock struct{}

// Now returns time.Now().
func (systemClock) Now() time.Time { return time.Now() }

// Since returns time.Since(t).
func (systemClock) Since(t time.Time) time.Duration { return time.Since(t) }

// AfterFunc wraps time.AfterFunc.
func (systemClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
