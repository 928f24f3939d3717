package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/api"
)

// burnConfig is what `workload burn` does.
type burnConfig struct {
	duty     float64       // share of each period spent busy, in (0, 1]
	period   time.Duration // length of one busy+idle cycle
	memory   int64         // bytes allocated and touched once at the start
	duration time.Duration // how long to run; 0 until stopped
}

// parseBurn parses `workload burn`'s flags.
func parseBurn(args []string) (burnConfig, error) {
	fs := flag.NewFlagSet("burn", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	duty := fs.Float64("duty", 1, "share of each period spent computing, above 0 and at most 1")
	period := fs.Duration("period", 100*time.Millisecond, "length of one busy and idle cycle")
	memory := fs.String("memory", "0", "memory to allocate and touch at the start, such as 256Mi")
	duration := fs.Duration("duration", 0, "how long to run (0: until stopped)")
	if err := fs.Parse(args); err != nil {
		return burnConfig{}, fmt.Errorf("burn: %w", err)
	}
	mem, err := api.ParseBytes(*memory)
	var errs []error
	if err != nil {
		errs = append(errs, fmt.Errorf("-memory: %w", err))
	}
	if !(*duty > 0 && *duty <= 1) {
		errs = append(errs, fmt.Errorf("-duty %v: want above 0 and at most 1", *duty))
	}
	if *period <= 0 {
		errs = append(errs, fmt.Errorf("-period %v: want above 0", *period))
	}
	if *duration < 0 {
		errs = append(errs, fmt.Errorf("-duration %v: want 0 or more", *duration))
	}
	if fs.NArg() != 0 {
		errs = append(errs, fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	if err := errors.Join(errs...); err != nil {
		return burnConfig{}, fmt.Errorf("burn: usage: burn [-duty F] [-period D] [-memory BYTES] [-duration D]: %w", err)
	}
	return burnConfig{duty: *duty, period: *period, memory: mem, duration: *duration}, nil
}

// sink keeps the busy loop's result, so that the compiler keeps the loop.
var sink atomic.Uint64

// burn allocates c.memory and writes every page of it, so that it is
// resident, then on one thread computes for c.duty of every c.period and
// sleeps the rest, until c.duration passes (never when 0) or ctx ends. It
// returns how many busy loops it ran.
func burn(ctx context.Context, c burnConfig, stdout io.Writer) uint64 {
	mem := make([]byte, c.memory)
	for i := 0; i < len(mem); i += 4096 {
		mem[i] = 1
	}
	defer runtime.KeepAlive(mem)
	fmt.Fprintf(stdout, "burning %.0f%% of every %s with %d bytes resident\n", 100*c.duty, c.period, len(mem))
	var end <-chan time.Time
	if c.duration > 0 {
		t := time.NewTimer(c.duration)
		defer t.Stop()
		end = t.C
	}
	busy := time.Duration(float64(c.period) * c.duty)
	var loops, x uint64
	defer func() { sink.Store(x) }()
	for next := time.Now(); ; {
		for until := next.Add(busy); time.Now().Before(until); loops++ {
			for range 1000 {
				x = x*6364136223846793005 + 1442695040888963407
			}
		}
		// Behind (a full duty, or the CPU taken): go on from now rather
		// than burst to catch up.
		if next = next.Add(c.period); next.Before(time.Now()) {
			next = time.Now()
		}
		idle := time.NewTimer(time.Until(next))
		select {
		case <-ctx.Done():
			idle.Stop()
			return loops
		case <-end:
			idle.Stop()
			return loops
		case <-idle.C:
		}
	}
}

// burnCmd is `workload burn [-duty F] [-period D] [-memory BYTES]
// [-duration D]`.
func burnCmd(args []string, stdout io.Writer) error {
	c, err := parseBurn(args)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "burned %d loops\n", burn(context.Background(), c, stdout))
	return nil
}
