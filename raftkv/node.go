package raftkv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// Node is one replica of the replicated store. Its methods are safe for
// concurrent use. One goroutine (the Ready loop) owns the raft RawNode, the
// write side of the storage and the state machine; every other method talks
// to it over channels and waits, so no caller ever blocks the loop.
type Node struct {
	cfg   Config
	id    uint64
	log   *slog.Logger
	db    *pebble.DB
	st    *storage
	sm    StateMachine
	tr    Transport
	app   *appender
	guard *fatalGuard
	// nonce tells this incarnation's proposals apart in the log.
	nonce uint64

	propc chan *proposal
	readc chan *readWaiter
	ctrlc chan func()
	inbox inbox
	failc chan struct{} // closed by fail
	stopc chan struct{} // closed by Close
	donec chan struct{} // closed when the Ready loop has exited
	wg    sync.WaitGroup

	leader  atomic.Uint64 // the leader as last seen by the loop
	metrics metrics
	// syncLatency times the log's syncs (SyncLatency).
	syncLatency latencies

	closeOnce sync.Once
	closeErr  error

	// dbMu keeps Close from closing the database under a reader.
	dbMu     sync.RWMutex
	dbClosed bool

	// mu guards what the loop publishes for other goroutines.
	mu struct {
		sync.Mutex
		status   Status
		err      error // the fatal error that stopped the replica
		failOnce bool
		// leads and term are the leadership status last announced: leads
		// is status.IsLeader of a replica that has not failed.
		leads bool
		term  uint64
		// leadership, when not nil, is closed (and set to nil) at the next
		// change of leads or term.
		leadership chan struct{}
	}

	// Owned by the Ready loop.
	rn        *raft.RawNode
	lead      uint64
	state     raft.StateType
	confState *raftpb.ConfState
	members   map[uint64]memberRecord // the replicated member table
	peers     map[uint64]string       // what the transport was told
	heard     map[uint64]time.Time    // when a message of each peer was last stepped (checkQuorumAfter)
	seq       uint64
	waiting   map[uint64]*proposal
	prunedAt  uint64 // the applied term up to which waiters were pruned
	reads     readQueue
	batch     Batch
	decBuf    []byte
	cmdBuf    [][]byte
	propBuf   []*proposal
	encBuf    [][]byte
	sendBuf   []*raftpb.Message
	localBuf  []localResponse
	// applyQ holds the MsgStorageApply messages not yet applied in full,
	// oldest first, the first of them applied up to applyAt entries
	// (applyPending); applyMore wakes the loop to go on with them.
	applyQ    []*raftpb.Message
	applyAt   int
	applyMore chan struct{}
	applied   indexTerm
	wroteAt   time.Time // when the applied state was last written
	// membersDirty says the published member list must be rebuilt.
	membersDirty bool

	// unstored says some applied state is not yet written to the store
	// (set by the loop); a read of the store asks the loop to write it
	// first.
	unstored atomic.Bool
}

// proposal is a command (or membership change) waiting for its result.
type proposal struct {
	cmd  []byte // encoded command
	term uint64 // the term it was proposed in
	seq  uint64 // its key in Node.waiting
	done chan result
}

type result struct {
	val []byte
	err error
}

func (p *proposal) finish(r result) {
	select {
	case p.done <- r:
	default:
	}
}

// Member is one replica of the cluster.
type Member struct {
	// ID is the member's raft ID.
	ID uint64
	// Addr is the member's raft (transport) address.
	Addr string
	// Meta is opaque to raftkv: what the application records about the
	// member with its membership (a dispatcher replica's client URL). It
	// is replicated with the member table, so every replica, one restarted
	// or one that catches up by snapshot included, has it. Empty for an
	// initial member not in Config.PeerMeta.
	Meta string
	// Learner: the member receives the log but does not vote.
	Learner bool
}

