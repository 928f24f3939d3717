package raftkv

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// A snapshot's Data is the state machine's keyspace and the member table at
// the snapshot's index, serialized from a pebble snapshot:
//
//	"SLKV" <version:1> <index:8> <term:8>
//	<uvarint members> members × (<id:8> <uvarint len> <member record>)
//	records × (0x01 <uvarint klen> <key> <uvarint vlen> <value>)   keys relative to the keyspace, in order
//	0x00
//	<crc32c:4> of everything before
//
// It is not compressed here: the transport compresses the snapshot stream.
const (
	snapMagic   = "SLKV"
	snapVersion = 1
	snapRecord  = 0x01
	snapEnd     = 0x00
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// buildSnapshot serializes the state at ps. stop aborts it (returning nil, nil).
func buildSnapshot(ps *pebble.Snapshot, stop <-chan struct{}) (*raftpb.Snapshot, error) {
	get := func(key []byte) ([]byte, error) {
		v, closer, err := ps.Get(key)
		if err != nil {
			return nil, err
		}
		out := slices.Clone(v)
		return out, closer.Close()
	}
	av, err := get(keyApplied)
	if err != nil {
		return nil, storageError("snapshot: applied index", err)
	}
	applied, ok := decodeIndexTerm(av)
	if !ok {
		return nil, fmt.Errorf("%w: snapshot: applied index", ErrCorrupt)
	}
	cs := &raftpb.ConfState{}
	csv, err := get(keyConfState)
	if err != nil {
		return nil, storageError("snapshot: conf state", err)
	}
	if err := proto.Unmarshal(csv, cs); err != nil {
		return nil, fmt.Errorf("%w: snapshot: conf state: %w", ErrCorrupt, err)
	}

	buf := make([]byte, 0, 1<<16)
	buf = append(buf, snapMagic...)
	buf = append(buf, snapVersion)
	buf = binary.BigEndian.AppendUint64(buf, applied.index)
	buf = binary.BigEndian.AppendUint64(buf, applied.term)

	it, err := ps.NewIter(&pebble.IterOptions{LowerBound: keyMemberPrefix, UpperBound: keyMemberEnd})
	if err != nil {
		return nil, storageError("snapshot: members", err)
	}
	var members [][2][]byte
	for ok := it.First(); ok; ok = it.Next() {
		members = append(members, [2][]byte{slices.Clone(it.Key()[len(keyMemberPrefix):]), slices.Clone(it.Value())})
	}
	if err := it.Close(); err != nil {
		return nil, storageError("snapshot: members", err)
	}
	buf = binary.AppendUvarint(buf, uint64(len(members)))
	for _, m := range members {
		buf = append(buf, m[0]...)
		buf = binary.AppendUvarint(buf, uint64(len(m[1])))
		buf = append(buf, m[1]...)
	}

	it, err = ps.NewIter(&pebble.IterOptions{LowerBound: keySMStart, UpperBound: keySMEnd})
	if err != nil {
		return nil, storageError("snapshot: data", err)
	}
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		if n++; n%4096 == 0 {
			select {
			case <-stop:
				_ = it.Close()
				return nil, nil
			default:
			}
		}
		v, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return nil, storageError("snapshot: data", err)
		}
		k := it.Key()[1:]
		buf = append(buf, snapRecord)
		buf = binary.AppendUvarint(buf, uint64(len(k)))
		buf = append(buf, k...)
		buf = binary.AppendUvarint(buf, uint64(len(v)))
		buf = append(buf, v...)
	}
	if err := it.Close(); err != nil {
		return nil, storageError("snapshot: data", err)
	}
	buf = append(buf, snapEnd)
	buf = binary.BigEndian.AppendUint32(buf, crc32.Checksum(buf, crcTable))
	return &raftpb.Snapshot{
		Data: buf,
		Metadata: &raftpb.SnapshotMetadata{
			Index:     new(applied.index),
			Term:      new(applied.term),
			ConfState: cs,
		},
	}, nil
}

// restoredSnapshot is a received snapshot, verified and parsed.
type restoredSnapshot struct {
	meta      indexTerm
	confState *raftpb.ConfState
	members   map[uint64]memberRecord
	records   []byte // the records section, verified to parse
}

