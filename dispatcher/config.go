package dispatcher

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/dispatcher/fsm"
	"github.com/sluicehq/sluice/dispatcher/placement"
	"github.com/sluicehq/sluice/dispatcher/sched"
	"github.com/sluicehq/sluice/raftkv"
)

// Defaults of Config, used where a field is zero.
const (
	DefaultMaxWait            = 5 * time.Millisecond
	DefaultMaxTasks           = 20_000
	DefaultMaxPreemptions     = 100
	DefaultEstimateHeadroom   = 0.1
	DefaultEstimateMaxAge     = time.Minute
	DefaultEstimateDecayEvery = 10 * time.Second
	DefaultPeriod             = time.Second
	DefaultRoundBudget        = 100 * time.Millisecond
	DefaultProposeTimeout     = 10 * time.Second
	DefaultNodeTTL            = 10 * time.Second
	DefaultNodeTTLPerNode     = time.Millisecond
	DefaultReportWait         = 2 * time.Millisecond
	DefaultMaxReports         = 20_000
	DefaultStatsRounds        = 1024
	DefaultJobRetention       = time.Hour
	DefaultJobRetentionMax    = 100_000
	DefaultHistoryRetention   = 7 * 24 * time.Hour
	DefaultHistoryMax         = 100_000
	maxForgetEvery            = 10 * time.Second
	// MaxHistoryMax is the largest HistoryMax: the summaries are all in
	// memory, and this many hold about 1.6 GiB of every replica's heap.
	MaxHistoryMax          = 10_000_000
	defaultLivenessDivisor = 4
)