// Status is a replica's view of the cluster.
type Status struct {
	ID         uint64
	Leader     uint64 // 0 when unknown
	LeaderAddr string
	IsLeader   bool
	State      string // raft's role (StateLeader, StateFollower, ...), or "stopped"
	Term       uint64
	Commit     uint64
	Applied    uint64
	FirstIndex uint64 // first index in the log
	LastIndex  uint64
	Members    []Member // sorted by ID
	// Err is the error that stopped the replica, if any.
	Err error
}

// Open opens (creating or bootstrapping if needed) the replica in cfg.Dir,
// starts its transport and its Ready loop.
func Open(cfg Config) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	n := &Node{
		cfg:     cfg,
		id:      cfg.ID,
		log:     cfg.Logger.With("replica", cfg.ID),
		sm:      cfg.StateMachine,
		tr:      cfg.Transport,
		propc:   make(chan *proposal, 4096),
		readc:   make(chan *readWaiter, 1024),
		ctrlc:   make(chan func(), 16),
		failc:   make(chan struct{}),
		stopc:   make(chan struct{}),
		donec:   make(chan struct{}),
		waiting: map[uint64]*proposal{},
		peers:   map[uint64]string{},
		heard:   map[uint64]time.Time{},
	}
	n.inbox.ready = make(chan struct{}, 1)
	n.applyMore = make(chan struct{}, 1)
	n.app = newAppender(n)
	for n.nonce == 0 {
		n.nonce = rand.Uint64()
	}
	n.guard = &fatalGuard{log: n.log, onFatal: func(err error) { n.fail(storageError("", err)) }}
	db, err := openPebble(cfg, n.guard)
	if err != nil {
		return nil, fmt.Errorf("raftkv: open replica %d in %s: %w", cfg.ID, cfg.Dir, err)
	}
	n.db = db
	if err := n.init(); err != nil {
		n.dbClosed = true
		_ = n.closeDB()
		return nil, fmt.Errorf("raftkv: open replica %d in %s: %w", cfg.ID, cfg.Dir, err)
	}
	n.wg.Go(n.app.run)
	go n.run()
	return n, nil
}

