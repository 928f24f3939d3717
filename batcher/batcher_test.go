package batcher_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/batcher"
	"github.com/sluicehq/sluice/clock"
)

// newManual returns a batcher of ints on a manual clock.
func newManual(t *testing.T, cfg batcher.Config) (*batcher.Batcher[int], *clock.Manual) {
	t.Helper()
	c := clock.NewManual(time.Time{})
	cfg.Clock = c
	b, err := batcher.New[int](cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return b, c
}

// items returns n items of queue q with values from, from+1, ...
func items(q string, from, n int) []batcher.Item[int] {
	out := make([]batcher.Item[int], n)
	for i := range out {
		out[i] = batcher.Item[int]{Value: from + i, Queue: q}
	}
	return out
}

// nextAsync calls Next in a goroutine and delivers its result.
func nextAsync(ctx context.Context, b *batcher.Batcher[int]) <-chan result {
	ch := make(chan result, 1)
	go func() {
		r, err := b.Next(ctx)
		ch <- result{r, err}
	}()
	return ch
}

type result struct {
	round batcher.Round[int]
	err   error
}

// await returns the result, failing the test if none comes in a generous
// time: only a hang makes it fail.
func await(t *testing.T, ch <-chan result) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("Next did not return")
		return result{}
	}
}

// waitTimers waits until the clock has n armed timers, which shows that a
// Next call has gone to sleep.
func waitTimers(t *testing.T, c *clock.Manual, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.WaitTimers(ctx, n); err != nil {
		t.Fatal(err)
	}
}

func values(r batcher.Round[int]) []int {
	out := make([]int, len(r.Items))
	for i, it := range r.Items {
		out[i] = it.Value
	}
	return out
}

func TestDefaults(t *testing.T) {
	b, clk := newManual(t, batcher.Config{})
	if err := b.Add(items("a", 0, batcher.DefaultMaxItems-1)...); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.TryNext(); ok {
		t.Fatal("round ready below DefaultMaxItems and before DefaultMaxWait")
	}
	if err := b.Add(items("a", batcher.DefaultMaxItems, 2)...); err != nil {
		t.Fatal(err)
	}
	r, ok := b.TryNext()
	if !ok || r.Reason != batcher.ReasonSize || len(r.Items) != batcher.DefaultMaxItems {
		t.Fatalf("got ok=%v reason=%v n=%d, want a size round of %d", ok, r.Reason, len(r.Items), batcher.DefaultMaxItems)
	}
	clk.Advance(batcher.DefaultMaxWait - 1)
	if _, ok := b.TryNext(); ok {
		t.Fatal("round ready before DefaultMaxWait")
	}
	clk.Advance(1)
	if r, ok := b.TryNext(); !ok || r.Reason != batcher.ReasonWait || len(r.Items) != 1 {
		t.Fatalf("got ok=%v reason=%v n=%d, want a wait round of 1", ok, r.Reason, len(r.Items))
	}
}

func TestValidate(t *testing.T) {
	cfg := batcher.Config{MaxItems: -1, MaxWait: -1, DefaultWeight: -1, Weights: map[string]int{"a": 0, "b": 1}}
	err := cfg.Validate()
	if !errors.Is(err, batcher.ErrInvalidConfig) {
		t.Fatalf("Validate = %v, want ErrInvalidConfig", err)
	}
	var joined interface{ Unwrap() []error }
	if !errors.As(err, &joined) {
		t.Fatalf("Validate = %v, want joined problems", err)
	}
	problems := 0
	for _, e := range joined.Unwrap() {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			problems += len(j.Unwrap())
		}
	}
	if problems != 4 {
		t.Fatalf("Validate reported %d problems, want 4: %v", problems, err)
	}
	if _, err := batcher.New[int](cfg); !errors.Is(err, batcher.ErrInvalidConfig) {
		t.Fatalf("New = %v, want ErrInvalidConfig", err)
	}
	if err := (batcher.Config{}).Validate(); err != nil {
		t.Fatalf("zero Config: %v", err)
	}
}

func TestNewCopiesWeights(t *testing.T) {
	weights := map[string]int{"a": 2}
	b, _ := newManual(t, batcher.Config{MaxItems: 3, Weights: weights})
	weights["a"] = 1
	weights["b"] = 5
	if err := b.Add(append(items("a", 0, 3), items("b", 10, 3)...)...); err != nil {
		t.Fatal(err)
	}
	r, _ := b.TryNext()
	if got, want := fmt.Sprint(values(r)), "[0 1 10]"; got != want {
		t.Fatalf("round %s, want %s (weights as at New)", got, want)
	}
}

func TestReasonString(t *testing.T) {
	for r, want := range map[batcher.Reason]string{batcher.ReasonSize: "size", batcher.ReasonWait: "wait", 7: "Reason(7)"} {
		if got := r.String(); got != want {
			t.Errorf("Reason(%d).String() = %q, want %q", r, got, want)
		}
	}
}

