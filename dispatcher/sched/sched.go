package sched

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sluicehq/sluice/batcher"
	"github.com/sluicehq/sluice/clock"
)

// Kind is what an Action asks the caller to do.
type Kind uint8

const (
	// StartLeading: this replica leads in Term; the caller marks itself
	// leading and starts the term's context.
	StartLeading Kind = iota + 1
	// Barrier: apply everything committed before Term (a ReadIndex), then
	// report BarrierDone.
	Barrier
	// GraceBeats: give every node a full TTL from now (a new leader has
	// no memory of heartbeats). Synchronous: no Done event.
	GraceBeats
	// Round: run one scheduling round, then report RoundDone.
	Round
	// Preempt: preempt for the groups the last round left pending for
	// lack of capacity, then report PreemptDone.
	Preempt
	// Liveness: check node TTLs, then report LivenessDone.
	Liveness
	// Forget: forget the finished jobs due, then report ForgetDone.
	Forget
	// StopLeading: this replica no longer leads in Term; the caller
	// cancels the term's work, waits for it, and marks itself a follower.
	// Done events of that term are ignored from then on.
	StopLeading
	// StepDown: the FSM refused a plan of Term as a deposed leader's; no
	// round runs in Term any more (housekeeping goes on until the
	// replica's leadership changes).
	StepDown
)

var kindNames = [...]string{"", "start-leading", "barrier", "grace-beats", "round", "preempt", "liveness", "forget", "stop-leading", "step-down"}

