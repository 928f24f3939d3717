package container_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/nodelet/runtime"
)

// uniq is a pod ID no other test process on the host uses at once.
func uniq(name string) string { return fmt.Sprintf("%s-%d", name, os.Getpid()) }

// volumeLeaks lists what volumes left below dir: mounts, loop devices
// backed by a file there, and scratch images.
func volumeLeaks(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) > 4 && strings.HasPrefix(fields[4], dir+"/") {
			out = append(out, "mount "+fields[4])
		}
	}
	backing, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, b := range backing {
		if p, err := os.ReadFile(b); err == nil && strings.HasPrefix(string(p), dir+"/") {
			out = append(out, "loop device of "+strings.TrimSpace(string(p)))
		}
	}
	imgs, _ := filepath.Glob(filepath.Join(dir, ".scratch", "*", "*"))
	for _, i := range imgs {
		out = append(out, "image "+i)
	}
	return out
}

// noVolumeLeaks fails t if volumes left anything below dir, allowing the
// kernel a moment to release loop devices of filesystems just unmounted.
func noVolumeLeaks(t *testing.T, dir string) {
	t.Helper()
	var l []string
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if l = volumeLeaks(t, dir); len(l) == 0 {
			return
		}
	}
	t.Errorf("volumes left behind: %v", l)
}

func scratch(name string, size int64) runtime.Volume {
	return runtime.Volume{Name: name, ScratchSize: size}
}

func mount(vol, path string, ro bool) runtime.Mount {
	return runtime.Mount{Volume: vol, Path: path, ReadOnly: ro}
}

// TestScratchShared: the containers of a pod share its scratch volume,
// each at its own path; a read-only mount of it refuses writes; Remove
// leaves no mount, loop device or image.
func TestScratchShared(t *testing.T) {
	rt, dir, ctx := startRuntime(t, "")
	spec := pod(uniq("scratch-shared"),
		[]string{"/payload", "write", "/work/msg", "from c0", "waitfile", "/work/done", "yes", "exit", "0"},
		[]string{"/payload", "waitfile", "/shared/msg", "from c0", "write", "/shared/done", "yes", "exit", "0"},
		[]string{"/payload", "waitfile", "/ro/msg", "from c0", "write", "/ro/nope", "x", "exit", "0"},
	)
	spec.Volumes = []runtime.Volume{scratch("work", 4<<20)}
	spec.Containers[0].Mounts = []runtime.Mount{mount("work", "/work", false)}
	spec.Containers[1].Mounts = []runtime.Mount{mount("work", "/shared", false)}
	spec.Containers[2].Mounts = []runtime.Mount{mount("work", "/ro", true)}
	e := startWait(ctx, t, rt, spec)
	if e.Code != 0 || e.Containers[1].Code != 0 {
		t.Errorf("exit = %+v; logs %q, %q", e, logsOf(ctx, t, rt, spec.ID, "c0"), logsOf(ctx, t, rt, spec.ID, "c1"))
	}
	if l := logsOf(ctx, t, rt, spec.ID, "c1"); !strings.Contains(l, "from c0") {
		t.Errorf("c1 did not read c0's file: %q", l)
	}
	if l := logsOf(ctx, t, rt, spec.ID, "c2"); e.Containers[2].Code != 99 || !strings.Contains(l, "read-only file system") {
		t.Errorf("read-only mount: exit %d, logs %q; want a refused write", e.Containers[2].Code, l)
	}
	if len(e.ScratchFull) != 0 {
		t.Errorf("ScratchFull = %v, want none", e.ScratchFull)
	}
	if err := rt.Remove(ctx, spec.ID); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	noVolumeLeaks(t, dir)
	if l := leftovers(dir, spec.ID); len(l) > 0 {
		t.Errorf("left behind: %v", l)
	}
}

