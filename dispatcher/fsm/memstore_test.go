package fsm

import (
	"bytes"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/raftkv"
)

// memStore is an in-memory keyspace: a writer for apply (whose writes are
// kept only when the command succeeds, as raftkv does) and a raftkv.Reader
// for Load. Unless keepBack is set, it stores the FSM's deferred writes
// after every command (as raftkv does with a negative
// ApplyWriteInterval); otherwise only store does.
type memStore struct {
	m        map[string][]byte
	ops      []memOp // the current command's writes
	keepBack bool
}

type memOp struct {
	key, val []byte
	del      bool
	end      []byte // a range deletion of [key, end)
}

func newMemStore() *memStore { return &memStore{m: map[string][]byte{}} }

func (s *memStore) Set(k, v []byte) {
	s.ops = append(s.ops, memOp{key: bytes.Clone(k), val: bytes.Clone(v)})
}
func (s *memStore) Delete(k []byte) { s.ops = append(s.ops, memOp{key: bytes.Clone(k), del: true}) }
func (s *memStore) DeleteRange(start, end []byte) {
	s.ops = append(s.ops, memOp{key: bytes.Clone(start), end: bytes.Clone(end), del: true})
}

// apply runs one command; it returns how many writes a rejected command
// attempted (must be 0) along with apply's outcome.
func (s *memStore) apply(f *FSM, index uint64, cmd []byte) ([]byte, int, error) {
	s.ops = s.ops[:0]
	res, err := f.apply(s, index, cmd)
	f.EntriesApplied(index) // one command per entry here
	if err != nil {
		return nil, len(s.ops), err
	}
	if !s.keepBack {
		f.writeDeferred(s)
	}
	s.commit()
	return res, 0, nil
}

// store writes the FSM's deferred writes, as raftkv does when it stores
// the applied state.
func (s *memStore) store(f *FSM) {
	s.ops = s.ops[:0]
	f.writeDeferred(s)
	s.commit()
}

// commit applies the buffered writes to the keyspace.
func (s *memStore) commit() {
	for _, o := range s.ops {
		if o.end != nil {
			for k := range s.m {
				if k >= string(o.key) && k < string(o.end) {
					delete(s.m, k)
				}
			}
			continue
		}
		if o.del {
			delete(s.m, string(o.key))
		} else {
			s.m[string(o.key)] = o.val
		}
	}
}

func (s *memStore) Get(k []byte) ([]byte, error) {
	v, ok := s.m[string(k)]
	if !ok {
		return nil, raftkv.ErrNotFound
	}
	return bytes.Clone(v), nil
}

func (s *memStore) Scan(start, end []byte, fn func(k, v []byte) error) error {
	var keys []string
	for k := range s.m {
		if k >= string(start) && (end == nil || k < string(end)) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		if err := fn([]byte(k), s.m[k]); err != nil {
			return err
		}
	}
	return nil
}

// discard is a writer that keeps nothing, for benchmarks of apply alone.
type discard struct{ n int }

func (d *discard) Set(k, v []byte)               { d.n += len(k) + len(v) }
func (d *discard) Delete(k []byte)               { d.n += len(k) }
func (d *discard) DeleteRange(start, end []byte) { d.n += len(start) + len(end) }

// loadRefuses sets s's record at key to rec, checks that Load refuses the
// keyspace as corrupt, and puts back what key held.
func (s *memStore) loadRefuses(t *testing.T, key string, rec []byte) {
	t.Helper()
	good, had := s.m[key]
	defer func() {
		if had {
			s.m[key] = good
		} else {
			delete(s.m, key)
		}
	}()
	s.m[key] = rec
	if err := New().Load(s); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Load: %v; want ErrCorrupt", err)
	}
}

// seq applies commands by hand, in order, to an FSM through a memStore,
// failing the test at the first one refused.
type seq struct {
	t     *testing.T
	f     *FSM
	s     *memStore
	index uint64 // of the last command applied
}

func newSeq(t *testing.T) *seq { return &seq{t: t, f: New(), s: newMemStore()} }

// apply applies cmd as the next command and returns its result.
func (q *seq) apply(cmd []byte) []byte {
	q.t.Helper()
	q.index++
	res, _, err := q.s.apply(q.f, q.index, cmd)
	if err != nil {
		q.t.Fatalf("apply %d: %v", q.index, err)
	}
	return res
}

// node registers a node named n1 of capacity c, all of it allocatable in
// both tiers.
func (q *seq) node(now time.Time, c api.Capacity) {
	q.t.Helper()
	cmd, err := RegisterNode(now, api.NodeSpec{Name: "n1", Capacity: c, Allocatable: api.Allocatable{Online: c, Offline: c}})
	if err != nil {
		q.t.Fatal(err)
	}
	q.apply(cmd)
}
