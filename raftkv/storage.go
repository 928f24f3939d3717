package raftkv

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// storage is the replica's raft.Storage: the log, hard state and conf state in
// pebble, with the recent tail of the log cached in memory so that raft's hot
// path (sending appends, applying committed entries) does not read pebble.
//
// raft calls it from the Ready goroutine. Two goroutines write: the
// appender (the log, the hard state, snapshots: save) and the Ready loop
// (applies and truncations); the snapshot goroutine and Status read it
// concurrently. Every field below mu is guarded by it; logMu orders save
// and truncate, which both move the log's bounds.
type storage struct {
	db       *pebble.DB
	cacheMax int
	logMu    sync.Mutex
	// genSnapshot starts building an outgoing snapshot from a pebble
	// snapshot, off the Ready goroutine; set by the Node.
	genSnapshot func(*pebble.Snapshot)

	mu struct {
		sync.Mutex
		hardState *raftpb.HardState
		confState *raftpb.ConfState // at applied
		applied   indexTerm
		trunc     indexTerm // the log holds (trunc.index, lastIndex]
		lastIndex uint64
		// cache holds the entries (lastIndex-len(cache), lastIndex].
		cache      []*raftpb.Entry
		cacheBytes int
		// logBytes counts entry bytes appended since the last truncation
		// (since Open, after a restart).
		logBytes uint64
		// snap is the last outgoing snapshot built; snapBusy is set while one
		// is being built.
		snap     *raftpb.Snapshot
		snapBusy bool
		// snapAt is the applied index the snapshot being built is at.
		snapAt uint64
		// durable is the hard state and last index as of the appender's
		// last sync: what a crash now would leave.
		durable struct {
			hardState *raftpb.HardState
			lastIndex uint64
		}
	}
}

var _ raft.Storage = (*storage)(nil)

// persistedState is what Open reads back.
type persistedState struct {
	fresh   bool // nothing was ever written
	id      uint64
	members map[uint64]memberRecord
}

// loadStorage reads the replica's state from db.
func loadStorage(db *pebble.DB, cacheMax int) (*storage, persistedState, error) {
	s := &storage{db: db, cacheMax: cacheMax}
	var ps persistedState
	get := func(key []byte) ([]byte, error) {
		v, closer, err := db.Get(key)
		if errors.Is(err, pebble.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, storageError("load", err)
		}
		out := slices.Clone(v)
		return out, closer.Close()
	}
	idv, err := get(keyReplicaID)
	if err != nil {
		return nil, ps, err
	}
	if idv == nil {
		ps.fresh = true
	} else if len(idv) == 8 {
		ps.id = binary.BigEndian.Uint64(idv)
	} else {
		return nil, ps, fmt.Errorf("%w: replica id of %d bytes", ErrCorrupt, len(idv))
	}
	hs := &raftpb.HardState{}
	if v, err := get(keyHardState); err != nil {
		return nil, ps, err
	} else if v != nil {
		if err := proto.Unmarshal(v, hs); err != nil {
			return nil, ps, fmt.Errorf("%w: hard state: %w", ErrCorrupt, err)
		}
	}
	cs := &raftpb.ConfState{}
	if v, err := get(keyConfState); err != nil {
		return nil, ps, err
	} else if v != nil {
		if err := proto.Unmarshal(v, cs); err != nil {
			return nil, ps, fmt.Errorf("%w: conf state: %w", ErrCorrupt, err)
		}
	}
	var applied, trunc indexTerm
	for _, x := range []struct {
		key []byte
		dst *indexTerm
	}{{keyApplied, &applied}, {keyTruncated, &trunc}} {
		v, err := get(x.key)
		if err != nil {
			return nil, ps, err
		}
		if v == nil {
			continue
		}
		it, ok := decodeIndexTerm(v)
		if !ok {
			return nil, ps, fmt.Errorf("%w: meta key %q", ErrCorrupt, x.key)
		}
		*x.dst = it
	}
	last, err := lastLogIndex(db)
	if err != nil {
		return nil, ps, err
	}
	if last == 0 || last < trunc.index {
		last = trunc.index
	}
	if applied.index < trunc.index || applied.index > last {
		return nil, ps, fmt.Errorf("%w: inconsistent state: truncated %d, applied %d, last %d",
			ErrCorrupt, trunc.index, applied.index, last)
	}
	if hs.GetCommit() < applied.index {
		// The apply batch reached the disk before the hard state with
		// the commit index that covered it: what was applied was
		// committed.
		hs.Commit = new(applied.index)
	}
	ps.members = map[uint64]memberRecord{}
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: keyMemberPrefix, UpperBound: keyMemberEnd})
	if err != nil {
		return nil, ps, storageError("load members", err)
	}
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) != len(keyMemberPrefix)+8 {
			_ = it.Close()
			return nil, ps, fmt.Errorf("%w: member key %q", ErrCorrupt, k)
		}
		rec, err := decodeMemberRecord(it.Value())
		if err != nil {
			_ = it.Close()
			return nil, ps, err
		}
		ps.members[binary.BigEndian.Uint64(k[len(keyMemberPrefix):])] = rec
	}
	if err := it.Close(); err != nil {
		return nil, ps, storageError("load members", err)
	}
	s.mu.hardState = hs
	s.mu.durable.hardState, s.mu.durable.lastIndex = hs, last
	s.mu.confState = cs
	s.mu.applied = applied
	s.mu.trunc = trunc
	s.mu.lastIndex = last
	return s, ps, nil
}

