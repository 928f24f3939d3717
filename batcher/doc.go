// Package batcher forms scheduling rounds from a stream of items.
//
// It is the one place in Sluice that decides when a batch closes. The
// dispatcher's scheduling core (package dispatcher/sched) feeds it one item
// per task arrived and takes a round when the batcher says one is ready:
// MaxItems is the dispatcher's MaxTasks (the size bound), MaxWait its
// MaxWait (the wait bound), and a round worth repeating is requeued with a
// backoff. The core is a synchronous state machine with no clock of its
// own, so it drives the batcher with TryNext and Due, and gives it a Clock
// that reads the time of the event being handled. The dispatcher's report
// batching uses a second Batcher, blocking in Next: a Report call is an
// item, MaxReports and ReportWait the bounds. What a round contains is not
// the batcher's business there: the scheduling round places whatever the
// replicated state holds pending, and placement orders it (priority, then
// fair share across queues).
//
// A Batcher holds pending items, each with a priority, a queue name and an
// enqueue time, and hands them out in rounds. A round closes when MaxItems
// items are eligible (ReasonSize) or when the oldest eligible item has
// waited MaxWait since its enqueue time (ReasonWait). This is delay
// scheduling: waiting a few milliseconds packs more work into one solve and
// one commit, and MaxWait bounds what that costs in latency.
//
// The package owns the order of items and nothing else: it never looks at
// an item's value, does no I/O and starts no goroutine of its own. Time
// comes from an injected Clock (tests drive a clock.Manual); one timer,
// armed only when a Next call waits, wakes it when MaxWait or a backoff
// runs out.
//
// # Order
//
// Items come out
//   - by priority, higher first: no item is handed out while an eligible
//     item of higher priority stays behind. Priority is strict: lower
//     priorities wait while higher ones have eligible items;
//   - within a priority, by weighted fair share across queues (deficit
//     round robin): queues with eligible items take turns, a turn giving a
//     queue up to its weight in items (Config.Weights). A turn cut short by
//     the end of a round continues in the next round, so shares hold across
//     rounds of any size, and a queue that starts waiting is served after
//     the queues already waiting. A queue that stays backlogged waits for at
//     most the sum of the other queues' weights in items of its priority;
//   - within a queue, by enqueue time, oldest first.
//
// Requeue puts back items that a round could not place. They are not
// eligible until their backoff has passed, and they keep their enqueue time,
// so that afterwards they go ahead of younger items of their queue.
//
// # Invariants
//
//   - Every item accepted by Add or Requeue is handed out exactly once: in
//     a round, or by Close.
//   - A round holds at least one item and at most MaxItems.
//   - A round takes min(MaxItems, eligible items).
//   - Items of one queue and priority come out oldest first.
//   - A delayed item is not handed out, and does not count towards
//     MaxItems, before its backoff has passed.
//
// # Cost
//
// Add and AddN are O(1) per item and take the lock once per call, reading the clock
// once per call, so callers should add in batches. A round costs O(items +
// turns + priorities with items) under the lock, where a turn moves up to a
// queue's weight in items with one copy; the round's []Item is built after
// the lock is released, so producers are held up only by the compact copy.
// Items added out of enqueue-time order within their queue, and requeued
// items, cost O(log n) each.
//
// Memory: each (priority, queue) pair in use holds a ring buffer; when it
// empties it keeps at most 2*MaxItems slots (at least 1024), and pairs that
// stay empty are dropped once there are many (at least 1024) of them.
//
// # Usage
//
//	b, err := batcher.New[Task](batcher.Config{
//		MaxItems: 5000,
//		MaxWait:  5 * time.Millisecond,
//		Weights:  map[string]int{"prod": 4, "batch": 1},
//	})
//	if err != nil {
//		return err
//	}
//	defer b.Close()
//
//	// Producers, from any goroutine:
//	err = b.Add(batcher.Item[Task]{Value: t, Priority: 10, Queue: "prod"})
//
//	// The scheduling loop, blocking:
//	for {
//		round, err := b.Next(ctx)
//		if err != nil {
//			return err
//		}
//		unplaced := place(round.Items)
//		if err := b.Requeue(unplaced, time.Second); err != nil {
//			return err
//		}
//	}
//
//	// Or a caller with timers of its own, never blocking:
//	if r, ok := b.TryNext(); ok {
//		place(r.Items)
//	}
//	if at, ok := b.Due(); ok {
//		wakeAt(at) // then TryNext again
//	}
package batcher
