package storebench

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// memStore is a Store that commits after a fixed delay, failing every
// failEvery-th write.
type memStore struct {
	mu        sync.Mutex
	n         int
	failEvery int
	delay     time.Duration
	data      map[string]int
}

func (m *memStore) Put(ctx context.Context, key string, value []byte) error {
	time.Sleep(m.delay)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.n++
	if m.failEvery > 0 && m.n%m.failEvery == 0 {
		return errors.New("injected failure")
	}
	m.data[key] = len(value)
	return nil
}

func TestDrive(t *testing.T) {
	s := &memStore{failEvery: 10, delay: time.Millisecond, data: map[string]int{}}
	r, err := Drive(context.Background(), s, Config{Writers: 4, ValueBytes: 256, Duration: 200 * time.Millisecond, Warmup: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if r.Writes == 0 || r.Errors == 0 || r.FirstError != "injected failure" {
		t.Fatalf("result %+v: want writes and the injected errors", r)
	}
	// Four writers, one write in flight each, 1 ms per write: at most
	// about 4,000 writes/s, and p50 at least the delay.
	if r.WritesPerSec > 4500 || r.P50Ms < 1 || r.P99Ms < r.P50Ms {
		t.Fatalf("result %+v: rate or latency impossible for the store's delay", r)
	}
	for k, n := range s.data {
		if n != 256 || !strings.HasPrefix(k, "bench/") {
			t.Fatalf("write %q of %d bytes", k, n)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	err := Config{Writers: 0, ValueBytes: 0, Duration: 0, Warmup: -1}.Validate()
	for _, want := range []string{"writers 0", "value bytes 0", "duration 0s", "warmup -1ns"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v: want it to name %q", err, want)
		}
	}
	if _, err := Drive(context.Background(), &memStore{}, Config{}); err == nil {
		t.Fatal("Drive accepted an empty config")
	}
}

// TestEtcd starts an etcd cluster and drives it through the etcd load
// driver, built for the test.
func TestEtcd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an etcd cluster")
	}
	if _, err := exec.LookPath("etcd"); err != nil {
		t.Skip(ErrNoEtcd)
	}
	driver := filepath.Join(t.TempDir(), EtcdDriverName)
	build := exec.Command("go", "build", "-o", driver, "github.com/sluicehq/sluice/cmd/etcdload")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the etcd load driver: %v\n%s", err, out)
	}
	e, err := StartEtcd(context.Background(), t.TempDir(), 3)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	r, err := e.Drive(context.Background(), driver, Config{Writers: 8, ValueBytes: 256, Duration: 300 * time.Millisecond})
	if err != nil || r.Writes == 0 || r.Errors != 0 {
		t.Fatalf("drive etcd: %+v, %v", r, err)
	}
	// A bad configuration is refused before the driver runs, and the
	// driver's own refusal comes back with what it said.
	if _, err := e.Drive(context.Background(), driver, Config{}); err == nil {
		t.Fatal("Drive accepted an empty config")
	}
	if _, err := e.Drive(context.Background(), filepath.Join(t.TempDir(), "absent"), Config{Writers: 1, ValueBytes: 1, Duration: time.Millisecond}); err == nil {
		t.Fatal("Drive with a missing driver: no error")
	}
}

func TestFindEtcdDriver(t *testing.T) {
	if p, err := FindEtcdDriver("/some/where"); err != nil || p != "/some/where" {
		t.Fatalf("FindEtcdDriver with a path = %q, %v", p, err)
	}
	t.Setenv("PATH", t.TempDir())
	if p, err := FindEtcdDriver(""); !errors.Is(err, ErrNoEtcdDriver) {
		t.Fatalf("FindEtcdDriver with none built = %q, %v", p, err)
	}
}

// TestComparePeerTLS drives raftkv briefly with mutual TLS between its
// replicas: it commits writes without errors.
func TestComparePeerTLS(t *testing.T) {
	out, err := Compare(context.Background(), CompareConfig{
		Config:   Config{Writers: 4, ValueBytes: 256, Duration: 300 * time.Millisecond, Warmup: 50 * time.Millisecond},
		Replicas: 3, NoEtcd: true, PeerTLS: true, Dir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if !out.PeerTLS || out.Sluice.Writes == 0 || out.Sluice.Errors != 0 {
		t.Errorf("%+v: want peer TLS, writes and no errors", out)
	}
}

// TestStartRaftKVPeerTLS shows that a cluster started with PeerTLS speaks
// only TLS between its replicas: a plaintext hello gets no answer.
func TestStartRaftKVPeerTLS(t *testing.T) {
	ctx := context.Background()
	for _, peerTLS := range []bool{false, true} {
		kv, err := StartRaftKV(ctx, t.TempDir(), 3, RaftKVOptions{PeerTLS: peerTLS})
		if err != nil {
			t.Fatal(err)
		}
		if err := kv.Put(ctx, "k", []byte("v")); err != nil {
			t.Fatalf("peer TLS %v: put: %v", peerTLS, err)
		}
		conn, err := net.Dial("tcp", kv.peers[1])
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		conn.Write(plainHello(2, 1))
		var b [4]byte
		_, err = io.ReadFull(conn, b[:])
		conn.Close()
		kv.Close()
		if answered := err == nil && string(b[:]) == "SLKA"; answered == peerTLS {
			t.Errorf("peer TLS %v: a plaintext hello answered %v (read %q, %v)", peerTLS, answered, b, err)
		}
	}
}

// plainHello is the raft transport's hello (raftkv/transport_wire.go) of a
// message stream from node from to node to, cluster 0, version 1.
func plainHello(from, to uint64) []byte {
	b := append([]byte("SLKH"), 1, 1, 0, 0)
	b = binary.BigEndian.AppendUint64(b, 0)
	b = binary.BigEndian.AppendUint64(b, from)
	b = binary.BigEndian.AppendUint64(b, to)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
}