// init loads or bootstraps the state and builds the RawNode.
func (n *Node) init() (err error) {
	defer n.guard.enter()()
	defer recoverFatal(&err, "open")
	st, ps, err := loadStorage(n.db, n.cfg.EntryCacheBytes)
	if err != nil {
		return err
	}
	n.st = st
	st.genSnapshot = n.startSnapshot
	switch {
	case ps.fresh && n.cfg.Join:
		if err := st.bootstrap(n.id, nil); err != nil {
			return err
		}
		// Only until a snapshot brings the member table.
		ps.members = records(n.cfg.Peers, nil)
	case ps.fresh:
		peers := n.cfg.Peers
		if len(peers) == 0 {
			peers = map[uint64]string{n.id: ""}
		}
		if _, ok := peers[n.id]; !ok {
			return fmt.Errorf("raftkv: Peers does not include this replica (%d)", n.id)
		}
		ps.members = records(peers, n.cfg.PeerMeta)
		if err := st.bootstrap(n.id, ps.members); err != nil {
			return err
		}
	case ps.id != n.id:
		return fmt.Errorf("raftkv: directory belongs to replica %d", ps.id)
	case len(ps.members) == 0:
		// Joined but not yet caught up: still only Peers says where the
		// others are.
		ps.members = records(n.cfg.Peers, nil)
	}
	n.members = ps.members
	if n.members == nil {
		n.members = map[uint64]memberRecord{}
	}
	n.membersDirty = true
	hs, cs, _ := st.InitialState()
	n.confState = cs
	applied, _, _, _ := st.state()
	n.applied = applied
	n.batch.reset(n.db)
	n.wroteAt = time.Now()
	n.prunedAt = applied.term

	readOnly := raft.ReadOnlySafe
	if n.cfg.LeaseReads {
		readOnly = raft.ReadOnlyLeaseBased
	}
	rn, err := raft.NewRawNode(&raft.Config{
		ID:                        n.id,
		ElectionTick:              n.cfg.ElectionTicks,
		HeartbeatTick:             n.cfg.HeartbeatTicks,
		Storage:                   st,
		Applied:                   applied.index,
		MaxSizePerMsg:             n.cfg.MaxSizePerMsg,
		MaxCommittedSizePerReady:  max(n.cfg.MaxSizePerMsg, 64<<20),
		MaxUncommittedEntriesSize: n.cfg.MaxUncommittedEntriesSize,
		MaxInflightMsgs:           n.cfg.MaxInflightMsgs,
		MaxInflightBytes:          n.cfg.MaxInflightBytes,
		AsyncStorageWrites:        true,
		CheckQuorum:               true,
		PreVote:                   true,
		ReadOnlyOption:            readOnly,
		Logger:                    raftLogger{n.log},
		// Followers answer NotLeader; the caller (the dispatcher) forwards.
		DisableProposalForwarding: true,
		StepDownOnRemoval:         true,
	})
	if err != nil {
		return fmt.Errorf("raftkv: raft: %w", err)
	}
	n.rn = rn
	if l, ok := n.sm.(Loader); ok {
		if err := l.Load(pebbleReader{n.db}); err != nil {
			return fmt.Errorf("raftkv: load state machine: %w", err)
		}
	}
	if n.tr != nil {
		if err := n.tr.Start(n); err != nil {
			return fmt.Errorf("raftkv: start transport: %w", err)
		}
	}
	n.syncPeers()
	// A lone voter need not wait out an election timeout.
	if v := cs.GetVoters(); len(v) == 1 && v[0] == n.id && len(cs.GetLearners()) == 0 {
		_ = rn.Campaign()
	}
	n.log.Info("replica opened", "term", hs.GetTerm(), "commit", hs.GetCommit(), "applied", applied.index, "voters", cs.GetVoters(), "learners", cs.GetLearners())
	n.publish()
	return nil
}

// fail records the error that stops the replica; the first one wins. It may
// be called from any goroutine.
func (n *Node) fail(err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.mu.failOnce {
		return
	}
	n.mu.failOnce = true
	n.mu.err = err
	n.mu.status.Err = err
	n.announceLocked()
	close(n.failc)
}

// LeadershipChanged returns a channel that is closed at the next change of
// whether this replica leads, or of its term, as Status reports them (a
// failed or closed replica leads nothing). Take the channel before reading
// Status, so that no change is missed. It costs the Ready loop a comparison
// per Ready: subscribers are woken, not polled.
func (n *Node) LeadershipChanged() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.mu.leadership == nil {
		n.mu.leadership = make(chan struct{})
	}
	return n.mu.leadership
}

// announceLocked wakes the LeadershipChanged subscribers if the status's
// leadership differs from the one last announced.
func (n *Node) announceLocked() {
	leads := n.mu.status.IsLeader && n.mu.status.Err == nil
	if leads == n.mu.leads && n.mu.status.Term == n.mu.term {
		return
	}
	n.mu.leads, n.mu.term = leads, n.mu.status.Term
	if n.mu.leadership != nil {
		close(n.mu.leadership)
		n.mu.leadership = nil
	}
}

// Err returns the error that stopped the replica, or nil.
func (n *Node) Err() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.mu.err
}

// Failed returns a channel that is closed when the replica stops on an
// error of its own (Err is then non-nil and matches ErrStorage when the
// disk failed), not when Close stops it. A failed replica serves nothing
// again until it is closed and reopened: its owner selects on Failed to
// learn that without polling.
func (n *Node) Failed() <-chan struct{} { return n.failc }

// stoppedErr is what callers get once the loop is gone.
func (n *Node) stoppedErr() error {
	if err := n.Err(); err != nil {
		return err
	}
	return ErrStopped
}

