package raftkv

import (
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/klauspost/compress/s2"
)

// Commands travel in the log inside packed entries.
//
// A command is encoded with a one-byte header:
//
//	0x00 <command>               stored as is
//	0x01 <s2 block>              s2-compressed (commands of CompressThreshold bytes or more)
//
// A normal raft entry carries one or more encoded commands from one proposer:
//
//	0x01                         entry format
//	<nonce:8>                    the proposer's incarnation (random at Open)
//	<uvarint firstSeq>           the proposer's sequence number of the first command
//	<uvarint count>
//	count × (<uvarint len> <encoded command>)
//
// (nonce, seq) lets the proposing replica match applied commands to the
// callers waiting for them; other replicas ignore it. An empty entry (raft's
// own, at a new term) carries nothing.
const (
	cmdPlain      byte = 0x00
	cmdS2         byte = 0x01
	entryFormatV1 byte = 0x01

	// MaxCommandLimit is the largest Config.MaxCommandBytes allowed.
	MaxCommandLimit = 128 << 20
)

// maxDecodedCommand bounds what a compressed command may claim to expand to,
// so that corrupt input cannot make apply allocate without bound. It is the
// same on every replica (a config value could differ and make replicas
// disagree on which commands are corrupt). Tests lower it.
var maxDecodedCommand = MaxCommandLimit

// encodeCommand returns cmd with its header, compressed when that pays.
// The result never aliases cmd.
func encodeCommand(cmd []byte, compressThreshold int) []byte {
	if compressThreshold > 0 && len(cmd) >= compressThreshold {
		bp := scratchPool.Get().(*[]byte)
		defer scratchPool.Put(bp)
		if n := s2.MaxEncodedLen(len(cmd)); cap(*bp) < n {
			*bp = make([]byte, n)
		}
		enc := s2.Encode((*bp)[:cap(*bp)], cmd)
		if len(enc) < len(cmd)-len(cmd)/16 {
			out := make([]byte, 1+len(enc))
			out[0] = cmdS2
			copy(out[1:], enc)
			return out
		}
	}
	out := make([]byte, 1+len(cmd))
	out[0] = cmdPlain
	copy(out[1:], cmd)
	return out
}

// scratchPool holds compression buffers, so that a big command that
// compresses well does not cost an allocation of its full size.
var scratchPool = sync.Pool{New: func() any { return new([]byte) }}

// decodeCommand returns the command encoded in enc. A decompressed command is
// written into *buf (grown as needed), so the result is only valid until the
// next call with the same buf.
func decodeCommand(enc []byte, buf *[]byte) ([]byte, error) {
	if len(enc) == 0 {
		return nil, fmt.Errorf("%w: empty command", ErrCorrupt)
	}
	switch enc[0] {
	case cmdPlain:
		return enc[1:], nil
	case cmdS2:
		n, err := s2.DecodedLen(enc[1:])
		if err != nil {
			return nil, fmt.Errorf("%w: compressed command: %w", ErrCorrupt, err)
		}
		if n > maxDecodedCommand {
			return nil, fmt.Errorf("%w: compressed command claims %d bytes", ErrCorrupt, n)
		}
		if cap(*buf) < n {
			*buf = make([]byte, n)
		}
		out, err := s2.Decode((*buf)[:n], enc[1:])
		if err != nil {
			return nil, fmt.Errorf("%w: compressed command: %w", ErrCorrupt, err)
		}
		return out, nil
	default:
		return nil, fmt.Errorf("%w: unknown command encoding 0x%02x", ErrCorrupt, enc[0])
	}
}

// entryHeader identifies the proposer of an entry's commands.
type entryHeader struct {
	nonce    uint64
	firstSeq uint64
	count    int
}

// encodeEntry packs encoded commands into one entry's data.
func encodeEntry(h entryHeader, cmds [][]byte) []byte {
	size := 1 + 8 + 2*binary.MaxVarintLen64
	for _, c := range cmds {
		size += binary.MaxVarintLen64 + len(c)
	}
	out := make([]byte, 0, size)
	out = append(out, entryFormatV1)
	out = binary.BigEndian.AppendUint64(out, h.nonce)
	out = binary.AppendUvarint(out, h.firstSeq)
	out = binary.AppendUvarint(out, uint64(len(cmds)))
	for _, c := range cmds {
		out = binary.AppendUvarint(out, uint64(len(c)))
		out = append(out, c...)
	}
	return out
}

// decodeEntryHeader parses an entry's header and returns it with the rest of
// the data (the packed commands).
func decodeEntryHeader(data []byte) (entryHeader, []byte, error) {
	var h entryHeader
	if len(data) < 9 {
		return h, nil, fmt.Errorf("%w: entry of %d bytes is too short", ErrCorrupt, len(data))
	}
	if data[0] != entryFormatV1 {
		return h, nil, fmt.Errorf("%w: unknown entry format 0x%02x", ErrCorrupt, data[0])
	}
	h.nonce = binary.BigEndian.Uint64(data[1:9])
	rest := data[9:]
	seq, n := binary.Uvarint(rest)
	if n <= 0 {
		return h, nil, fmt.Errorf("%w: entry header: bad sequence number", ErrCorrupt)
	}
	rest = rest[n:]
	count, n := binary.Uvarint(rest)
	if n <= 0 || count > uint64(len(rest)) {
		return h, nil, fmt.Errorf("%w: entry header: bad command count", ErrCorrupt)
	}
	h.firstSeq, h.count = seq, int(count)
	return h, rest[n:], nil
}

// splitCommands appends the h.count encoded commands in body to dst.
func splitCommands(dst [][]byte, h entryHeader, body []byte) ([][]byte, error) {
	for i := 0; i < h.count; i++ {
		l, n := binary.Uvarint(body)
		if n <= 0 || l > uint64(len(body)-n) {
			return dst, fmt.Errorf("%w: command %d of %d is truncated", ErrCorrupt, i, h.count)
		}
		dst = append(dst, body[n:n+int(l)])
		body = body[n+int(l):]
	}
	if len(body) != 0 {
		return dst, fmt.Errorf("%w: %d trailing bytes after %d commands", ErrCorrupt, len(body), h.count)
	}
	return dst, nil
}