// String returns the action's name in the scripts' words.
func (k Kind) String() string {
	if int(k) < len(kindNames) && k != 0 {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Action is one thing the caller is to do, in the term it belongs to.
type Action struct {
	Kind Kind
	Term uint64
}

// RoundResult is what a round reports.
type RoundResult struct {
	// Placed counts the tasks the round's plan placed.
	Placed int64
	// Again: work is left that another round soon may place (the budget
	// ran out, conflicts, rejected assignments, a truncated input).
	Again bool
	// Preempt: the plan left groups pending for lack of capacity, for
	// which a Preempt action may free room.
	Preempt bool
	// Deposed: the FSM refused the plan as a deposed leader's.
	Deposed bool
}

// PreemptResult is what a preemption reports.
type PreemptResult struct {
	// Preempted counts the tasks stopped; any makes another round worth
	// running.
	Preempted int64
	// Failed: the preemption failed (not as a deposed leader's); another
	// round is worth running.
	Failed bool
	// Deposed: the FSM refused the preemption as a deposed leader's.
	Deposed bool
}

// Defaults of Config.
const (
	// DefaultBarrierRetry is the wait between failed barriers.
	DefaultBarrierRetry = 20 * time.Millisecond
	// DefaultIdleRounds is how many rounds without progress are re-run.
	DefaultIdleRounds = 3
)

// ErrConfig is wrapped by the errors of Config.Validate and New.
var ErrConfig = errors.New("sched: invalid config")

// Config sets the core's bounds and cadences.
type Config struct {
	// MaxWait is the wait bound of a round: how long the first work to
	// arrive waits for more. 0 runs a round as soon as work arrives.
	MaxWait time.Duration
	// MaxTasks is the size bound of a round: a round closes as soon as
	// this many tasks arrived, without waiting out MaxWait. Required,
	// positive.
	MaxTasks int
	// Period runs a round after this long without one, work or not.
	// Required, positive.
	Period time.Duration
	// LivenessEvery is the wait between the end of a liveness check and
	// the next. Required, positive.
	LivenessEvery time.Duration
	// ForgetEvery is the wait between the end of a forget pass and the
	// next; 0: never forget.
	ForgetEvery time.Duration
	// BarrierRetry is the wait after a failed barrier. Default 20ms.
	BarrierRetry time.Duration
	// IdleRounds is how many times in a row a round that placed nothing
	// but asked for another is re-run before the core waits for new work
	// or the period. Default 3.
	IdleRounds int
}

// Validate reports every problem of c at once.
func (c Config) Validate() error {
	var probs []string
	if c.MaxWait < 0 {
		probs = append(probs, fmt.Sprintf("MaxWait %v must not be negative", c.MaxWait))
	}
	if c.MaxTasks <= 0 {
		probs = append(probs, fmt.Sprintf("MaxTasks %d must be positive", c.MaxTasks))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"Period", c.Period}, {"LivenessEvery", c.LivenessEvery}} {
		if d.v <= 0 {
			probs = append(probs, fmt.Sprintf("%s %v must be positive", d.name, d.v))
		}
	}
	if c.ForgetEvery < 0 || c.BarrierRetry < 0 || c.IdleRounds < 0 {
		probs = append(probs, fmt.Sprintf("ForgetEvery %v, BarrierRetry %v, IdleRounds %d must not be negative", c.ForgetEvery, c.BarrierRetry, c.IdleRounds))
	}
	if len(probs) > 0 {
		return fmt.Errorf("%w: %s", ErrConfig, strings.Join(probs, "; "))
	}
	return nil
}

// work is the batcher's item: one task, or one notification, arrived.
type work struct{}

// Core is the scheduling state machine. Create it with New.
type Core struct {
	cfg Config
	now time.Time
	out []Action

	// leading is true from StartLeading to StopLeading, in term.
	leading bool
	term    uint64
	// ready: the barrier of the term completed; rounds and housekeeping
	// may run. deposed: a plan of the term was refused; no more rounds.
	ready, deposed bool
	// barrierAt is when to retry a failed barrier (zero: none due).
	barrierAt time.Time
	// In flight: at most one of each.
	barrier, round, preempt, liveness, forget bool
	// rounds forms the rounds of the term; nil while not ready.
	rounds *batcher.Batcher[work]
	// idle counts the rounds re-run in a row without progress.
	idle int
	// periodAt, livenessAt and forgetAt are when the next period round
	// and housekeeping are due.
	periodAt, livenessAt, forgetAt time.Time
	// again holds a finished round's verdict while its preemption runs.
	again  bool
	placed int64
}

// New returns a Core that follows, at now.
func New(cfg Config, now time.Time) (*Core, error) {
	if cfg.BarrierRetry == 0 {
		cfg.BarrierRetry = DefaultBarrierRetry
	}
	if cfg.IdleRounds == 0 {
		cfg.IdleRounds = DefaultIdleRounds
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Core{cfg: cfg, now: now}, nil
}

// eventClock is the batcher's Clock: the time of the event being handled. The
// core never lets the batcher arm a timer (it asks Due and TryNext), so
// AfterFunc is never called with effect.
type eventClock struct{ c *Core }

func (k eventClock) Now() time.Time { return k.c.now }

func (eventClock) AfterFunc(time.Duration, func()) clock.Timer { return noTimer{} }

type noTimer struct{}

func (noTimer) Stop() bool { return true }

// advance moves the core's time to now; time never goes backwards.
func (c *Core) advance(now time.Time) {
	if now.After(c.now) {
		c.now = now
	}
}

func (c *Core) emit(k Kind) { c.out = append(c.out, Action{Kind: k, Term: c.term}) }

// Leadership tells the core whether the replica leads, and in which term.
func (c *Core) Leadership(now time.Time, leads bool, term uint64) {
	c.advance(now)
	if c.leading && (!leads || term != c.term) {
		c.stop()
	}
	if !c.leading && leads {
		c.leading, c.term = true, term
		c.emit(StartLeading)
		c.barrierAt = c.now
	}
	c.step()
}

// stop ends the term.
func (c *Core) stop() {
	c.emit(StopLeading)
	if c.rounds != nil {
		c.rounds.Close()
	}
	*c = Core{cfg: c.cfg, now: c.now, out: c.out}
}

// Work tells the core that n tasks (or, for n = 1, a change that may make
// work placeable: a registration, reports) arrived. A follower, or a
// deposed leader, ignores it.
func (c *Core) Work(now time.Time, n int) {
	c.advance(now)
	if c.rounds != nil && !c.deposed && n > 0 {
		_ = c.rounds.AddN(c.item(), min(n, c.cfg.MaxTasks))
	}
	c.step()
}

// Tick tells the core the time.
func (c *Core) Tick(now time.Time) {
	c.advance(now)
	c.step()
}

// current reports whether a Done event of term concerns the running term.
func (c *Core) current(term uint64) bool { return c.leading && term == c.term }

// BarrierDone reports the barrier of term: ok, or failed (retried after
// BarrierRetry).
func (c *Core) BarrierDone(now time.Time, term uint64, ok bool) {
	c.advance(now)
	if !c.current(term) || !c.barrier {
		c.step()
		return
	}
	c.barrier = false
	if !ok {
		c.barrierAt = c.now.Add(c.cfg.BarrierRetry)
		c.step()
		return
	}
	c.ready = true
	c.emit(GraceBeats)
	c.rounds, _ = batcher.New[work](batcher.Config{MaxItems: c.cfg.MaxTasks, MaxWait: c.wait(), Clock: eventClock{c}})
	// The previous leader may have left pending work.
	_ = c.rounds.AddN(c.item(), 1)
	c.periodAt = c.now.Add(c.cfg.Period)
	c.livenessAt = c.now.Add(c.cfg.LivenessEvery)
	if c.cfg.ForgetEvery > 0 {
		c.forgetAt = c.now.Add(c.cfg.ForgetEvery)
	}
	c.step()
}

// RoundDone reports the round of term.
func (c *Core) RoundDone(now time.Time, term uint64, r RoundResult) {
	c.advance(now)
	if !c.current(term) || !c.round {
		c.step()
		return
	}
	c.round = false
	if r.Deposed {
		c.depose()
		c.step()
		return
	}
	c.again, c.placed = r.Again, r.Placed
	if r.Preempt {
		c.preempt = true
		c.emit(Preempt)
		return
	}
	c.settle()
	c.step()
}

// PreemptDone reports the preemption that followed a round of term.
func (c *Core) PreemptDone(now time.Time, term uint64, r PreemptResult) {
	c.advance(now)
	if !c.current(term) || !c.preempt {
		c.step()
		return
	}
	c.preempt = false
	if r.Deposed {
		c.depose()
		c.step()
		return
	}
	if r.Preempted > 0 || r.Failed {
		c.again = true
	}
	c.settle()
	c.step()
}

// wait is the batcher's MaxWait: MaxWait, or for none the batcher's
// smallest, 1ns.
func (c *Core) wait() time.Duration { return max(c.cfg.MaxWait, time.Nanosecond) }

// item is a unit of work arrived now: enqueued as long before now as the
// batcher's wait exceeds MaxWait, so that it waits exactly MaxWait.
func (c *Core) item() batcher.Item[work] {
	return batcher.Item[work]{Enqueued: c.now.Add(c.cfg.MaxWait - c.wait())}
}

// depose stops the term's rounds.
func (c *Core) depose() {
	c.deposed = true
	c.emit(StepDown)
}

// settle applies the policy after a round: progress, or work to retry,
// goes again after MaxWait; without progress only IdleRounds times, then
// the core waits for new work or the period.
func (c *Core) settle() {
	retry := false
	switch {
	case !c.again:
		c.idle = 0
	case c.placed > 0:
		c.idle = 0
		retry = true
	case c.idle < c.cfg.IdleRounds:
		c.idle++
		retry = true
	}
	if retry {
		// An item as old as its backoff: ready as soon as the backoff
		// ends, MaxWait after this round, as new work would be.
		it := batcher.Item[work]{Enqueued: c.now.Add(-c.wait())}
		_ = c.rounds.Requeue([]batcher.Item[work]{it}, c.cfg.MaxWait)
	}
	c.periodAt = c.now.Add(c.cfg.Period)
}

// LivenessDone reports the liveness check of term.
func (c *Core) LivenessDone(now time.Time, term uint64) {
	c.advance(now)
	if c.current(term) && c.liveness {
		c.liveness = false
		c.livenessAt = c.now.Add(c.cfg.LivenessEvery)
	}
	c.step()
}

// ForgetDone reports the forget pass of term.
func (c *Core) ForgetDone(now time.Time, term uint64) {
	c.advance(now)
	if c.current(term) && c.forget {
		c.forget = false
		c.forgetAt = c.now.Add(c.cfg.ForgetEvery)
	}
	c.step()
}

// due reports whether t is set and not after now.
func (c *Core) due(t time.Time) bool { return !t.IsZero() && !t.After(c.now) }

// step emits the actions due at the core's time.
func (c *Core) step() {
	if !c.leading {
		return
	}
	if !c.ready {
		if !c.barrier && c.due(c.barrierAt) {
			c.barrier, c.barrierAt = true, time.Time{}
			c.emit(Barrier)
		}
		return
	}
	if !c.liveness && c.due(c.livenessAt) {
		c.liveness = true
		c.emit(Liveness)
	}
	if !c.forget && c.due(c.forgetAt) {
		c.forget = true
		c.emit(Forget)
	}
	if c.deposed || c.round || c.preempt {
		return
	}
	_, formed := c.rounds.TryNext()
	if formed || c.due(c.periodAt) {
		c.round = true
		c.emit(Round)
	}
}

// Ready returns the actions to carry out, in order, and forgets them: the
// caller carries out each (feeding back its Done event) before the next
// event.
func (c *Core) Ready() []Action {
	out := c.out
	c.out = nil
	return out
}

// Wake returns when the core next wants a Tick if nothing else happens;
// ok is false when only an event can move it on.
func (c *Core) Wake() (at time.Time, ok bool) {
	if !c.leading {
		return time.Time{}, false
	}
	earliest := func(t time.Time) {
		if !t.IsZero() && (!ok || t.Before(at)) {
			at, ok = t, true
		}
	}
	if !c.ready {
		if !c.barrier {
			earliest(c.barrierAt)
		}
		return at, ok
	}
	if !c.liveness {
		earliest(c.livenessAt)
	}
	if !c.forget {
		earliest(c.forgetAt)
	}
	if !c.deposed && !c.round && !c.preempt {
		earliest(c.periodAt)
		if t, due := c.rounds.Due(); due {
			earliest(t)
		}
	}
	return at, ok
}

// Leading reports whether the core leads, and in which term.
func (c *Core) Leading() (term uint64, ok bool) { return c.term, c.leading }