// usable returns an error if the replica no longer serves.
func (n *Node) usable() error {
	if err := n.Err(); err != nil {
		return err
	}
	select {
	case <-n.stopc:
		return ErrStopped
	default:
		return nil
	}
}

func timeoutErr(ctx context.Context) error {
	return fmt.Errorf("%w: %w", ErrTimeout, context.Cause(ctx))
}

func (n *Node) notLeader() error {
	lead := n.leader.Load()
	e := &NotLeaderError{LeaderID: lead}
	if lead != 0 {
		n.mu.Lock()
		e.LeaderAddr = n.mu.status.LeaderAddr
		n.mu.Unlock()
	}
	return e
}

// Propose replicates cmd, waits until it is applied on this replica and
// returns the state machine's result. Only the leader accepts proposals
// (others return a *NotLeaderError). Concurrent proposals are packed into
// shared log entries and share one fsync.
//
// On ErrProposalDropped and ErrNotLeader the command was not applied; on
// ErrTimeout, ErrStopped and ErrOutcomeUnknown it may have been.
func (n *Node) Propose(ctx context.Context, cmd []byte) ([]byte, error) {
	if err := n.usable(); err != nil {
		return nil, err
	}
	if len(cmd) > n.cfg.MaxCommandBytes {
		return nil, fmt.Errorf("%w: %d bytes (limit %d)", ErrTooLarge, len(cmd), n.cfg.MaxCommandBytes)
	}
	if n.leader.Load() != n.id {
		return nil, n.notLeader()
	}
	p := &proposal{cmd: encodeCommand(cmd, n.cfg.CompressThreshold), done: make(chan result, 1)}
	select {
	case n.propc <- p:
	case <-ctx.Done():
		return nil, timeoutErr(ctx)
	case <-n.donec:
		return nil, n.stoppedErr()
	}
	return n.wait(ctx, p)
}

func (n *Node) wait(ctx context.Context, p *proposal) ([]byte, error) {
	select {
	case r := <-p.done:
		return r.val, r.err
	case <-ctx.Done():
		return nil, timeoutErr(ctx)
	case <-n.donec:
		select {
		case r := <-p.done:
			return r.val, r.err
		default:
			return nil, n.stoppedErr()
		}
	}
}

// do runs fn on the Ready loop and returns its error.
func (n *Node) do(ctx context.Context, fn func() error) error {
	if err := n.usable(); err != nil {
		return err
	}
	done := make(chan error, 1)
	select {
	case n.ctrlc <- func() { done <- fn() }:
	case <-ctx.Done():
		return timeoutErr(ctx)
	case <-n.donec:
		return n.stoppedErr()
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return timeoutErr(ctx)
	case <-n.donec:
		return n.stoppedErr()
	}
}

// ReadIndex waits until this replica has applied every entry committed
// before the call: reads of the local state after it returns are
// linearizable. It works on followers too (the leader confirms its
// leadership with a quorum and hands out the index). Concurrent calls share
// one round trip.
func (n *Node) ReadIndex(ctx context.Context) error {
	if err := n.usable(); err != nil {
		return err
	}
	n.metrics.reads.Add(1)
	w := &readWaiter{done: make(chan error, 1)}
	select {
	case n.readc <- w:
	case <-ctx.Done():
		return timeoutErr(ctx)
	case <-n.donec:
		return n.stoppedErr()
	}
	select {
	case err := <-w.done:
		return err
	case <-ctx.Done():
		return timeoutErr(ctx)
	case <-n.donec:
		return n.stoppedErr()
	}
}

// Get reads key from this replica's applied state, which may lag the
// leader's (use LinearizableGet, or ReadIndex first, for a linearizable read).
// It returns ErrNotFound for a missing key.
func (n *Node) Get(key []byte) ([]byte, error) {
	var out []byte
	err := n.read(func(r Reader) (err error) {
		out, err = r.Get(key)
		return err
	})
	return out, err
}