// Config configures a Dispatcher. The zero value of every field but Raft
// and FSM means the documented default.
type Config struct {
	// Raft is the local replica; its Config.StateMachine must be FSM.
	// Required. The Dispatcher does not close it.
	Raft *raftkv.Node
	// FSM is the replica's state machine. Required.
	FSM *fsm.FSM
	// Registry holds the filters and scorers placement uses. Default
	// placement.DefaultRegistry().
	Registry *placement.Registry

	// MaxWait is the delay-scheduling wait, the wait bound of a round:
	// work that arrives waits this long for more before a round places
	// it, so that one solve and one commit carry more placements (MaxTasks
	// tasks arrived close a round sooner). Default 5ms; negative means no
	// wait.
	MaxWait time.Duration
	// MaxTasks bounds the pending tasks one round considers (highest
	// priority first), and so the plan one commit carries: the commit is
	// most of a large round's time (about 2 µs per placement on each
	// replica). Default 20,000, which keeps rounds near 50 ms at 10,000
	// nodes; a larger backlog is placed by rounds that follow each other.
	MaxTasks int64
	// MaxPreemptions bounds the running tasks one round may preempt for
	// offline groups it could not place (placement.Preempt). Default 100;
	// negative turns preemption off.
	MaxPreemptions int
	// QueueWeights are the queues' fair-share weights, 1 to
	// api.MaxQueueWeight: at one priority, the active queues share
	// contended capacity in these proportions (dominant resource). A queue
	// not named weighs 1. A weight set through the API (fsm.SetQueue) wins
	// over the queue's weight here.
	QueueWeights map[string]int64
	// SlotTTL keeps the resources of a task that ends on its own cached
	// on its node this long for a task of the same shape and class
	// (Capos' offer cache: placement prefers the slot, other work cannot
	// take it); then they return to the node's free pool. Default 0: no
	// caching.
	SlotTTL time.Duration
	// EstimateHeadroom is added to the online tasks' estimated usage (as a
	// share of it) when the leader lowers a node's offline capacity to
	// what its online work leaves idle. Default 0.1.
	EstimateHeadroom float64
	// EstimateMaxAge is how long a node's heartbeat, and a task group's
	// usage estimate, count; negative turns estimates off (offline
	// capacity is the nodes' static allocatable). Default 1m.
	EstimateMaxAge time.Duration
	// EstimateDecayEvery is how long smaller usage samples take to lower
	// a group's estimate a fifth of the way to them, however many of its
	// tasks report: the nodes' heartbeat period. Default 10s, the
	// nodelet's default heartbeat period.
	EstimateDecayEvery time.Duration
	// Period runs a round even without new work (tasks whose retry
	// backoff ended, capacity freed by reports). Default 1s.
	Period time.Duration
	// RoundBudget bounds the time placement may take in a round; a solve
	// cut short leaves the round's tasks pending for the next one.
	// Default 100ms.
	RoundBudget time.Duration
	// ProposeTimeout bounds one raft proposal made by the loop, the node
	// registry or the report batcher. Default 10s.
	ProposeTimeout time.Duration

	// NodeTTL is the base time a node may go without contact (a Report,
	// a Register, a Heartbeat, or the start of a Target long-poll, which
	// the leader answers within half the TTL) before the leader proposes
	// it down. Default 10s.
	NodeTTL time.Duration
	// NodeTTLPerNode is added to NodeTTL once per registered node, so the
	// TTL grows with the cluster. Default 1ms (10,000 nodes: 20s); negative
	// means none.
	NodeTTLPerNode time.Duration
	// LivenessEvery is how often the leader checks node TTLs. Default
	// NodeTTL/4.
	LivenessEvery time.Duration

	// ReportWait is the wait bound of the report batcher: how long a
	// Report call waits for others to ride in the same UpdateTasks
	// command. Default 2ms; negative means no wait.
	ReportWait time.Duration
	// MaxReports bounds the task reports of one UpdateTasks command, and
	// the Report calls of one round of the report batcher. Default 20,000.
	MaxReports int

	// JobRetention is how long a finished job (every task ended, nothing
	// pending; an appmaster's capbox sets too) is kept after it finished:
	// then the leader forgets it (fsm.ForgetJobs), and its records, tasks
	// and idempotency key leave every replica's memory and store, so
	// that a dispatcher's state follows the work in flight and not every
	// job ever run. Default 1h; negative keeps finished jobs for ever.
	JobRetention time.Duration
	// JobRetentionMax bounds how many finished jobs are kept, whatever
	// their age: past it the leader forgets the oldest, so that the
	// memory finished jobs hold has a ceiling at any rate of work. A kept
	// job holds about 0.7 KiB of every replica's heap for a job of one
	// task and 19 KiB for one of 100 tasks (fsm's BenchmarkRetainedJobs:
	// its tasks dominate), and a process's resident memory runs to about
	// twice its heap: at the default, up to 2 GiB of heap for jobs of 100
	// tasks. Default 100,000; negative: no bound.
	JobRetentionMax int

	// HistoryRetention is how long the summary of a forgotten job
	// (fsm.ForgetJobsToHistory: its name, queue, labels, times, final
	// state, task counts and first failure) is kept after the job ended:
	// listings show it, marked as history, and then the leader prunes it
	// (fsm.PruneHistory). Default 7 days; negative keeps no history.
	HistoryRetention time.Duration
	// HistoryMax bounds how many summaries are kept, whatever their age:
	// past it the leader prunes those of the jobs that ended first. Each
	// holds about 195 bytes of every replica's heap (the FSM's and the
	// watch feed's) and 90 bytes of its store (fsm's
	// BenchmarkHistorySummary, a named job with two labels; longer names
	// and more labels cost their bytes): at the default, about 19 MiB of
	// heap. Default 100,000; negative keeps no history.
	HistoryMax int

	// StatsRounds is how many recent rounds Rounds and RoundSummary keep.
	// Default 1024.
	StatsRounds int
	// OnRound, when set, is called with the stat of each round that had
	// pending work, as Rounds records it, by the goroutine that runs
	// rounds: it must return quickly and not call back into the
	// Dispatcher. Default none.
	OnRound func(RoundStat)
	// Clock supplies the scheduling time (what commands carry, delay
	// scheduling, periods and TTLs). Default the system clock; tests pass
	// clock.Manual.
	Clock clock.Clock
	// Logger receives the dispatcher's logs. Default: discard.
	Logger *slog.Logger

	// trace, when set (by tests), is called with each action of the
	// scheduling core as the shell carries it out.
	trace func(sched.Action)
}

