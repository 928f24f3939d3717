package storebench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Store is what Drive writes to: Put returns once the write is committed.
type Store interface {
	Put(ctx context.Context, key string, value []byte) error
}

// Config says how hard and how long Drive pushes a store.
type Config struct {
	// Writers is the number of concurrent writers, each with one write in
	// flight at a time.
	Writers int
	// ValueBytes is the size of every value.
	ValueBytes int
	// Duration is how long the writers run after Warmup.
	Duration time.Duration
	// Warmup runs the writers before measuring, to open connections and
	// fill caches.
	Warmup time.Duration
}

// Validate reports what is wrong with c.
func (c Config) Validate() error {
	var errs []error
	if c.Writers < 1 {
		errs = append(errs, fmt.Errorf("writers %d: want at least 1", c.Writers))
	}
	if c.ValueBytes < 1 || c.ValueBytes > 1<<24 {
		errs = append(errs, fmt.Errorf("value bytes %d: want 1 to 16 MiB", c.ValueBytes))
	}
	if c.Duration <= 0 {
		errs = append(errs, fmt.Errorf("duration %v: want more than 0", c.Duration))
	}
	if c.Warmup < 0 {
		errs = append(errs, fmt.Errorf("warmup %v: want 0 or more", c.Warmup))
	}
	return errors.Join(errs...)
}

// Result is what one Drive measured.
type Result struct {
	Writes       int64   `json:"writes"`
	Errors       int64   `json:"errors"`
	WritesPerSec float64 `json:"writes_per_sec"`
	MBPerSec     float64 `json:"mb_per_sec"`
	P50Ms        float64 `json:"p50_ms"`
	P99Ms        float64 `json:"p99_ms"`
	// FirstError is the first write error seen, if any.
	FirstError string `json:"first_error,omitempty"`
}

// Drive runs cfg.Writers writers against s: each writes cfg.ValueBytes
// values under its own keys, one write at a time, for cfg.Warmup and then
// cfg.Duration, and Drive reports what the measured part committed. It
// returns early, with what it measured, if ctx ends.
func Drive(ctx context.Context, s Store, cfg Config) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, fmt.Errorf("drive: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type tally struct {
		lat    []time.Duration
		errs   int64
		first  error
		writes int64
	}
	tallies := make([]tally, cfg.Writers)
	start := time.Now()
	measureFrom := start.Add(cfg.Warmup)
	end := measureFrom.Add(cfg.Duration)
	var wg sync.WaitGroup
	for w := range cfg.Writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := &tallies[w]
			value := make([]byte, cfg.ValueBytes)
			for i := range value {
				value[i] = byte('a' + (w+i)%26)
			}
			for i := 0; ctx.Err() == nil; i++ {
				began := time.Now()
				if !began.Before(end) {
					return
				}
				err := s.Put(ctx, fmt.Sprintf("bench/%04d/%08d", w, i), value)
				done := time.Now()
				if began.Before(measureFrom) {
					continue
				}
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					t.errs++
					if t.first == nil {
						t.first = err
					}
					continue
				}
				t.writes++
				t.lat = append(t.lat, done.Sub(began))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(measureFrom)
	var r Result
	var all []time.Duration
	for _, t := range tallies {
		r.Writes += t.writes
		r.Errors += t.errs
		all = append(all, t.lat...)
		if t.first != nil && r.FirstError == "" {
			r.FirstError = t.first.Error()
		}
	}
	if elapsed > 0 {
		r.WritesPerSec = float64(r.Writes) / elapsed.Seconds()
		r.MBPerSec = r.WritesPerSec * float64(cfg.ValueBytes) / 1e6
	}
	slices.Sort(all)
	r.P50Ms = percentile(all, 0.50)
	r.P99Ms = percentile(all, 0.99)
	return r, ctx.Err()
}

// percentile returns the q-quantile of sorted latencies in milliseconds
// (nearest rank), or 0 for none.
func percentile(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	i = min(max(i, 0), len(sorted)-1)
	return float64(sorted[i]) / float64(time.Millisecond)
}
