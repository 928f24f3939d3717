package raftkv

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
	"google.golang.org/protobuf/proto"
)

// run is the Ready loop: the one goroutine that owns the RawNode.
func (n *Node) run() {
	defer close(n.donec)
	defer n.guard.enter()()
	t := time.NewTicker(n.cfg.TickInterval)
	defer t.Stop()
	err := n.loop(t.C)
	if err != nil {
		n.fail(err)
		n.log.Error("replica stopped", "err", err)
	}
	n.shutdown()
}

// loop handles events until Close or a fatal error. Each event is followed
// by a non-blocking drain of everything else that is queued (so that a burst
// of proposals and messages shares one Ready and one fsync), then by the
// Readys it produced.
func (n *Node) loop(tick <-chan time.Time) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = n.panicErr(r)
		}
	}()
	var items []inboxItem
	for {
		select {
		case <-tick:
			n.rn.Tick()
			n.reads.tick(n)
			if n.unstored.Load() && n.writeDue() {
				if err := n.writeStateNow(); err != nil {
					return err
				}
			}
		case p := <-n.propc:
			n.propBuf = append(n.propBuf, p)
			n.propose()
		case w := <-n.readc:
			n.reads.waiting = append(n.reads.waiting, w)
		case f := <-n.ctrlc:
			f()
		case <-n.inbox.ready:
		case <-n.app.ready:
		case <-n.applyMore:
		case <-n.failc:
			return n.Err()
		case <-n.stopc:
			// Not needed for durability (the log holds it), but it spares
			// the next Open applying the entries again.
			return n.writeStateNow()
		}
		if err := n.stepLocal(); err != nil {
			return err
		}
		items = n.inbox.take(items)
		n.step(items)
		if len(n.propc) > 0 || len(n.propBuf) > 0 {
			n.propose()
		}
	drainReads:
		for {
			select {
			case w := <-n.readc:
				n.reads.waiting = append(n.reads.waiting, w)
			default:
				break drainReads
			}
		}
		n.reads.maybeSend(n)
		if err := n.handleReadys(); err != nil {
			return err
		}
	}
}

// panicErr turns a panic on the Ready loop into the replica's error: raft
// panics when its storage fails, pebble's Fatalf panics through the guard.
func (n *Node) panicErr(r any) error {
	if fp, ok := r.(fatalPanic); ok {
		return storageError("", fp.err)
	}
	if err, ok := r.(error); ok && errors.Is(err, ErrStorage) {
		return err
	}
	if err := n.Err(); err != nil {
		return err
	}
	n.log.Error("panic in the Ready loop", "panic", r, "stack", string(debug.Stack()))
	return fmt.Errorf("raftkv: replica %d: internal error: %v", n.id, r)
}

// shutdown fails everything still waiting on the loop.
func (n *Node) shutdown() {
	err := n.stoppedErr()
	for seq, p := range n.waiting {
		p.finish(result{err: err})
		delete(n.waiting, seq)
	}
	n.reads.failAll(err)
	n.mu.Lock()
	n.mu.status.Err = n.mu.err
	n.mu.status.State = "StateStopped"
	n.mu.status.IsLeader, n.mu.status.Leader, n.mu.status.LeaderAddr = false, 0, ""
	n.announceLocked()
	n.mu.Unlock()
	n.leader.Store(0)
	// Proposals and requests still queued: their callers see donec.
}