// Scan calls fn for every key of the state machine in [start, end) (nil end:
// to the end) of this replica's applied state, in order.
func (n *Node) Scan(start, end []byte, fn func(key, value []byte) error) error {
	return n.read(func(r Reader) error { return r.Scan(start, end, fn) })
}

// LinearizableGet is ReadIndex followed by Get.
func (n *Node) LinearizableGet(ctx context.Context, key []byte) ([]byte, error) {
	if err := n.ReadIndex(ctx); err != nil {
		return nil, err
	}
	return n.Get(key)
}

func (n *Node) read(fn func(Reader) error) (err error) {
	if err := n.usable(); err != nil {
		return err
	}
	if n.unstored.Load() {
		if err := n.do(context.Background(), n.writeStateNow); err != nil {
			return err
		}
	}
	n.dbMu.RLock()
	defer n.dbMu.RUnlock()
	if n.dbClosed {
		return ErrStopped
	}
	defer n.guard.enter()()
	defer recoverFatal(&err, "read")
	err = fn(pebbleReader{n.db})
	if errors.Is(err, ErrStorage) {
		n.fail(err)
	}
	// Never hand out data read after the replica failed.
	if ferr := n.Err(); ferr != nil {
		return ferr
	}
	return err
}

// Status returns the replica's view of the cluster as of its last Ready.
func (n *Node) Status() Status {
	n.mu.Lock()
	defer n.mu.Unlock()
	s := n.mu.status
	s.Members = slices.Clone(s.Members)
	if s.Err != nil {
		// A stopped replica leads nothing, whatever raft said last.
		s.IsLeader, s.State = false, "stopped"
	}
	return s
}

// TransferLeadership asks the leader to hand its leadership to the voter to
// and waits until to leads. To 0 picks the voter that has the most of the
// log among those heard from within an election timeout; it fails when no
// other voter was.
func (n *Node) TransferLeadership(ctx context.Context, to uint64) error {
	var target atomic.Uint64
	target.Store(to)
	start := func() error {
		if target.Load() == 0 {
			t, err := n.transferTargetLocked()
			if err != nil {
				return err
			}
			target.Store(t)
		}
		dst := target.Load()
		if !slices.Contains(n.confState.GetVoters(), dst) {
			return fmt.Errorf("raftkv: transfer leadership: %d is not a voter", dst)
		}
		if n.lead == dst {
			return nil
		}
		if n.state != raft.StateLeader {
			return n.notLeaderLocked()
		}
		n.rn.TransferLeader(dst)
		return nil
	}
	if err := n.do(ctx, start); err != nil {
		return fmt.Errorf("raftkv: transfer leadership to %d: %w", target.Load(), err)
	}
	to = target.Load()
	t := time.NewTicker(n.cfg.TickInterval)
	defer t.Stop()
	retry := time.Now().Add(time.Duration(2*n.cfg.ElectionTicks) * n.cfg.TickInterval)
	for n.leader.Load() != to {
		select {
		case <-ctx.Done():
			return fmt.Errorf("raftkv: transfer leadership to %d: %w", to, timeoutErr(ctx))
		case <-n.donec:
			return n.stoppedErr()
		case now := <-t.C:
			if now.After(retry) && n.leader.Load() == n.id {
				// raft gives up a transfer after an election timeout; ask again.
				retry = now.Add(time.Duration(2*n.cfg.ElectionTicks) * n.cfg.TickInterval)
				if err := n.do(ctx, start); err != nil {
					return fmt.Errorf("raftkv: transfer leadership to %d: %w", to, err)
				}
			}
		}
	}
	return nil
}

// transferTargetLocked picks the voter TransferLeadership(0) hands over to.
// Run on the loop.
func (n *Node) transferTargetLocked() (uint64, error) {
	if n.state != raft.StateLeader {
		return 0, n.notLeaderLocked()
	}
	var best, match uint64
	progress := n.rn.Status().Progress
	for _, v := range n.confState.GetVoters() {
		if v == n.id || !n.recentlyHeard(v) {
			continue
		}
		if pr, ok := progress[v]; ok && (best == 0 || pr.Match > match) {
			best, match = v, pr.Match
		}
	}
	if best == 0 {
		return 0, fmt.Errorf("%w: no other voter was heard from within an election timeout", ErrQuorumAtRisk)
	}
	return best, nil
}

