package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/batcher"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/dispatcher/fsm"
	"github.com/sluicehq/sluice/dispatcher/jobfeed"
	"github.com/sluicehq/sluice/dispatcher/placement"
	"github.com/sluicehq/sluice/dispatcher/roundinput"
	"github.com/sluicehq/sluice/raftkv"
)

// Dispatcher runs one replica's share of the dispatcher: the scheduling
// loop while the replica leads, the node registry (heartbeats, TTLs,
// batched reports) and the node-facing Target long-poll. Its methods are
// safe for concurrent use.
type Dispatcher struct {
	cfg    Config
	placer *placement.Placer // used by the leader loop only
	// input is the leader loop's rounds' input, kept from round to round
	// and read again only where the FSM's change sets said it changed
	// (read by the leader loop only; it consumes the change sets through
	// consume).
	input roundinput.Kept
	// assign is the memory of the last plan's assignments as the FSM's
	// command takes them (the leader loop's).
	assign []fsm.Assignment

	// feed is the watch feed, a view of the FSM's change sets.
	feed *jobfeed.Feed
	// unsubscribe ends the FSM's calls of consume.
	unsubscribe func()

	closing chan struct{}
	// ctx is cancelled by Close; background proposals run under it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // the goroutines started by New

	// work is signalled (non-blocking, capacity 1) when new work may be
	// placeable: a submit, a registration, reports; arrived counts the
	// tasks (1 for a change that is not a submit) since the shell last
	// took it.
	work    chan struct{}
	arrived atomic.Int64

	// wakeups wakes the Changed waiters and the Target long-polls, a view
	// of the FSM's change sets.
	wakeups *wakeups
	// targets answers the Target long-polls, a view of the FSM's change
	// sets.
	targets *targetJournal

	mu struct {
		sync.Mutex
		// Every field below is guarded by mu.
		closed bool
		// beats is the leader's memory of node contacts. A node's beat,
		// once made, is never replaced or removed.
		beats map[string]*beat
		// beatOf caches, by a round input's node index, that node's beat
		// (nil: none yet), so that a round finds its nodes' beats without
		// a map lookup each while the node list stays the same.
		beatOf []nodeBeat
		// usageBeats counts the nodes that sent usage in this term; while
		// none has, the offline estimate has nothing to do, and beatOf is
		// dropped.
		usageBeats int
		// rounds is the ring of recent round stats; next is where the next
		// one goes.
		rounds []RoundStat
		next   int
		total  RoundTotals
		// lastPending is the diagnosis of the last round that ran placement.
		lastPending []placement.Pending
		leading     bool
		term        uint64
		// droppedReports counts the task reports the FSM refused.
		droppedReports int64
		// estimates are the task groups' usage estimates, from heartbeats.
		estimates map[placement.GroupKey]*usageEstimate
	}

	// shell runs the scheduling core (schedule).
	shell *shell

	// reports forms the rounds of Report calls that share an UpdateTasks
	// command.
	reports *batcher.Batcher[*reportReq]
}

// nodeBeat is a node's ID and its beat, and the free offline capacity
// the last round's placement saw on the node after the estimate.
type nodeBeat struct {
	id      string
	b       *beat
	offline api.Capacity
}

// beat is what the leader remembers of a node's contacts.
type beat struct {
	last    time.Time // the last contact, or the leader's start for grace
	contact bool      // a real contact since this replica started leading
	// usage is the node's last heartbeat's usage, received at usageAt
	// (zero: none) while leading in term usageTerm. It is ephemeral:
	// never proposed to raft, and only shown by the leader of that term.
	usage     api.NodeUsage
	usageAt   time.Time
	usageTerm uint64
	// onlineEst is what the online tasks of that heartbeat are estimated to
	// use (their groups' estimates), onlineAsked what they asked for.
	onlineEst, onlineAsked api.Capacity
}

// New validates cfg, fills its defaults, subscribes to the FSM's change
// sets and starts the Dispatcher's goroutines: the scheduling shell (which
// runs the scheduling core and, while the replica leads, its rounds and
// housekeeping) and the report batcher. Close stops them and ends the
// subscription.
func New(cfg Config) (*Dispatcher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	d := &Dispatcher{
		cfg:     cfg,
		placer:  placement.New(cfg.Registry),
		closing: make(chan struct{}),
		work:    make(chan struct{}, 1),
	}
	shell, err := newShell(d)
	if err != nil {
		return nil, err
	}
	d.shell = shell
	d.ctx, d.cancel = context.WithCancel(context.Background())
	d.wakeups = newWakeups()
	d.mu.beats = map[string]*beat{}
	d.mu.estimates = map[placement.GroupKey]*usageEstimate{}
	d.mu.rounds = make([]RoundStat, 0, cfg.StatsRounds)
	reports, err := newReportBatcher(cfg)
	if err != nil {
		return nil, fmt.Errorf("dispatcher: report batcher: %w", err)
	}
	d.reports = reports
	d.feed = jobfeed.New(cfg.FSM)
	d.targets = newTargetJournal(cfg.FSM)
	d.unsubscribe = cfg.FSM.Subscribe(d.consume)
	d.wg.Add(2)
	go d.schedule()
	go d.flushReports()
	return d, nil
}