// TestScratchFull: a pod writing past its scratch size gets ENOSPC and
// its exit names the full volume; a neighbour writing at the same time
// within its own size succeeds.
func TestScratchFull(t *testing.T) {
	rt, dir, ctx := startRuntime(t, "")
	greedy := pod(uniq("scratch-greedy"), []string{"/payload", "fill", "/work/big", fmt.Sprint(8 << 20), "exit", "0"})
	modest := pod(uniq("scratch-modest"), []string{"/payload", "sleep", "100ms", "fill", "/work/small", fmt.Sprint(2 << 20), "exit", "0"})
	for _, s := range []*runtime.PodSpec{&greedy, &modest} {
		s.Volumes = []runtime.Volume{scratch("work", 4<<20)}
		s.Containers[0].Mounts = []runtime.Mount{mount("work", "/work", false)}
		if err := rt.Start(ctx, *s); err != nil {
			t.Fatalf("Start: %v", err)
		}
	}
	e, err := rt.Wait(ctx, greedy.ID)
	if err != nil {
		t.Fatal(err)
	}
	if l := logsOf(ctx, t, rt, greedy.ID, "c0"); e.Code != 99 || !strings.Contains(l, "no space left on device") {
		t.Errorf("greedy pod: exit %+v, logs %q; want 99 after ENOSPC", e, l)
	}
	if !slices.Equal(e.ScratchFull, []string{"work"}) {
		t.Errorf("greedy pod: ScratchFull = %v, want [work]", e.ScratchFull)
	}
	e, err = rt.Wait(ctx, modest.ID)
	if err != nil {
		t.Fatal(err)
	}
	if e.Code != 0 || len(e.ScratchFull) != 0 {
		t.Errorf("modest pod: exit %+v, logs %q; want 0 and no full scratch", e, logsOf(ctx, t, rt, modest.ID, "c0"))
	}
	for _, id := range []string{greedy.ID, modest.ID} {
		if err := rt.Remove(ctx, id); err != nil {
			t.Errorf("Remove %s: %v", id, err)
		}
	}
	noVolumeLeaks(t, dir)
}

