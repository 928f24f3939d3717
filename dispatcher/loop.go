package dispatcher

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/dispatcher/fsm"
	"github.com/sluicehq/sluice/dispatcher/placement"
	"github.com/sluicehq/sluice/dispatcher/roundinput"
	"github.com/sluicehq/sluice/dispatcher/sched"
)

// roundOutcome is what a round hands back to the shell.
type roundOutcome struct {
	sched.RoundResult
	// plan is the round's plan while its preemption is to run.
	plan *placement.Plan
	// st is the round's stat, recorded once its preemption ran (nil: the
	// round read nothing).
	st *RoundStat
	// start is when the round started; err is what failed it.
	start time.Time
	err   error
}

// round runs one scheduling round: read the pending work, place it under
// the round's budget, commit the plan as one proposal. Its result says
// whether another round soon is worthwhile, and whether a preemption is
// to follow.
func (d *Dispatcher) round(ctx context.Context, term uint64) (out roundOutcome) {
	again, placed, err := d.roundOnce(ctx, term, &out)
	out.Again, out.Placed, out.err = again, placed, err
	out.Deposed = errors.Is(err, errDeposed)
	out.Preempt = !out.Deposed && out.plan != nil
	if out.st != nil && err != nil {
		out.st.Err = err.Error()
	}
	return out
}

// roundOnce is the body of round; it sets out's plan (for a preemption)
// and stat.
func (d *Dispatcher) roundOnce(ctx context.Context, term uint64, out *roundOutcome) (again bool, placed int64, err error) {
	start := time.Now()
	now := d.cfg.Clock.Now()
	index := d.cfg.FSM.Applied()
	if !d.cfg.FSM.HasReadyNode() {
		// Nothing can be placed; reading the pending work would be wasted
		// (the HTTP API says why jobs wait).
		d.mu.Lock()
		d.mu.lastPending = nil
		d.mu.Unlock()
		return false, 0, nil
	}
	in := d.input.Read(d.cfg.FSM, now, d.cfg.MaxTasks)
	if len(in.Groups) == 0 {
		return false, 0, nil
	}
	d.weigh(in)
	if d.estimateOffline(in) {
		d.input.Modified = true
	}
	st := RoundStat{At: now, Term: term, Index: index, Groups: len(in.Groups), Nodes: len(in.Nodes)}
	for i := range in.Groups {
		st.Tasks += in.Groups[i].Pending
	}
	st.Input = time.Since(start)
	out.st, out.start = &st, start
	defer func() {
		st.Latency = time.Since(start)
		d.cfg.Logger.Debug("dispatcher: round", "term", term, "tasks", st.Tasks, "groups", st.Groups, "nodes", st.Nodes,
			"placed", st.Placed, "rejected", st.Rejected, "unplaced", st.Unplaced, "latency", st.Latency, "again", again, "err", err)
	}()

	pctx, cancel := context.WithTimeout(ctx, d.cfg.RoundBudget)
	plan, err := d.placer.Place(pctx, in)
	cancel()
	if err != nil {
		in.Kept = false // the placer may not have seen it
		return false, 0, err
	}
	d.input.Placed()
	st.Build, st.Solve, st.Optimal = plan.Stats.Build, plan.Stats.Solve, plan.Stats.Optimal
	st.FlowNodes, st.FlowArcs, st.Cost = plan.Stats.FlowNodes, plan.Stats.FlowArcs, plan.Stats.Cost
	st.Unplaced = plan.Stats.Pending
	d.mu.Lock()
	d.mu.lastPending = plan.Pending
	d.mu.Unlock()
	// Work left over for reasons of this round only (the budget ran out,
	// conflicts between its own placements) is worth another round soon.
	retry := false
	for _, p := range plan.Pending {
		if p.Reason == placement.ReasonDeadline || p.Reason == placement.ReasonConflict {
			retry = true
			break
		}
	}
	if d.wantsPreempt(plan) {
		defer func() {
			if err == nil {
				out.plan = plan
			}
		}()
	}
	if len(plan.Assignments) == 0 {
		return retry, 0, nil
	}
	d.assign = fsmAssignments(d.assign, plan.Assignments)
	cmd := fsm.CommitPlan(&fsm.Plan{Term: term, Index: index, Now: now, Assignments: d.assign})
	st.PlanBytes = len(cmd)
	cstart := time.Now()
	res, err := d.propose(ctx, cmd)
	st.Commit = time.Since(cstart)
	if errors.Is(err, fsm.ErrStalePlan) {
		return false, 0, errDeposed
	}
	if err != nil {
		return true, 0, err
	}
	pr, err := fsm.DecodePlanResult(res)
	if err != nil {
		return false, 0, err
	}
	st.Placed, st.Rejected = pr.Placed, int64(len(pr.Rejected))
	if len(pr.Rejected) > 0 {
		d.cfg.Logger.Debug("dispatcher: plan assignments rejected, retried next round",
			"rejected", len(pr.Rejected), "first", pr.Rejected[0].String())
	}
	truncated := st.Tasks >= d.cfg.MaxTasks
	return retry || pr.Placed > 0 && (truncated || st.Unplaced > 0) || len(pr.Rejected) > 0, pr.Placed, nil
}

