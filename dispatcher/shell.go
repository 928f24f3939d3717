package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/dispatcher/fsm"
	"github.com/sluicehq/sluice/dispatcher/sched"
)

// done is a finished action's report to the shell.
type done struct {
	kind    sched.Kind
	term    uint64
	ok      bool
	round   roundOutcome
	preempt sched.PreemptResult
	nodes   []fsm.NodeState
}

// shell carries out the scheduling core's actions. It is owned by the
// schedule goroutine; the actions that wait on raft run in goroutines of
// their own (at most one of each kind: the core says so), which report to
// done and end with the term's context.
type shell struct {
	d    *Dispatcher
	core *sched.Core
	done chan done
	// ctx is the term's, cancelled by StopLeading; running counts the
	// term's action goroutines.
	ctx     context.Context
	cancel  context.CancelFunc
	running sync.WaitGroup
	// last is the round whose preemption runs or is to run.
	last roundOutcome
	// nodes is the liveness check's buffer, kept from check to check.
	nodes []fsm.NodeState
	// tick is signalled by the timer armed at the core's Wake time.
	tick    chan struct{}
	timer   clock.Timer
	timerAt time.Time
	// inFlight counts the action goroutines whose report is not yet fed
	// to the core, ticks the timer's signals not yet fed; waiting is true
	// while schedule waits for an event. They only tell tests when the
	// shell has settled (Settled).
	inFlight, ticks atomic.Int32
	waiting         atomic.Bool
}

// newShell returns the shell of d and its core; schedule runs it.
func newShell(d *Dispatcher) (*shell, error) {
	core, err := sched.New(d.schedConfig(), d.cfg.Clock.Now())
	if err != nil {
		return nil, fmt.Errorf("dispatcher: scheduling core: %w", err)
	}
	// done holds a report of every action that can be in flight at once
	// (one of each of the core's five kinds), so that no sender blocks
	// while StopLeading waits for them before it drains.
	return &shell{d: d, core: core, done: make(chan done, 8), tick: make(chan struct{}, 1)}, nil
}

// settled reports whether the shell waits for an event with no action in
// flight and no event queued but leadership: nothing happens until the
// time passes, work arrives or the leadership changes. An event counts
// until the core is fed it (arrived, ticks, inFlight), not only while it
// is queued: schedule may have taken it from its channel, and not yet read
// the clock for it, when waiting still says it waits.
func (s *shell) settled() bool {
	return s.waiting.Load() && s.inFlight.Load() == 0 && s.ticks.Load() == 0 && s.d.arrived.Load() == 0 &&
		len(s.d.work) == 0 && len(s.tick) == 0 && len(s.done) == 0
}

// schedConfig is the scheduling core's configuration.
func (d *Dispatcher) schedConfig() sched.Config {
	return sched.Config{
		MaxWait:       d.cfg.MaxWait,
		MaxTasks:      int(d.cfg.MaxTasks),
		Period:        d.cfg.Period,
		LivenessEvery: d.cfg.LivenessEvery,
		ForgetEvery:   d.forgetEvery(),
	}
}

// schedule is the scheduling shell: it feeds the core the replica's
// leadership (pushed by raftkv), the work that arrives (kick), the time
// (a timer at the core's Wake) and the actions' results, and carries out
// the actions it returns. It returns on Close, having stopped leading.
func (d *Dispatcher) schedule() {
	defer d.wg.Done()
	s, core := d.shell, d.shell.core
	defer s.stopTimer()
	leadership := func() <-chan struct{} {
		ch := d.cfg.Raft.LeadershipChanged()
		st := d.cfg.Raft.Status()
		core.Leadership(d.cfg.Clock.Now(), st.IsLeader, st.Term)
		return ch
	}
	changed := leadership()
	for {
		s.carryOut(core.Ready())
		s.arm()
		s.waiting.Store(true)
		select {
		case <-d.closing:
			core.Leadership(d.cfg.Clock.Now(), false, 0)
			s.carryOut(core.Ready())
			return
		case <-changed:
			changed = leadership()
		case <-d.work:
			core.Work(d.cfg.Clock.Now(), int(min(d.arrived.Swap(0), int64(d.cfg.MaxTasks))))
		case <-s.tick:
			core.Tick(d.cfg.Clock.Now())
			s.ticks.Add(-1)
		case r := <-s.done:
			s.report(r)
			s.inFlight.Add(-1)
		}
		s.waiting.Store(false)
	}
}