func TestNextBlocksUntilMaxWait(t *testing.T) {
	b, clk := newManual(t, batcher.Config{MaxItems: 10, MaxWait: 40 * time.Millisecond})
	if err := b.Add(items("a", 0, 2)...); err != nil {
		t.Fatal(err)
	}
	ch := nextAsync(context.Background(), b)
	waitTimers(t, clk, 1)
	clk.Advance(39 * time.Millisecond)
	select {
	case r := <-ch:
		t.Fatalf("Next returned %v before MaxWait", r)
	default:
	}
	clk.Advance(time.Millisecond)
	res := await(t, ch)
	if res.err != nil || res.round.Reason != batcher.ReasonWait || len(res.round.Items) != 2 {
		t.Fatalf("Next = %v reason=%v n=%d, want a wait round of 2", res.err, res.round.Reason, len(res.round.Items))
	}
}

func TestNextWakesOnSize(t *testing.T) {
	b, clk := newManual(t, batcher.Config{MaxItems: 3, MaxWait: time.Hour})
	if err := b.Add(items("a", 0, 1)...); err != nil {
		t.Fatal(err)
	}
	ch := nextAsync(context.Background(), b)
	waitTimers(t, clk, 1)
	if err := b.Add(items("a", 1, 2)...); err != nil {
		t.Fatal(err)
	}
	res := await(t, ch)
	if res.err != nil || res.round.Reason != batcher.ReasonSize || fmt.Sprint(values(res.round)) != "[0 1 2]" {
		t.Fatalf("Next = %v reason=%v items=%v, want a size round [0 1 2]", res.err, res.round.Reason, values(res.round))
	}
}

func TestNextWakesWhenBackoffEnds(t *testing.T) {
	b, clk := newManual(t, batcher.Config{MaxItems: 2, MaxWait: time.Hour})
	if err := b.Add(items("a", 0, 2)...); err != nil {
		t.Fatal(err)
	}
	r, ok := b.TryNext()
	if !ok {
		t.Fatal("no size round")
	}
	if err := b.Requeue(r.Items, 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	ch := nextAsync(context.Background(), b)
	waitTimers(t, clk, 1)
	clk.Advance(99 * time.Millisecond)
	select {
	case r := <-ch:
		t.Fatalf("Next returned %v during the backoff", r)
	default:
	}
	clk.Advance(time.Millisecond)
	res := await(t, ch)
	if res.err != nil || res.round.Reason != batcher.ReasonSize || fmt.Sprint(values(res.round)) != "[0 1]" {
		t.Fatalf("Next = %v reason=%v items=%v, want a size round [0 1]", res.err, res.round.Reason, values(res.round))
	}
}

func TestNextContextCanceled(t *testing.T) {
	b, clk := newManual(t, batcher.Config{MaxItems: 10, MaxWait: time.Second})
	if err := b.Add(items("a", 0, 1)...); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ch := nextAsync(ctx, b)
	waitTimers(t, clk, 1)
	cancel()
	if res := await(t, ch); !errors.Is(res.err, context.Canceled) {
		t.Fatalf("Next = %v, want context.Canceled", res.err)
	}
	clk.Advance(time.Second)
	if r, ok := b.TryNext(); !ok || len(r.Items) != 1 {
		t.Fatal("item lost by a canceled Next")
	}
}

func TestNextReturnsReadyRoundDespiteDoneContext(t *testing.T) {
	b, _ := newManual(t, batcher.Config{MaxItems: 1})
	if err := b.Add(items("a", 0, 1)...); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if r, err := b.Next(ctx); err != nil || len(r.Items) != 1 {
		t.Fatalf("Next = %v, %v; want the ready round", r, err)
	}
	if _, err := b.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next = %v, want context.Canceled", err)
	}
}

func TestCloseUnblocksNext(t *testing.T) {
	b, clk := newManual(t, batcher.Config{MaxItems: 10})
	if err := b.Add(items("a", 0, 3)...); err != nil {
		t.Fatal(err)
	}
	ch := nextAsync(context.Background(), b)
	waitTimers(t, clk, 1)
	left := b.Close()
	if res := await(t, ch); !errors.Is(res.err, batcher.ErrClosed) {
		t.Fatalf("Next = %v, want ErrClosed", res.err)
	}
	if len(left) != 3 {
		t.Fatalf("Close returned %d items, want 3", len(left))
	}
	if n := clk.Timers(); n != 0 {
		t.Fatalf("%d timers armed after Close, want 0", n)
	}
	if _, err := b.Next(context.Background()); !errors.Is(err, batcher.ErrClosed) {
		t.Fatalf("Next after Close = %v, want ErrClosed", err)
	}
	if err := b.Add(items("a", 0, 1)...); !errors.Is(err, batcher.ErrClosed) {
		t.Fatalf("Add after Close = %v, want ErrClosed", err)
	}
	if err := b.Requeue(items("a", 0, 1), 0); !errors.Is(err, batcher.ErrClosed) {
		t.Fatalf("Requeue after Close = %v, want ErrClosed", err)
	}
}

