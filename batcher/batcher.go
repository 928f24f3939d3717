package batcher

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/sluicehq/sluice/clock"
)

// ErrClosed is returned by Next, Add and Requeue once Close has been called.
var ErrClosed = errors.New("batcher: closed")

// Item is one unit of work with the metadata that orders it.
type Item[T any] struct {
	// Value is the caller's item; the batcher never looks at it.
	Value T
	// Priority orders items across queues: higher first. Default 0.
	Priority int
	// Queue names the fair-share queue the item belongs to; see
	// Config.Weights. Default "" (a queue like any other).
	Queue string
	// Enqueued is when the item started waiting. It orders items within
	// their queue (oldest first) and starts the MaxWait bound. Zero means
	// the clock's time at Add or Requeue. Requeue keeps a set value, so a
	// requeued item keeps its age. Items handed out carry the same instant
	// (time.Time.Equal), expressed in the location of the clock's times;
	// it is kept to the nanosecond within ±290 years of New.
	Enqueued time.Time
}

// Reason says why a round closed.
type Reason uint8

const (
	// reasonNone means no round is ready.
	reasonNone Reason = iota
	// ReasonSize means MaxItems items were eligible.
	ReasonSize
	// ReasonWait means the oldest eligible item had waited MaxWait.
	ReasonWait
)

// String returns "size" or "wait".
func (r Reason) String() string {
	switch r {
	case ReasonSize:
		return "size"
	case ReasonWait:
		return "wait"
	default:
		return "Reason(" + strconv.Itoa(int(r)) + ")"
	}
}

// Round is a batch of items handed out together.
type Round[T any] struct {
	// Items holds between 1 and MaxItems items: by priority, higher first;
	// within a priority, interleaved across queues by weight; within a
	// queue, oldest first. The caller owns the slice.
	Items []Item[T]
	// Reason says why the round closed.
	Reason Reason
	// At is the clock's time when the round was taken.
	At time.Time
}

// Stats are the batcher's counters, for export as metrics.
type Stats struct {
	// Added counts items accepted by Add.
	Added uint64
	// Requeued counts items accepted by Requeue.
	Requeued uint64
	// Taken counts items handed out in rounds.
	Taken uint64
	// RoundsBySize counts rounds closed because MaxItems items were eligible.
	RoundsBySize uint64
	// RoundsByWait counts rounds closed because an item had waited MaxWait.
	RoundsByWait uint64
	// Pending is the number of items held: eligible ones and Delayed ones.
	// Added+Requeued = Taken+Pending until Close, which hands the pending
	// items back and leaves Pending at 0.
	Pending int
	// Delayed is the number of requeued items still waiting out a backoff.
	Delayed int
}

// delayedBatch is a set of requeued items that become eligible together, at
// at nanoseconds since Batcher.base.
type delayedBatch[T any] struct {
	at    int64
	seq   uint64
	items []Item[T]
}

// lessDelayed orders batches by eligible time, then by Requeue order.
func lessDelayed[T any](a, b *delayedBatch[T]) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return a.seq < b.seq
}

// scratch holds a round in compact form: taken under the lock, it becomes
// a Round outside it. A scratch is recycled as Batcher.mu.spare.
type scratch[T any] struct {
	slots []slot[T]
	runs  []run[T]
}

// addRun records that the last n slots came from q.
func (sc *scratch[T]) addRun(q *queue[T], n int) {
	if last := len(sc.runs) - 1; last >= 0 && sc.runs[last].q == q {
		sc.runs[last].n += n
		return
	}
	sc.runs = append(sc.runs, run[T]{q: q, n: n})
}

