package raftkv

import (
	"bytes"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// delivery is a result for one of this replica's waiting proposals.
type delivery struct {
	seq uint64
	res result
}

// memberChange is a change to the member table, applied to the loop's copy
// once the batch that writes it is committed.
type memberChange struct {
	id     uint64
	rec    memberRecord
	remove bool
}

// apply applies committed entries. The commands' writes stay in n.batch
// until the applied state is written (writeState): after ApplyWriteInterval
// or ApplyWriteBytes, with a membership change, before a snapshot replaces
// the state, for a read of the store, and at Close. Until then the log,
// synced before any entry is applied, holds them: a crash loses the
// unwritten applied state, and the restart applies its entries again.
// Results reach the waiting callers once their commands are applied. Past
// deadline (unless zero) it stops after the entry it is in, and returns how
// many entries it went through.
func (n *Node) apply(ents []*raftpb.Entry, deadline time.Time) (int, error) {
	if len(ents) == 0 {
		return 0, nil
	}
	main := n.db.NewBatch()
	defer main.Close()
	var (
		out     []delivery
		changes []memberChange
		cs      *raftpb.ConfState
		last    indexTerm
		cmds    int
	)
	done := 0
	for _, e := range ents {
		if done > 0 && !deadline.IsZero() && time.Now().After(deadline) {
			break
		}
		done++
		if e.GetIndex() <= n.applied.index {
			continue
		}
		var err error
		switch e.GetType() {
		case raftpb.EntryNormal:
			var c int
			out, c, err = n.applyNormal(e, out)
			cmds += c
		case raftpb.EntryConfChange, raftpb.EntryConfChangeV2:
			var ncs *raftpb.ConfState
			out, changes, ncs, err = n.applyConfChange(main, e, out, changes)
			if ncs != nil {
				cs = ncs
			}
		default:
			err = fmt.Errorf("%w: entry %d has type %v", ErrCorrupt, e.GetIndex(), e.GetType())
		}
		if err != nil {
			return 0, err
		}
		last = indexTerm{e.GetIndex(), e.GetTerm()}
	}
	if last.index == 0 {
		return done, nil
	}
	n.applied = last
	n.unstored.Store(true)
	if cs != nil || n.writeDue() {
		// A membership change is written at once, with its member table
		// changes and conf state, so that the stored conf state is always
		// the one at the stored applied index.
		if err := n.writeState(main, cs); err != nil {
			return 0, err
		}
	}
	if ea, ok := n.sm.(EntryAware); ok {
		ea.EntriesApplied(last.index)
	}
	n.metrics.appliedEntries.Add(uint64(done))
	n.metrics.appliedCommands.Add(uint64(cmds))
	if cs != nil {
		n.confState = cs
		n.membersDirty = true
	}
	if len(changes) > 0 {
		for _, c := range changes {
			if c.remove {
				delete(n.members, c.id)
			} else {
				n.members[c.id] = c.rec
			}
		}
		n.syncPeers()
	}
	if cs != nil {
		// Whoever waits for the change sees it in Status on return.
		n.publish()
	}
	for _, d := range out {
		if p := n.waiting[d.seq]; p != nil {
			delete(n.waiting, d.seq)
			p.finish(d.res)
		}
	}
	n.reads.applied(last.index)
	// Log terms never decrease: once an entry of term T is applied, no entry
	// of an earlier term can still commit after it. Our proposals from
	// earlier terms that did not show up were dropped.
	if last.term > n.prunedAt {
		n.prunedAt = last.term
		for seq, p := range n.waiting {
			if p.term < last.term {
				delete(n.waiting, seq)
				n.metrics.dropped.Add(1)
				p.finish(result{err: fmt.Errorf("%w: the leadership changed before it committed", ErrProposalDropped)})
			}
		}
	}
	return done, nil
}

// writeDue says whether the applied state should be written now. A state
// machine that defers no writes gains nothing from the wait: its state is
// written with every Ready.
func (n *Node) writeDue() bool {
	if _, ok := n.sm.(Deferrer); !ok || n.cfg.ApplyWriteInterval < 0 {
		return true
	}
	return n.batch.bufferedBytes() >= n.cfg.ApplyWriteBytes || time.Since(n.wroteAt) >= n.cfg.ApplyWriteInterval
}

// appliedStateBytes is room for the applied index and a conf state of a
// few members in writeState's batch (more only grows it).
const appliedStateBytes = 128

// writeState commits the applied state without sync, in one batch with
// main's writes (a membership change's; main may be nil): the state
// machine's buffered writes, the applied index and, if it changed, the
// conf state. The batch is sized for them at once: grown by doubling, an
// interval's deferred records (megabytes) were copied as much again.
func (n *Node) writeState(main *pebble.Batch, cs *raftpb.ConfState) error {
	if d, ok := n.sm.(Deferrer); ok {
		d.WriteDeferred(&n.batch)
	}
	w := n.db.NewBatchWithSize(n.batch.encodedBytes() + appliedStateBytes)
	defer w.Close()
	if main != nil && !main.Empty() {
		if err := w.Apply(main, nil); err != nil {
			return storageError("apply", err)
		}
	}
	if err := n.batch.write(w); err != nil {
		return err
	}
	if err := n.st.writeApplied(w, n.applied, cs); err != nil {
		return err
	}
	if err := w.Commit(pebble.NoSync); err != nil {
		return storageError("apply", err)
	}
	n.st.appliedCommitted(n.applied, cs)
	n.unstored.Store(false)
	n.wroteAt = time.Now()
	n.metrics.stateWrites.Add(1)
	return nil
}

// writeStateNow writes the applied state, if any of it is not stored.
func (n *Node) writeStateNow() error {
	if !n.unstored.Load() {
		return nil
	}
	return n.writeState(nil, nil)
}

// applyNormal applies the commands of one normal entry. A command that fails
// to decode, or that the state machine rejects, leaves no writes behind; a
// malformed entry is rejected as a whole before any of its commands runs.
// Only storage failures are returned as errors.
func (n *Node) applyNormal(e *raftpb.Entry, out []delivery) ([]delivery, int, error) {
	data := e.GetData()
	if len(data) == 0 {
		return out, 0, nil
	}
	h, body, err := decodeEntryHeader(data)
	if err != nil {
		n.metrics.rejected.Add(1)
		n.log.Error("rejected a corrupt log entry", "index", e.GetIndex(), "err", err)
		return out, 0, nil
	}
	mine := h.nonce == n.nonce
	n.cmdBuf, err = splitCommands(n.cmdBuf[:0], h, body)
	defer clear(n.cmdBuf)
	if err != nil {
		n.metrics.rejected.Add(uint64(h.count))
		n.log.Error("rejected a corrupt log entry", "index", e.GetIndex(), "commands", h.count, "err", err)
		if mine {
			for i := range h.count {
				out = append(out, delivery{h.firstSeq + uint64(i), result{err: fmt.Errorf("raftkv: entry %d: %w", e.GetIndex(), err)}})
			}
		}
		return out, 0, nil
	}
	for i, enc := range n.cmdBuf {
		var res result
		cmd, err := decodeCommand(enc, &n.decBuf)
		if err == nil {
			n.batch.startCommand()
			var val []byte
			val, err = n.sm.Apply(&n.batch, e.GetIndex(), cmd)
			if n.batch.err != nil {
				return out, 0, n.batch.err
			}
			if err == nil {
				if mine { // only this replica's proposer waits for the result
					res.val = bytes.Clone(val)
				}
			} else {
				n.batch.rollback()
			}
		}
		if err != nil {
			n.metrics.rejected.Add(1)
			res.err = fmt.Errorf("raftkv: command at index %d rejected: %w", e.GetIndex(), err)
			if !mine {
				n.log.Debug("command rejected", "index", e.GetIndex(), "err", err)
			}
		}
		if mine {
			out = append(out, delivery{h.firstSeq + uint64(i), res})
		}
	}
	return out, len(n.cmdBuf), nil
}

// applyConfChange applies a membership change to raft and writes the member
// table's change. A change that would leave no voter is cancelled (raft's
// documented way: zero node IDs), the same on every replica.
func (n *Node) applyConfChange(main *pebble.Batch, e *raftpb.Entry, out []delivery, changes []memberChange) ([]delivery, []memberChange, *raftpb.ConfState, error) {
	var cc *raftpb.ConfChangeV2
	if e.GetType() == raftpb.EntryConfChange {
		v1 := &raftpb.ConfChange{}
		if err := proto.Unmarshal(e.GetData(), v1); err != nil {
			return out, changes, nil, fmt.Errorf("%w: conf change at %d: %w", ErrCorrupt, e.GetIndex(), err)
		}
		cc = v1.AsV2()
	} else {
		cc = &raftpb.ConfChangeV2{}
		if err := proto.Unmarshal(e.GetData(), cc); err != nil {
			return out, changes, nil, fmt.Errorf("%w: conf change at %d: %w", ErrCorrupt, e.GetIndex(), err)
		}
	}
	nonce, seq, rec, hasCtx := decodeMemberContext(cc.GetContext())
	var rejected error
	if len(cc.GetChanges()) == 0 || len(cc.GetChanges()) > 1 {
		// We only ever propose single changes; refuse joint transitions.
		rejected = fmt.Errorf("raftkv: conf change at %d: %d changes; only single changes are supported", e.GetIndex(), len(cc.GetChanges()))
	} else {
		voters := map[uint64]bool{}
		for _, v := range n.confState.GetVoters() {
			voters[v] = true
		}
		c := cc.GetChanges()[0]
		switch c.GetType() {
		case raftpb.ConfChangeAddNode:
			voters[c.GetNodeId()] = true
		case raftpb.ConfChangeAddLearnerNode, raftpb.ConfChangeRemoveNode:
			delete(voters, c.GetNodeId())
		}
		if len(voters) == 0 {
			rejected = fmt.Errorf("raftkv: conf change at %d would leave no voter", e.GetIndex())
		}
	}
	if rejected != nil {
		n.log.Warn("membership change cancelled", "err", rejected)
		cc = &raftpb.ConfChangeV2{Changes: []*raftpb.ConfChangeSingle{{Type: raftpb.ConfChangeAddNode.Enum(), NodeId: new(uint64(0))}}}
	}
	cs := n.rn.ApplyConfChange(cc)
	if rejected == nil {
		for _, c := range cc.GetChanges() {
			id := c.GetNodeId()
			switch c.GetType() {
			case raftpb.ConfChangeAddNode, raftpb.ConfChangeAddLearnerNode:
				if rec.addr == "" {
					break // a promotion: the record is already there
				}
				if err := main.Set(memberKey(id), rec.encode(), nil); err != nil {
					return out, changes, nil, storageError("apply conf change", err)
				}
				changes = append(changes, memberChange{id: id, rec: rec})
			case raftpb.ConfChangeRemoveNode:
				if err := main.Delete(memberKey(id), nil); err != nil {
					return out, changes, nil, storageError("apply conf change", err)
				}
				changes = append(changes, memberChange{id: id, remove: true})
			}
		}
		n.log.Info("membership changed", "index", e.GetIndex(), "change", raftpb.ConfChangesToString(cc.GetChanges()), "voters", cs.GetVoters(), "learners", cs.GetLearners())
	}
	if hasCtx && nonce == n.nonce {
		out = append(out, delivery{seq, result{err: rejected}})
	}
	// Keep the member table's changes visible to later entries of this batch.
	n.confState = cs
	return out, changes, cs, nil
}