func lastLogIndex(db pebble.Reader) (uint64, error) {
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: keyLogStart, UpperBound: keyLogEnd})
	if err != nil {
		return 0, storageError("load log", err)
	}
	var last uint64
	if it.Last() {
		k := it.Key()
		if len(k) != 9 {
			_ = it.Close()
			return 0, fmt.Errorf("%w: log key %q", ErrCorrupt, k)
		}
		last = binary.BigEndian.Uint64(k[1:])
	}
	if err := it.Close(); err != nil {
		return 0, storageError("load log", err)
	}
	return last, nil
}

// bootstrap writes the initial state of a new cluster: the log starts after
// index 1 (term 1), which stands for the configuration with the given
// voters. Every initial replica writes the same, so they agree from the start.
func (s *storage) bootstrap(id uint64, peers map[uint64]memberRecord) error {
	b := s.db.NewBatch()
	defer b.Close()
	var idv [8]byte
	binary.BigEndian.PutUint64(idv[:], id)
	if err := b.Set(keyReplicaID, idv[:], nil); err != nil {
		return storageError("bootstrap", err)
	}
	var hs *raftpb.HardState
	var cs *raftpb.ConfState
	var start indexTerm
	if len(peers) > 0 {
		hs = &raftpb.HardState{Term: new(uint64(1)), Commit: new(uint64(1))}
		cs = &raftpb.ConfState{Voters: slices.Sorted(maps.Keys(peers))}
		start = indexTerm{1, 1}
		hsv, err := proto.Marshal(hs)
		if err != nil {
			return fmt.Errorf("raftkv: bootstrap: %w", err)
		}
		csv, err := proto.Marshal(cs)
		if err != nil {
			return fmt.Errorf("raftkv: bootstrap: %w", err)
		}
		sets := [][2][]byte{{keyHardState, hsv}, {keyConfState, csv}, {keyApplied, start.encode()}, {keyTruncated, start.encode()}}
		for pid, rec := range peers {
			sets = append(sets, [2][]byte{memberKey(pid), rec.encode()})
		}
		for _, kv := range sets {
			if err := b.Set(kv[0], kv[1], nil); err != nil {
				return storageError("bootstrap", err)
			}
		}
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return storageError("bootstrap", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if hs != nil {
		s.mu.hardState, s.mu.confState = hs, cs
		s.mu.applied, s.mu.trunc, s.mu.lastIndex = start, start, start.index
	}
	return nil
}

// InitialState implements raft.Storage.
func (s *storage) InitialState() (*raftpb.HardState, *raftpb.ConfState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return proto.Clone(s.mu.hardState).(*raftpb.HardState), proto.Clone(s.mu.confState).(*raftpb.ConfState), nil
}

// FirstIndex implements raft.Storage.
func (s *storage) FirstIndex() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.trunc.index + 1, nil
}

// LastIndex implements raft.Storage.
func (s *storage) LastIndex() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.lastIndex, nil
}

func (s *storage) cacheFirstLocked() uint64 { return s.mu.lastIndex + 1 - uint64(len(s.mu.cache)) }

// Term implements raft.Storage.
func (s *storage) Term(i uint64) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case i < s.mu.trunc.index:
		return 0, raft.ErrCompacted
	case i == s.mu.trunc.index:
		return s.mu.trunc.term, nil
	case i > s.mu.lastIndex:
		return 0, raft.ErrUnavailable
	case i >= s.cacheFirstLocked():
		return s.mu.cache[i-s.cacheFirstLocked()].GetTerm(), nil
	}
	ents, err := s.readLocked(i, i+1, math.MaxUint64)
	if err != nil {
		return 0, err
	}
	return ents[0].GetTerm(), nil
}