// TestSystemClock is the one test on the real clock: a wait round arrives.
func TestSystemClock(t *testing.T) {
	b, err := batcher.New[int](batcher.Config{MaxWait: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Add(items("a", 0, 2)...); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := b.Next(ctx)
	if err != nil || r.Reason != batcher.ReasonWait || len(r.Items) != 2 {
		t.Fatalf("Next = %v reason=%v n=%d, want a wait round of 2", err, r.Reason, len(r.Items))
	}
}

// TestConcurrentAddNext has many goroutines add, in batches of varied sizes,
// while one consumer takes rounds and requeues some items once; every item
// must come out exactly once more than it was requeued. Run it with -race.
func TestConcurrentAddNext(t *testing.T) {
	const (
		producers = 8
		perProd   = 5000
		total     = producers * perProd
		maxItems  = 100
	)
	b, clk := newManual(t, batcher.Config{MaxItems: maxItems, MaxWait: time.Millisecond})
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			for i := 0; i < perProd; {
				n := min(1+(i+p)%17, perProd-i)
				batch := make([]batcher.Item[int], n)
				for j := range batch {
					v := p*perProd + i + j
					batch[j] = batcher.Item[int]{Value: v, Priority: v % 3, Queue: fmt.Sprint("q", v%5)}
				}
				if err := b.Add(batch...); err != nil {
					t.Error(err)
					return
				}
				i += n
			}
		})
	}
	seen := make([]int, total)
	done := make(chan error, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	consuming, consumed := context.WithCancel(ctx)
	go func() {
		defer consumed()
		final := 0
		for final < total {
			r, err := b.Next(context.Background())
			if err != nil {
				done <- err
				return
			}
			if len(r.Items) > maxItems {
				done <- fmt.Errorf("round of %d items", len(r.Items))
				return
			}
			var again []batcher.Item[int]
			for _, it := range r.Items {
				seen[it.Value]++
				if it.Value%7 == 0 && seen[it.Value] == 1 {
					again = append(again, it)
				} else {
					final++
				}
			}
			if err := b.Requeue(again, 0); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	wg.Wait()
	// The tail of fewer than maxItems items closes by wait: move the clock
	// each time the consumer waits on it, until it is done.
	for clk.WaitTimers(consuming, 1) == nil {
		clk.Advance(time.Millisecond)
	}
	if ctx.Err() != nil {
		t.Fatal("consumer did not finish")
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for v, n := range seen {
		want := 1
		if v%7 == 0 {
			want = 2
		}
		if n != want {
			t.Fatalf("item %d came out %d times, want %d", v, n, want)
		}
	}
	if left := b.Close(); len(left) != 0 {
		t.Fatalf("%d items left after every item came out", len(left))
	}
}

// TestManyPriorities uses thousands of (priority, queue) pairs, enough for
// the batcher to drop the state of idle ones, and checks that every round
// still holds exactly its items in priority order.
func TestManyPriorities(t *testing.T) {
	const perRound, rounds = 100, 50
	b, _ := newManual(t, batcher.Config{MaxItems: perRound})
	for r := range rounds {
		batch := make([]batcher.Item[int], perRound)
		for i := range batch {
			v := r*perRound + i
			batch[i] = batcher.Item[int]{Value: v, Priority: v, Queue: fmt.Sprint("q", i%7)}
		}
		if err := b.Add(batch...); err != nil {
			t.Fatal(err)
		}
		round, ok := b.TryNext()
		if !ok || len(round.Items) != perRound {
			t.Fatalf("round %d: ok=%v n=%d, want a round of %d", r, ok, len(round.Items), perRound)
		}
		for i, it := range round.Items {
			if want := r*perRound + perRound - 1 - i; it.Value != want || it.Priority != want {
				t.Fatalf("round %d item %d = %+v, want value and priority %d", r, i, it, want)
			}
		}
	}
	if st := b.Stats(); st.Pending != 0 || st.Taken != perRound*rounds {
		t.Fatalf("stats %+v, want %d taken and none pending", st, perRound*rounds)
	}
}

// TestAncientEnqueued checks that an enqueue time far outside the ±290
// years the batcher keeps exactly still counts as long waited.
func TestAncientEnqueued(t *testing.T) {
	b, _ := newManual(t, batcher.Config{MaxItems: 10, MaxWait: time.Hour})
	old := time.Date(1500, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := b.Add(batcher.Item[int]{Value: 1, Enqueued: old}); err != nil {
		t.Fatal(err)
	}
	if r, ok := b.TryNext(); !ok || r.Reason != batcher.ReasonWait {
		t.Fatalf("TryNext = %v, %v; want a wait round at once", r, ok)
	}
}