// Batcher forms rounds from the items added to it; see the package
// documentation for the order and the invariants. All methods are safe for
// concurrent use. Create one with New.
type Batcher[T any] struct {
	cfg   Config
	clock Clock
	// base is the clock's time at New. Inside the batcher, times are
	// nanoseconds since base (int64): cheap to store and compare.
	base time.Time
	// since is the clock's Since method, or nil if it has none.
	since func(time.Time) time.Duration

	// mu guards every field in this group.
	mu struct {
		sync.Mutex
		closed bool
		// now is the latest clock reading used. Readings are taken
		// outside the lock and raised to now under it, so that the times
		// the batcher uses never go backwards.
		now int64

		// buckets holds every priority seen; active holds the buckets with
		// eligible items, by ascending priority.
		buckets map[int]*bucket[T]
		active  []*bucket[T]
		// last caches the queue of the previous insert.
		last *queue[T]
		// nqueues counts the queues of all buckets. When a new queue
		// would make it reach sweepAt, empty queues and buckets are
		// dropped first, so that state for priorities and queue names no
		// longer in use does not pile up.
		nqueues, sweepAt int
		// eligible is the number of items in buckets.
		eligible int
		// oldest is the earliest enqueue time of an eligible item; it is
		// meaningful only while oldestOK is true.
		oldest   int64
		oldestOK bool
		// seq numbers late slots and delayed batches.
		seq uint64
		// spare is a scratch to reuse, or nil while a round is being
		// expanded with it.
		spare *scratch[T]

		// delayed holds requeued items until their backoff ends;
		// delayedItems counts them.
		delayed      minHeap[delayedBatch[T]]
		delayedItems int

		// wake, when not nil, is closed to wake every Next blocked on it.
		wake chan struct{}
		// timer, when not nil, calls fire(timerGen) at timerAt.
		timer    Timer
		timerAt  int64
		timerGen uint64

		stats Stats
	}
}

// New returns a Batcher with a copy of cfg, its zero fields set to their
// defaults. It returns an error wrapping ErrInvalidConfig, listing every
// problem, if cfg is invalid.
func New[T any](cfg Config) (*Batcher[T], error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	b := &Batcher[T]{cfg: cfg, clock: cfg.Clock, base: cfg.Clock.Now()}
	if c, ok := cfg.Clock.(clock.Sincer); ok {
		b.since = c.Since
	}
	b.mu.buckets = make(map[int]*bucket[T])
	b.mu.sweepAt = minSweep
	b.mu.delayed.less = lessDelayed[T]
	return b, nil
}

// Add makes items eligible for the next rounds, under one lock acquisition
// for the whole slice. Items with a zero Enqueued get the clock's time. Add
// copies the items; the caller keeps the slice. After Close, Add adds
// nothing and returns ErrClosed.
func (b *Batcher[T]) Add(items ...Item[T]) error {
	reading := b.read()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mu.closed {
		return ErrClosed
	}
	now := b.nowLocked(reading)
	b.insertAllLocked(items, now)
	b.mu.stats.Added += uint64(len(items))
	if b.mu.wake != nil {
		b.notifyLocked(now)
	}
	return nil
}

// AddN adds n copies of it, as Add would, without the caller building a
// slice: for items that stand for units of work counted, not told apart
// (a notification that n tasks arrived). n <= 0 adds nothing. After Close,
// AddN adds nothing and returns ErrClosed.
func (b *Batcher[T]) AddN(it Item[T], n int) error {
	reading := b.read()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mu.closed {
		return ErrClosed
	}
	if n <= 0 {
		return nil
	}
	now := b.nowLocked(reading)
	enq := now
	if !it.Enqueued.IsZero() {
		enq = b.rel(it.Enqueued)
	}
	for range n {
		b.insertLocked(it.Priority, it.Queue, slot[T]{v: it.Value, enq: enq})
	}
	b.mu.stats.Added += uint64(n)
	if b.mu.wake != nil {
		b.notifyLocked(now)
	}
	return nil
}

