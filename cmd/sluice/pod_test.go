package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/nodelet/runtime"
	"github.com/sluicehq/sluice/nodelet/runtime/container"
)

// testAsMainEnv, set to "1" in a process's environment, makes the test
// binary run main instead of the tests: tests start it as the sluice
// binary (see dispatcherProc.start in failover_test.go).
const testAsMainEnv = "SLUICE_TEST_AS_MAIN"

// TestMain lets the test binary serve as the container runtime's init and
// sandbox, as main does for the sluice binary, and as the sluice binary
// itself when testAsMainEnv is set.
func TestMain(m *testing.M) {
	container.Reexec()
	if os.Getenv(testAsMainEnv) == "1" {
		main() // does not return
	}
	os.Exit(m.Run())
}

func TestDecodePod(t *testing.T) {
	var w bytes.Buffer
	p, err := decodePod(&w, []byte(`{"containers":[{"image":{"rootfs":"/r"},"command":["/x"],"resources":{"cpu":"1","memory":"1Mi"}}]}`))
	if err != nil || len(p.Containers) != 1 || p.Containers[0].Name != "c0" || p.Containers[0].Resources.CPU != 1000 {
		t.Fatalf("decodePod(pod) = %+v, %v", p, err)
	}
	p, err = decodePod(&w, []byte(`{"name":"j","tasks":[{"count":1,"pod":{"containers":[{"name":"m","image":{"rootfs":"/r"},"command":["/x"],"resources":{"cpu":1,"memory":1}}]}}]}`))
	if err != nil || p.Containers[0].Name != "m" {
		t.Fatalf("decodePod(job) = %+v, %v", p, err)
	}
	w.Reset()
	_, err = decodePod(&w, []byte(`{"containers":[{"image":{"rootfs":"rel"},"command":["/x"],"resources":{"cpu":1,"memory":1}}]}`))
	if !errors.Is(err, errInvalidSpec) || !strings.HasPrefix(w.String(), "containers[0].image.rootfs: ") {
		t.Errorf("decodePod(bad) = %v, printed %q", err, w.String())
	}
	if _, err = decodePod(&w, []byte(`[1]`)); err == nil {
		t.Errorf("decodePod(array) succeeded")
	}
}

func TestPodRun(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (runs containers)")
	}
	images := t.TempDir()
	rootfs := filepath.Join(images, "rootfs")
	for _, d := range []string{"", "proc", "dev", "sys", "tmp"} {
		if err := os.Mkdir(filepath.Join(rootfs, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	buildStatic(t, filepath.Join(rootfs, "payload"), "./nodelet/runtime/container/testdata/payload")
	spec := filepath.Join(t.TempDir(), "pod.json")
	body := `{"containers":[{"image":{"rootfs":"` + rootfs + `"},"command":["/payload","print","hi there","exit","7"],"resources":{"cpu":"100m","memory":"32Mi"}}]}`
	if err := os.WriteFile(spec, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	var out, errOut bytes.Buffer
	ctx := context.Background()
	// Below no image root (the default is --image-dir's): refused.
	err := run(ctx, []string{"pod", "run", "--state-dir", state, "--image-dir", t.TempDir(), "--cgroup-parent", "sluicetest-cmd", spec}, &out, &errOut)
	if !errors.Is(err, runtime.ErrImageDenied) || out.Len() != 0 {
		t.Errorf("pod outside the image roots: %v, output %q; want image denied and no output", err, out.String())
	}
	err = run(ctx, []string{"pod", "run", "--state-dir", state, "--image-roots", images, "--cgroup-parent", "sluicetest-cmd", spec}, &out, &errOut)
	if code := exitCode(ctx, err); code != 7 {
		t.Errorf("exit code %d (%v), want 7", code, err)
	}
	if out.String() != "hi there\n" {
		t.Errorf("stdout = %q", out.String())
	}
	if ents, _ := os.ReadDir(state); len(ents) != 0 {
		t.Errorf("state left behind: %v", ents)
	}
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*/sluicetest-cmd")
	for _, d := range dirs {
		_ = os.Remove(d)
	}
}

// TestPodRunVolumes: pod run resolves host paths as a nodelet does, from
// --volume-roots, and mounts a scratch volume.
func TestPodRunVolumes(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (runs containers)")
	}
	images := t.TempDir()
	rootfs := filepath.Join(images, "rootfs")
	for _, d := range []string{"", "proc", "dev", "sys", "tmp"} {
		if err := os.Mkdir(filepath.Join(rootfs, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	buildStatic(t, filepath.Join(rootfs, "payload"), "./nodelet/runtime/container/testdata/payload")
	data := t.TempDir()
	if err := os.WriteFile(filepath.Join(data, "in.txt"), []byte("from the host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := filepath.Join(t.TempDir(), "pod.json")
	body := `{"volumes":[{"name":"data","host_path":{"path":"` + data + `","read_only":true}},{"name":"work","scratch":{"size":"4Mi"}}],
	"containers":[{"image":{"rootfs":"` + rootfs + `"},"command":["/payload","write","/work/x","y","cat","/work/x","cat","/data/in.txt","exit","0"],
	"mounts":[{"volume":"data","path":"/data"},{"volume":"work","path":"/work"}],"resources":{"cpu":"100m","memory":"32Mi"}}]}`
	if err := os.WriteFile(spec, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	var out, errOut bytes.Buffer
	ctx := context.Background()
	args := []string{"pod", "run", "--state-dir", state, "--image-roots", images, "--cgroup-parent", "sluicetest-cmd", spec}
	err := run(ctx, args, &out, &errOut)
	if !errors.Is(err, runtime.ErrVolumeDenied) || !strings.Contains(err.Error(), data) || out.Len() != 0 {
		t.Errorf("without volume roots: %v, output %q; want the host path denied", err, out.String())
	}
	err = run(ctx, append([]string{"pod", "run", "--volume-roots", data}, args[2:]...), &out, &errOut)
	if err != nil || out.String() != "yfrom the host\n" {
		t.Errorf("with volume roots: %v, output %q", err, out.String())
	}
	if ents, _ := os.ReadDir(state); len(ents) != 1 || ents[0].Name() != ".scratch" {
		t.Errorf("state left behind: %v", ents)
	}
	if ents, _ := os.ReadDir(filepath.Join(state, ".scratch")); len(ents) != 0 {
		t.Errorf("scratch left behind: %v", ents)
	}
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*/sluicetest-cmd")
	for _, d := range dirs {
		_ = os.Remove(d)
	}
}