// report feeds a finished action to the core.
func (s *shell) report(r done) {
	now := s.d.cfg.Clock.Now()
	switch r.kind {
	case sched.Barrier:
		s.core.BarrierDone(now, r.term, r.ok)
	case sched.Round:
		s.last = r.round
		if !r.round.Preempt {
			s.record(nil)
		}
		s.core.RoundDone(now, r.term, r.round.RoundResult)
	case sched.Preempt:
		s.record(&r.preempt)
		s.core.PreemptDone(now, r.term, r.preempt)
	case sched.Liveness:
		s.nodes = r.nodes
		s.core.LivenessDone(now, r.term)
	case sched.Forget:
		s.core.ForgetDone(now, r.term)
	}
}

// record records the last round's stat, with its preemption's (nil: none
// ran) tasks stopped and time.
func (s *shell) record(p *sched.PreemptResult) {
	st := s.last.st
	if st == nil {
		return
	}
	if p != nil {
		st.Preempted = p.Preempted
		st.Latency = time.Since(s.last.start)
	}
	s.d.record(*st)
}

// carryOut does the actions, in order.
func (s *shell) carryOut(acts []sched.Action) {
	d := s.d
	for _, a := range acts {
		if d.cfg.trace != nil {
			d.cfg.trace(a)
		}
		switch a.Kind {
		case sched.StartLeading:
			s.ctx, s.cancel = context.WithCancel(context.Background())
			d.mu.Lock()
			d.mu.leading, d.mu.term, d.mu.usageBeats = true, a.Term, 0
			d.mu.Unlock()
			d.cfg.Logger.Info("dispatcher: leading, scheduling loop started", "term", a.Term)
			d.broadcast()
		case sched.StopLeading:
			s.cancel()
			s.running.Wait()
			s.drain()
			s.last = roundOutcome{}
			d.cfg.Logger.Info("dispatcher: scheduling loop stopped", "term", a.Term)
			d.mu.Lock()
			d.mu.leading = false
			d.mu.Unlock()
			d.broadcast()
		case sched.GraceBeats:
			d.graceBeats()
		case sched.StepDown:
			d.cfg.Logger.Info("dispatcher: plan refused as stale, stepping down", "term", a.Term)
		case sched.Barrier:
			s.async(a, func(ctx context.Context, r *done) {
				// Apply everything committed before this term, so that
				// the first round sees the state the previous leader left.
				rctx, cancel := context.WithTimeout(ctx, d.cfg.ProposeTimeout)
				defer cancel()
				r.ok = d.cfg.Raft.ReadIndex(rctx) == nil
			})
		case sched.Round:
			s.async(a, func(ctx context.Context, r *done) {
				r.round = d.round(ctx, a.Term)
				if err := r.round.err; err != nil && !r.round.Deposed && ctx.Err() == nil {
					d.cfg.Logger.Warn("dispatcher: round", "term", a.Term, "err", err)
				}
			})
		case sched.Preempt:
			plan := s.last.plan
			s.async(a, func(ctx context.Context, r *done) {
				n, err := d.preempt(ctx, a.Term, plan)
				r.preempt = sched.PreemptResult{Preempted: n, Deposed: errors.Is(err, errDeposed), Failed: err != nil}
				if err != nil && !r.preempt.Deposed && ctx.Err() == nil {
					d.cfg.Logger.Warn("dispatcher: preempt", "term", a.Term, "err", err)
				}
			})
		case sched.Liveness:
			nodes := s.nodes
			s.nodes = nil // the check's own until it reports
			s.async(a, func(ctx context.Context, r *done) {
				r.nodes = d.liveness(ctx, nodes)
			})
		case sched.Forget:
			s.async(a, func(ctx context.Context, _ *done) { d.forget(ctx) })
		}
	}
}

// async runs f for action a in a goroutine of the term, which reports to
// done.
func (s *shell) async(a sched.Action, f func(ctx context.Context, r *done)) {
	ctx := s.ctx
	s.inFlight.Add(1)
	s.running.Add(1)
	go func() {
		defer s.running.Done()
		r := done{kind: a.Kind, term: a.Term}
		f(ctx, &r)
		s.done <- r
	}()
}

// drain drops the reports of a stopped term: the core ignores them.
func (s *shell) drain() {
	for {
		select {
		case <-s.done:
			s.inFlight.Add(-1)
		default:
			return
		}
	}
}

// arm sets the timer to the core's Wake time.
func (s *shell) arm() {
	at, ok := s.core.Wake()
	if !ok {
		s.stopTimer()
		return
	}
	if s.timer != nil && s.timerAt.Equal(at) {
		return
	}
	s.stopTimer()
	s.timerAt = at
	s.timer = s.d.cfg.Clock.AfterFunc(at.Sub(s.d.cfg.Clock.Now()), func() {
		s.ticks.Add(1)
		select {
		case s.tick <- struct{}{}:
		default:
			s.ticks.Add(-1) // one is queued already
		}
	})
}

func (s *shell) stopTimer() {
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
}