// entrySize approximates an entry's encoded size for raft's size limits.
func entrySize(e *raftpb.Entry) uint64 { return uint64(len(e.GetData())) + 16 }

// Entries implements raft.Storage.
func (s *storage) Entries(lo, hi, maxSize uint64) ([]*raftpb.Entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if lo <= s.mu.trunc.index {
		return nil, raft.ErrCompacted
	}
	if hi > s.mu.lastIndex+1 || lo >= hi {
		return nil, raft.ErrUnavailable
	}
	var out []*raftpb.Entry
	var size uint64
	cf := s.cacheFirstLocked()
	if lo < cf {
		ents, err := s.readLocked(lo, min(hi, cf), maxSize)
		if err != nil {
			return nil, err
		}
		out = ents
		for _, e := range ents {
			size += entrySize(e)
		}
		if uint64(len(ents)) < min(hi, cf)-lo || hi <= cf {
			return out, nil
		}
		lo = cf
	}
	for _, e := range s.mu.cache[lo-cf : hi-cf] {
		size += entrySize(e)
		if len(out) > 0 && size > maxSize {
			break
		}
		out = append(out, e)
	}
	return out, nil
}

// readLocked reads the entries [lo, hi) from pebble, stopping after maxSize
// bytes (but returning at least one entry).
func (s *storage) readLocked(lo, hi, maxSize uint64) ([]*raftpb.Entry, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: logKey(lo), UpperBound: logKey(hi)})
	if err != nil {
		return nil, storageError("read log", err)
	}
	var out []*raftpb.Entry
	var size uint64
	next := lo
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) != 9 || binary.BigEndian.Uint64(k[1:]) != next {
			_ = it.Close()
			return nil, fmt.Errorf("%w: log entry %d missing (found key %x)", ErrCorrupt, next, k)
		}
		v, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return nil, storageError("read log", err)
		}
		e, err := decodeLogEntry(next, v)
		if err != nil {
			_ = it.Close()
			return nil, err
		}
		size += entrySize(e)
		if len(out) > 0 && size > maxSize {
			break
		}
		out = append(out, e)
		next++
	}
	if err := it.Close(); err != nil {
		return nil, storageError("read log", err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: log entry %d missing", ErrCorrupt, lo)
	}
	return out, nil
}

// A log entry is stored as <type:1> <uvarint term> <data>.
func appendLogValueHeader(dst []byte, e *raftpb.Entry) []byte {
	dst = append(dst, byte(e.GetType()))
	return binary.AppendUvarint(dst, e.GetTerm())
}

func decodeLogEntry(index uint64, v []byte) (*raftpb.Entry, error) {
	if len(v) < 2 {
		return nil, fmt.Errorf("%w: log entry %d of %d bytes", ErrCorrupt, index, len(v))
	}
	typ := raftpb.EntryType(v[0])
	if typ != raftpb.EntryNormal && typ != raftpb.EntryConfChange && typ != raftpb.EntryConfChangeV2 {
		return nil, fmt.Errorf("%w: log entry %d has type %d", ErrCorrupt, index, v[0])
	}
	term, n := binary.Uvarint(v[1:])
	if n <= 0 {
		return nil, fmt.Errorf("%w: log entry %d: bad term", ErrCorrupt, index)
	}
	e := &raftpb.Entry{Index: new(index), Term: new(term), Type: typ.Enum()}
	if data := v[1+n:]; len(data) > 0 {
		e.Data = slices.Clone(data)
	}
	return e, nil
}

// Snapshot implements raft.Storage. Building a snapshot reads the whole state
// machine keyspace, so it happens off the Ready goroutine: the first call
// starts it from a pebble snapshot (consistent by construction: the applied
// index, the conf state, the member table and the data change in one batch)
// and returns ErrSnapshotTemporarilyUnavailable; raft asks again on the next
// heartbeat response, and gets the snapshot once it is built. A snapshot is
// reused as long as the log still continues from its index and no
// membership change was applied since: raft refuses to send a snapshot to
// a member its conf state does not have, and a new member needs one.
func (s *storage) Snapshot() (*raftpb.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sn := s.mu.snap; sn != nil && sn.GetMetadata().GetIndex() >= s.mu.trunc.index &&
		sameConfState(sn.GetMetadata().GetConfState(), s.mu.confState) {
		return sn, nil
	}
	s.mu.snap = nil
	if !s.mu.snapBusy && s.genSnapshot != nil {
		s.mu.snapBusy, s.mu.snapAt = true, s.mu.applied.index
		s.genSnapshot(s.db.NewSnapshot())
	}
	return nil, raft.ErrSnapshotTemporarilyUnavailable
}

