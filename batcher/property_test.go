package batcher_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/batcher"
	"github.com/sluicehq/sluice/clock"
)

// seedEnv names the environment variable that replays one seed of
// TestRandomized.
const seedEnv = "SLUICE_SEED"

// TestRandomized runs random adds, requeues, clock moves and rounds against a
// model, checking on every round that the batcher keeps its invariants. Each
// seed is logged; set SLUICE_SEED to replay one.
func TestRandomized(t *testing.T) {
	var seeds []uint64
	if v := os.Getenv(seedEnv); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", seedEnv, v, err)
		}
		seeds = []uint64{s}
	} else {
		for s := range uint64(20) {
			seeds = append(seeds, s+1)
		}
		seeds = append(seeds, uint64(time.Now().UnixNano()))
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			t.Parallel()
			t.Logf("seed %d (replay with %s=%d)", seed, seedEnv, seed)
			runRandomized(t, seed, 2000)
		})
	}
}

// mItem is the model's view of one item.
type mItem struct {
	prio     int
	queue    string
	enq      time.Time
	eligible time.Time
	pending  bool
	outs     int // rounds it came out in
	requeues int
}

type pq struct {
	prio  int
	queue string
}

func runRandomized(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	queues := []string{"a", "b", "c", "d"}
	cfg := batcher.Config{
		MaxItems:      1 + rng.IntN(20),
		MaxWait:       time.Duration(1+rng.IntN(20)) * time.Millisecond,
		DefaultWeight: 1 + rng.IntN(3),
		Weights:       map[string]int{},
	}
	for _, q := range queues[:3] {
		cfg.Weights[q] = 1 + rng.IntN(4)
	}
	weight := func(q string) int {
		if w, ok := cfg.Weights[q]; ok {
			return w
		}
		return cfg.DefaultWeight
	}
	totalWeight := 0
	for _, q := range queues {
		totalWeight += weight(q)
	}
	t.Logf("config: max_items=%d max_wait=%v default_weight=%d weights=%v", cfg.MaxItems, cfg.MaxWait, cfg.DefaultWeight, cfg.Weights)

	clk := clock.NewManual(time.Time{})
	cfg.Clock = clk
	b, err := batcher.New[int](cfg)
	if err != nil {
		t.Fatal(err)
	}

	var model []*mItem
	pending := map[int]bool{} // ids of pending items
	var out []int             // items handed out and not requeued since
	var added, requeued, taken uint64
	// since counts, for each backlogged (priority, queue), the items of that
	// priority other queues received since it was last served.
	since := map[pq]int{}

	eligibleNow := func() []int {
		now := clk.Now()
		var ids []int
		for id := range pending {
			if !model[id].eligible.After(now) {
				ids = append(ids, id)
			}
		}
		slices.Sort(ids)
		return ids
	}

	checkRound := func(step int) {
		now := clk.Now()
		elig := eligibleNow()
		want := batcher.Reason(0)
		if len(elig) >= cfg.MaxItems {
			want = batcher.ReasonSize
		} else if len(elig) > 0 {
			oldest := model[elig[0]].enq
			for _, id := range elig {
				if model[id].enq.Before(oldest) {
					oldest = model[id].enq
				}
			}
			if !now.Before(oldest.Add(cfg.MaxWait)) {
				want = batcher.ReasonWait
			}
		}
		r, ok := b.TryNext()
		if !ok {
			if want != 0 {
				t.Fatalf("step %d: no round, want one closed by %v (%d eligible)", step, want, len(elig))
			}
			return
		}
		if r.Reason != want {
			t.Fatalf("step %d: round closed by %v, want %v", step, r.Reason, want)
		}
		if n := min(cfg.MaxItems, len(elig)); len(r.Items) != n {
			t.Fatalf("step %d: round of %d items, want %d (max %d, eligible %d)", step, len(r.Items), n, cfg.MaxItems, len(elig))
		}

		// Backlogged queues at the start of the round.
		backlog := map[pq]int{}
		for _, id := range elig {
			backlog[pq{model[id].prio, model[id].queue}]++
		}
		for k := range since {
			if backlog[k] == 0 {
				delete(since, k)
			}
		}
		for k := range backlog {
			if _, ok := since[k]; !ok {
				since[k] = 0
			}
		}

		inRound := map[int]bool{}
		lastEnq := map[pq]time.Time{}
		for i, it := range r.Items {
			id := it.Value
			if id < 0 || id >= len(model) {
				t.Fatalf("step %d: unknown item %d", step, id)
			}
			m := model[id]
			if inRound[id] || !m.pending {
				t.Fatalf("step %d: item %d handed out twice", step, id)
			}
			if m.eligible.After(now) {
				t.Fatalf("step %d: item %d handed out %v before its backoff ends", step, id, m.eligible.Sub(now))
			}
			if it.Priority != m.prio || it.Queue != m.queue || !it.Enqueued.Equal(m.enq) {
				t.Fatalf("step %d: item %d metadata changed: %+v, want prio=%d queue=%s enq=%v", step, id, it, m.prio, m.queue, m.enq)
			}
			if i > 0 && it.Priority > r.Items[i-1].Priority {
				t.Fatalf("step %d: priority %d after %d in a round", step, it.Priority, r.Items[i-1].Priority)
			}
			k := pq{m.prio, m.queue}
			if last, ok := lastEnq[k]; ok && m.enq.Before(last) {
				t.Fatalf("step %d: item %d of %v is older than one before it in the round", step, id, k)
			}
			lastEnq[k] = m.enq
			inRound[id] = true

			// Fair share: q is served, every other backlogged queue of the
			// priority waits one more item, up to the sum of the others'
			// weights.
			since[k] = 0
			backlog[k]--
			for o := range since {
				if o.prio != k.prio || o == k || backlog[o] == 0 {
					continue
				}
				since[o]++
				if bound := totalWeight - weight(o.queue); since[o] > bound {
					t.Fatalf("step %d: queue %v starved: %d items of its priority went to other queues, bound %d", step, o, since[o], bound)
				}
			}
			if backlog[k] == 0 {
				delete(since, k)
			}
		}
		minPrio := r.Items[len(r.Items)-1].Priority
		for _, id := range elig {
			if inRound[id] {
				continue
			}
			m := model[id]
			if m.prio > minPrio {
				t.Fatalf("step %d: item %d of priority %d left behind a round down to priority %d", step, id, m.prio, minPrio)
			}
			if last, ok := lastEnq[pq{m.prio, m.queue}]; ok && m.enq.Before(last) {
				t.Fatalf("step %d: item %d of %s/%d left behind a younger item", step, id, m.queue, m.prio)
			}
		}
		for id := range inRound {
			model[id].pending = false
			delete(pending, id)
			model[id].outs++
			out = append(out, id)
		}
		taken += uint64(len(r.Items))
	}

	// The mix of operations varies by seed, so that some runs keep a deep
	// backlog and others drain it.
	addW, advW, roundW, requeueW := 20+rng.IntN(40), 10+rng.IntN(20), 10+rng.IntN(30), 5+rng.IntN(15)
	t.Logf("mix: add %d, advance %d, round %d, requeue %d", addW, advW, roundW, requeueW)
	maxPending := 0
	for step := range steps {
		switch op := rng.IntN(addW + advW + roundW + requeueW); {
		case op < addW:
			n := 1 + rng.IntN(8)
			batch := make([]batcher.Item[int], n)
			now := clk.Now()
			for i := range batch {
				m := &mItem{prio: rng.IntN(3), queue: queues[rng.IntN(len(queues))], enq: now, eligible: now, pending: true}
				it := batcher.Item[int]{Value: len(model), Priority: m.prio, Queue: m.queue}
				if rng.IntN(10) == 0 {
					m.enq = now.Add(-time.Duration(rng.IntN(20)) * time.Millisecond)
					it.Enqueued = m.enq
				}
				batch[i] = it
				pending[len(model)] = true
				model = append(model, m)
			}
			if err := b.Add(batch...); err != nil {
				t.Fatal(err)
			}
			added += uint64(n)
		case op < addW+advW:
			clk.Advance(time.Duration(rng.IntN(15)) * time.Millisecond)
		case op < addW+advW+roundW:
			checkRound(step)
		default:
			if len(out) == 0 {
				continue
			}
			rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
			n := 1 + rng.IntN(min(len(out), 10))
			backoff := time.Duration(rng.IntN(40)) * time.Millisecond
			if rng.IntN(5) == 0 {
				backoff = 0
			}
			batch := make([]batcher.Item[int], n)
			now := clk.Now()
			for i, id := range out[len(out)-n:] {
				m := model[id]
				batch[i] = batcher.Item[int]{Value: id, Priority: m.prio, Queue: m.queue, Enqueued: m.enq}
				m.pending, m.eligible = true, now.Add(backoff)
				pending[id] = true
				m.requeues++
			}
			out = out[:len(out)-n]
			if err := b.Requeue(batch, backoff); err != nil {
				t.Fatal(err)
			}
			requeued += uint64(n)
		}

		if step%50 == 0 {
			now := clk.Now()
			delayed := 0
			for id := range pending {
				if model[id].eligible.After(now) {
					delayed++
				}
			}
			maxPending = max(maxPending, len(pending))
			st := b.Stats()
			want := batcher.Stats{Added: added, Requeued: requeued, Taken: taken, Pending: len(pending), Delayed: delayed}
			st.RoundsBySize, st.RoundsByWait = 0, 0
			if st != want {
				t.Fatalf("step %d: stats %+v, want %+v", step, st, want)
			}
		}
	}

	// Close hands back exactly the pending items; with the rounds, every
	// item came out once more than it was requeued.
	left := b.Close()
	var leftIDs, wantIDs []int
	for _, it := range left {
		leftIDs = append(leftIDs, it.Value)
	}
	for id, m := range model {
		if m.pending {
			wantIDs = append(wantIDs, id)
			m.outs++
		}
		if m.outs != m.requeues+1 {
			t.Fatalf("item %d came out %d times, requeued %d times", id, m.outs, m.requeues)
		}
	}
	slices.Sort(leftIDs)
	if !slices.Equal(leftIDs, wantIDs) {
		t.Fatalf("Close returned %v, want %v", leftIDs, wantIDs)
	}
	t.Logf("%d items, %d requeued, %d taken in rounds, %d left at Close, at most %d pending", added, requeued, taken, len(left), maxPending)
}