// Close stops the scheduling loop and every goroutine of the Dispatcher and
// waits for them. Calls in flight return ErrClosed or their context's
// error. It does not close the raft replica.
func (d *Dispatcher) Close() error {
	d.mu.Lock()
	if d.mu.closed {
		d.mu.Unlock()
		return nil
	}
	d.mu.closed = true
	d.mu.Unlock()
	close(d.closing)
	d.cancel()
	d.wg.Wait()
	d.unsubscribe()
	d.broadcast()
	d.failReports()
	return nil
}

// kick tells the scheduling core that new work may be placeable.
func (d *Dispatcher) kick() { d.arrive(1) }

// arrive tells the scheduling core that n tasks arrived.
func (d *Dispatcher) arrive(n int64) {
	d.arrived.Add(max(n, 1))
	select {
	case d.work <- struct{}{}:
	default:
	}
}

// broadcast wakes every Target long-poll and every Changed waiter.
func (d *Dispatcher) broadcast() {
	d.wakeups.all()
}

// nodeChanged returns a channel closed at the next change of node's target
// generation or of the replica's leadership.
func (d *Dispatcher) nodeChanged(node string) <-chan struct{} {
	return d.wakeups.node(node)
}

// Changed returns a channel that is closed once the FSM has applied the
// next raft entries and the views have consumed their changes (or the
// FSM was reset), or at the next change of the replica's leadership.
// Take it before reading the state it guards, so that no change is
// missed.
func (d *Dispatcher) Changed() <-chan struct{} {
	return d.wakeups.next()
}

// consume is the Dispatcher's subscriber to the FSM's change sets, called
// on the replica's apply goroutine: the round input, the watch feed and
// the target journals, then the wake-ups, so that a woken reader finds
// the views as new as what woke it.
func (d *Dispatcher) consume(c *fsm.Changes) {
	d.input.Consume(c)
	d.feed.Consume(c)
	d.targets.consume(c)
	d.wakeups.consume(c)
}

// JobsChangedSince is the watch feed's answer (jobfeed.Feed): up to limit
// (0: all) jobs changed after index from, in the order of their last
// change, and the index the answer is current as of. Take Changed first
// to wait for the next answer.
func (d *Dispatcher) JobsChangedSince(from uint64, limit int) ([]fsm.ChangedJob, uint64) {
	return d.feed.JobsChangedSince(from, limit)
}

// Leading reports whether the scheduling loop runs here, and in which term.
func (d *Dispatcher) Leading() (term uint64, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mu.term, d.mu.leading
}

// notLeader returns the error of an operation only the leader serves.
func (d *Dispatcher) notLeader() error {
	st := d.cfg.Raft.Status()
	return &raftkv.NotLeaderError{LeaderID: st.Leader, LeaderAddr: st.LeaderAddr}
}

func (d *Dispatcher) checkOpen() error {
	select {
	case <-d.closing:
		return ErrClosed
	default:
		return nil
	}
}

func (d *Dispatcher) propose(ctx context.Context, cmd []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.ProposeTimeout)
	defer cancel()
	return d.cfg.Raft.Propose(ctx, cmd)
}

// Submit proposes the jobs in one SubmitJobs command (concurrent submits
// are packed into raft entries by raftkv) and returns their IDs, in order,
// once committed, and the indexes of the specs whose idempotency key named a
// job committed before (whose ID is returned for them; nothing new is
// created). An invalid spec rejects the whole submit, before anything is
// proposed, with fsm.SubmitJobs's *api.ValidationError. Errors of the raft
// replica are returned unchanged, so that a *raftkv.NotLeaderError names
// the leader to redirect to.
func (d *Dispatcher) Submit(ctx context.Context, specs []api.JobSpec) (ids []string, existing []int, err error) {
	if err := d.checkOpen(); err != nil {
		return nil, nil, err
	}
	cmd, err := fsm.SubmitJobs(d.cfg.Clock.Now(), specs)
	var tasks int64
	for i := range specs {
		for _, g := range specs[i].Tasks {
			tasks += g.Count
		}
	}
	return d.proposeCreate(ctx, "submit", cmd, err, tasks)
}