// decodeSnapshot verifies sn and parses its data.
func decodeSnapshot(sn *raftpb.Snapshot) (*restoredSnapshot, error) {
	data := sn.GetData()
	corrupt := func(what string) error { return fmt.Errorf("%w: snapshot: %s", ErrCorrupt, what) }
	if len(data) < len(snapMagic)+1+16+1+4 {
		return nil, corrupt("too short")
	}
	body, sum := data[:len(data)-4], binary.BigEndian.Uint32(data[len(data)-4:])
	if crc32.Checksum(body, crcTable) != sum {
		return nil, corrupt("checksum mismatch")
	}
	if string(body[:4]) != snapMagic || body[4] != snapVersion {
		return nil, corrupt("unknown format")
	}
	r := &restoredSnapshot{
		meta: indexTerm{binary.BigEndian.Uint64(body[5:]), binary.BigEndian.Uint64(body[13:])},
	}
	md := sn.GetMetadata()
	if r.meta.index != md.GetIndex() || r.meta.term != md.GetTerm() {
		return nil, corrupt(fmt.Sprintf("data is at %d/%d, metadata at %d/%d", r.meta.index, r.meta.term, md.GetIndex(), md.GetTerm()))
	}
	r.confState = proto.Clone(raftpb.EnsureConfState(proto.Clone(md.GetConfState()).(*raftpb.ConfState))).(*raftpb.ConfState)
	rest := body[21:]
	nm, n := binary.Uvarint(rest)
	if n <= 0 || nm > uint64(len(rest)) {
		return nil, corrupt("member count")
	}
	rest = rest[n:]
	r.members = make(map[uint64]memberRecord, nm)
	for range nm {
		if len(rest) < 8 {
			return nil, corrupt("member")
		}
		id := binary.BigEndian.Uint64(rest)
		l, n := binary.Uvarint(rest[8:])
		if n <= 0 || l > uint64(len(rest)-8-n) {
			return nil, corrupt("member address")
		}
		rec, err := decodeMemberRecord(rest[8+n : 8+n+int(l)])
		if err != nil {
			return nil, err
		}
		r.members[id] = rec
		rest = rest[8+n+int(l):]
	}
	r.records = rest
	if err := r.forEach(func(k, v []byte) error { return nil }); err != nil {
		return nil, err
	}
	return r, nil
}

// forEach calls fn for every record of the snapshot.
func (r *restoredSnapshot) forEach(fn func(k, v []byte) error) error {
	corrupt := errors.New("record")
	rest := r.records
	next := func() ([]byte, bool) {
		l, n := binary.Uvarint(rest)
		if n <= 0 || l > uint64(len(rest)-n) {
			return nil, false
		}
		out := rest[n : n+int(l)]
		rest = rest[n+int(l):]
		return out, true
	}
	for {
		if len(rest) == 0 {
			return fmt.Errorf("%w: snapshot: %w: no end marker", ErrCorrupt, corrupt)
		}
		tag := rest[0]
		rest = rest[1:]
		if tag == snapEnd {
			if len(rest) != 0 {
				return fmt.Errorf("%w: snapshot: trailing bytes", ErrCorrupt)
			}
			return nil
		}
		if tag != snapRecord {
			return fmt.Errorf("%w: snapshot: %w tag 0x%02x", ErrCorrupt, corrupt, tag)
		}
		k, ok1 := next()
		v, ok2 := next()
		if !ok1 || !ok2 {
			return fmt.Errorf("%w: snapshot: truncated %w", ErrCorrupt, corrupt)
		}
		if err := fn(k, v); err != nil {
			return err
		}
	}
}

// writeTo adds to b everything that replaces the replica's state with the
// snapshot's: the state machine's keyspace, the member table, the applied
// index, conf state and truncation point, and an empty log.
func (r *restoredSnapshot) writeTo(b *pebble.Batch) error {
	for _, rng := range [][2][]byte{{keySMStart, keySMEnd}, {keyMemberPrefix, keyMemberEnd}, {keyLogStart, keyLogEnd}} {
		if err := b.DeleteRange(rng[0], rng[1], nil); err != nil {
			return storageError("restore snapshot", err)
		}
	}
	for id, rec := range r.members {
		if err := b.Set(memberKey(id), rec.encode(), nil); err != nil {
			return storageError("restore snapshot", err)
		}
	}
	var key []byte
	err := r.forEach(func(k, v []byte) error {
		key = appendSMKey(key[:0], k)
		if err := b.Set(key, v, nil); err != nil {
			return storageError("restore snapshot", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	cs, err := proto.Marshal(r.confState)
	if err != nil {
		return fmt.Errorf("raftkv: restore snapshot: %w", err)
	}
	for _, kv := range [][2][]byte{{keyApplied, r.meta.encode()}, {keyTruncated, r.meta.encode()}, {keyConfState, cs}} {
		if err := b.Set(kv[0], kv[1], nil); err != nil {
			return storageError("restore snapshot", err)
		}
	}
	return nil
}
