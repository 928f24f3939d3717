package batcher

// slot is an item as a queue stores it: the priority and queue name are the
// queue's, and the enqueue time is in nanoseconds since Batcher.base.
type slot[T any] struct {
	v   T
	enq int64
}

// ring is a FIFO of slots on a power-of-two circular buffer. Slots that no
// longer hold an item are zeroed so that the values can be collected.
type ring[T any] struct {
	buf  []slot[T]
	head int
	n    int
}

// push appends s at the back.
func (r *ring[T]) push(s slot[T]) {
	if r.n == len(r.buf) {
		r.grow()
	}
	r.buf[(r.head+r.n)&(len(r.buf)-1)] = s
	r.n++
}

// grow doubles the buffer, moving the slots to its start in order.
func (r *ring[T]) grow() {
	buf := make([]slot[T], max(16, 2*len(r.buf)))
	m := copy(buf, r.buf[r.head:])
	copy(buf[m:], r.buf[:r.head])
	r.buf, r.head = buf, 0
}

// front returns the oldest slot; the ring must not be empty.
func (r *ring[T]) front() *slot[T] { return &r.buf[r.head] }

// back returns the newest slot; the ring must not be empty.
func (r *ring[T]) back() *slot[T] { return &r.buf[(r.head+r.n-1)&(len(r.buf)-1)] }

// pop removes and returns the front slot; the ring must not be empty.
func (r *ring[T]) pop() slot[T] {
	s := r.buf[r.head]
	r.buf[r.head] = slot[T]{}
	r.head = (r.head + 1) & (len(r.buf) - 1)
	r.n--
	return s
}

// popN removes the n front slots (n <= r.n) and appends them to dst in
// order, in at most two copies.
func (r *ring[T]) popN(dst []slot[T], n int) []slot[T] {
	for n > 0 {
		seg := r.buf[r.head:min(r.head+n, len(r.buf))]
		dst = append(dst, seg...)
		clear(seg)
		r.head = (r.head + len(seg)) & (len(r.buf) - 1)
		r.n -= len(seg)
		n -= len(seg)
	}
	if r.n == 0 {
		r.head = 0
	}
	return dst
}

// minHeap is a binary min-heap ordered by less.
type minHeap[E any] struct {
	s    []E
	less func(a, b *E) bool
}

// push adds e.
func (h *minHeap[E]) push(e E) {
	h.s = append(h.s, e)
	i := len(h.s) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(&h.s[i], &h.s[p]) {
			break
		}
		h.s[i], h.s[p] = h.s[p], h.s[i]
		i = p
	}
}

// top returns the least element; the heap must not be empty.
func (h *minHeap[E]) top() *E { return &h.s[0] }

// pop removes and returns the least element; the heap must not be empty.
func (h *minHeap[E]) pop() E {
	e := h.s[0]
	last := len(h.s) - 1
	h.s[0] = h.s[last]
	var zero E
	h.s[last] = zero
	h.s = h.s[:last]
	i := 0
	for {
		c := 2*i + 1
		if c >= last {
			break
		}
		if c+1 < last && h.less(&h.s[c+1], &h.s[c]) {
			c++
		}
		if !h.less(&h.s[c], &h.s[i]) {
			break
		}
		h.s[i], h.s[c] = h.s[c], h.s[i]
		i = c
	}
	return e
}

// lateSlot is a slot that arrived after a younger slot of its queue (a
// requeued item, or one added with an old enqueue time). seq breaks ties
// between equal enqueue times in arrival order.
type lateSlot[T any] struct {
	s   slot[T]
	seq uint64
}

// lessLate orders late slots by enqueue time, then arrival.
func lessLate[T any](a, b *lateSlot[T]) bool {
	if a.s.enq != b.s.enq {
		return a.s.enq < b.s.enq
	}
	return a.seq < b.seq
}

// queue holds the eligible items of one (priority, queue name) pair, oldest
// first. Items that arrive in enqueue-time order (the common case) go to a
// ring in O(1); the others go to a heap, and take merges the two.
//
// name, bucket and weight never change once the queue exists, so they may be
// read without the lock; the other fields are guarded by Batcher.mu.
type queue[T any] struct {
	name   string
	bucket *bucket[T]
	// weight is the number of items the queue takes per turn.
	weight int

	// deficit is what is left of the current turn; 0 between turns.
	deficit int
	// ring holds slots in nondecreasing enqueue time.
	ring ring[T]
	// late holds slots older than the ring's back when they arrived.
	late minHeap[lateSlot[T]]
	// next and prev link the bucket's active queues in a circle; nil while
	// the queue is empty.
	next, prev *queue[T]
}