// step feeds the transport's deliveries to raft.
func (n *Node) step(items []inboxItem) {
	var now time.Time
	for i := range items {
		it := &items[i]
		switch {
		case it.msg != nil:
			m := it.msg
			if m.GetType() == raftpb.MsgProp || raft.IsLocalMsg(m.GetType()) {
				// Followers never forward proposals here; a proposal from
				// the network is not ours to append. Local messages
				// (storage acknowledgements above all) come only from
				// this replica's own goroutines.
				n.log.Warn("dropping a message of a type peers do not send", "type", m.GetType(), "from", m.GetFrom())
				continue
			}
			if m.GetType() == raftpb.MsgSnap {
				// Never let raft accept a snapshot we could not restore.
				if _, err := decodeSnapshot(m.GetSnapshot()); err != nil {
					n.log.Error("dropping a corrupt snapshot", "from", m.GetFrom(), "err", err)
					continue
				}
			}
			if now.IsZero() {
				now = time.Now()
			}
			n.heard[m.GetFrom()] = now
			if err := n.rn.Step(m); err != nil {
				n.log.Debug("step", "type", m.GetType(), "from", m.GetFrom(), "err", err)
			}
		case it.unreachable != 0:
			n.rn.ReportUnreachable(it.unreachable)
		case it.snapTo != 0:
			n.rn.ReportSnapshot(it.snapTo, it.snapStatus)
		}
		*it = inboxItem{}
	}
}

// propose drains the proposal channel into n.propBuf and proposes it, packed
// into as few entries as the limits allow, in one raft step.
//
// While the appender is writing, a leader holds proposals back (up to an
// entry's worth of bytes, or a full channel) and proposes them when the
// write ends: they would wait for that write anyway, and packed they cost
// one entry, one append and one apply instead of one each.
func (n *Node) propose() {
	held := 0
	for _, p := range n.propBuf {
		held += len(p.cmd)
	}
drain:
	for len(n.propBuf) < cap(n.propc) {
		select {
		case p := <-n.propc:
			n.propBuf = append(n.propBuf, p)
			held += len(p.cmd)
		default:
			break drain
		}
	}
	props := n.propBuf
	if len(props) == 0 {
		return
	}
	st := n.rn.BasicStatus()
	if st.RaftState == raft.StateLeader && held < n.cfg.MaxEntryBytes && len(props) < cap(n.propc) && n.app.busy() {
		return
	}
	defer func() {
		clear(props)
		n.propBuf = props[:0]
	}()
	if st.RaftState != raft.StateLeader {
		err := n.notLeaderLocked()
		for _, p := range props {
			p.finish(result{err: err})
		}
		return
	}
	term := st.GetTerm()
	// Pack: group[k] holds the proposals of ents[k].
	var ents []*raftpb.Entry
	var groups [][]*proposal
	for i := 0; i < len(props); {
		j, size := i, 0
		for j < len(props) && (j == i || size+len(props[j].cmd) <= n.cfg.MaxEntryBytes) &&
			(n.cfg.MaxCommandsPerEntry == 0 || j-i < n.cfg.MaxCommandsPerEntry) {
			size += len(props[j].cmd)
			j++
		}
		n.encBuf = n.encBuf[:0]
		for _, p := range props[i:j] {
			n.encBuf = append(n.encBuf, p.cmd)
		}
		data := encodeEntry(entryHeader{nonce: n.nonce, firstSeq: n.seq + 1}, n.encBuf)
		for k, p := range props[i:j] {
			p.term, p.cmd, p.seq = term, nil, n.seq+1+uint64(k)
			n.waiting[p.seq] = p
		}
		n.seq += uint64(j - i)
		ents = append(ents, &raftpb.Entry{Data: data})
		groups = append(groups, props[i:j])
		i = j
	}
	clear(n.encBuf)
	step := func(ents []*raftpb.Entry, groups [][]*proposal) error {
		err := n.rn.Step(&raftpb.Message{Type: raftpb.MsgProp.Enum(), From: new(n.id), Entries: ents})
		if err != nil {
			return err
		}
		n.metrics.proposedEntries.Add(uint64(len(ents)))
		for _, g := range groups {
			n.metrics.proposals.Add(uint64(len(g)))
		}
		return nil
	}
	drop := func(g []*proposal, err error) {
		n.metrics.dropped.Add(uint64(len(g)))
		err = fmt.Errorf("%w: %w", ErrProposalDropped, err)
		for _, p := range g {
			delete(n.waiting, p.seq)
			p.finish(result{err: err})
		}
	}
	if err := step(ents, groups); err == nil || len(ents) == 1 {
		if err != nil {
			drop(groups[0], err)
		}
		return
	}
	// Raft refused the lot (most likely the uncommitted tail is at its
	// bound): offer the entries one by one, so that what fits goes in.
	for k := range ents {
		if err := step(ents[k:k+1], groups[k:k+1]); err != nil {
			drop(groups[k], err)
		}
	}
}