// recentlyHeard reports whether a message from peer id was stepped within
// an election timeout. Run on the loop.
func (n *Node) recentlyHeard(id uint64) bool {
	return id == n.id || time.Since(n.heard[id]) < time.Duration(n.cfg.ElectionTicks)*n.cfg.TickInterval
}

// checkQuorumAfter refuses a membership change after which the voters
// heard from within an election timeout (this one included) would be no
// quorum of the voters: the cluster would stop committing. Run on the
// loop.
func (n *Node) checkQuorumAfter(voters []uint64) error {
	var silent []uint64
	for _, v := range voters {
		if !n.recentlyHeard(v) {
			silent = append(silent, v)
		}
	}
	if active := len(voters) - len(silent); active < len(voters)/2+1 {
		return fmt.Errorf("%w: %d voters, of which %v not heard from within an election timeout: %d active, %d needed",
			ErrQuorumAtRisk, len(voters), silent, active, len(voters)/2+1)
	}
	return nil
}

// notLeaderLocked is notLeader for the Ready loop.
func (n *Node) notLeaderLocked() error {
	return &NotLeaderError{LeaderID: n.lead, LeaderAddr: n.members[n.lead].addr}
}

// AddMember adds m to the cluster, as a learner (m.Learner: it receives
// the log but does not vote; PromoteMember makes it a voter once it caught
// up, see CatchUp) or as a voter, and waits until the change is applied
// here. m.Addr is required and m.Meta is stored with it. Only the leader
// accepts it (ErrNotLeader), and only one membership change can be in
// flight (ErrMembershipPending). An ID that is a member is refused
// (ErrMemberExists), and so is an address another member has; an ID once
// removed must not come back (see Config.ID). A voter is not added while
// too few voters answer for a quorum with it (ErrQuorumAtRisk).
func (n *Node) AddMember(ctx context.Context, m Member) error {
	typ := raftpb.ConfChangeAddNode
	if m.Learner {
		typ = raftpb.ConfChangeAddLearnerNode
	}
	if m.Addr == "" {
		return fmt.Errorf("raftkv: add member %d: %w", m.ID, ErrBadAddress)
	}
	return n.changeMembership(ctx, typ, m.ID, memberRecord{addr: m.Addr, meta: m.Meta})
}

// PromoteMember makes the learner id a voter (ErrNotMember if it is no
// learner; ErrQuorumAtRisk if the voters heard from, it included, would be
// no quorum).
func (n *Node) PromoteMember(ctx context.Context, id uint64) error {
	return n.changeMembership(ctx, raftpb.ConfChangeAddNode, id, memberRecord{})
}

// RemoveMember removes replica id from the cluster: ErrNotMember if it is
// no member, ErrLastVoter if it is the only voter, ErrQuorumAtRisk if the
// voters left that were heard from within an election timeout would be no
// quorum of them (remove a silent voter before a live one). Removing the
// leader is allowed: once the change is applied it steps down, and the
// others elect one of them after an election timeout; TransferLeadership
// first avoids that wait.
func (n *Node) RemoveMember(ctx context.Context, id uint64) error {
	return n.changeMembership(ctx, raftpb.ConfChangeRemoveNode, id, memberRecord{})
}

func (n *Node) changeMembership(ctx context.Context, typ raftpb.ConfChangeType, id uint64, rec memberRecord) error {
	if id == 0 {
		return fmt.Errorf("raftkv: membership change: ID 0 is not allowed")
	}
	p := &proposal{done: make(chan result, 1)}
	if err := n.do(ctx, func() error { return n.proposeConfChange(p, typ, id, rec) }); err != nil {
		return fmt.Errorf("raftkv: %s %d: %w", typ, id, err)
	}
	if _, err := n.wait(ctx, p); err != nil {
		return fmt.Errorf("raftkv: %s %d: %w", typ, id, err)
	}
	return nil
}