// weigh sets the configured queue weights in a round's input, where the
// queue's replicated settings give none (fsm.SetQueue's weight wins).
func (d *Dispatcher) weigh(in *placement.Input) {
	if len(d.cfg.QueueWeights) == 0 {
		return
	}
	seen := make(map[string]bool, len(in.Queues))
	for i := range in.Queues {
		q := &in.Queues[i]
		if q.Weight == 0 {
			q.Weight = d.cfg.QueueWeights[q.Name]
		}
		seen[q.Name] = true
	}
	for _, name := range slices.Sorted(maps.Keys(d.cfg.QueueWeights)) {
		if !seen[name] {
			in.Queues = append(in.Queues, placement.Queue{Name: name, Weight: d.cfg.QueueWeights[name]})
		}
	}
}

// preempt stops lower-priority running offline tasks for the offline
// groups the round's plan (already committed) left pending for lack of
// capacity, at most MaxPreemptions, as one proposal; it returns how many
// the FSM applied. It reads the state afresh, the plan's placements
// included. The groups are placed by a later round, once the nodes report
// the victims stopped.
func (d *Dispatcher) preempt(ctx context.Context, term uint64, plan *placement.Plan) (int64, error) {
	var want []placement.Pending
	for _, p := range plan.Pending {
		if preemptFor(p) {
			want = append(want, p)
		}
	}
	if d.cfg.MaxPreemptions == 0 || len(want) == 0 {
		return 0, nil
	}
	now := d.cfg.Clock.Now()
	in := roundinput.Build(d.cfg.FSM, now, d.cfg.MaxTasks)
	var top int32
	for _, g := range in.Groups {
		if g.QoS == api.QoSOffline {
			top = max(top, g.Priority)
		}
	}
	if top == 0 {
		return 0, nil // nothing offline above the lowest priority
	}
	d.estimateOffline(in)
	roundinput.AddVictims(d.cfg.FSM, in, top)
	ps := d.placer.Preempt(in, &placement.Plan{Pending: want}, d.cfg.MaxPreemptions)
	if len(ps) == 0 {
		return 0, nil
	}
	res, err := d.propose(ctx, fsm.PreemptTasks(now, term, fsmPreemptions(ps)))
	if errors.Is(err, fsm.ErrStalePlan) {
		return 0, errDeposed
	}
	if err != nil {
		return 0, err
	}
	pr, err := fsm.DecodePreemptResult(res)
	if err != nil {
		return 0, err
	}
	d.cfg.Logger.Info("dispatcher: preempted running tasks for higher-priority work",
		"preempted", pr.Preempted, "rejected", len(pr.Rejected), "first", ps[0].Task, "for", ps[0].For.String())
	return pr.Preempted, nil
}