// proposeConfChange proposes one membership change for p. Run on the loop.
func (n *Node) proposeConfChange(p *proposal, typ raftpb.ConfChangeType, id uint64, rec memberRecord) error {
	if n.state != raft.StateLeader {
		return n.notLeaderLocked()
	}
	voters, learners := n.confState.GetVoters(), n.confState.GetLearners()
	switch typ {
	case raftpb.ConfChangeAddNode, raftpb.ConfChangeAddLearnerNode:
		if rec.addr == "" && !slices.Contains(learners, id) {
			return fmt.Errorf("%w: %d is not a learner", ErrNotMember, id)
		}
		if rec.addr != "" && (slices.Contains(voters, id) || slices.Contains(learners, id)) {
			return fmt.Errorf("%w: %d is a member", ErrMemberExists, id)
		}
		for mid, m := range n.members {
			if rec.addr != "" && m.addr == rec.addr && mid != id && (slices.Contains(voters, mid) || slices.Contains(learners, mid)) {
				return fmt.Errorf("%w: %d has address %s", ErrMemberExists, mid, rec.addr)
			}
		}
	case raftpb.ConfChangeRemoveNode:
		if !slices.Contains(voters, id) && !slices.Contains(learners, id) {
			return fmt.Errorf("%w: %d", ErrNotMember, id)
		}
		if len(voters) == 1 && voters[0] == id {
			return fmt.Errorf("%w: %d is the only voter", ErrLastVoter, id)
		}
	}
	switch after := slices.Clone(voters); {
	case typ == raftpb.ConfChangeAddNode:
		if err := n.checkQuorumAfter(append(after, id)); err != nil {
			return err
		}
	case typ == raftpb.ConfChangeRemoveNode && slices.Contains(voters, id):
		if err := n.checkQuorumAfter(slices.DeleteFunc(after, func(v uint64) bool { return v == id })); err != nil {
			return err
		}
	}
	term := n.rn.BasicStatus().GetTerm()
	n.seq++
	cc := &raftpb.ConfChangeV2{
		Changes: []*raftpb.ConfChangeSingle{{Type: typ.Enum(), NodeId: new(id)}},
		Context: encodeMemberContext(n.nonce, n.seq, rec),
	}
	data, err := proto.Marshal(cc)
	if err != nil {
		return fmt.Errorf("raftkv: marshal conf change: %w", err)
	}
	m := &raftpb.Message{
		Type:    raftpb.MsgProp.Enum(),
		From:    new(n.id),
		Entries: []*raftpb.Entry{{Type: raftpb.EntryConfChangeV2.Enum(), Data: data}},
	}
	if err := n.rn.Step(m); err != nil {
		return fmt.Errorf("%w: %w", ErrProposalDropped, err)
	}
	if m.GetEntries()[0].GetType() != raftpb.EntryConfChangeV2 {
		// raft turned it into an empty entry: a change is still pending.
		return fmt.Errorf("%w: %w: the previous one is still being applied", ErrMembershipPending, ErrProposalDropped)
	}
	p.term = term
	n.waiting[n.seq] = p
	return nil
}