// CatchUp waits until the learner or voter id has, in its log, every entry
// the leader had committed when CatchUp was called, so that promoting it
// does not leave the quorum waiting for a replica that is far behind. Only
// the leader knows; elsewhere it returns ErrNotLeader (also when the
// leadership moves while it waits).
func (n *Node) CatchUp(ctx context.Context, id uint64) error {
	var target uint64
	check := func() (bool, error) {
		var done bool
		err := n.do(ctx, func() error {
			if n.state != raft.StateLeader {
				return n.notLeaderLocked()
			}
			st := n.rn.Status()
			pr, ok := st.Progress[id]
			if !ok {
				return fmt.Errorf("%w: %d", ErrNotMember, id)
			}
			if target == 0 {
				target = st.GetCommit()
			}
			done = pr.Match >= target
			return nil
		})
		return done, err
	}
	t := time.NewTicker(n.cfg.TickInterval)
	defer t.Stop()
	for {
		done, err := check()
		if err != nil {
			return fmt.Errorf("raftkv: catch up %d: %w", id, err)
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("raftkv: catch up %d (to index %d): %w", id, target, timeoutErr(ctx))
		case <-n.donec:
			return n.stoppedErr()
		case <-t.C:
		}
	}
}

// Close stops the replica: the Ready loop, the transport, the snapshot
// goroutines, and the database. Callers waiting on it get ErrStopped. Every
// write acknowledged before was synced to disk (in the log); the applied
// state held in memory is stored, so that the next Open need not apply
// those entries again.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		close(n.stopc)
		<-n.donec
		var errs []error
		if n.tr != nil {
			if err := n.tr.Close(); err != nil {
				errs = append(errs, fmt.Errorf("raftkv: close transport: %w", err))
			}
		}
		n.wg.Wait()
		n.dbMu.Lock()
		n.dbClosed = true
		n.dbMu.Unlock()
		errs = append(errs, n.closeDB())
		n.closeErr = errors.Join(errs...)
	})
	return n.closeErr
}

func (n *Node) closeDB() (err error) {
	defer n.guard.enter()()
	defer recoverFatal(&err, "close")
	if err := n.db.Close(); err != nil {
		return storageError("close", err)
	}
	return nil
}

// Metrics counts what the replica did since Open.
type Metrics struct {
	Proposals         uint64 // commands proposed by this replica
	ProposedEntries   uint64 // log entries they were packed into
	Readys            uint64 // Ready structs handled
	Syncs             uint64 // synced log writes
	AppliedEntries    uint64
	AppliedCommands   uint64
	RejectedCommands  uint64 // commands the state machine (or decoding) rejected
	DroppedProposals  uint64
	ReadIndexRequests uint64 // ReadIndex round trips (each serves a batch of reads)
	Reads             uint64
	SnapshotsBuilt    uint64
	SnapshotsRestored uint64
	Truncations       uint64
	StateWrites       uint64 // writes of the applied state to the store
}

type metrics struct {
	proposals, proposedEntries, readys, syncs, appliedEntries, appliedCommands,
	rejected, dropped, readIndexRequests, reads, snapshotsBuilt, snapshotsRestored,
	truncations, stateWrites atomic.Uint64
}

