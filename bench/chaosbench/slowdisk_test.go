package chaosbench_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluicehq/sluice/bench/chaosbench"
)

func TestSlowSyncFS(t *testing.T) {
	const delay = 100 * time.Millisecond
	var d time.Duration
	fs := chaosbench.SlowSyncFS(vfs.NewMem(), func() time.Duration { return d })
	f, err := fs.Create("wal", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write([]byte("entry")); err != nil {
		t.Fatal(err)
	}
	timeSync := func(name string, sync func() error) time.Duration {
		start := time.Now()
		if err := sync(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return time.Since(start)
	}
	if took := timeSync("Sync", f.Sync); took >= delay {
		t.Errorf("Sync without a delay took %v", took)
	}
	d = delay
	for name, sync := range map[string]func() error{
		"Sync": f.Sync, "SyncData": f.SyncData, "SyncTo": func() error { _, err := f.SyncTo(5); return err },
	} {
		if took := timeSync(name, sync); took < delay {
			t.Errorf("%s with a delay of %v took %v", name, delay, took)
		}
	}
	g, err := fs.Open("wal")
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if took := timeSync("Sync of an opened file", g.Sync); took < delay {
		t.Errorf("Sync of a file opened again took %v, want %v", took, delay)
	}
}

func TestDelayFromFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "delay")
	delay := chaosbench.DelayFromFile(path)
	if d := delay(); d != 0 {
		t.Errorf("no file: %v, want 0", d)
	}
	// Each value is read again at most every 50 ms: poll for it, bounded.
	want := func(v time.Duration) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for delay() != v {
			if time.Now().After(deadline) {
				t.Fatalf("delay %v, want %v", delay(), v)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	for _, c := range []struct {
		text string
		want time.Duration
	}{{"150ms\n", 150 * time.Millisecond}, {"bogus", 0}, {"2s", 2 * time.Second}, {"-1s", 0}} {
		if err := os.WriteFile(path, []byte(c.text), 0o644); err != nil {
			t.Fatal(err)
		}
		want(c.want)
	}
	if err := os.WriteFile(path, []byte("1s"), 0o644); err != nil {
		t.Fatal(err)
	}
	want(time.Second)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	want(0)
}