// handleReadys handles every Ready raft has. Raft runs with
// AsyncStorageWrites, so a Ready is messages only:
//   - MsgStorageAppend (entries, hard state, snapshot to persist) goes to
//     the appender, which writes and syncs it off this goroutine and hands
//     back the responses that had to wait for it (the acknowledgements of
//     appends and votes), so the loop goes on proposing, sending and
//     applying while the disk syncs;
//   - MsgStorageApply (committed entries, all of them already durable
//     here: raft hands out only stable entries in this mode) is applied,
//     its callers answered, and its response stepped: at once, unless the
//     entries before it took a tick already (applyPending);
//   - everything else goes to the peers now: raft has kept back whatever
//     depends on a write (a vote, a term) as a response of that write.
func (n *Node) handleReadys() error {
	defer n.publish()
	deadline := time.Now().Add(n.cfg.TickInterval)
	for {
		for n.rn.HasReady() {
			if err := n.handleReady(); err != nil {
				return err
			}
		}
		if len(n.applyQ) == 0 {
			break
		}
		if time.Now().After(deadline) {
			// A tick's worth of applying: let the loop tick and step
			// what came (a leader's heartbeat above all) before the rest.
			select {
			case n.applyMore <- struct{}{}:
			default:
			}
			break
		}
		if err := n.applyPending(deadline); err != nil {
			return err
		}
	}
	n.reads.applied(n.applied.index)
	n.reads.maybeSend(n)
	return n.maybeTruncate()
}

// handleReady sends one Ready's messages on their way, and queues its
// committed entries for applyPending.
func (n *Node) handleReady() error {
	rd := n.rn.Ready()
	n.metrics.readys.Add(1)
	if rd.SoftState != nil {
		n.softState(*rd.SoftState)
	}
	peers := n.sendBuf[:0]
	for _, m := range rd.Messages {
		switch m.GetTo() {
		case raft.LocalAppendThread:
			if sn := m.GetSnapshot(); sn != nil && !raft.IsEmptySnap(sn) {
				// The snapshot replaces the stored state: what was
				// applied before it is stored first, so that no later
				// write of it lands on the snapshot's.
				if err := n.applyPending(time.Time{}); err != nil {
					return err
				}
				if err := n.writeStateNow(); err != nil {
					return err
				}
			}
			n.app.push(m)
		case raft.LocalApplyThread:
			n.applyQ = append(n.applyQ, m)
		default:
			peers = append(peers, m)
		}
	}
	n.send(peers)
	clear(peers)
	n.sendBuf = peers
	for _, rs := range rd.ReadStates {
		n.reads.readState(n, rs)
	}
	return nil
}

// applyPending applies the committed entries of n.applyQ, in order, until
// it is past deadline (never, when zero), and steps each message's
// responses once all its entries are applied. A follower far behind (its
// apply slower than the leader's commits) thus still answers heartbeats:
// applied in one go, a backlog kept the loop from raft for seconds, and
// the leader, hearing from no quorum, stepped down.
func (n *Node) applyPending(deadline time.Time) error {
	for len(n.applyQ) > 0 {
		m := n.applyQ[0]
		ents := m.GetEntries()
		for n.applyAt < len(ents) {
			if !deadline.IsZero() && time.Now().After(deadline) {
				return nil
			}
			done, err := n.apply(ents[n.applyAt:], deadline)
			if err != nil {
				return err
			}
			n.applyAt += done
		}
		for _, r := range m.GetResponses() {
			if err := n.rn.Step(r); err != nil {
				n.log.Debug("step apply response", "err", err)
			}
		}
		n.applyQ[0] = nil
		n.applyQ, n.applyAt = n.applyQ[1:], 0
	}
	return nil
}

func (n *Node) send(msgs []*raftpb.Message) {
	if len(msgs) > 0 && n.tr != nil {
		n.tr.Send(msgs)
	}
}

func (n *Node) softState(ss raft.SoftState) {
	if ss.Lead != n.lead {
		n.log.Info("leader changed", "leader", ss.Lead, "state", ss.RaftState)
		// A ReadIndex in flight may have been dropped with the old leader.
		n.reads.retry(n)
	}
	n.lead, n.state = ss.Lead, ss.RaftState
	if n.state == raft.StateLeader {
		n.leader.Store(n.id)
	} else {
		n.leader.Store(n.lead)
	}
}

