// Package batchertest names package clock's manual clock as the batcher's
// tests first did.
//
// Deprecated: use clock.Manual, clock.NewManual and clock.Epoch.
package batchertest

import (
	"time"

	"github.com/sluicehq/sluice/clock"
)

// Clock is clock.Manual.
//
// Deprecated: use clock.Manual.
type Clock = clock.Manual

// NewClock returns clock.NewManual(start).
//
// Deprecated: use clock.NewManual.
func NewClock(start time.Time) *Clock { return clock.NewManual(start) }

// Epoch returns clock.Epoch().
//
// Deprecated: use clock.Epoch.
func Epoch() time.Time { return clock.Epoch() }
