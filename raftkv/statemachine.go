package raftkv

import (
	"bytes"
	"encoding/binary"
	"errors"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/batchrepr"
)

// StateMachine is the replicated state machine. The replica calls Apply for
// every committed command, in log order, on one goroutine.
//
// Apply must be deterministic: the same state and command give the same
// writes, result and error on every replica. It writes only through b, whose
// keys are relative to the state machine's keyspace (it cannot touch the raft
// log or the replica's metadata). The writes of all commands of one Ready go
// into the same pebble batch as the applied index, so a command is applied
// exactly once even across crashes.
//
// If Apply returns an error the command is rejected: its writes are discarded
// (the batch keeps nothing of it), the error is returned to the proposer, and
// the log moves on. Apply must then have no other effect either. A command is
// only valid during the call; Apply must not keep it or modify it.
type StateMachine interface {
	Apply(b *Batch, index uint64, command []byte) (result []byte, err error)
}

// EntryAware is implemented by state machines that need to know when the
// last command of an applied raft entry has been applied: a raft entry may
// carry several commands (concurrent proposals are packed together), each
// applied by its own Apply call with the entry's index, so an index alone
// does not say that no more commands of it will come. EntriesApplied is called on
// the Apply goroutine after every command of every entry up to index.
type EntryAware interface {
	EntriesApplied(index uint64)
}

// Deferrer is implemented by state machines that keep some of their
// writes back until the replica stores the applied state, so that a record
// changed by many commands in between reaches the store once.
// WriteDeferred is called on the Apply goroutine just before the state is
// stored, after every command up to the applied index: it writes through b
// what the store must hold as of that index. A crash loses what was
// applied since the state was last stored, and the restart applies those
// commands again, so keeping writes back is safe whenever Apply is
// deterministic.
type Deferrer interface {
	WriteDeferred(b *Batch)
}

// Loader is implemented by state machines that keep in-memory state derived
// from their keyspace. Load is called at Open and after a snapshot replaced
// the keyspace, before any later Apply.
type Loader interface {
	Load(r Reader) error
}

// Reader reads the state machine's keyspace. Keys are relative to it.
type Reader interface {
	// Get returns a copy of the value of key, or ErrNotFound.
	Get(key []byte) ([]byte, error)
	// Scan calls fn for every key in [start, end) in order (a nil end means the
	// end of the keyspace). The slices are valid only during the call. Scan
	// stops at the first error fn returns and returns it.
	Scan(start, end []byte, fn func(key, value []byte) error) error
}

// pebbleReader is a Reader over a pebble database or snapshot.
type pebbleReader struct{ r pebble.Reader }

func (p pebbleReader) Get(key []byte) ([]byte, error) {
	v, closer, err := p.r.Get(smKey(key))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, storageError("get", err)
	}
	out := bytes.Clone(v)
	if out == nil {
		out = []byte{}
	}
	if err := closer.Close(); err != nil {
		return nil, storageError("get", err)
	}
	return out, nil
}

func (p pebbleReader) Scan(start, end []byte, fn func(key, value []byte) error) error {
	lo, hi := smBounds(start, end)
	it, err := p.r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return storageError("scan", err)
	}
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return storageError("scan", err)
		}
		if err := fn(it.Key()[1:], v); err != nil {
			_ = it.Close()
			return err
		}
	}
	if err := it.Close(); err != nil {
		return storageError("scan", err)
	}
	return nil
}

// Batch is what Apply writes one command through. Its reads see the
// applied state: what the store holds, the writes of the commands applied
// since it was last written to, and this command's own writes. A
// command's writes are dropped if Apply returns an error, and otherwise
// kept in memory until the replica stores the applied state (see
// Config.ApplyWriteInterval and Deferrer). Keys are relative to the state
// machine's keyspace.
//
// The buffer holds every write since the state was last stored, so that
// reads find them without the cost of an indexed pebble batch; the key
// index over it is built only when a command reads, so commands that only
// write pay for neither.
type Batch struct {
	db     pebble.Reader // the stored state
	arena  []byte        // keys and values of ops
	ops    []bufOp       // the writes since the store was written, in order
	ranges []int         // indexes of range deletions in ops
	// last maps a key to the index of its last point op among
	// ops[:indexed]; it is built by reads, once ops is long.
	last    map[string]int
	indexed int
	// cmdOps, cmdArena and cmdRanges are the lengths at the current
	// command's start.
	cmdOps, cmdArena, cmdRanges int
	keyBuf                      []byte
	err                         error // a storage error seen by a read: the replica must stop
}

type opKind uint8

const (
	opSet opKind = iota
	opDelete
	opDeleteRange
)

// bufOp is one buffered write; a and b are [off, off+len) spans of the arena:
// key and value for opSet, key for opDelete, start and end for opDeleteRange.
type bufOp struct {
	kind       opKind
	aOff, aLen int
	bOff, bLen int
}

const indexOpsAfter = 16

// reset drops the buffered writes: reads see db.
func (b *Batch) reset(db pebble.Reader) {
	b.db = db
	b.arena = b.arena[:0]
	b.ops = b.ops[:0]
	b.ranges = b.ranges[:0]
	clear(b.last)
	b.indexed = 0
	b.cmdOps, b.cmdArena, b.cmdRanges = 0, 0, 0
}