// proposeCreate proposes cmd, a command whose result decodes with
// fsm.DecodeSubmitResult (cmdErr is the error building it), and returns
// the IDs it answered and the indexes of those that existed before; once
// it is committed, tasks (when positive) tell the scheduling core how
// much work arrived.
func (d *Dispatcher) proposeCreate(ctx context.Context, what string, cmd []byte, cmdErr error, tasks int64) (ids []string, existing []int, err error) {
	if cmdErr != nil {
		return nil, nil, fmt.Errorf("dispatcher: %s: %w", what, cmdErr)
	}
	res, err := d.propose(ctx, cmd)
	if err != nil {
		return nil, nil, err
	}
	r, err := fsm.DecodeSubmitResult(res)
	if err != nil {
		return nil, nil, fmt.Errorf("dispatcher: %s: %w", what, err)
	}
	if tasks > 0 {
		d.arrive(tasks)
	}
	ids = make([]string, len(r.Jobs))
	for i, j := range r.Jobs {
		ids[i] = j.ID
		if j.Existing {
			existing = append(existing, i)
		}
	}
	return ids, existing, nil
}

// Cancel proposes the cancellation of a job.
func (d *Dispatcher) Cancel(ctx context.Context, id string) (fsm.CancelResult, error) {
	if err := d.checkOpen(); err != nil {
		return fsm.CancelResult{}, err
	}
	return d.proposeStop(ctx, "cancel "+id, fsm.CancelJob(d.cfg.Clock.Now(), id), true)
}

// proposeStop proposes cmd, a command whose result decodes with
// fsm.DecodeCancelResult; kick starts a round once it is committed.
func (d *Dispatcher) proposeStop(ctx context.Context, what string, cmd []byte, kick bool) (fsm.CancelResult, error) {
	res, err := d.propose(ctx, cmd)
	if err != nil {
		return fsm.CancelResult{}, err
	}
	r, err := fsm.DecodeCancelResult(res)
	if err != nil {
		return r, fmt.Errorf("dispatcher: %s: %w", what, err)
	}
	if kick {
		d.kick()
	}
	return r, nil
}

// CreateCapboxes proposes capbox requests for appmaster (a job ID) and
// returns one capbox set ID per request once committed, and the indexes of
// the requests whose idempotency key named a set created before. Errors
// are the FSM's (fsm.ErrNotFound, fsm.ErrNotAppmaster,
// fsm.ErrAppmasterDone, *api.ValidationError) or the replica's.
func (d *Dispatcher) CreateCapboxes(ctx context.Context, appmaster string, reqs []api.CapboxRequest) (sets []string, existing []int, err error) {
	if err := d.checkOpen(); err != nil {
		return nil, nil, err
	}
	cmd, err := fsm.CreateCapboxes(d.cfg.Clock.Now(), appmaster, reqs)
	var boxes int64
	for _, r := range reqs {
		boxes += r.Count
	}
	return d.proposeCreate(ctx, "create capboxes", cmd, err, boxes)
}

// ReleaseCapboxes proposes the release of appmaster's capboxes by ID.
func (d *Dispatcher) ReleaseCapboxes(ctx context.Context, appmaster string, ids []string) (fsm.CancelResult, error) {
	if err := d.checkOpen(); err != nil {
		return fsm.CancelResult{}, err
	}
	return d.proposeStop(ctx, "release capboxes of "+appmaster, fsm.ReleaseCapboxes(d.cfg.Clock.Now(), appmaster, ids), true)
}

// StartCapTasks proposes capbox tasks for appmaster and returns their IDs
// once committed, and the indexes of those whose name was taken in their
// capbox. Errors are the FSM's (fsm.ErrNotFound, fsm.ErrCapboxNotRunning,
// fsm.ErrNoRoom, *api.ValidationError) or the replica's.
func (d *Dispatcher) StartCapTasks(ctx context.Context, appmaster string, specs []api.CapTaskSpec) (ids []string, existing []int, err error) {
	if err := d.checkOpen(); err != nil {
		return nil, nil, err
	}
	cmd, err := fsm.StartCapTasks(d.cfg.Clock.Now(), appmaster, specs)
	return d.proposeCreate(ctx, "start capbox tasks", cmd, err, 0)
}

// StopCapTasks proposes stopping appmaster's capbox tasks by ID, and
// returns how many were told to stop.
func (d *Dispatcher) StopCapTasks(ctx context.Context, appmaster string, ids []string) (int64, error) {
	if err := d.checkOpen(); err != nil {
		return 0, err
	}
	r, err := d.proposeStop(ctx, "stop capbox tasks of "+appmaster, fsm.StopCapTasks(d.cfg.Clock.Now(), appmaster, ids), false)
	if err != nil {
		return 0, err
	}
	return r.Stopping, nil
}

