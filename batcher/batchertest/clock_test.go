package batchertest_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/batcher"
	"github.com/sluicehq/sluice/batcher/batchertest"
)

var _ batcher.Clock = (*batchertest.Clock)(nil)

func TestNewClock(t *testing.T) {
	if got := batchertest.NewClock(time.Time{}).Now(); !got.Equal(batchertest.Epoch()) {
		t.Fatalf("NewClock(zero).Now() = %v, want Epoch %v", got, batchertest.Epoch())
	}
	start := time.Date(2030, 5, 6, 7, 8, 9, 0, time.UTC)
	if got := batchertest.NewClock(start).Now(); !got.Equal(start) {
		t.Fatalf("NewClock(start).Now() = %v, want %v", got, start)
	}
}

func TestAdvanceFiresInOrder(t *testing.T) {
	c := batchertest.NewClock(time.Time{})
	start := c.Now()
	var log []string
	arm := func(name string, d time.Duration) batcher.Timer {
		return c.AfterFunc(d, func() { log = append(log, fmt.Sprintf("%s@%v", name, c.Now().Sub(start))) })
	}
	arm("c", 30*time.Millisecond)
	arm("a", 10*time.Millisecond)
	arm("b", 10*time.Millisecond)
	stopped := arm("x", 20*time.Millisecond)
	c.AfterFunc(15*time.Millisecond, func() {
		log = append(log, "chain")
		arm("d", 5*time.Millisecond)  // due at 20ms: fires in this Advance
		arm("e", 50*time.Millisecond) // due at 65ms: does not
	})
	if !stopped.Stop() {
		t.Fatal("Stop of an armed timer returned false")
	}
	if stopped.Stop() {
		t.Fatal("second Stop returned true")
	}
	c.Advance(30 * time.Millisecond)
	want := []string{"a@10ms", "b@10ms", "chain", "d@20ms", "c@30ms"}
	if !slices.Equal(log, want) {
		t.Fatalf("fired %v, want %v", log, want)
	}
	if got := c.Now().Sub(start); got != 30*time.Millisecond {
		t.Fatalf("Now after Advance = %v, want 30ms", got)
	}
	if n := c.Timers(); n != 1 {
		t.Fatalf("Timers() = %d, want 1", n)
	}
}

func TestZeroDurationFiresOnNextAdvance(t *testing.T) {
	c := batchertest.NewClock(time.Time{})
	fired := 0
	tm := c.AfterFunc(0, func() { fired++ })
	if fired != 0 {
		t.Fatal("AfterFunc called f before returning")
	}
	c.Advance(0)
	if fired != 1 {
		t.Fatalf("fired %d times, want 1", fired)
	}
	if tm.Stop() {
		t.Fatal("Stop after firing returned true")
	}
	c.Advance(time.Hour)
	if fired != 1 {
		t.Fatalf("fired %d times, want 1", fired)
	}
}

func TestAdvanceNegativePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("Advance(-1) did not panic")
		}
	}()
	batchertest.NewClock(time.Time{}).Advance(-1)
}
