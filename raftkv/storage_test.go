package raftkv

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

func openTestDB(t *testing.T, fs vfs.FS) *pebble.DB {
	t.Helper()
	db, err := pebble.Open("db", &pebble.Options{FS: fs, Logger: quietLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func ents(term uint64, lo, hi uint64, size int) []*raftpb.Entry {
	var out []*raftpb.Entry
	for i := lo; i < hi; i++ {
		out = append(out, &raftpb.Entry{Index: new(i), Term: new(term), Type: raftpb.EntryNormal.Enum(), Data: bytes.Repeat([]byte{byte(i)}, size)})
	}
	return out
}

func checkEntries(t *testing.T, s *storage, lo, hi uint64, term uint64) {
	t.Helper()
	got, err := s.Entries(lo, hi, 1<<30)
	if err != nil {
		t.Fatalf("Entries(%d, %d): %v", lo, hi, err)
	}
	if uint64(len(got)) != hi-lo {
		t.Fatalf("Entries(%d, %d): %d entries", lo, hi, len(got))
	}
	for i, e := range got {
		if e.GetIndex() != lo+uint64(i) || e.GetTerm() != term || len(e.GetData()) == 0 || e.GetData()[0] != byte(e.GetIndex()) {
			t.Fatalf("Entries(%d, %d)[%d] = index %d term %d", lo, hi, i, e.GetIndex(), e.GetTerm())
		}
	}
}

// TestStorageLog covers the log: the cache and pebble behind it, conflicting
// appends, truncation and what survives a reopen.
func TestStorageLog(t *testing.T) {
	fs := vfs.NewMem()
	db := openTestDB(t, fs)
	// A cache of ~10 entries of 100 bytes: most reads come from pebble.
	s, _, err := loadStorage(db, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.bootstrap(1, records(map[uint64]string{1: "a"}, nil)); err != nil {
		t.Fatal(err)
	}
	if f, _ := s.FirstIndex(); f != 2 {
		t.Fatalf("first index after bootstrap %d", f)
	}
	if term, err := s.Term(1); err != nil || term != 1 {
		t.Fatalf("Term(1) = %d, %v", term, err)
	}
	if err := s.save(nil, ents(2, 2, 52, 100), &raftpb.HardState{Term: new(uint64(2)), Commit: new(uint64(30))}); err != nil {
		t.Fatal(err)
	}
	checkEntries(t, s, 2, 52, 2)
	checkEntries(t, s, 40, 52, 2) // cache only
	checkEntries(t, s, 5, 7, 2)   // pebble only
	if got, _ := s.Entries(2, 52, 340); len(got) != 2 {
		t.Fatalf("maxSize 340 gave %d entries of ~116 bytes", len(got))
	}
	if got, _ := s.Entries(2, 52, 0); len(got) != 1 {
		t.Fatalf("maxSize 0 gave %d entries, want 1", len(got))
	}
	if _, err := s.Entries(1, 5, 1<<30); !errors.Is(err, raft.ErrCompacted) {
		t.Fatalf("Entries below the first index: %v", err)
	}
	if _, err := s.Entries(50, 60, 1<<30); !errors.Is(err, raft.ErrUnavailable) {
		t.Fatalf("Entries past the last index: %v", err)
	}
	// A new leader overwrites 30..51 with 30..34 of term 3.
	if err := s.save(nil, ents(3, 30, 35, 100), nil); err != nil {
		t.Fatal(err)
	}
	if last, _ := s.LastIndex(); last != 34 {
		t.Fatalf("last index after a conflicting append: %d", last)
	}
	checkEntries(t, s, 30, 35, 3)
	checkEntries(t, s, 2, 30, 2)
	// Truncate through 20.
	ab := db.NewBatch()
	if err := s.writeApplied(ab, indexTerm{25, 2}, nil); err != nil {
		t.Fatal(err)
	}
	if err := ab.Commit(pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	s.appliedCommitted(indexTerm{25, 2}, nil)
	if err := s.truncate(20); err != nil {
		t.Fatal(err)
	}
	if f, _ := s.FirstIndex(); f != 21 {
		t.Fatalf("first index after truncation: %d", f)
	}
	if term, err := s.Term(20); err != nil || term != 2 {
		t.Fatalf("Term(20) after truncation = %d, %v", term, err)
	}
	if _, err := s.Term(19); !errors.Is(err, raft.ErrCompacted) {
		t.Fatalf("Term(19) after truncation: %v", err)
	}
	// What a reopen sees.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openTestDB(t, fs)
	defer db.Close()
	s, ps, err := loadStorage(db, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if ps.fresh || ps.id != 1 || ps.members[1] != (memberRecord{addr: "a"}) {
		t.Fatalf("persisted state: %+v", ps)
	}
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	hs, cs, _ := s.InitialState()
	if first != 21 || last != 34 || hs.GetCommit() != 30 || hs.GetTerm() != 2 || len(cs.GetVoters()) != 1 {
		t.Fatalf("after reopen: first %d last %d hard state %v conf state %v", first, last, hs, cs)
	}
	checkEntries(t, s, 21, 30, 2)
	checkEntries(t, s, 30, 35, 3)
	// The range deletions left no stray keys behind.
	it, _ := db.NewIter(&pebble.IterOptions{LowerBound: keyLogStart, UpperBound: keyLogEnd})
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	_ = it.Close()
	if n != 14 {
		t.Fatalf("%d log keys in pebble, want 14", n)
	}
}

// TestSnapshotRoundTrip builds a snapshot from one database, restores it into
// another, and checks that any corruption is caught.
func TestSnapshotRoundTrip(t *testing.T) {
	src := openTestDB(t, vfs.NewMem())
	defer src.Close()
	s, _, err := loadStorage(src, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.bootstrap(1, records(map[uint64]string{1: "a", 2: "b"}, map[uint64]string{2: "meta-b"})); err != nil {
		t.Fatal(err)
	}
	b := src.NewBatch()
	for i := range 100 {
		_ = b.Set(smKey([]byte{byte(i)}), bytes.Repeat([]byte{byte(i)}, i), nil)
	}
	_ = s.writeApplied(b, indexTerm{7, 3}, &raftpb.ConfState{Voters: []uint64{1, 2}})
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	ps := src.NewSnapshot()
	sn, err := buildSnapshot(ps, nil)
	_ = ps.Close()
	if err != nil {
		t.Fatal(err)
	}
	if sn.GetMetadata().GetIndex() != 7 || sn.GetMetadata().GetTerm() != 3 {
		t.Fatalf("snapshot metadata %v", sn.GetMetadata())
	}
	rs, err := decodeSnapshot(sn)
	if err != nil {
		t.Fatal(err)
	}
	dst := openTestDB(t, vfs.NewMem())
	defer dst.Close()
	_ = dst.Set(smKey([]byte("stale")), []byte("x"), nil)
	_ = dst.Set(logKey(3), []byte("stale"), nil)
	db := dst.NewBatch()
	if err := rs.writeTo(db); err != nil {
		t.Fatal(err)
	}
	if err := db.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	r := pebbleReader{dst}
	for i := range 100 {
		if v, err := r.Get([]byte{byte(i)}); err != nil || !bytes.Equal(v, bytes.Repeat([]byte{byte(i)}, i)) {
			t.Fatalf("restored key %d = %q, %v", i, v, err)
		}
	}
	if _, err := r.Get([]byte("stale")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a key the snapshot does not have survived: %v", err)
	}
	s2, ps2, err := loadStorage(dst, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if ps2.members[2] != (memberRecord{addr: "b", meta: "meta-b"}) || s2.mu.applied != (indexTerm{7, 3}) || s2.mu.lastIndex != 7 {
		t.Fatalf("restored meta: members %v applied %v last %d", ps2.members, s2.mu.applied, s2.mu.lastIndex)
	}
	for _, i := range []int{0, 5, len(sn.Data) / 2, len(sn.Data) - 1} {
		bad := &raftpb.Snapshot{Data: bytes.Clone(sn.Data), Metadata: sn.Metadata}
		bad.Data[i] ^= 0x40
		if _, err := decodeSnapshot(bad); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("flipped byte %d: %v", i, err)
		}
	}
	bad := &raftpb.Snapshot{Data: sn.Data, Metadata: &raftpb.SnapshotMetadata{Index: new(uint64(8)), Term: new(uint64(3))}}
	if _, err := decodeSnapshot(bad); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("metadata that does not match the data: %v", err)
	}
}

// TestBatch checks what Apply sees: its own writes over earlier commands'
// over the store, and nothing of a command whose writes were dropped,
// whether or not a read had indexed them; and that the store gets exactly
// the kept commands' writes.
func TestBatch(t *testing.T) {
	db := openTestDB(t, vfs.NewMem())
	defer db.Close()
	_ = db.Set(smKey([]byte("a")), []byte("db"), nil)
	_ = db.Set(smKey([]byte("m")), []byte("db"), nil)
	var b Batch
	b.reset(db)
	b.startCommand()
	b.Set([]byte("b"), []byte("cmd1"))
	for i := range 40 { // past the point where lookups use an index
		b.Set([]byte{'y', byte(i)}, []byte("cmd1"))
	}
	b.startCommand()
	get := func(k string) string {
		v, err := b.Get([]byte(k))
		if errors.Is(err, ErrNotFound) {
			return "<none>"
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(v)
	}
	if get("a") != "db" || get("b") != "cmd1" || get("c") != "<none>" || get("y\x03") != "cmd1" {
		t.Fatalf("reads before writing: a=%s b=%s c=%s", get("a"), get("b"), get("c"))
	}
	b.Set([]byte("a"), []byte("own"))
	b.DeleteRange([]byte("l"), []byte("n"))
	b.Set([]byte("ma"), []byte("own"))
	b.Set([]byte("y\x03"), []byte("own"))
	b.Delete([]byte("b"))
	if get("a") != "own" || get("b") != "<none>" || get("m") != "<none>" || get("ma") != "own" || get("y\x03") != "own" {
		t.Fatalf("own writes: a=%s b=%s m=%s ma=%s y3=%s", get("a"), get("b"), get("m"), get("ma"), get("y\x03"))
	}
	b.rollback() // the command failed: drop its writes
	if get("a") != "db" || get("b") != "cmd1" || get("m") != "db" || get("ma") != "<none>" || get("y\x03") != "cmd1" {
		t.Fatalf("after dropping a command's writes: a=%s b=%s m=%s ma=%s y3=%s", get("a"), get("b"), get("m"), get("ma"), get("y\x03"))
	}
	b.startCommand()
	b.Set([]byte("c"), []byte("cmd3"))
	if get("c") != "cmd3" || get("y\x05") != "cmd1" {
		t.Fatalf("a later command: c=%s y5=%s", get("c"), get("y\x05"))
	}
	main := db.NewBatch()
	defer main.Close()
	if err := b.write(main); err != nil {
		t.Fatal(err)
	}
	if err := main.Commit(nil); err != nil {
		t.Fatal(err)
	}
	if get("c") != "cmd3" || get("b") != "cmd1" {
		t.Fatalf("reads after the store was written: c=%s b=%s", get("c"), get("b"))
	}
	want := map[string]string{"a": "db", "b": "cmd1", "c": "cmd3", "m": "db", "y\x03": "cmd1"}
	for k, v := range want {
		got, closer, err := db.Get(smKey([]byte(k)))
		if err != nil {
			t.Fatalf("committed %q: %v", k, err)
		}
		if string(got) != v {
			t.Errorf("committed %q = %q, want %q", k, got, v)
		}
		closer.Close()
	}
	if _, _, err := db.Get(smKey([]byte("ma"))); !errors.Is(err, pebble.ErrNotFound) {
		t.Errorf("the dropped command's write of ma reached the batch: %v", err)
	}
}

// TestBatchWrite applies seeded random commands (sets, deletes, range
// deletions and reads over a few keys, some commands dropped), writing the buffer to
// the store now and then, and checks that reads through the Batch, and the
// store after each write, hold what applying the kept commands one by one
// leaves.
func TestBatchWrite(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 7))
	db := openTestDB(t, vfs.NewMem())
	defer db.Close()
	key := func() []byte { return []byte{byte('a' + r.IntN(6)), byte('a' + r.IntN(3))}[:1+r.IntN(2)] }
	model := map[string]string{}
	var b Batch
	b.reset(db)
	for round := range 200 {
		for cmd := range r.IntN(60) {
			b.startCommand()
			mine := maps.Clone(model)
			for range r.IntN(8) {
				switch k := key(); r.IntN(10) {
				case 0:
					end := key()
					if bytes.Compare(k, end) > 0 {
						k, end = end, k
					}
					b.DeleteRange(k, end)
					for m := range mine {
						if m >= string(k) && m < string(end) {
							delete(mine, m)
						}
					}
				case 1, 2:
					b.Delete(k)
					delete(mine, string(k))
				case 3: // a read indexes the buffer, which a rollback must then undo
					got, err := b.Get(k)
					if want, ok := mine[string(k)]; ok != (err == nil) || string(got) != want {
						t.Fatalf("round %d, command %d: Get(%q) = %q, %v; want %q", round, cmd, k, got, err, want)
					}
				default:
					v := fmt.Sprintf("%d.%d", round, cmd)
					b.Set(k, []byte(v))
					mine[string(k)] = v
				}
			}
			if r.IntN(5) == 0 {
				b.rollback()
				continue
			}
			model = mine
		}
		for c := 'a'; c < 'g'; c++ {
			for _, k := range []string{string(c), string(c) + "a", string(c) + "b", string(c) + "c"} {
				got, err := b.Get([]byte(k))
				if want, ok := model[k]; ok != (err == nil) || string(got) != want {
					t.Fatalf("round %d: Get(%q) = %q, %v; applying the commands in order gives %q", round, k, got, err, want)
				}
			}
		}
		main := db.NewBatch()
		if err := b.write(main); err != nil {
			t.Fatal(err)
		}
		if err := main.Commit(nil); err != nil {
			t.Fatal(err)
		}
		main.Close()
		got := map[string]string{}
		if err := (pebbleReader{db}).Scan(nil, nil, func(k, v []byte) error {
			got[string(k)] = string(v)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(got, model) {
			t.Fatalf("round %d: the store holds %v, applying the commands in order gives %v", round, got, model)
		}
	}
}

func snapshotWithData(data []byte) *raftpb.Snapshot {
	return &raftpb.Snapshot{Data: data, Metadata: &raftpb.SnapshotMetadata{Index: new(uint64(0)), Term: new(uint64(0))}}
}

type quietLogger struct{}

func (quietLogger) Infof(string, ...any)           {}
func (quietLogger) Errorf(string, ...any)          {}
func (quietLogger) Fatalf(format string, a ...any) { panic(fmt.Sprintf(format, a...)) }