// snapshotInProgress returns the index of the snapshot being built, if one is.
func (s *storage) snapshotInProgress() (uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.snapAt, s.mu.snapBusy
}

// snapshotBuilt records the result of a snapshot goroutine.
func (s *storage) snapshotBuilt(sn *raftpb.Snapshot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.snapBusy = false
	if sn != nil && sn.GetMetadata().GetIndex() >= s.mu.trunc.index {
		s.mu.snap = sn
	}
}

// save writes a MsgStorageAppend's snapshot (already decoded and verified),
// entries and hard state in one batch, in that order, without sync: the
// appender syncs once for several. Called by the appender only.
func (s *storage) save(snap *restoredSnapshot, ents []*raftpb.Entry, hs *raftpb.HardState) error {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	s.mu.Lock()
	last := s.mu.lastIndex
	s.mu.Unlock()

	b := s.db.NewBatch()
	defer b.Close()
	if snap != nil {
		if err := snap.writeTo(b); err != nil {
			return err
		}
		last = snap.meta.index
	}
	var appended uint64
	if len(ents) > 0 {
		first := ents[0].GetIndex()
		if first > last+1 {
			return fmt.Errorf("raftkv: append of entry %d leaves a gap after %d", first, last)
		}
		var hdr []byte
		for _, e := range ents {
			// Written in place: the data is copied once, into the batch.
			hdr = appendLogValueHeader(hdr[:0], e)
			op := b.SetDeferred(9, len(hdr)+len(e.GetData()))
			binary.BigEndian.PutUint64(op.Key[1:], e.GetIndex())
			op.Key[0] = prefixLog
			copy(op.Value[copy(op.Value, hdr):], e.GetData())
			if err := op.Finish(); err != nil {
				return storageError("append", err)
			}
			appended += uint64(len(e.GetData()))
		}
		newLast := ents[len(ents)-1].GetIndex()
		if newLast < last {
			// A new leader overwrote our tail: drop what follows.
			if err := b.DeleteRange(logKey(newLast+1), logKey(last+1), nil); err != nil {
				return storageError("append", err)
			}
		}
	}
	if !raft.IsEmptyHardState(hs) {
		v, err := proto.Marshal(hs)
		if err != nil {
			return fmt.Errorf("raftkv: marshal hard state: %w", err)
		}
		if err := b.Set(keyHardState, v, nil); err != nil {
			return storageError("save hard state", err)
		}
	}
	if b.Empty() {
		return nil
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return storageError("save", err)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if snap != nil {
		s.mu.confState = snap.confState
		s.mu.applied, s.mu.trunc, s.mu.lastIndex = snap.meta, snap.meta, snap.meta.index
		s.mu.cache, s.mu.cacheBytes, s.mu.logBytes = nil, 0, 0
	}
	if len(ents) > 0 {
		s.appendCacheLocked(ents)
		s.mu.lastIndex = ents[len(ents)-1].GetIndex()
		s.mu.logBytes += appended
	}
	if !raft.IsEmptyHardState(hs) {
		s.mu.hardState = proto.Clone(hs).(*raftpb.HardState)
	}
	return nil
}

// synced records that everything save wrote so far is durable. Called by
// the appender only, after a sync.
func (s *storage) synced() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.durable.hardState, s.mu.durable.lastIndex = s.mu.hardState, s.mu.lastIndex
}

func (s *storage) appendCacheLocked(ents []*raftpb.Entry) {
	first := ents[0].GetIndex()
	cf := s.cacheFirstLocked()
	switch {
	case len(s.mu.cache) == 0 || first < cf:
		s.mu.cache = nil
		s.mu.cacheBytes = 0
	case first <= s.mu.lastIndex:
		for _, e := range s.mu.cache[first-cf:] {
			s.mu.cacheBytes -= len(e.GetData())
		}
		// Full slice expression: never write over entries raft may still hold.
		s.mu.cache = s.mu.cache[: first-cf : first-cf]
	}
	s.mu.cache = append(s.mu.cache, ents...)
	for _, e := range ents {
		s.mu.cacheBytes += len(e.GetData())
	}
	drop := 0
	for s.mu.cacheBytes > s.cacheMax && drop < len(s.mu.cache)-1 {
		s.mu.cacheBytes -= len(s.mu.cache[drop].GetData())
		drop++
	}
	if drop > 0 {
		// Release the entries; the array itself goes at the next growth.
		clear(s.mu.cache[:drop])
		s.mu.cache = s.mu.cache[drop:]
	}
}