// restored takes in a snapshot that replaced the replica's state.
func (n *Node) restored(snap *restoredSnapshot) error {
	n.metrics.snapshotsRestored.Add(1)
	n.log.Info("restored snapshot", "index", snap.meta.index, "term", snap.meta.term, "voters", snap.confState.GetVoters())
	n.confState = snap.confState
	n.members = snap.members
	n.membersDirty = true
	n.applied = snap.meta
	n.batch.reset(n.db)
	n.unstored.Store(false)
	n.syncPeers()
	// Our proposals up to the snapshot's term may be in it or may have been
	// dropped; the log no longer tells which.
	for seq, p := range n.waiting {
		if p.term <= snap.meta.term {
			p.finish(result{err: fmt.Errorf("%w: a snapshot at index %d replaced the log", ErrOutcomeUnknown, snap.meta.index)})
			delete(n.waiting, seq)
		}
	}
	if l, ok := n.sm.(Loader); ok {
		if err := l.Load(pebbleReader{n.db}); err != nil {
			return fmt.Errorf("raftkv: load state machine after snapshot: %w", err)
		}
	}
	return nil
}

// syncPeers tells the transport about the members it does not know yet and
// forgets the ones that left.
func (n *Node) syncPeers() {
	if n.tr == nil {
		return
	}
	for id, m := range n.members {
		addr := m.addr
		if id == n.id || addr == "" {
			continue
		}
		if old, ok := n.peers[id]; !ok || old != addr {
			n.tr.AddPeer(id, addr)
			n.peers[id] = addr
		}
	}
	for id := range n.peers {
		if _, ok := n.members[id]; !ok {
			n.tr.RemovePeer(id)
			delete(n.peers, id)
		}
	}
}

// maybeTruncate truncates the log when it holds more than SnapshotEntries
// applied entries or SnapshotLogBytes bytes. It keeps SnapshotCatchUpEntries
// applied entries, but no more than half the byte budget (so that with big
// commands the log mostly dies in pebble's memtable instead of being flushed
// and compacted). On the leader it also keeps what followers still need: the
// entries after an active follower's match index, and after a snapshot being
// built or sent (else a follower restored from it would need another one) —
// unless the log is over four times its byte budget.
func (n *Node) maybeTruncate() error {
	stored, trunc, _, logBytes := n.st.state()
	applied := n.applied
	overBytes := logBytes > n.cfg.SnapshotLogBytes
	if applied.index-trunc.index <= n.cfg.SnapshotEntries && !overBytes {
		return nil
	}
	to := applied.index - min(applied.index, n.cfg.SnapshotCatchUpEntries)
	if overBytes {
		to = max(to, n.st.indexKeeping(n.cfg.SnapshotLogBytes/2))
	}
	if n.state == raft.StateLeader && logBytes <= 4*n.cfg.SnapshotLogBytes {
		if busy, ok := n.st.snapshotInProgress(); ok {
			to = min(to, busy)
		}
		n.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
			switch {
			case id == n.id:
			case pr.State == tracker.StateSnapshot && pr.PendingSnapshot >= trunc.index:
				to = min(to, pr.PendingSnapshot)
			case pr.RecentActive && pr.Match > trunc.index:
				to = min(to, pr.Match)
			}
		})
	}
	to = min(to, applied.index)
	if to <= trunc.index {
		return nil
	}
	if to > stored.index {
		// The log may lose only what the store holds.
		if err := n.writeStateNow(); err != nil {
			return err
		}
	}
	if err := n.st.truncate(to); err != nil {
		return err
	}
	n.metrics.truncations.Add(1)
	n.log.Debug("log truncated", "through", to, "applied", applied.index)
	return nil
}

// startSnapshot builds an outgoing snapshot from ps on its own goroutine.
func (n *Node) startSnapshot(ps *pebble.Snapshot) {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		defer n.guard.enter()()
		sn, err := func() (sn *raftpb.Snapshot, err error) {
			defer recoverFatal(&err, "snapshot")
			return buildSnapshot(ps, n.stopc)
		}()
		if cerr := ps.Close(); err == nil && cerr != nil {
			err = storageError("snapshot", cerr)
		}
		if err != nil {
			n.fail(fmt.Errorf("raftkv: build snapshot: %w", err))
		} else if sn != nil {
			n.metrics.snapshotsBuilt.Add(1)
			n.log.Info("snapshot built", "index", sn.GetMetadata().GetIndex(), "bytes", len(sn.GetData()))
		}
		n.st.snapshotBuilt(sn)
	}()
}