// TestScratchSurvivesRestart: a running pod's scratch stays mounted for
// the next Runtime, which removes it with the pod; the scratch images of
// pods the state directory no longer has (a host that rebooted) are
// removed when a Runtime starts.
func TestScratchSurvivesRestart(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rt := newRuntime(t, dir)
	spec := pod(uniq("scratch-restart"), []string{"/payload", "write", "/work/a", "kept", "waitfile", "/work/b", "go", "cat", "/work/a", "exit", "0"})
	spec.Volumes = []runtime.Volume{scratch("work", 2<<20)}
	spec.Containers[0].Mounts = []runtime.Mount{mount("work", "/work", false)}
	if err := rt.Start(ctx, spec); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	ghost := filepath.Join(dir, ".scratch", "ghost-pod")
	if err := os.MkdirAll(ghost, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ghost, "work.img"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	rt = newRuntime(t, dir)
	defer rt.Close()
	if _, err := os.Stat(ghost); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("scratch of a pod gone: stat = %v, want it removed", err)
	}
	// The adopted pod still writes to its scratch through the mount.
	mp := filepath.Join(dir, spec.ID, "volumes", "work")
	if err := os.WriteFile(filepath.Join(mp, "b"), []byte("go"), 0o644); err != nil {
		t.Fatal(err)
	}
	e, err := rt.Wait(ctx, spec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if l := logsOf(ctx, t, rt, spec.ID, "c0"); e.Code != 0 || !strings.Contains(l, "kept") {
		t.Errorf("exit %+v, logs %q", e, l)
	}
	if err := rt.Remove(ctx, spec.ID); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	noVolumeLeaks(t, dir)
}

// TestScratchNoLeaks starts and removes pods with scratch volumes, some
// failing to start, and counts what is left.
func TestScratchNoLeaks(t *testing.T) {
	rt, dir, ctx := startRuntime(t, "")
	for i := range 8 {
		spec := pod(uniq(fmt.Sprintf("scratch-leak%d", i)), []string{"/payload", "exit", "0"})
		spec.Volumes = []runtime.Volume{scratch("a", 1<<20), scratch("b", 3<<20)}
		spec.Containers[0].Mounts = []runtime.Mount{mount("a", "/a", false), mount("b", "/b", false)}
		if i%2 == 1 {
			// Fails after the volumes were made: a file is in the way of
			// the mount point.
			spec.Containers[0].Mounts[1].Path = "/payload/b"
		}
		err := rt.Start(ctx, spec)
		if i%2 == 1 {
			if err == nil {
				t.Fatalf("Start of a pod with a mount below a file succeeded")
			}
			continue
		}
		if err != nil {
			t.Fatalf("Start: %v", err)
		}
		if _, err := rt.Wait(ctx, spec.ID); err != nil {
			t.Fatal(err)
		}
		if err := rt.Remove(ctx, spec.ID); err != nil {
			t.Fatal(err)
		}
	}
	// A scratch larger than the disk can hold fails at once.
	huge := pod(uniq("scratch-huge"), []string{"/payload", "exit", "0"})
	huge.Volumes = []runtime.Volume{scratch("a", 1<<20), scratch("b", 1<<50)}
	huge.Containers[0].Mounts = []runtime.Mount{mount("a", "/a", false), mount("b", "/b", false)}
	if err := rt.Start(ctx, huge); err == nil || !strings.Contains(err.Error(), `volume "b"`) {
		t.Errorf("Start of a 1 PiB scratch = %v, want an error naming the volume", err)
	}
	noVolumeLeaks(t, dir)
	if l := leftovers(dir, huge.ID); len(l) > 0 {
		t.Errorf("left behind: %v", l)
	}
}

// hostRoots makes a read-only root holding input and a writable root,
// below a fresh directory, and returns their paths.
func hostRoots(t *testing.T) (top, ro, rw string) {
	t.Helper()
	top = t.TempDir()
	ro, rw = filepath.Join(top, "data"), filepath.Join(top, "out")
	for _, d := range []string{ro, rw, filepath.Join(ro, "in")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(ro, "in", "input.txt"), []byte("the input\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return top, ro, rw
}

// TestHostPathMounts: a read-only host path is read and refuses writes, a
// writable one takes the pod's result.
func TestHostPathMounts(t *testing.T) {
	needRoot(t)
	_, ro, rw := hostRoots(t)
	roots := []runtime.VolumeRoot{{Path: ro}, {Path: rw, Writable: true}}
	in, err := runtime.ResolveHostPath(roots, "in", filepath.Join(ro, "in"), false)
	if err != nil {
		t.Fatal(err)
	}
	out, err := runtime.ResolveHostPath(roots, "out", rw, true)
	if err != nil {
		t.Fatal(err)
	}
	spec := pod(uniq("hostpath"),
		[]string{"/payload", "cat", "/in/input.txt", "write", "/out/result.txt", "the result", "exit", "0"},
		[]string{"/payload", "write", "/in/nope", "x", "exit", "0"},
	)
	spec.Volumes = []runtime.Volume{in, out}
	spec.Containers[0].Mounts = []runtime.Mount{mount("in", "/in", false), mount("out", "/out", false)}
	spec.Containers[1].Mounts = []runtime.Mount{mount("in", "/in", false)}
	e, logs := runPod(t, spec)
	if e.Code != 0 || logs[0] != "the input\n" {
		t.Errorf("exit %+v, logs %q", e, logs[0])
	}
	if e.Containers[1].Code != 99 || !strings.Contains(logs[1], "read-only file system") {
		t.Errorf("write to a read-only host path: exit %d, logs %q", e.Containers[1].Code, logs[1])
	}
	if b, err := os.ReadFile(filepath.Join(rw, "result.txt")); err != nil || string(b) != "the result" {
		t.Errorf("result on the host = %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(ro, "in", "nope")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the read-only root was written: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(ro, "in", "input.txt")); string(b) != "the input\n" {
		t.Errorf("input changed: %q", b)
	}
}

// TestHostPathSwappedAfterCheck: a path checked below its root and then
// replaced by a symbolic link out of it is opened within the root, so
// the pod gets nothing from outside and fails to start as volume denied.
func TestHostPathSwappedAfterCheck(t *testing.T) {
	needRoot(t)
	top, ro, _ := hostRoots(t)
	secret := filepath.Join(top, "secret")
	if err := os.Mkdir(secret, 0o700); err != nil {
		t.Fatal(err)
	}
	v, err := runtime.ResolveHostPath([]runtime.VolumeRoot{{Path: ro}}, "in", filepath.Join(ro, "in"), false)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(ro, "in")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(ro, "in")); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rt := newRuntime(t, dir)
	defer rt.Close()
	spec := pod(uniq("hostpath-swap"), []string{"/payload", "exit", "0"})
	spec.Volumes = []runtime.Volume{v}
	spec.Containers[0].Mounts = []runtime.Mount{mount("in", "/in", false)}
	err = rt.Start(context.Background(), spec)
	if !errors.Is(err, runtime.ErrVolumeDenied) || !strings.Contains(err.Error(), filepath.Join(ro, "in")) {
		t.Errorf("Start = %v, want a volume denied error naming the path", err)
	}
	noVolumeLeaks(t, dir)
	if l := leftovers(dir, spec.ID); len(l) > 0 {
		t.Errorf("left behind: %v", l)
	}
}
