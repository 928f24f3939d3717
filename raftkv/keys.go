package raftkv

import "encoding/binary"

// Key layout of the one pebble database a replica owns. Every key starts with
// a one-byte prefix naming its keyspace; numbers inside keys are big-endian so
// that byte order is numeric order and a range of indexes is a range scan.
//
//	0x01 'h' 's'            hard state (term, vote, commit)
//	0x01 'c' 's'            conf state at the applied index
//	0x01 'a' 'p'            applied index and its term
//	0x01 't' 'r'            truncation point: the last index removed from the log and its term
//	0x01 'i' 'd'            the replica's ID (guards against opening another replica's dir)
//	0x01 'm' <id:8>         a member's record: its address and metadata (member.go)
//	0x02 <index:8>          a raft log entry
//	0x03 <key>              the state machine's data; the state machine sees <key> only
//
// The applied index, the conf state, the member table and the state machine's
// data change together in one batch per Ready, which is what makes applies
// exactly-once across restarts.
const (
	prefixMeta byte = 0x01
	prefixLog  byte = 0x02
	prefixSM   byte = 0x03
	prefixEnd  byte = 0x04 // exclusive upper bound of all keys
)

var (
	keyHardState = []byte{prefixMeta, 'h', 's'}
	keyConfState = []byte{prefixMeta, 'c', 's'}
	keyApplied   = []byte{prefixMeta, 'a', 'p'}
	keyTruncated = []byte{prefixMeta, 't', 'r'}
	keyReplicaID = []byte{prefixMeta, 'i', 'd'}

	keyMemberPrefix = []byte{prefixMeta, 'm'}
	keyMemberEnd    = []byte{prefixMeta, 'm' + 1}

	keyLogStart = []byte{prefixLog}
	keyLogEnd   = []byte{prefixLog + 1}
	keySMStart  = []byte{prefixSM}
	keySMEnd    = []byte{prefixSM + 1}
)

func logKey(index uint64) []byte {
	var k [9]byte
	k[0] = prefixLog
	binary.BigEndian.PutUint64(k[1:], index)
	return k[:]
}

func memberKey(id uint64) []byte {
	k := append([]byte(nil), keyMemberPrefix...)
	return binary.BigEndian.AppendUint64(k, id)
}

// smKey returns the database key of the state machine's key k.
func smKey(k []byte) []byte {
	out := make([]byte, 1+len(k))
	out[0] = prefixSM
	copy(out[1:], k)
	return out
}

func appendSMKey(dst, k []byte) []byte {
	dst = append(dst, prefixSM)
	return append(dst, k...)
}

// smBounds returns the database bounds of the state machine's range
// [start, end); a nil end means the end of the keyspace.
func smBounds(start, end []byte) (lo, hi []byte) {
	lo = smKey(start)
	if end == nil {
		hi = keySMEnd
	} else {
		hi = smKey(end)
	}
	return lo, hi
}

// indexTerm is an (index, term) pair stored as 16 big-endian bytes.
type indexTerm struct{ index, term uint64 }

func (it indexTerm) encode() []byte {
	b := make([]byte, 16)
	binary.BigEndian.PutUint64(b, it.index)
	binary.BigEndian.PutUint64(b[8:], it.term)
	return b
}

func decodeIndexTerm(b []byte) (indexTerm, bool) {
	if len(b) != 16 {
		return indexTerm{}, false
	}
	return indexTerm{binary.BigEndian.Uint64(b), binary.BigEndian.Uint64(b[8:])}, true
}
