package raftkv

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// KV is the built-in state machine: a map from keys to values with put,
// delete and compare-and-swap, used by tests, benchmarks and as the default.
// Build its commands with PutCommand, DeleteCommand and CASCommand, propose
// them with Node.Propose, and read with Node.Get or Node.LinearizableGet.
type KV struct{}

// NewKV returns the built-in key-value state machine.
func NewKV() *KV { return &KV{} }

var (
	// ErrBadCommand: the command is not a KV command. It is rejected on every
	// replica and nothing of it is applied.
	ErrBadCommand = errors.New("raftkv: bad KV command")
	// ErrCASMismatch: a compare-and-swap found another value; nothing was written.
	ErrCASMismatch = errors.New("raftkv: compare-and-swap: value mismatch")
)

// KV command encodings:
//
//	0x01 <uvarint klen> <key> <value>                                put
//	0x02 <key>                                                       delete
//	0x03 <uvarint klen> <key> 0x00 <new>                             CAS, key must be absent
//	0x03 <uvarint klen> <key> 0x01 <uvarint olen> <old> <new>        CAS, key must hold old
const (
	kvPut    byte = 0x01
	kvDelete byte = 0x02
	kvCAS    byte = 0x03
)

// PutCommand returns the command that sets key to value.
func PutCommand(key, value []byte) []byte {
	b := make([]byte, 0, 1+binary.MaxVarintLen64+len(key)+len(value))
	b = append(b, kvPut)
	b = binary.AppendUvarint(b, uint64(len(key)))
	b = append(b, key...)
	return append(b, value...)
}

// DeleteCommand returns the command that deletes key.
func DeleteCommand(key []byte) []byte {
	return append([]byte{kvDelete}, key...)
}

// CASCommand returns the command that sets key to value if it holds old; a
// nil old means the key must be absent. It fails with ErrCASMismatch.
func CASCommand(key, old, value []byte) []byte {
	b := make([]byte, 0, 2+2*binary.MaxVarintLen64+len(key)+len(old)+len(value))
	b = append(b, kvCAS)
	b = binary.AppendUvarint(b, uint64(len(key)))
	b = append(b, key...)
	if old == nil {
		b = append(b, 0)
	} else {
		b = append(b, 1)
		b = binary.AppendUvarint(b, uint64(len(old)))
		b = append(b, old...)
	}
	return append(b, value...)
}

// cut splits a uvarint-length-prefixed field off b.
func cut(b []byte) (field, rest []byte, ok bool) {
	l, n := binary.Uvarint(b)
	if n <= 0 || l > uint64(len(b)-n) {
		return nil, nil, false
	}
	return b[n : n+int(l)], b[n+int(l):], true
}

// Apply implements StateMachine.
func (*KV) Apply(b *Batch, _ uint64, cmd []byte) ([]byte, error) {
	if len(cmd) == 0 {
		return nil, fmt.Errorf("%w: empty", ErrBadCommand)
	}
	switch cmd[0] {
	case kvPut:
		key, value, ok := cut(cmd[1:])
		if !ok {
			return nil, fmt.Errorf("%w: put: bad key length", ErrBadCommand)
		}
		b.Set(key, value)
		return nil, nil
	case kvDelete:
		b.Delete(cmd[1:])
		return nil, nil
	case kvCAS:
		key, rest, ok := cut(cmd[1:])
		if !ok || len(rest) == 0 || rest[0] > 1 {
			return nil, fmt.Errorf("%w: cas: malformed", ErrBadCommand)
		}
		var old []byte
		mustExist := rest[0] == 1
		rest = rest[1:]
		if mustExist {
			if old, rest, ok = cut(rest); !ok {
				return nil, fmt.Errorf("%w: cas: bad old value length", ErrBadCommand)
			}
		}
		cur, err := b.Get(key)
		switch {
		case errors.Is(err, ErrNotFound):
			if mustExist {
				return nil, ErrCASMismatch
			}
		case err != nil:
			return nil, err
		case !mustExist || !bytes.Equal(cur, old):
			return nil, ErrCASMismatch
		}
		b.Set(key, rest)
		return nil, nil
	default:
		return nil, fmt.Errorf("%w: unknown operation 0x%02x", ErrBadCommand, cmd[0])
	}
}