// Requeue puts back items that a round could not place. They keep a set
// Enqueued (a zero one gets the clock's time), so once eligible they go
// ahead of younger items of their queue, but they are not eligible, and do
// not count towards MaxItems, until backoff has passed on the clock; a
// backoff <= 0 makes them eligible at once. Requeue copies the items; the
// caller keeps the slice. After Close, Requeue returns ErrClosed.
func (b *Batcher[T]) Requeue(items []Item[T], backoff time.Duration) error {
	reading := b.read()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mu.closed {
		return ErrClosed
	}
	if len(items) == 0 {
		return nil
	}
	now := b.nowLocked(reading)
	b.mu.stats.Requeued += uint64(len(items))
	if backoff <= 0 {
		b.insertAllLocked(items, now)
	} else {
		batch := slices.Clone(items)
		for i := range batch {
			if batch[i].Enqueued.IsZero() {
				batch[i].Enqueued = b.base.Add(time.Duration(now))
			}
		}
		b.mu.seq++
		b.mu.delayed.push(delayedBatch[T]{at: addSat(now, backoff), seq: b.mu.seq, items: batch})
		b.mu.delayedItems += len(batch)
	}
	if b.mu.wake != nil {
		b.notifyLocked(now)
	}
	return nil
}

// Next blocks until a round closes, then returns it. It returns ErrClosed
// once Close has been called, and an error wrapping ctx.Err() if ctx ends
// first; in both cases no item is taken. A round that is ready when Next is
// called is returned at once even if ctx has ended. Several goroutines may
// call Next; each round goes to one of them.
func (b *Batcher[T]) Next(ctx context.Context) (Round[T], error) {
	for {
		reading := b.read()
		b.mu.Lock()
		if b.mu.closed {
			b.mu.Unlock()
			return Round[T]{}, ErrClosed
		}
		now := b.nowLocked(reading)
		if reason := b.readyLocked(now); reason != reasonNone {
			sc := b.takeLocked(reason)
			b.mu.Unlock()
			return b.round(sc, reason, now), nil
		}
		if ctx.Err() != nil {
			b.mu.Unlock()
			return Round[T]{}, fmt.Errorf("batcher: next: %w", ctx.Err())
		}
		if b.mu.wake == nil {
			b.mu.wake = make(chan struct{})
		}
		wake := b.mu.wake
		b.armLocked(now)
		b.mu.Unlock()

		select {
		case <-wake:
		case <-ctx.Done():
			return Round[T]{}, fmt.Errorf("batcher: next: %w", ctx.Err())
		}
	}
}

// TryNext returns a round and true if one is ready now, and false if none is
// or the batcher is closed. It never blocks and arms no timer.
func (b *Batcher[T]) TryNext() (Round[T], bool) {
	reading := b.read()
	b.mu.Lock()
	if b.mu.closed {
		b.mu.Unlock()
		return Round[T]{}, false
	}
	now := b.nowLocked(reading)
	reason := b.readyLocked(now)
	if reason == reasonNone {
		b.mu.Unlock()
		return Round[T]{}, false
	}
	sc := b.takeLocked(reason)
	b.mu.Unlock()
	return b.round(sc, reason, now), true
}

// Due returns when a round may next be ready without an Add or a Requeue:
// now or earlier if one is ready, else the moment the oldest eligible item
// reaches MaxWait or the first backoff ends, whichever comes first. ok is
// false when the batcher holds nothing, or is closed. With TryNext, it lets
// a caller that keeps its own timers (a synchronous state machine fed the
// time as events) drive the batcher without Next and without its timer.
func (b *Batcher[T]) Due() (at time.Time, ok bool) {
	reading := b.read()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mu.closed {
		return time.Time{}, false
	}
	now := b.nowLocked(reading)
	if b.readyLocked(now) != reasonNone {
		return b.base.Add(time.Duration(now)), true
	}
	var due int64
	if b.mu.eligible > 0 {
		due, ok = addSat(b.oldestLocked(), b.cfg.MaxWait), true
	}
	if len(b.mu.delayed.s) > 0 {
		if d := b.mu.delayed.top().at; !ok || d < due {
			due, ok = d, true
		}
	}
	if !ok {
		return time.Time{}, false
	}
	return b.base.Add(time.Duration(due)), true
}

