package raftkv

import (
	"encoding/binary"
	"fmt"
)

// memberRecord is a member's entry in the replicated member table: its raft
// address and the application's metadata (Member.Meta).
type memberRecord struct {
	addr, meta string
}

// Encoding of a member table value (memberKey). A record without metadata
// is its address alone, as the table held before metadata existed; one with
// metadata is
//
//	0x00 <uvarint len(addr)> <addr> <meta>
//
// No address starts with a zero byte, so the two never meet.
const memberValueWithMeta = 0x00

func (r memberRecord) encode() []byte {
	if r.meta == "" {
		return []byte(r.addr)
	}
	b := make([]byte, 0, 1+binary.MaxVarintLen64+len(r.addr)+len(r.meta))
	b = append(b, memberValueWithMeta)
	b = binary.AppendUvarint(b, uint64(len(r.addr)))
	b = append(b, r.addr...)
	return append(b, r.meta...)
}

func decodeMemberRecord(v []byte) (memberRecord, error) {
	if len(v) == 0 || v[0] != memberValueWithMeta {
		return memberRecord{addr: string(v)}, nil
	}
	l, k := binary.Uvarint(v[1:])
	if k <= 0 || l > uint64(len(v)-1-k) {
		return memberRecord{}, fmt.Errorf("%w: member record of %d bytes", ErrCorrupt, len(v))
	}
	rest := v[1+k:]
	return memberRecord{addr: string(rest[:l]), meta: string(rest[l:])}, nil
}

// records builds a member table from addresses and metadata by ID (meta
// may name IDs addrs does not; those are ignored).
func records(addrs, meta map[uint64]string) map[uint64]memberRecord {
	out := make(map[uint64]memberRecord, len(addrs))
	for id, a := range addrs {
		out[id] = memberRecord{addr: a, meta: meta[id]}
	}
	return out
}

// memberContext is the Context of our ConfChangeV2 entries. Version 2:
//
//	<2> <nonce:8> <uvarint seq> <uvarint len(addr)> <addr> <meta>
//
// Version 1 (<1> <nonce:8> <uvarint seq> <addr>) is still read. It carries
// the new member's record into the replicated member table; a promotion
// carries an empty address.
const (
	memberContextV1 = 1
	memberContextV2 = 2
)

func encodeMemberContext(nonce, seq uint64, rec memberRecord) []byte {
	b := []byte{memberContextV2}
	b = binary.BigEndian.AppendUint64(b, nonce)
	b = binary.AppendUvarint(b, seq)
	b = binary.AppendUvarint(b, uint64(len(rec.addr)))
	b = append(b, rec.addr...)
	return append(b, rec.meta...)
}

func decodeMemberContext(b []byte) (nonce, seq uint64, rec memberRecord, ok bool) {
	if len(b) < 10 || (b[0] != memberContextV1 && b[0] != memberContextV2) {
		return 0, 0, memberRecord{}, false
	}
	nonce = binary.BigEndian.Uint64(b[1:])
	seq, k := binary.Uvarint(b[9:])
	if k <= 0 {
		return 0, 0, memberRecord{}, false
	}
	rest := b[9+k:]
	if b[0] == memberContextV1 {
		return nonce, seq, memberRecord{addr: string(rest)}, true
	}
	l, k := binary.Uvarint(rest)
	if k <= 0 || l > uint64(len(rest)-k) {
		return 0, 0, memberRecord{}, false
	}
	rest = rest[k:]
	return nonce, seq, memberRecord{addr: string(rest[:l]), meta: string(rest[l:])}, true
}
