package container_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/nodelet/overcommit"
	"github.com/sluicehq/sluice/nodelet/runtime"
)

// TestResourceDir: the pod's resource file is in every container at
// /run/sluice/resources.json, readable by a non-root user, read-only, and
// a rewrite by the overcommit loop's writer after the start is seen
// inside.
func TestResourceDir(t *testing.T) {
	rt, dir, ctx := startRuntime(t, "")
	resDir := t.TempDir()
	if err := os.Chmod(resDir, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(resDir, "resources.json")
	pr := overcommit.PodResources{ID: "res", Guaranteed: overcommit.Resources{CPUMillis: 250, MemoryBytes: 64 << 20}, Limit: overcommit.Resources{CPUMillis: 250, MemoryBytes: 64 << 20}}
	if err := overcommit.WriteResourceFile(file, pr); err != nil {
		t.Fatal(err)
	}
	const inside = runtime.ResourceMount + "/resources.json"
	spec := pod("res",
		[]string{"/payload", "cat", inside, "print", "read-1", "waitfile", inside, `"cpu_millis":900`,
			"write", inside, "overwritten", "exit", "0"},
		[]string{"/payload", "cat", inside, "write", runtime.ResourceMount + "/new", "x", "exit", "0"},
	)
	spec.Containers[1].User = &runtime.User{UID: 1000, GID: 1000}
	spec.ResourceDir = resDir
	startPod(t, ctx, rt, spec)
	first := waitLog(t, ctx, rt, "res", "c0", "read-1")
	if !strings.Contains(first, `"limit":{"cpu_millis":250,`) {
		t.Errorf("c0 read %q at its start, want the initial file", first)
	}
	pr.Limit.CPUMillis = 900
	if err := overcommit.WriteResourceFile(file, pr); err != nil {
		t.Fatal(err)
	}
	e, err := rt.Wait(ctx, "res")
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	logs := []string{logsOf(ctx, t, rt, "res", "c0"), logsOf(ctx, t, rt, "res", "c1")}
	// Both read the file and then failed (99) to write: read-only.
	if e.Containers[0].Code != 99 || !strings.Contains(logs[0], `"limit":{"cpu_millis":900,`) || !strings.Contains(logs[0], "read-only file system") {
		t.Errorf("c0: exit %+v, log %q; want the rewritten file read, then a refused write", e.Containers[0], logs[0])
	}
	if e.Containers[1].Code != 99 || !strings.Contains(logs[1], `"pod":"res"`) || !strings.Contains(logs[1], "read-only file system") {
		t.Errorf("c1 (uid 1000): exit %+v, log %q; want the file read, then a refused write", e.Containers[1], logs[1])
	}
	if b, err := os.ReadFile(file); err != nil || !strings.Contains(string(b), `"cpu_millis":900`) {
		t.Errorf("host file now %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(resDir, "new")); err == nil {
		t.Errorf("a container created a file in the resource directory")
	}
	if err := rt.Remove(ctx, "res"); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if l := leftovers(dir, "res"); len(l) > 0 {
		t.Errorf("left behind: %v", l)
	}
	if _, err := os.Stat(file); err != nil {
		t.Errorf("Remove took the resource file, which is not the runtime's: %v", err)
	}
}

// TestResourceDirRefused: a resource directory that is relative, missing
// or a file is a bad spec, and nothing of the pod is made.
func TestResourceDirRefused(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	rt := newRuntime(t, dir)
	defer rt.Close()
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"rel/dir", "/no/such/dir", file, "/tmp/../tmp"} {
		spec := pod("resbad", []string{"/payload", "exit", "0"})
		spec.ResourceDir = d
		err := rt.Start(context.Background(), spec)
		if !errors.Is(err, runtime.ErrBadSpec) || !strings.Contains(err.Error(), "resource_dir") {
			t.Errorf("ResourceDir %q: Start = %v, want a bad spec naming resource_dir", d, err)
		}
		if l := leftovers(dir, "resbad"); len(l) > 0 {
			t.Errorf("left behind: %v", l)
		}
	}
}