// round turns a scratch taken by takeLocked into a Round and recycles the
// scratch. It runs without the lock.
func (b *Batcher[T]) round(sc *scratch[T], reason Reason, now int64) Round[T] {
	items := b.expand(sc, 0)
	b.recycle(sc)
	return Round[T]{Items: items, Reason: reason, At: b.base.Add(time.Duration(now))}
}

// Close stops the batcher and returns every item it still holds, eligible or
// delayed, in no particular order, so that none is lost. Blocked and later
// calls to Next return ErrClosed; Add and Requeue return ErrClosed. Close
// stops the batcher's timer. Calling Close again returns nil.
func (b *Batcher[T]) Close() []Item[T] {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mu.closed {
		return nil
	}
	b.mu.closed = true
	b.stopTimerLocked()
	if b.mu.wake != nil {
		close(b.mu.wake)
		b.mu.wake = nil
	}
	left := b.expand(b.collectLocked(b.mu.eligible), b.mu.delayedItems)
	for len(b.mu.delayed.s) > 0 {
		left = append(left, b.mu.delayed.pop().items...)
	}
	b.mu.buckets, b.mu.active, b.mu.last = nil, nil, nil
	b.mu.eligible, b.mu.delayedItems, b.mu.oldestOK = 0, 0, false
	return left
}

// Stats returns the counters. Delayed items whose backoff has passed count
// as eligible.
func (b *Batcher[T]) Stats() Stats {
	reading := b.read()
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.mu.closed {
		b.releaseLocked(b.nowLocked(reading))
	}
	s := b.mu.stats
	s.Pending = b.mu.eligible + b.mu.delayedItems
	s.Delayed = b.mu.delayedItems
	return s
}

// read returns the clock's time in nanoseconds since base. It needs no lock;
// pass the result to nowLocked.
func (b *Batcher[T]) read() int64 {
	if b.since != nil {
		return int64(b.since(b.base))
	}
	return b.rel(b.clock.Now())
}

// nowLocked returns reading, raised to the latest time already used, and
// records it as the latest.
func (b *Batcher[T]) nowLocked(reading int64) int64 {
	b.mu.now = max(b.mu.now, reading)
	return b.mu.now
}

// rel returns t in nanoseconds since base.
func (b *Batcher[T]) rel(t time.Time) int64 { return int64(t.Sub(b.base)) }

// addSat returns t+d for d >= 0, saturating at the largest int64 instead of
// wrapping.
func addSat(t int64, d time.Duration) int64 {
	if s := t + int64(d); s >= t {
		return s
	}
	return math.MaxInt64
}

// insertAllLocked makes items eligible; zero enqueue times become now.
func (b *Batcher[T]) insertAllLocked(items []Item[T], now int64) {
	for i := range items {
		it := &items[i]
		enq := now
		if !it.Enqueued.IsZero() {
			enq = b.rel(it.Enqueued)
		}
		b.insertLocked(it.Priority, it.Queue, slot[T]{v: it.Value, enq: enq})
	}
}

// insertLocked makes s eligible in the named queue of the priority.
func (b *Batcher[T]) insertLocked(priority int, name string, s slot[T]) {
	q := b.mu.last
	if q == nil || q.bucket.priority != priority || q.name != name {
		q = b.queueLocked(priority, name)
		b.mu.last = q
	}
	bk := q.bucket
	if bk.n == 0 {
		b.activateLocked(bk)
	}
	if q.next == nil {
		bk.activate(q)
	}
	q.push(s, &b.mu.seq)
	bk.n++
	switch {
	case b.mu.eligible == 0:
		b.mu.oldest, b.mu.oldestOK = s.enq, true
	case b.mu.oldestOK && s.enq < b.mu.oldest:
		b.mu.oldest = s.enq
	}
	b.mu.eligible++
}