// Validate reports every problem of c at once.
func (c *Config) Validate() error {
	var probs []string
	add := func(f string, a ...any) { probs = append(probs, fmt.Sprintf(f, a...)) }
	if c.Raft == nil {
		add("Raft is required")
	}
	if c.FSM == nil {
		add("FSM is required")
	}
	if c.MaxTasks < 0 {
		add("MaxTasks %d must not be negative", c.MaxTasks)
	}
	for _, q := range slices.Sorted(maps.Keys(c.QueueWeights)) {
		if w := c.QueueWeights[q]; q == "" || w < 1 || w > api.MaxQueueWeight {
			add("QueueWeights[%q] = %d: want a named queue and a weight of 1 to %d", q, w, api.MaxQueueWeight)
		}
	}
	if c.EstimateHeadroom < 0 || c.EstimateHeadroom > 10 {
		add("EstimateHeadroom %v must be from 0 to 10", c.EstimateHeadroom)
	}
	if c.EstimateDecayEvery < 0 {
		add("EstimateDecayEvery %v must not be negative", c.EstimateDecayEvery)
	}
	if c.MaxReports < 0 {
		add("MaxReports %d must not be negative", c.MaxReports)
	}
	if c.HistoryMax > MaxHistoryMax {
		add("HistoryMax %d must be at most %d", c.HistoryMax, MaxHistoryMax)
	}
	if c.StatsRounds < 0 {
		add("StatsRounds %d must not be negative", c.StatsRounds)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"Period", c.Period}, {"RoundBudget", c.RoundBudget}, {"ProposeTimeout", c.ProposeTimeout},
		{"NodeTTL", c.NodeTTL}, {"LivenessEvery", c.LivenessEvery}, {"SlotTTL", c.SlotTTL}} {
		if d.v < 0 {
			add("%s %v must not be negative", d.name, d.v)
		}
	}
	if len(probs) > 0 {
		return fmt.Errorf("%w: %s", ErrConfig, strings.Join(probs, "; "))
	}
	return nil
}

// defaultOrOff sets *v to def when it is zero, and to zero (off) when it
// is negative: the rule of the settings whose zero means the default.
func defaultOrOff[T int | time.Duration](v *T, def T) {
	switch {
	case *v == 0:
		*v = def
	case *v < 0:
		*v = 0
	}
}

func (c Config) withDefaults() Config {
	if c.Registry == nil {
		c.Registry = placement.DefaultRegistry()
	}
	defaultOrOff(&c.MaxWait, DefaultMaxWait)
	if c.MaxTasks == 0 {
		c.MaxTasks = DefaultMaxTasks
	}
	if c.EstimateHeadroom == 0 {
		c.EstimateHeadroom = DefaultEstimateHeadroom
	}
	defaultOrOff(&c.EstimateMaxAge, DefaultEstimateMaxAge)
	if c.EstimateDecayEvery == 0 {
		c.EstimateDecayEvery = DefaultEstimateDecayEvery
	}
	defaultOrOff(&c.MaxPreemptions, DefaultMaxPreemptions)
	if c.Period == 0 {
		c.Period = DefaultPeriod
	}
	if c.RoundBudget == 0 {
		c.RoundBudget = DefaultRoundBudget
	}
	if c.ProposeTimeout == 0 {
		c.ProposeTimeout = DefaultProposeTimeout
	}
	if c.NodeTTL == 0 {
		c.NodeTTL = DefaultNodeTTL
	}
	defaultOrOff(&c.NodeTTLPerNode, DefaultNodeTTLPerNode)
	if c.LivenessEvery == 0 {
		c.LivenessEvery = max(c.NodeTTL/defaultLivenessDivisor, time.Millisecond)
	}
	defaultOrOff(&c.ReportWait, DefaultReportWait)
	if c.MaxReports == 0 {
		c.MaxReports = DefaultMaxReports
	}
	if c.StatsRounds == 0 {
		c.StatsRounds = DefaultStatsRounds
	}
	defaultOrOff(&c.JobRetention, DefaultJobRetention)
	defaultOrOff(&c.JobRetentionMax, DefaultJobRetentionMax)
	defaultOrOff(&c.HistoryRetention, DefaultHistoryRetention)
	defaultOrOff(&c.HistoryMax, DefaultHistoryMax)
	if c.HistoryRetention == 0 || c.HistoryMax == 0 {
		c.HistoryRetention, c.HistoryMax = 0, 0 // no history
	}
	c.Clock = clock.OrSystem(c.Clock)
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return c
}

// Errors callers act on.
var (
	// ErrConfig: the Config is invalid; the error lists every problem.
	ErrConfig = errors.New("dispatcher: invalid config")
	// ErrClosed: the Dispatcher was closed.
	ErrClosed = errors.New("dispatcher: closed")
	// ErrUnknownNode: the node is not registered.
	ErrUnknownNode = errors.New("dispatcher: unknown node")
)