// Register proposes a node's registration (or spec update); a node that was
// down becomes ready. It counts as a contact of the node.
func (d *Dispatcher) Register(ctx context.Context, spec api.NodeSpec) error {
	if err := d.checkOpen(); err != nil {
		return err
	}
	cmd, err := fsm.RegisterNode(d.cfg.Clock.Now(), spec)
	if err != nil {
		return fmt.Errorf("dispatcher: register %s: %w", spec.Name, err)
	}
	if _, err := d.propose(ctx, cmd); err != nil {
		return err
	}
	d.touch(spec.Name)
	d.kick()
	return nil
}

// Target is a node's desired pod set, whole or as the changes since the
// set of generation Base.
type Target struct {
	// Generation increases whenever the set changes.
	Generation uint64
	// Base is zero for a whole target. Otherwise Pods are the pods added
	// (or possibly changed) since the target of generation Base, and
	// Removed the task IDs of its pods no longer in the set (which may
	// name pods that had already gone).
	Base uint64
	// Pods are the desired pods, or those added since Base, by task ID,
	// in a slice of the caller's own. Their specs share memory with the
	// FSM: do not modify them.
	Pods    []api.TargetPod
	Removed []string
}

// Target long-polls for a node's target: it returns the current one as soon
// as its generation differs from knownGeneration, or blocks until it does,
// ctx ends, or the replica stops leading (then a *raftkv.NotLeaderError).
// Only the leader serves it, since only the leader keeps the node's
// heartbeats. A poll's start counts as the node's contact, and after half
// the node TTL (on the Config's Clock) at most it returns an error matching
// context.DeadlineExceeded, as when ctx ends (the HTTP layer answers 304
// Not Modified): a live node polls again within the TTL, and an open poll
// whose node vanished (a cut network, whose connection the server does not
// see end) does not keep the node alive.
func (d *Dispatcher) Target(ctx context.Context, node string, knownGeneration uint64) (Target, error) {
	return d.target(ctx, node, knownGeneration, false)
}

// TargetChanges is Target answered, when the node's target journal reaches
// back to knownGeneration (targets.go), with the changes since the target
// of that generation, which the node holds: work in proportion to what
// changed, not to the node's pods. Every replica keeps the journals from
// the change sets its FSM applies, so a new leader answers so too, for
// the generations since its replica last started or restored a snapshot.
func (d *Dispatcher) TargetChanges(ctx context.Context, node string, knownGeneration uint64) (Target, error) {
	return d.target(ctx, node, knownGeneration, true)
}

func (d *Dispatcher) target(ctx context.Context, node string, knownGeneration uint64, changes bool) (Target, error) {
	// The bound is on the Clock, as the TTL it halves is.
	bound := clock.NewAlarm(d.cfg.Clock)
	defer bound.Stop()
	bound.Set(d.touch(node) / 2)
	for {
		// Take the wake-up channel first: a change after this closes it.
		ch := d.nodeChanged(node)
		if err := d.checkOpen(); err != nil {
			return Target{}, err
		}
		if _, ok := d.Leading(); !ok {
			return Target{}, d.notLeader()
		}
		t, ok, err := d.targets.since(node, knownGeneration, changes)
		if err != nil {
			return Target{}, fmt.Errorf("dispatcher: target of %q: %w", node, err)
		}
		if ok {
			return t, nil
		}
		select {
		case <-ctx.Done():
			return Target{}, fmt.Errorf("dispatcher: target of %q: %w", node, ctx.Err())
		case <-bound.C:
			return Target{}, fmt.Errorf("dispatcher: target of %q: %w", node, context.DeadlineExceeded)
		case <-d.closing:
			return Target{}, ErrClosed
		case <-ch:
		}
	}
}

// touch records a contact of node and returns the node TTL.
func (d *Dispatcher) touch(node string) time.Duration {
	now := d.cfg.Clock.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.touchLocked(node, now)
	return d.ttl(len(d.mu.beats))
}

// touchLocked is touch with d.mu held; it returns the node's beat.
func (d *Dispatcher) touchLocked(node string, now time.Time) *beat {
	b := d.mu.beats[node]
	if b == nil {
		b = &beat{}
		d.mu.beats[node] = b
	}
	b.last, b.contact = now, true
	return b
}

// errDeposed stops the loop of a leader whose plan the FSM refused as stale.
var errDeposed = errors.New("dispatcher: deposed")