// minSweep is the fewest queues that trigger a sweep of empty ones.
const minSweep = 1024

// queueLocked returns the queue for the pair, creating it if needed.
func (b *Batcher[T]) queueLocked(priority int, name string) *queue[T] {
	if l := b.mu.last; l != nil && l.bucket.priority == priority {
		if q := l.bucket.queues[name]; q != nil {
			return q
		}
	} else if bk := b.mu.buckets[priority]; bk != nil {
		if q := bk.queues[name]; q != nil {
			return q
		}
	}
	if b.mu.nqueues+1 >= b.mu.sweepAt {
		b.sweepLocked()
	}
	bk := b.mu.buckets[priority]
	if bk == nil {
		bk = &bucket[T]{priority: priority, queues: make(map[string]*queue[T])}
		b.mu.buckets[priority] = bk
	}
	q := &queue[T]{name: name, bucket: bk, weight: b.cfg.weight(name)}
	q.late.less = lessLate[T]
	bk.queues[name] = q
	b.mu.nqueues++
	return q
}

// sweepLocked drops empty queues, and buckets left without queues.
func (b *Batcher[T]) sweepLocked() {
	for p, bk := range b.mu.buckets {
		for name, q := range bk.queues {
			if q.len() == 0 {
				delete(bk.queues, name)
				b.mu.nqueues--
			}
		}
		if len(bk.queues) == 0 {
			delete(b.mu.buckets, p)
		}
	}
	b.mu.last = nil
	b.mu.sweepAt = max(minSweep, 2*b.mu.nqueues)
}

// activateLocked inserts the empty bucket bk into active, keeping the order.
func (b *Batcher[T]) activateLocked(bk *bucket[T]) {
	i, _ := slices.BinarySearchFunc(b.mu.active, bk.priority, func(e *bucket[T], p int) int {
		switch {
		case e.priority < p:
			return -1
		case e.priority > p:
			return 1
		default:
			return 0
		}
	})
	b.mu.active = slices.Insert(b.mu.active, i, bk)
}

// releaseLocked makes eligible the delayed items whose backoff has ended.
func (b *Batcher[T]) releaseLocked(now int64) {
	for len(b.mu.delayed.s) > 0 && b.mu.delayed.top().at <= now {
		batch := b.mu.delayed.pop()
		b.insertAllLocked(batch.items, now)
		b.mu.delayedItems -= len(batch.items)
	}
}

// oldestLocked returns the earliest enqueue time of an eligible item; there
// must be one.
func (b *Batcher[T]) oldestLocked() int64 {
	if !b.mu.oldestOK {
		t := b.mu.active[0].oldest()
		for _, bk := range b.mu.active[1:] {
			t = min(t, bk.oldest())
		}
		b.mu.oldest, b.mu.oldestOK = t, true
	}
	return b.mu.oldest
}

// readyLocked releases what is due and reports why a round is ready now, or
// reasonNone.
func (b *Batcher[T]) readyLocked(now int64) Reason {
	b.releaseLocked(now)
	switch {
	case b.mu.eligible == 0:
		return reasonNone
	case b.mu.eligible >= b.cfg.MaxItems:
		return ReasonSize
	case now >= addSat(b.oldestLocked(), b.cfg.MaxWait):
		return ReasonWait
	default:
		return reasonNone
	}
}

// takeLocked removes a round of min(MaxItems, eligible) items and counts it.
func (b *Batcher[T]) takeLocked(reason Reason) *scratch[T] {
	sc := b.collectLocked(min(b.cfg.MaxItems, b.mu.eligible))
	b.mu.stats.Taken += uint64(len(sc.slots))
	if reason == ReasonSize {
		b.mu.stats.RoundsBySize++
	} else {
		b.mu.stats.RoundsByWait++
	}
	return sc
}

// minKeep is the fewest slots a queue keeps buffered when it empties; it
// keeps up to 2*MaxItems.
const minKeep = 1024

