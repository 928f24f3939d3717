package batcher

import "github.com/sluicehq/sluice/clock"

// Clock is the batcher's source of time, injected through Config.Clock so
// that tests can drive time by hand (clock.Manual); the default is the
// system clock. The batcher uses a Clock's Since (clock.Sincer) on hot
// paths when it has one. AfterFunc's f takes the batcher's lock.
type Clock = clock.Clock

// Timer is a pending call armed by Clock.AfterFunc.
type Timer = clock.Timer
