package batcher_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/batcher"
	"github.com/sluicehq/sluice/clock"
)

func Example() {
	b, err := batcher.New[string](batcher.Config{
		MaxItems: 4,
		MaxWait:  5 * time.Millisecond,
		Weights:  map[string]int{"prod": 2},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()

	err = b.Add(
		batcher.Item[string]{Value: "p1", Queue: "prod"},
		batcher.Item[string]{Value: "p2", Queue: "prod"},
		batcher.Item[string]{Value: "p3", Queue: "prod"},
		batcher.Item[string]{Value: "b1", Queue: "batch"},
		batcher.Item[string]{Value: "urgent", Queue: "batch", Priority: 9},
	)
	if err != nil {
		fmt.Println(err)
		return
	}

	// Five items are eligible and MaxItems is 4: a round is ready.
	round, err := b.Next(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(round.Reason, ":")
	for _, it := range round.Items {
		fmt.Print(" ", it.Value)
	}
	fmt.Println()
	// Output: size: urgent p1 p2 b1
}

// A manual clock drives wait-closed rounds and backoffs in tests.
func ExampleBatcher_Requeue() {
	clk := clock.NewManual(time.Time{})
	b, err := batcher.New[string](batcher.Config{MaxWait: 10 * time.Millisecond, Clock: clk})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()

	if err := b.Add(batcher.Item[string]{Value: "t1"}, batcher.Item[string]{Value: "t2"}); err != nil {
		fmt.Println(err)
		return
	}
	clk.Advance(10 * time.Millisecond)
	round, _ := b.TryNext()
	fmt.Println(round.Reason, len(round.Items))

	// t2 could not be placed: try again in 100ms.
	if err := b.Requeue(round.Items[1:], 100*time.Millisecond); err != nil {
		fmt.Println(err)
		return
	}
	clk.Advance(99 * time.Millisecond)
	_, ok := b.TryNext()
	fmt.Println(ok)
	clk.Advance(time.Millisecond)
	round, _ = b.TryNext()
	fmt.Println(round.Reason, round.Items[0].Value)
	// Output:
	// wait 2
	// false
	// wait t2
}