// collectLocked removes n eligible items (n <= eligible), taking priorities
// from the highest down, into a scratch.
func (b *Batcher[T]) collectLocked(n int) *scratch[T] {
	sc := b.mu.spare
	b.mu.spare = nil
	if sc == nil {
		sc = new(scratch[T])
	}
	sc.slots = slices.Grow(sc.slots, n)
	for moved := 0; moved < n; {
		last := len(b.mu.active) - 1
		bk := b.mu.active[last]
		moved += bk.take(sc, n-moved, max(minKeep, 2*b.cfg.MaxItems))
		if bk.n == 0 {
			b.mu.active[last] = nil
			b.mu.active = b.mu.active[:last]
		}
	}
	b.mu.eligible -= n
	b.mu.oldestOK = false
	return sc
}

// expand returns the items of sc, in a slice with room for extra more. It
// reads only what never changes, so it runs without the lock.
func (b *Batcher[T]) expand(sc *scratch[T], extra int) []Item[T] {
	items := make([]Item[T], len(sc.slots), len(sc.slots)+extra)
	// Items added together share an enqueue time: convert it once per run
	// of equal times.
	enq, t := int64(0), b.base
	i := 0
	for _, r := range sc.runs {
		prio, name := r.q.bucket.priority, r.q.name
		for _, s := range sc.slots[i : i+r.n] {
			if s.enq != enq {
				enq, t = s.enq, b.base.Add(time.Duration(s.enq))
			}
			it := &items[i]
			it.Value, it.Priority, it.Queue, it.Enqueued = s.v, prio, name, t
			i++
		}
	}
	return items
}

// recycle empties sc and keeps it as the spare scratch.
func (b *Batcher[T]) recycle(sc *scratch[T]) {
	clear(sc.slots)
	clear(sc.runs)
	sc.slots, sc.runs = sc.slots[:0], sc.runs[:0]
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.mu.closed {
		b.mu.spare = sc
	}
}

// notifyLocked wakes blocked Next calls if a round is ready, and otherwise
// makes sure the timer will wake them when one may be. Callers check that
// wake is not nil.
func (b *Batcher[T]) notifyLocked(now int64) {
	if b.readyLocked(now) != reasonNone {
		close(b.mu.wake)
		b.mu.wake = nil
		return
	}
	b.armLocked(now)
}

// armLocked arms the timer for the next moment a round may become ready
// without an Add: the oldest eligible item reaching MaxWait, or a backoff
// ending. A timer already due by then is kept. No round may be ready now.
func (b *Batcher[T]) armLocked(now int64) {
	var at int64
	due := false
	if b.mu.eligible > 0 {
		at, due = addSat(b.oldestLocked(), b.cfg.MaxWait), true
	}
	if len(b.mu.delayed.s) > 0 {
		if d := b.mu.delayed.top().at; !due || d < at {
			at, due = d, true
		}
	}
	if !due || (b.mu.timer != nil && b.mu.timerAt <= at) {
		return
	}
	b.stopTimerLocked()
	gen := b.mu.timerGen
	b.mu.timer = b.clock.AfterFunc(time.Duration(at-now), func() { b.fire(gen) })
	b.mu.timerAt = at
}

// stopTimerLocked stops the timer and makes a call already under way a
// no-op.
func (b *Batcher[T]) stopTimerLocked() {
	if b.mu.timer != nil {
		b.mu.timer.Stop()
		b.mu.timer = nil
	}
	b.mu.timerGen++
}

// fire is the timer's call: it wakes blocked Next calls, which check for a
// round and re-arm the timer if needed.
func (b *Batcher[T]) fire(gen uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if gen != b.mu.timerGen {
		return
	}
	b.mu.timer = nil
	b.mu.timerGen++
	if b.mu.wake != nil {
		close(b.mu.wake)
		b.mu.wake = nil
	}
}