// writeApplied adds the applied index and, if it changed, the conf state to
// an apply batch. The batch may reach the disk before the hard state that
// carries the commit index covering it (the appender writes that one);
// loadStorage raises the commit index to the applied one for that reason.
func (s *storage) writeApplied(b *pebble.Batch, applied indexTerm, cs *raftpb.ConfState) error {
	if err := b.Set(keyApplied, applied.encode(), nil); err != nil {
		return storageError("apply", err)
	}
	if cs != nil {
		v, err := proto.Marshal(cs)
		if err != nil {
			return fmt.Errorf("raftkv: marshal conf state: %w", err)
		}
		if err := b.Set(keyConfState, v, nil); err != nil {
			return storageError("apply", err)
		}
	}
	return nil
}

// appliedCommitted records in memory what writeApplied wrote, once the batch
// is committed.
func (s *storage) appliedCommitted(applied indexTerm, cs *raftpb.ConfState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.applied = applied
	if cs != nil {
		s.mu.confState = cs
	}
}

// state returns the applied index, the truncation point, the last index and
// the bytes appended since the last truncation.
func (s *storage) state() (applied, trunc indexTerm, last, logBytes uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.applied, s.mu.trunc, s.mu.lastIndex, s.mu.logBytes
}

// indexKeeping returns the index through which the log can be truncated so
// that at most budget bytes of entries remain, as far as the cache knows (it
// returns the truncation point if the cache does not reach back far enough).
func (s *storage) indexKeeping(budget uint64) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var kept uint64
	for i := len(s.mu.cache) - 1; i >= 0; i-- {
		kept += uint64(len(s.mu.cache[i].GetData()))
		if kept > budget {
			return s.mu.cache[i].GetIndex()
		}
	}
	return s.mu.trunc.index
}

// truncate removes the log entries up to and including index, which must be
// applied, with one range deletion.
func (s *storage) truncate(index uint64) error {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	s.mu.Lock()
	trunc, applied, last := s.mu.trunc, s.mu.applied, s.mu.lastIndex
	s.mu.Unlock()
	if index <= trunc.index || index > applied.index || index > last {
		return nil
	}
	term, err := s.Term(index)
	if err != nil {
		return fmt.Errorf("raftkv: truncate at %d: %w", index, err)
	}
	nt := indexTerm{index, term}
	b := s.db.NewBatch()
	defer b.Close()
	if err := b.DeleteRange(logKey(trunc.index+1), logKey(index+1), nil); err != nil {
		return storageError("truncate", err)
	}
	if err := b.Set(keyTruncated, nt.encode(), nil); err != nil {
		return storageError("truncate", err)
	}
	// NoSync: losing a truncation in a crash only brings entries back. The
	// apply batch that covers index precedes this one in the WAL, so the
	// truncation never survives without it.
	if err := b.Commit(pebble.NoSync); err != nil {
		return storageError("truncate", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.trunc = nt
	if cf := s.cacheFirstLocked(); index >= cf && len(s.mu.cache) > 0 {
		n := int(index - cf + 1)
		for _, e := range s.mu.cache[:n] {
			s.mu.cacheBytes -= len(e.GetData())
		}
		s.mu.cache = slices.Clone(s.mu.cache[n:])
	}
	s.mu.logBytes = uint64(s.mu.cacheBytes)
	if sn := s.mu.snap; sn != nil && sn.GetMetadata().GetIndex() < index {
		s.mu.snap = nil
	}
	return nil
}

// sameConfState reports whether a and b have the same members in the same
// roles (raft keeps each list sorted).
func sameConfState(a, b *raftpb.ConfState) bool {
	return slices.Equal(a.GetVoters(), b.GetVoters()) && slices.Equal(a.GetLearners(), b.GetLearners()) &&
		slices.Equal(a.GetVotersOutgoing(), b.GetVotersOutgoing()) && slices.Equal(a.GetLearnersNext(), b.GetLearnersNext()) &&
		a.GetAutoLeave() == b.GetAutoLeave()
}