// preemptFor reports whether a group left pending may be placed after a
// preemption.
func preemptFor(p placement.Pending) bool {
	return p.Reason == placement.ReasonNoCapacity || p.Reason == placement.ReasonNoCandidates
}

// wantsPreempt reports whether a preemption may help the groups plan left
// pending.
func (d *Dispatcher) wantsPreempt(plan *placement.Plan) bool {
	return d.cfg.MaxPreemptions != 0 && slices.ContainsFunc(plan.Pending, preemptFor)
}

// graceBeats gives every node the leader knows no contact of a full TTL
// from now: a new leader has no memory of heartbeats.
func (d *Dispatcher) graceBeats() {
	now := d.cfg.Clock.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, b := range d.mu.beats {
		b.contact = false
		if b.last.Before(now) {
			b.last = now
		}
	}
	for _, n := range d.cfg.FSM.Nodes() {
		if d.mu.beats[n.Spec.Name] == nil {
			d.mu.beats[n.Spec.Name] = &beat{last: now}
		}
	}
}

// forgetEvery is the cadence of forget passes (0: none): every quarter of
// JobRetention and of HistoryRetention (at least a millisecond), at most
// every 10s, and every second with a JobRetentionMax or a history (always
// bounded by HistoryMax), so that a count is exceeded by at most a
// second's work.
func (d *Dispatcher) forgetEvery() time.Duration {
	keep, most, hist := d.cfg.JobRetention, d.cfg.JobRetentionMax, d.cfg.HistoryMax > 0
	if keep == 0 && most == 0 && !hist {
		return 0
	}
	every := maxForgetEvery
	if keep > 0 {
		every = min(keep/4, every)
	}
	if most > 0 || hist {
		every = min(time.Second, every)
	}
	if hist {
		every = min(d.cfg.HistoryRetention/4, every)
	}
	return max(every, time.Millisecond)
}

// forget proposes that the jobs finished for JobRetention be forgotten,
// and the oldest finished jobs beyond JobRetentionMax, MaxForget jobs a
// command, until none is due, each leaving its summary when there is a
// history; then that the summaries due be pruned.
func (d *Dispatcher) forget(ctx context.Context) {
	d.forgetJobs(ctx)
	if d.cfg.HistoryMax > 0 && ctx.Err() == nil {
		d.pruneHistory(ctx)
	}
}

func (d *Dispatcher) forgetJobs(ctx context.Context) {
	keep, most := d.cfg.JobRetention, d.cfg.JobRetentionMax
	forget := fsm.ForgetJobs
	if d.cfg.HistoryMax > 0 {
		forget = fsm.ForgetJobsToHistory
	}
	for {
		now := d.cfg.Clock.Now()
		var ids []string
		if keep > 0 {
			ids = d.cfg.FSM.Forgettable(now.Add(-keep), fsm.MaxForget)
		}
		if most > 0 && len(ids) < fsm.MaxForget {
			// Both answers are prefixes of one order: the longer holds
			// the other.
			if over := d.cfg.FSM.ForgettableBeyond(most, fsm.MaxForget); len(over) > len(ids) {
				ids = over
			}
		}
		if len(ids) == 0 {
			return
		}
		res, err := d.propose(ctx, forget(now, ids))
		if err != nil {
			if ctx.Err() == nil {
				d.cfg.Logger.Warn("dispatcher: forget finished jobs", "jobs", len(ids), "err", err)
			}
			return
		}
		r, _ := fsm.DecodeForgetResult(res)
		d.cfg.Logger.Debug("dispatcher: forgot finished jobs", "forgotten", r.Forgotten, "kept", r.Kept)
		if len(ids) < fsm.MaxForget || r.Forgotten == 0 {
			return
		}
	}
}