// bufferedBytes returns the bytes of the buffered writes.
func (b *Batch) bufferedBytes() int { return len(b.arena) }

// encodedBytes bounds the size of the buffered writes in a pebble batch:
// their keys and values, and per write its kind, the state machine's key
// prefix and two lengths.
func (b *Batch) encodedBytes() int {
	return batchrepr.HeaderLen + len(b.arena) + len(b.ops)*(2+2*binary.MaxVarintLen32)
}

// startCommand marks where the next command's writes begin.
func (b *Batch) startCommand() {
	b.cmdOps, b.cmdArena, b.cmdRanges = len(b.ops), len(b.arena), len(b.ranges)
}

// rollback drops the current command's writes.
func (b *Batch) rollback() {
	b.ops, b.arena, b.ranges = b.ops[:b.cmdOps], b.arena[:b.cmdArena], b.ranges[:b.cmdRanges]
	if b.indexed > b.cmdOps {
		// The index may name dropped ops, or have lost the earlier op of a
		// key to a dropped one: rebuild it at the next read.
		clear(b.last)
		b.indexed = 0
	}
}

func (b *Batch) span(off, n int) []byte { return b.arena[off : off+n : off+n] }

func (b *Batch) opKey(i int) []byte {
	o := b.ops[i]
	return b.span(o.aOff, o.aLen)
}

func (b *Batch) add(kind opKind, x, y []byte) {
	op := bufOp{kind: kind, aOff: len(b.arena), aLen: len(x)}
	b.arena = append(b.arena, x...)
	op.bOff, op.bLen = len(b.arena), len(y)
	b.arena = append(b.arena, y...)
	b.ops = append(b.ops, op)
	if kind == opDeleteRange {
		b.ranges = append(b.ranges, len(b.ops)-1)
	}
}

// Set sets key to value.
func (b *Batch) Set(key, value []byte) { b.add(opSet, key, value) }

// Delete deletes key.
func (b *Batch) Delete(key []byte) { b.add(opDelete, key, nil) }

// DeleteRange deletes every key in [start, end).
func (b *Batch) DeleteRange(start, end []byte) {
	if bytes.Compare(start, end) >= 0 {
		return
	}
	b.add(opDeleteRange, start, end)
}

// lastPoint returns the index of the last point op on key, or -1.
func (b *Batch) lastPoint(key []byte) int {
	if len(b.ops) <= indexOpsAfter {
		for i := len(b.ops) - 1; i >= 0; i-- {
			if b.ops[i].kind != opDeleteRange && bytes.Equal(b.opKey(i), key) {
				return i
			}
		}
		return -1
	}
	if b.last == nil {
		b.last = make(map[string]int, 2*len(b.ops))
	}
	for ; b.indexed < len(b.ops); b.indexed++ {
		if b.ops[b.indexed].kind != opDeleteRange {
			b.last[string(b.opKey(b.indexed))] = b.indexed
		}
	}
	if i, ok := b.last[string(key)]; ok {
		return i
	}
	return -1
}

// Get returns a copy of key's value, or ErrNotFound. Any other error is a
// storage failure: the replica stops whatever Apply returns.
func (b *Batch) Get(key []byte) ([]byte, error) {
	if b.err != nil {
		return nil, b.err
	}
	// The latest of the Ready's writes that covers key decides.
	lastPoint := b.lastPoint(key)
	lastRange := -1
	for j := len(b.ranges) - 1; j >= 0; j-- {
		o := b.ops[b.ranges[j]]
		if bytes.Compare(key, b.span(o.aOff, o.aLen)) >= 0 && bytes.Compare(key, b.span(o.bOff, o.bLen)) < 0 {
			lastRange = b.ranges[j]
			break
		}
	}
	switch {
	case lastPoint >= 0 && lastPoint > lastRange:
		o := b.ops[lastPoint]
		if o.kind == opDelete {
			return nil, ErrNotFound
		}
		return bytes.Clone(b.span(o.bOff, o.bLen)), nil
	case lastRange >= 0:
		return nil, ErrNotFound
	}
	out, err := pebbleReader{b.db}.Get(key)
	if err != nil && !errors.Is(err, ErrNotFound) {
		b.err = storageError("apply: get", err)
		return nil, b.err
	}
	return out, err
}

// write adds the buffered writes to main, in order, and drops them from
// the buffer.
func (b *Batch) write(main *pebble.Batch) error {
	for i, o := range b.ops {
		var err error
		b.keyBuf = appendSMKey(b.keyBuf[:0], b.opKey(i))
		switch o.kind {
		case opSet:
			err = main.Set(b.keyBuf, b.span(o.bOff, o.bLen), nil)
		case opDelete:
			err = main.Delete(b.keyBuf, nil)
		case opDeleteRange:
			err = main.DeleteRange(b.keyBuf, smKey(b.span(o.bOff, o.bLen)), nil)
		}
		if err != nil {
			return storageError("apply: batch", err)
		}
	}
	b.reset(b.db)
	return nil
}
