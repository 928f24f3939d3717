package batcher

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/sluicehq/sluice/clock"
)

// Defaults for the zero values of Config.
const (
	// DefaultMaxItems is the round size used when Config.MaxItems is 0.
	DefaultMaxItems = 10000
	// DefaultMaxWait is the wait bound used when Config.MaxWait is 0.
	DefaultMaxWait = 10 * time.Millisecond
	// DefaultQueueWeight is the weight used when Config.DefaultWeight is 0.
	DefaultQueueWeight = 1
)

// ErrInvalidConfig is wrapped by every error Config.Validate and New return.
var ErrInvalidConfig = errors.New("batcher: invalid config")

// Config sets the bounds of rounds and the shares of queues. Its zero value
// is a valid configuration: every zero field means the documented default.
// New copies the Config; changing it (or its Weights map) afterwards has no
// effect on the Batcher.
type Config struct {
	// MaxItems is the most items a round holds. A round closes as soon as
	// this many items are eligible. Must not be negative; 0 means
	// DefaultMaxItems (10000).
	MaxItems int
	// MaxWait bounds how long an item waits for its round to fill: a round
	// closes, with fewer than MaxItems items, once the oldest eligible item's
	// enqueue time is MaxWait in the past. Must not be negative; 0 means
	// DefaultMaxWait (10ms). For rounds that close as soon as anything is
	// eligible, use 1ns.
	MaxWait time.Duration
	// Weights maps a queue name to its weight: among queues of one priority
	// that all have eligible items, a queue receives items in proportion to
	// its weight. Every weight must be positive. Queues not listed get
	// DefaultWeight. Default: empty, so every queue gets DefaultWeight.
	Weights map[string]int
	// DefaultWeight is the weight of a queue not listed in Weights. Must not
	// be negative; 0 means DefaultQueueWeight (1).
	DefaultWeight int
	// Clock supplies the time and the timers that close rounds by wait and
	// end backoffs. Default (nil): the system clock, time.Now and
	// time.AfterFunc.
	Clock Clock
}

// Validate reports every problem of the configuration at once, as an error
// that wraps ErrInvalidConfig and one error per problem (errors.Join). It
// returns nil if the configuration is valid. Zero values are valid: they
// stand for the defaults.
func (c Config) Validate() error {
	var problems []error
	if c.MaxItems < 0 {
		problems = append(problems, fmt.Errorf("invalid MaxItems %d: want >= 0", c.MaxItems))
	}
	if c.MaxWait < 0 {
		problems = append(problems, fmt.Errorf("invalid MaxWait %v: want >= 0", c.MaxWait))
	}
	if c.DefaultWeight < 0 {
		problems = append(problems, fmt.Errorf("invalid DefaultWeight %d: want >= 0", c.DefaultWeight))
	}
	for _, name := range slices.Sorted(maps.Keys(c.Weights)) {
		if w := c.Weights[name]; w <= 0 {
			problems = append(problems, fmt.Errorf("invalid Weights[%q] %d: want > 0", name, w))
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrInvalidConfig, errors.Join(problems...))
}

// withDefaults returns a copy of c with zero fields set to their defaults and
// its own Weights map.
func (c Config) withDefaults() Config {
	if c.MaxItems == 0 {
		c.MaxItems = DefaultMaxItems
	}
	if c.MaxWait == 0 {
		c.MaxWait = DefaultMaxWait
	}
	if c.DefaultWeight == 0 {
		c.DefaultWeight = DefaultQueueWeight
	}
	c.Clock = clock.OrSystem(c.Clock)
	c.Weights = maps.Clone(c.Weights)
	return c
}

// weight returns the weight of the named queue.
func (c *Config) weight(queue string) int {
	if w, ok := c.Weights[queue]; ok {
		return w
	}
	return c.DefaultWeight
}
