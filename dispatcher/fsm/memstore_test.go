package fsm

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/raftkv"
)

// memStore is an in-memory keyspace: a writer for apply (whose writes are
// kept only when the command succeeds, as raftkv does) and a raftkv.Reader
// for Load.
type memStore struct {
	m   map[string][]byte
	ops []memOp // the current command's writes
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
	return res, 0, nil
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