// pruneHistory proposes that the summaries of the jobs that ended
// HistoryRetention ago or earlier, and the oldest beyond HistoryMax, be
// pruned, MaxForget a command, until none is due.
func (d *Dispatcher) pruneHistory(ctx context.Context) {
	for {
		now := d.cfg.Clock.Now()
		ids := d.cfg.FSM.HistoryPrunable(now.Add(-d.cfg.HistoryRetention), d.cfg.HistoryMax, fsm.MaxForget)
		if len(ids) == 0 {
			return
		}
		res, err := d.propose(ctx, fsm.PruneHistory(now, ids))
		if err != nil {
			if ctx.Err() == nil {
				d.cfg.Logger.Warn("dispatcher: prune job history", "jobs", len(ids), "err", err)
			}
			return
		}
		r, _ := fsm.DecodePruneResult(res)
		d.cfg.Logger.Debug("dispatcher: pruned job history", "pruned", r.Pruned, "kept", r.Kept)
		if len(ids) < fsm.MaxForget || r.Pruned == 0 {
			return
		}
	}
}

// ttl is the node TTL for a cluster of n nodes.
func (d *Dispatcher) ttl(n int) time.Duration {
	return d.cfg.NodeTTL + time.Duration(n)*d.cfg.NodeTTLPerNode
}

// liveness proposes down the nodes that missed their TTL, and ready the
// down nodes heard from again (draining, the drained ones), and ends the
// drains whose deadline passed; nodes is a buffer kept from check to
// check. Only transitions are proposed.
func (d *Dispatcher) liveness(ctx context.Context, nodes []fsm.NodeState) []fsm.NodeState {
	nodes = d.cfg.FSM.AppendNodeStates(nodes[:0])
	d.checkNodes(ctx, nodes)
	d.endDrains(ctx, nodes, d.cfg.Clock.Now())
	d.pruneEstimates(d.cfg.Clock.Now())
	return nodes
}

func (d *Dispatcher) checkNodes(ctx context.Context, nodes []fsm.NodeState) {
	ttl := d.ttl(len(nodes))
	now := d.cfg.Clock.Now()
	type change struct {
		name  string
		state api.NodeState
	}
	var changes []change
	d.mu.Lock()
	for _, n := range nodes {
		b := d.mu.beats[n.Name]
		if b == nil {
			b = &beat{last: now}
			d.mu.beats[n.Name] = b
		}
		alive := now.Sub(b.last) < ttl
		switch {
		case n.State != api.NodeDown && !alive:
			changes = append(changes, change{n.Name, api.NodeDown})
		case n.State == api.NodeDown && alive && b.contact:
			changes = append(changes, change{n.Name, api.NodeReady})
		}
	}
	d.mu.Unlock()
	for _, c := range changes {
		res, err := d.propose(ctx, fsm.SetNodeState(now, c.name, c.state))
		if err != nil {
			if ctx.Err() == nil {
				d.cfg.Logger.Warn("dispatcher: node state", "node", c.name, "state", c.state, "err", err)
			}
			return
		}
		r, _ := fsm.DecodeNodeStateResult(res)
		d.cfg.Logger.Info("dispatcher: node state", "node", c.name, "state", c.state, "ttl", ttl, "lost", r.Lost, "requeued", r.Requeued)
		d.kick()
	}
}

// fsmAssignments returns a round's assignments as the FSM's plan command
// takes them, in buf's memory (what an earlier, longer plan left beyond
// the end is not kept alive).
func fsmAssignments(buf []fsm.Assignment, as []placement.Assignment) []fsm.Assignment {
	buf = slices.Grow(buf[:0], len(as))
	for _, a := range as {
		buf = append(buf, fsm.Assignment{Group: fsm.GroupKey(a.Group), Node: a.Node, Count: a.Count, Slots: a.Slots})
	}
	clear(buf[len(buf):cap(buf)])
	return buf
}

// fsmPreemptions returns preemptions as the FSM's command takes them.
func fsmPreemptions(ps []placement.Preemption) []fsm.Preemption {
	out := make([]fsm.Preemption, len(ps))
	for i, p := range ps {
		out[i] = fsm.Preemption{Task: p.Task, Node: p.Node, For: fsm.GroupKey(p.For)}
	}
	return out
}