// Metrics returns the replica's counters.
func (n *Node) Metrics() Metrics {
	m := &n.metrics
	return Metrics{
		Proposals: m.proposals.Load(), ProposedEntries: m.proposedEntries.Load(),
		Readys: m.readys.Load(), Syncs: m.syncs.Load(),
		AppliedEntries: m.appliedEntries.Load(), AppliedCommands: m.appliedCommands.Load(),
		RejectedCommands: m.rejected.Load(), DroppedProposals: m.dropped.Load(),
		ReadIndexRequests: m.readIndexRequests.Load(), Reads: m.reads.Load(),
		SnapshotsBuilt: m.snapshotsBuilt.Load(), SnapshotsRestored: m.snapshotsRestored.Load(),
		Truncations: m.truncations.Load(), StateWrites: m.stateWrites.Load(),
	}
}

// StoreBytes returns what the replica wrote to its store's write-ahead log
// since Open: the log's entries and the applied state, as pebble counts
// them; 0 once the replica is closed. Unlike Metrics, which loads
// counters, it asks pebble for its metrics: not for a hot path.
func (n *Node) StoreBytes() uint64 {
	n.dbMu.RLock()
	defer n.dbMu.RUnlock()
	if n.dbClosed {
		return 0
	}
	return n.db.Metrics().WAL.BytesIn
}

// Receive implements Handler.
func (n *Node) Receive(m *raftpb.Message) { n.inbox.push(inboxItem{msg: m}) }

// ReportUnreachable implements Handler.
func (n *Node) ReportUnreachable(id uint64) { n.inbox.push(inboxItem{unreachable: id}) }

// ReportSnapshot implements Handler.
func (n *Node) ReportSnapshot(id uint64, status raft.SnapshotStatus) {
	n.inbox.push(inboxItem{snapTo: id, snapStatus: status})
}

// inbox queues what the transport delivers without ever blocking it.
type inbox struct {
	mu    sync.Mutex
	items []inboxItem
	ready chan struct{}
}

type inboxItem struct {
	msg         *raftpb.Message
	unreachable uint64
	snapTo      uint64
	snapStatus  raft.SnapshotStatus
}

// maxInbox bounds the queued messages; beyond it messages are dropped, as a
// lossy network would (raft retransmits). Snapshots are never dropped here.
const maxInbox = 1 << 16

func (q *inbox) push(it inboxItem) {
	q.mu.Lock()
	if len(q.items) >= maxInbox && (it.msg == nil || it.msg.GetType() != raftpb.MsgSnap) {
		q.mu.Unlock()
		return
	}
	q.items = append(q.items, it)
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

func (q *inbox) take(buf []inboxItem) []inboxItem {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := append(buf[:0], q.items...)
	clear(q.items)
	q.items = q.items[:0]
	return out
}

// raftLogger sends raft's logs to slog. raft's Fatal and Panic panic; the
// Ready loop turns that into the replica's failure.
type raftLogger struct{ l *slog.Logger }

func (r raftLogger) Debug(v ...any)                 { r.l.Debug(fmt.Sprint(v...)) }
func (r raftLogger) Debugf(format string, v ...any) { r.l.Debug(fmt.Sprintf(format, v...)) }
func (r raftLogger) Info(v ...any)                  { r.l.Info(fmt.Sprint(v...)) }
func (r raftLogger) Infof(format string, v ...any)  { r.l.Info(fmt.Sprintf(format, v...)) }
func (r raftLogger) Warning(v ...any)               { r.l.Warn(fmt.Sprint(v...)) }
func (r raftLogger) Warningf(format string, v ...any) {
	r.l.Warn(fmt.Sprintf(format, v...))
}
func (r raftLogger) Error(v ...any)                 { r.l.Error(fmt.Sprint(v...)) }
func (r raftLogger) Errorf(format string, v ...any) { r.l.Error(fmt.Sprintf(format, v...)) }
func (r raftLogger) Fatal(v ...any)                 { panic(fmt.Sprint(v...)) }
func (r raftLogger) Fatalf(format string, v ...any) { panic(fmt.Sprintf(format, v...)) }
func (r raftLogger) Panic(v ...any)                 { panic(fmt.Sprint(v...)) }
func (r raftLogger) Panicf(format string, v ...any) { panic(fmt.Sprintf(format, v...)) }