// len returns the number of items held.
func (q *queue[T]) len() int { return q.ring.n + len(q.late.s) }

// push adds s; seq numbers late slots.
func (q *queue[T]) push(s slot[T], seq *uint64) {
	if q.ring.n == 0 || s.enq >= q.ring.back().enq {
		q.ring.push(s)
		return
	}
	*seq++
	q.late.push(lateSlot[T]{s: s, seq: *seq})
}

// oldest returns the earliest enqueue time held; the queue must not be empty.
func (q *queue[T]) oldest() int64 {
	switch {
	case len(q.late.s) == 0:
		return q.ring.front().enq
	case q.ring.n == 0:
		return q.late.top().s.enq
	default:
		return min(q.ring.front().enq, q.late.top().s.enq)
	}
}

// take removes the n oldest slots (n <= q.len()) and appends them to dst.
func (q *queue[T]) take(dst []slot[T], n int) []slot[T] {
	for ; n > 0 && len(q.late.s) > 0; n-- {
		if q.ring.n == 0 || q.late.top().s.enq < q.ring.front().enq {
			dst = append(dst, q.late.pop().s)
		} else {
			dst = append(dst, q.ring.pop())
		}
	}
	return q.ring.popN(dst, n)
}

// shrink drops the buffers of the empty queue if they hold more than keep
// slots, so that a burst does not pin its memory for good.
func (q *queue[T]) shrink(keep int) {
	if len(q.ring.buf) > keep {
		q.ring = ring[T]{}
	}
	if cap(q.late.s) > keep {
		q.late.s = nil
	}
}

// run is a stretch of a round's slots that came from one queue.
type run[T any] struct {
	q *queue[T]
	n int
}

// bucket holds the active queues of one priority in a circle served by
// deficit round robin from cur. priority never changes; the other fields are
// guarded by Batcher.mu.
type bucket[T any] struct {
	priority int
	// queues holds every queue of the priority seen.
	queues map[string]*queue[T]

	// cur is the queue whose turn it is; nil when no queue holds items.
	cur *queue[T]
	// n is the number of items held by the bucket's queues.
	n int
}

// activate links the empty queue q into the circle just before cur, so that
// it is served after every queue already waiting.
func (bk *bucket[T]) activate(q *queue[T]) {
	if bk.cur == nil {
		q.next, q.prev = q, q
		bk.cur = q
		return
	}
	q.prev, q.next = bk.cur.prev, bk.cur
	bk.cur.prev.next = q
	bk.cur.prev = q
}

// deactivate unlinks the now empty queue q and ends its turn.
func (bk *bucket[T]) deactivate(q *queue[T]) {
	if q.next == q {
		bk.cur = nil
	} else {
		q.prev.next, q.next.prev = q.next, q.prev
		if bk.cur == q {
			bk.cur = q.next
		}
	}
	q.next, q.prev, q.deficit = nil, nil, 0
}

// take moves up to n slots into sc by deficit round robin and returns how
// many it moved. A turn gives a queue up to weight items; a turn cut short
// by n carries over to the next call. A queue alone in its bucket takes what
// it needs at once, with the same turn accounting. A queue that empties
// drops buffers of more than keep slots.
func (bk *bucket[T]) take(sc *scratch[T], n, keep int) int {
	moved := 0
	for moved < n && bk.cur != nil {
		q := bk.cur
		d := q.deficit
		if d == 0 {
			d = q.weight
		}
		var k int
		if q.next == q {
			k = min(q.len(), n-moved)
			if k <= d {
				q.deficit = d - k
			} else {
				q.deficit = (q.weight - (k-d)%q.weight) % q.weight
			}
		} else {
			k = min(d, q.len(), n-moved)
			q.deficit = d - k
		}
		sc.slots = q.take(sc.slots, k)
		sc.addRun(q, k)
		bk.n -= k
		moved += k
		switch {
		case q.len() == 0:
			bk.deactivate(q)
			q.shrink(keep)
		case q.deficit == 0:
			bk.cur = q.next
		}
	}
	return moved
}

// oldest returns the earliest enqueue time held; the bucket must not be empty.
func (bk *bucket[T]) oldest() int64 {
	t := bk.cur.oldest()
	for q := bk.cur.next; q != bk.cur; q = q.next {
		t = min(t, q.oldest())
	}
	return t
}