// publish copies the loop's state for Status.
func (n *Node) publish() {
	hs := n.rn.BasicStatus()
	_, trunc, last, _ := n.st.state()
	s := Status{
		ID:         n.id,
		Leader:     hs.Lead,
		LeaderAddr: n.members[hs.Lead].addr,
		IsLeader:   hs.RaftState == raft.StateLeader,
		State:      hs.RaftState.String(),
		Term:       hs.GetTerm(),
		Commit:     hs.GetCommit(),
		Applied:    n.applied.index,
		FirstIndex: trunc.index + 1,
		LastIndex:  last,
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	s.Members = n.mu.status.Members
	if n.membersDirty {
		s.Members = n.memberList()
		n.membersDirty = false
	}
	s.Err = n.mu.err
	n.mu.status = s
	n.announceLocked()
}

func (n *Node) memberList() []Member {
	var out []Member
	for _, id := range n.confState.GetVoters() {
		out = append(out, Member{ID: id, Addr: n.members[id].addr, Meta: n.members[id].meta})
	}
	for _, id := range n.confState.GetLearners() {
		out = append(out, Member{ID: id, Addr: n.members[id].addr, Meta: n.members[id].meta, Learner: true})
	}
	slices.SortFunc(out, func(a, b Member) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return out
}

// readQueue batches ReadIndex requests: the reads that arrive while one
// ReadIndex is in flight all ride on the next one.
type readQueue struct {
	waiting   []*readWaiter // not yet asked for
	inflight  []*readWaiter
	ctx       uint64 // the request context of the ReadIndex in flight
	age       int    // ticks since it was sent
	applyWait []*readWaiter
	next      uint64
}

type readWaiter struct {
	done  chan error
	index uint64
}

func (q *readQueue) maybeSend(n *Node) {
	if len(q.inflight) > 0 || len(q.waiting) == 0 {
		return
	}
	q.inflight, q.waiting = q.waiting, q.inflight[:0]
	q.send(n)
}

func (q *readQueue) send(n *Node) {
	q.next++
	q.ctx, q.age = q.next, 0
	var rctx [8]byte
	binary.BigEndian.PutUint64(rctx[:], q.ctx)
	n.rn.ReadIndex(rctx[:])
	n.metrics.readIndexRequests.Add(1)
}

// retry asks again for the reads in flight: raft drops a ReadIndex when
// there is no leader or the leader changes.
func (q *readQueue) retry(n *Node) {
	if len(q.inflight) > 0 {
		q.send(n)
	}
}

func (q *readQueue) tick(n *Node) {
	if len(q.inflight) == 0 {
		return
	}
	if q.age++; q.age >= n.cfg.ElectionTicks {
		q.retry(n)
	}
}

func (q *readQueue) readState(n *Node, rs raft.ReadState) {
	if len(rs.RequestCtx) != 8 || binary.BigEndian.Uint64(rs.RequestCtx) != q.ctx || len(q.inflight) == 0 {
		return // an answer to a request we gave up on
	}
	for _, w := range q.inflight {
		w.index = rs.Index
	}
	q.applyWait = append(q.applyWait, q.inflight...)
	q.inflight = nil
	q.applied(n.applied.index)
}

func (q *readQueue) applied(index uint64) {
	kept := q.applyWait[:0]
	for _, w := range q.applyWait {
		if w.index <= index {
			w.done <- nil
		} else {
			kept = append(kept, w)
		}
	}
	clear(q.applyWait[len(kept):])
	q.applyWait = kept
}

func (q *readQueue) failAll(err error) {
	for _, l := range [][]*readWaiter{q.waiting, q.inflight, q.applyWait} {
		for _, w := range l {
			w.done <- err
		}
	}
	q.waiting, q.inflight, q.applyWait = nil, nil, nil
}
