package dispatcher

import (
	"maps"
	"slices"
	"time"

	"github.com/sluicehq/sluice/dispatcher/placement"
)

// RoundStat describes one scheduling round that had pending work.
type RoundStat struct {
	At    time.Time // the scheduling clock at the round's start
	Term  uint64
	Index uint64 // the FSM's applied index the round read
	// Tasks and Groups are the round's pending work; Nodes the ready nodes.
	Tasks         int64
	Groups, Nodes int
	// FlowNodes and FlowArcs are the size of placement's flow network.
	FlowNodes, FlowArcs int
	// Placed were committed; Rejected counts the plan's assignments the FSM
	// refused as stale (their tasks stay pending); Unplaced the tasks
	// placement left pending.
	Placed, Rejected, Unplaced int64
	// Preempted counts the running tasks the round stopped for groups it
	// could not place.
	Preempted int64
	// Latency is the whole round; Input reading the FSM; Build and Solve
	// placement's graph building and solving; Commit the raft proposal.
	Latency, Input, Build, Solve, Commit time.Duration
	Optimal                              bool
	// Cost is the cost of the round's flow.
	Cost      int64
	PlanBytes int
	Err       string
}

// RoundTotals count every round since the Dispatcher started.
type RoundTotals struct {
	Rounds                      int64
	Placed, Rejected, Preempted int64
}

// RoundSummary summarizes the recent rounds kept in the ring.
type RoundSummary struct {
	RoundTotals
	// Recent is how many rounds the percentiles cover.
	Recent   int
	P50, P99 time.Duration
	// SolverShare is the placement time (build and solve) over the round
	// time, summed over the recent rounds.
	SolverShare float64
}

func (d *Dispatcher) record(st RoundStat) {
	if d.cfg.OnRound != nil {
		d.cfg.OnRound(st)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.mu.total.Rounds++
	d.mu.total.Placed += st.Placed
	d.mu.total.Rejected += st.Rejected
	d.mu.total.Preempted += st.Preempted
	if cap(d.mu.rounds) == 0 {
		return
	}
	if len(d.mu.rounds) < cap(d.mu.rounds) {
		d.mu.rounds = append(d.mu.rounds, st)
		return
	}
	d.mu.rounds[d.mu.next] = st
	d.mu.next = (d.mu.next + 1) % len(d.mu.rounds)
}

// Rounds returns the recent rounds' stats, oldest first.
func (d *Dispatcher) Rounds() []RoundStat {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]RoundStat, 0, len(d.mu.rounds))
	out = append(out, d.mu.rounds[d.mu.next:]...)
	return append(out, d.mu.rounds[:d.mu.next]...)
}

// Totals returns the counts of every round since the Dispatcher started.
func (d *Dispatcher) Totals() RoundTotals {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mu.total
}

// RoundSummary returns the totals and the recent rounds' latency
// percentiles and solver share.
func (d *Dispatcher) RoundSummary() RoundSummary {
	rs := d.Rounds()
	s := RoundSummary{RoundTotals: d.Totals(), Recent: len(rs)}
	s.P50, s.P99, s.SolverShare = Percentiles(rs)
	return s
}

// Percentiles returns the p50 and p99 latency of rounds and the share of
// their time placement (build and solve) took; zeros for no rounds.
func Percentiles(rounds []RoundStat) (p50, p99 time.Duration, solverShare float64) {
	if len(rounds) == 0 {
		return 0, 0, 0
	}
	lat := make([]time.Duration, len(rounds))
	var total, solver time.Duration
	for i, r := range rounds {
		lat[i] = r.Latency
		total += r.Latency
		solver += r.Build + r.Solve
	}
	slices.Sort(lat)
	if total > 0 {
		solverShare = float64(solver) / float64(total)
	}
	return lat[(len(lat)-1)*50/100], lat[(len(lat)-1)*99/100], solverShare
}

// QueueWeight returns queue q's fair-share weight (Config.QueueWeights;
// 1 for a queue not named there).
func (d *Dispatcher) QueueWeight(q string) int64 {
	if w, ok := d.cfg.QueueWeights[q]; ok {
		return w
	}
	return 1
}

// WeightedQueues returns the queues Config.QueueWeights names, sorted.
func (d *Dispatcher) WeightedQueues() []string {
	return slices.Sorted(maps.Keys(d.cfg.QueueWeights))
}

// Diagnosis returns what the last round that ran placement left pending and
// why (placement's reasons and per-filter rejection counts). Tasks that
// became eligible since are not in it.
func (d *Dispatcher) Diagnosis() []placement.Pending {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.mu.lastPending)
}
