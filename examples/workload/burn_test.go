package main

import (
	"context"
	"io"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestParseBurn(t *testing.T) {
	c, err := parseBurn([]string{"-duty", "0.1", "-period", "50ms", "-memory", "4Mi", "-duration", "1s"})
	if err != nil {
		t.Fatal(err)
	}
	if c != (burnConfig{duty: 0.1, period: 50 * time.Millisecond, memory: 4 << 20, duration: time.Second}) {
		t.Errorf("parsed %+v", c)
	}
	if c, err := parseBurn(nil); err != nil || c.duty != 1 || c.period != 100*time.Millisecond || c.memory != 0 || c.duration != 0 {
		t.Errorf("defaults %+v, %v", c, err)
	}
	for _, args := range [][]string{
		{"-duty", "0"}, {"-duty", "1.5"}, {"-duty", "-0.1"}, {"-period", "0s"}, {"-memory", "lots"},
		{"-duration", "-1s"}, {"extra"}, {"-speed", "3"},
	} {
		if _, err := parseBurn(args); err == nil {
			t.Errorf("parseBurn(%q) = nil error, want a refusal", args)
		}
	}
	// Every problem is reported at once.
	_, err = parseBurn([]string{"-duty", "2", "-period", "-1s"})
	if err == nil || !strings.Contains(err.Error(), "-duty") || !strings.Contains(err.Error(), "-period") {
		t.Errorf("two problems: %v, want both named", err)
	}
}

// TestBurnDuty runs burn for a few periods and checks that its process
// spent about the duty's share of the wall time on the CPU: at a 20% duty
// well under the whole, and at a full duty well above the low one.
func TestBurnDuty(t *testing.T) {
	share := func(duty float64) float64 {
		c := burnConfig{duty: duty, period: 20 * time.Millisecond, duration: 400 * time.Millisecond}
		before := cpuTime(t)
		start := time.Now()
		if loops := burn(context.Background(), c, io.Discard); loops == 0 {
			t.Errorf("duty %v: no busy loop ran", duty)
		}
		return (cpuTime(t) - before).Seconds() / time.Since(start).Seconds()
	}
	low, full := share(0.2), share(1)
	t.Logf("CPU share at duty 0.2: %.2f, at duty 1: %.2f", low, full)
	if low > 0.6 {
		t.Errorf("duty 0.2 used %.2f of a CPU, want well under 1", low)
	}
	if full < 1.5*low {
		t.Errorf("duty 1 used %.2f of a CPU against %.2f at duty 0.2, want far more", full, low)
	}
}

// TestBurnStops: burn returns when its context ends, without a duration.
func TestBurnStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		burn(ctx, burnConfig{duty: 0.5, period: 10 * time.Millisecond, memory: 1 << 20}, io.Discard)
	}()
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("burn did not return within 5s of its context ending")
	}
}

// cpuTime is the CPU time (user and system) this process has used.
func cpuTime(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
