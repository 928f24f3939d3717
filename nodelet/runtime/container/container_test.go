package container_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/nodelet/runtime"
	"github.com/sluicehq/sluice/nodelet/runtime/container"
	"github.com/sluicehq/sluice/nodelet/runtime/runtimetest"
)

// rootfs is the test image: the payload binary and empty mount points,
// in imageRoot, the image root of the tests' runtimes.
var rootfs, imageRoot string

// shimBin is cmd/sluice-shim, built for the tests that create containers
// through it.
var shimBin string

const cgroupParent = "sluicetest"

func TestMain(m *testing.M) {
	container.Reexec()
	if dir := os.Getenv("SLUICE_TEST_START_AND_EXIT"); dir != "" {
		os.Exit(startAndExit(dir))
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if os.Geteuid() != 0 {
		fmt.Println("container runtime tests need root; skipping them")
		return m.Run() // each test skips
	}
	root, err := os.MkdirTemp("", "sluice-images-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(root)
	if err := os.Chmod(root, 0o755); err != nil { // MkdirTemp makes it 0700
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	dir := filepath.Join(root, "rootfs")
	if err := os.Mkdir(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for _, d := range []string{"proc", "dev", "sys", "tmp", "etc"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "payload"), "./testdata/payload")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building payload: %v\n%s", err, out)
		return 1
	}
	rootfs, imageRoot = dir, root
	shimDir, err := os.MkdirTemp("", "sluice-shim-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(shimDir)
	cmd = exec.Command("go", "build", "-o", filepath.Join(shimDir, "sluice-shim"), "../../../cmd/sluice-shim")
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building sluice-shim: %v\n%s", err, out)
		return 1
	}
	shimBin = filepath.Join(shimDir, "sluice-shim")
	code := m.Run()
	// The shared parents of the test pods' cgroups.
	for _, p := range []string{cgroupParent + "/online", cgroupParent} {
		dirs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", p))
		for _, d := range dirs {
			_ = os.Remove(d)
		}
	}
	return code
}

func needRoot(t testing.TB) {
	t.Helper()
	if rootfs == "" {
		t.Skip("needs root (the container runtime creates namespaces and cgroups)")
	}
}

func newRuntime(t testing.TB, dir string) *container.Runtime {
	t.Helper()
	return newRuntimeWith(t, dir, "")
}

// newRuntimeWith is newRuntime with the given shim binary ("": none).
func newRuntimeWith(t testing.TB, dir, shim string) *container.Runtime {
	t.Helper()
	rt, err := container.New(container.Config{StateDir: dir, CgroupParent: cgroupParent, LogMaxBytes: 1 << 20, ImageDir: filepath.Join(dir, ".images"),
		ImageRoots: []string{imageRoot}, Shim: shim})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return rt
}

func steps(b runtimetest.Behavior) []string {
	args := []string{"/payload"}
	if b.IgnoreTerm {
		args = append(args, "ignoreterm")
	}
	if b.Print != "" {
		args = append(args, "print", b.Print)
	}
	if b.Sleep > 0 {
		args = append(args, "sleep", b.Sleep.String())
	}
	return append(args, "exit", fmt.Sprint(b.Exit))
}

func pod(id string, args ...[]string) runtime.PodSpec {
	s := runtime.PodSpec{ID: id}
	for i, a := range args {
		s.Containers = append(s.Containers, runtime.ContainerSpec{
			Name:  fmt.Sprintf("c%d", i),
			Image: api.Image{Rootfs: rootfs},
			Args:  a,
		})
	}
	return s
}

// leftovers lists the state directory and cgroups of pod id that exist.
func leftovers(dir, id string) []string {
	var out []string
	paths := []string{filepath.Join(dir, id)}
	for _, ctl := range []string{"memory", "cpu", "cpuacct", "pids", "devices", "freezer", "blkio", "cpuset", "unified", "systemd"} {
		for _, parent := range []string{cgroupParent, cgroupParent + "/online"} {
			paths = append(paths, filepath.Join("/sys/fs/cgroup", ctl, parent, id))
		}
	}
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			out = append(out, p)
		}
	}
	return out
}

func factory(t *testing.T) runtimetest.Harness { return factoryWith(t, "") }

// factoryWith is factory for runtimes with the given shim ("": none).
func factoryWith(t *testing.T, shim string) runtimetest.Harness {
	needRoot(t)
	dir := t.TempDir()
	return runtimetest.Harness{
		Open: func(t *testing.T) runtime.Runtime { return newRuntimeWith(t, dir, shim) },
		Pod: func(id string, bs ...runtimetest.Behavior) runtime.PodSpec {
			var args [][]string
			for _, b := range bs {
				args = append(args, steps(b))
			}
			return pod(id, args...)
		},
		Leftovers:   func(id string) []string { return leftovers(dir, id) },
		Caps:        runtimetest.Caps{Output: true, Signals: true},
		Concurrency: 4,
	}
}

func TestConformance(t *testing.T) { runtimetest.Run(t, factory) }

// TestConformanceShim runs the suite with containers created by
// sluice-shim, whose exits reach the runtime through the shim.
func TestConformanceShim(t *testing.T) {
	runtimetest.Run(t, func(t *testing.T) runtimetest.Harness { return factoryWith(t, shimBin) })
}

// startRuntime starts a Runtime with the given shim binary ("": none) in
// a fresh state directory, for a test that needs root, and returns it, its
// directory and a context of 60s; the test's cleanup cancels the context
// and closes the Runtime.
func startRuntime(t *testing.T, shim string) (*container.Runtime, string, context.Context) {
	t.Helper()
	needRoot(t)
	dir := t.TempDir()
	rt := newRuntimeWith(t, dir, shim)
	t.Cleanup(func() { rt.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return rt, dir, ctx
}

// runPod starts spec, waits for it and returns its exit and the logs of
// each container; it removes the pod and checks nothing is left.
func runPod(t *testing.T, spec runtime.PodSpec) (runtime.Exit, []string) {
	t.Helper()
	rt, dir, ctx := startRuntime(t, "")
	e := startWait(ctx, t, rt, spec)
	var logs []string
	for _, c := range spec.Containers {
		logs = append(logs, logsOf(ctx, t, rt, spec.ID, c.Name))
	}
	if err := rt.Remove(ctx, spec.ID); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if l := leftovers(dir, spec.ID); len(l) > 0 {
		t.Errorf("left behind: %v", l)
	}
	return e, logs
}

// startWait starts spec in rt and waits for its end.
func startWait(ctx context.Context, t *testing.T, rt *container.Runtime, spec runtime.PodSpec) runtime.Exit {
	t.Helper()
	if err := rt.Start(ctx, spec); err != nil {
		t.Fatalf("Start %s: %v", spec.ID, err)
	}
	e, err := rt.Wait(ctx, spec.ID)
	if err != nil {
		t.Fatalf("Wait %s: %v", spec.ID, err)
	}
	return e
}

// startPod starts spec in rt and has the test's cleanup stop and remove
// it, so that after a failure nothing is left running.
func startPod(t *testing.T, ctx context.Context, rt *container.Runtime, spec runtime.PodSpec) {
	t.Helper()
	if err := rt.Start(ctx, spec); err != nil {
		t.Fatalf("Start %s: %v", spec.ID, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = rt.Stop(ctx, spec.ID, 0)
		_ = rt.Remove(ctx, spec.ID)
	})
}

// logsOf returns the whole log of container name of pod id.
func logsOf(ctx context.Context, t *testing.T, rt *container.Runtime, id, name string) string {
	t.Helper()
	rc, err := rt.Logs(ctx, id, name, runtime.LogOptions{})
	if err != nil {
		t.Fatalf("Logs %s/%s: %v", id, name, err)
	}
	b, _ := readAll(rc)
	return string(b)
}

func readAll(rc interface {
	Read([]byte) (int, error)
	Close() error
}) ([]byte, error) {
	defer rc.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := rc.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			return []byte(b.String()), nil
		}
	}
}

func TestOutputAndExit(t *testing.T) {
	e, logs := runPod(t, pod("out", []string{"/payload", "print", "to stdout", "eprint", "to stderr", "exit", "42"}))
	if e.Code != 42 || e.OOMKilled {
		t.Errorf("exit = %+v, want 42", e)
	}
	if logs[0] != "to stdout\nto stderr\n" {
		t.Errorf("logs = %q", logs[0])
	}
}

func TestMemoryLimitOOMKills(t *testing.T) {
	spec := pod("oom", []string{"/payload", "alloc", "200", "exit", "0"})
	spec.Containers[0].Resources.MemoryBytes = 32 << 20
	e, _ := runPod(t, spec)
	if !e.OOMKilled || e.Code != 137 || !e.Containers[0].OOMKilled {
		t.Errorf("exit = %+v, want OOM-killed with 137", e)
	}
}

func TestCPUQuotaThrottles(t *testing.T) {
	rt, _, ctx := startRuntime(t, "")
	spec := pod("cpu", []string{"/payload", "spin", "1", "sleep", "30s"})
	spec.Containers[0].Resources.MilliCPU = 200
	startPod(t, ctx, rt, spec)
	cg := filepath.Join("/sys/fs/cgroup/cpu", cgroupParent, "cpu", "c0")
	b, err := os.ReadFile(filepath.Join(cg, "cpu.cfs_quota_us"))
	if err != nil || strings.TrimSpace(string(b)) != "20000" {
		t.Errorf("cpu.cfs_quota_us = %q, %v; want 20000", b, err)
	}
	time.Sleep(1500 * time.Millisecond)
	b, err = os.ReadFile(filepath.Join(cg, "cpu.stat"))
	if err != nil {
		t.Fatalf("cpu.stat: %v", err)
	}
	var throttled int64
	for _, l := range strings.Split(string(b), "\n") {
		fmt.Sscanf(l, "nr_throttled %d", &throttled)
	}
	if throttled == 0 {
		t.Errorf("nr_throttled = 0 after spinning under a 200m quota:\n%s", b)
	}
}

func TestPodLoopback(t *testing.T) {
	e, logs := runPod(t, pod("net",
		[]string{"/payload", "listen", "7070", "exit", "0"},
		[]string{"/payload", "dial", "7070", "hello over lo", "exit", "0"},
	))
	if e.Code != 0 || e.Containers[1].Code != 0 {
		t.Errorf("exit = %+v; logs %q", e, logs)
	}
	if logs[0] != "got: hello over lo\n" {
		t.Errorf("listener logs = %q", logs[0])
	}
}

func TestSecureDefaults(t *testing.T) {
	spec := pod("sec", []string{"/payload", "status", "cat", "/proc/sys/kernel/hostname", "exit", "0"})
	spec.Containers[0].User = &runtime.User{UID: 1000, GID: 1000}
	spec.Containers[0].ReadOnlyRootfs = true
	e, logs := runPod(t, spec)
	if e.Code != 0 {
		t.Fatalf("exit = %+v; logs %q", e, logs)
	}
	out := logs[0]
	for _, want := range []string{"NoNewPrivs:\t1", "CapEff:\t0000000000000000", "Uid:\t1000", "sec\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// As root, the effective set is the minimal one: no CAP_SYS_ADMIN (bit
	// 21), no CAP_NET_RAW (bit 13).
	_, logs = runPod(t, pod("sec-root", []string{"/payload", "status", "cat", "/proc/kcore", "exit", "0"}))
	var capEff uint64
	for _, l := range strings.Split(logs[0], "\n") {
		fmt.Sscanf(l, "CapEff:\t%x", &capEff)
	}
	if capEff == 0 || capEff&(1<<21) != 0 || capEff&(1<<13) != 0 {
		t.Errorf("root CapEff = %x, want the minimal set", capEff)
	}
	if strings.Contains(logs[0], "payload:") && !strings.Contains(logs[0], "kcore") {
		t.Errorf("unexpected error output: %s", logs[0])
	}
}

func TestReadOnlyRootfs(t *testing.T) {
	spec := pod("ro", []string{"/payload", "print", "x", "exit", "0"})
	spec.Containers[0].ReadOnlyRootfs = true
	e, _ := runPod(t, spec)
	if e.Code != 0 {
		t.Errorf("exit = %+v", e)
	}
}

func TestBadSpecsLeaveNothing(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	rt := newRuntime(t, dir)
	defer rt.Close()
	ctx := context.Background()
	cases := []struct {
		name, field string
		mut         func(*runtime.ContainerSpec)
	}{
		{"missing image", "image.rootfs", func(c *runtime.ContainerSpec) { c.Image.Rootfs = filepath.Join(imageRoot, "nonexistent") }},
		{"missing program", "args[0]", func(c *runtime.ContainerSpec) { c.Args = []string{"/nope"} }},
		{"empty command", "args", func(c *runtime.ContainerSpec) { c.Args = nil }},
		{"too little memory", "resources.memory", func(c *runtime.ContainerSpec) { c.Resources.MemoryBytes = 4096 }},
		{"too much memory", "resources.memory", func(c *runtime.ContainerSpec) { c.Resources.MemoryBytes = 1 << 50 }},
		{"too much cpu", "resources.cpu", func(c *runtime.ContainerSpec) { c.Resources.MilliCPU = 1 << 40 }},
		{"oci layout", "image.oci_layout", func(c *runtime.ContainerSpec) {
			c.Image = api.Image{OCILayout: filepath.Join(imageRoot, "x"), Ref: "latest"}
		}},
	}
	for i, c := range cases {
		id := fmt.Sprintf("bad%d", i)
		spec := pod(id, []string{"/payload", "exit", "0"})
		c.mut(&spec.Containers[0])
		err := rt.Start(ctx, spec)
		if err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: Start = %v, want ErrBadSpec naming %s", c.name, err, c.field)
			_ = rt.Stop(ctx, id, 0)
			_ = rt.Remove(ctx, id)
		}
		if l := leftovers(dir, id); len(l) > 0 {
			t.Errorf("%s: left behind %v", c.name, l)
		}
	}
	// A program that fails in the container's init (not a file in the
	// image) fails Start, which cleans up.
	spec := pod("badexec", []string{"/proc"})
	if err := rt.Start(ctx, spec); err == nil {
		t.Errorf("Start of a directory as program succeeded")
		_ = rt.Stop(ctx, "badexec", 0)
		_ = rt.Remove(ctx, "badexec")
	}
	if l := leftovers(dir, "badexec"); len(l) > 0 {
		t.Errorf("failed start left behind %v", l)
	}
}

// TestLogCap: the janitor caps a log past LogMaxBytes at its rounds on
// the runtime's clock, and only then.
func TestLogCap(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	clk := clock.NewManual(time.Time{})
	rt, err := container.New(container.Config{StateDir: dir, CgroupParent: cgroupParent, LogMaxBytes: 64 << 10, ImageRoots: []string{imageRoot}, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := rt.Start(ctx, pod("flood", []string{"/payload", "flood", "1000000", "print", "tail", "sleep", "30s"})); err != nil {
		t.Fatal(err)
	}
	logs, err := rt.Logs(ctx, "flood", "c0", runtime.LogOptions{Follow: true})
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(logs)
	for sc.Scan() && sc.Text() != "tail" {
	}
	logs.Close()
	if sc.Err() != nil || sc.Text() != "tail" {
		t.Fatalf("the flood's last line never came: %v", sc.Err())
	}
	logPath := filepath.Join(dir, "flood", "logs", "c0.log")
	if st, err := os.Stat(logPath); err != nil || st.Size() <= 64<<10 {
		t.Fatalf("log = %v, %v before any round of the janitor, want the whole flood", st, err)
	}
	clk.Advance(time.Second)
	// The janitor rotates in its own time: poll, bounded, for the result.
	for {
		st, err := os.Stat(logPath + ".1")
		if err == nil {
			if st.Size() > 64<<10 {
				t.Errorf("rotated log of %d bytes, want at most 64KiB", st.Size())
			}
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no rotated log after a round of the janitor: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if st, err := os.Stat(logPath); err != nil || st.Size() > 64<<10 {
		t.Errorf("log size = %v, %v; want at most 64KiB", st, err)
	}
	if err := rt.Stop(ctx, "flood", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Wait(ctx, "flood"); err != nil {
		t.Fatal(err)
	}
	if err := rt.Remove(ctx, "flood"); err != nil {
		t.Fatal(err)
	}
}

// startAndExit is a nodelet that starts two pods and exits without
// stopping them (TestAdoptAcrossProcesses).
func startAndExit(dir string) int {
	rootfs = os.Getenv("SLUICE_TEST_ROOTFS")
	rt, err := container.New(container.Config{StateDir: dir, CgroupParent: cgroupParent, ImageRoots: []string{filepath.Dir(rootfs)}})
	if err == nil {
		err = rt.Start(context.Background(), pod("away-long", []string{"/payload", "print", "still here", "sleep", "60s"}))
	}
	if err == nil {
		err = rt.Start(context.Background(), pod("away-short", []string{"/payload", "sleep", "300ms", "exit", "5"}))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func TestAdoptAcrossProcesses(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "SLUICE_TEST_START_AND_EXIT="+dir, "SLUICE_TEST_ROOTFS="+rootfs)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("helper nodelet: %v\n%s", err, out)
	}
	time.Sleep(500 * time.Millisecond)
	rt := newRuntime(t, dir)
	defer rt.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := rt.List(ctx)
	if err != nil || len(l) != 2 {
		t.Fatalf("List = %+v, %v; want the helper's two pods", l, err)
	}
	long, short := l[0], l[1]
	if long.ID != "away-long" || long.State != runtime.StateRunning {
		t.Errorf("long pod = %+v, want running", long)
	}
	// The helper may have seen it end (code 5) before exiting itself.
	if short.ID != "away-short" || short.State != runtime.StateExited || short.Exit == nil ||
		!errors.Is(short.Exit.Err, runtime.ErrExitUnknown) && short.Exit.Code != 5 {
		t.Errorf("short pod = %+v (exit %+v), want exited with ErrExitUnknown or code 5", short, short.Exit)
	}
	rc, err := rt.Logs(ctx, "away-long", "c0", runtime.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := readAll(rc); string(b) != "still here\n" {
		t.Errorf("adopted logs = %q", b)
	}
	if err := rt.Stop(ctx, "away-long", 5*time.Second); err != nil {
		t.Fatalf("Stop(adopted): %v", err)
	}
	e, err := rt.Wait(ctx, "away-long")
	// The helper's containers were left to the nearest subreaper: this
	// process, once a Runtime with a shim made it one (TestConformanceShim),
	// and then their exits are ours to reap; else init.
	if subreaper(t) {
		if err != nil || e.Err != nil || e.Code != 143 {
			t.Errorf("Wait(adopted) = %+v, %v; want code 143 (SIGTERM; left to this subreaper)", e, err)
		}
	} else if err != nil || !errors.Is(e.Err, runtime.ErrExitUnknown) {
		t.Errorf("Wait(adopted) = %+v, %v; want ErrExitUnknown (not our child)", e, err)
	}
	for _, id := range []string{"away-long", "away-short"} {
		if err := rt.Remove(ctx, id); err != nil {
			t.Errorf("Remove(%s): %v", id, err)
		}
		if l := leftovers(dir, id); len(l) > 0 {
			t.Errorf("%s left behind %v", id, l)
		}
	}
}

// TestCapboxPlaceholder runs a capbox's placeholder (a sandbox holding a
// cgroup with the capbox's limits) and two pods inside it: they share its
// network namespace and sit in its cgroup; stopping the placeholder ends
// it, and nothing is left.
func TestCapboxPlaceholder(t *testing.T) {
	rt, dir, ctx := startRuntime(t, "")
	box := runtime.PodSpec{ID: "cb", Placeholder: true, Containers: []runtime.ContainerSpec{
		{Name: "capbox", Resources: runtime.Resources{MilliCPU: 500, MemoryBytes: 256 << 20}}}}
	if err := rt.Start(ctx, box); err != nil {
		t.Fatalf("Start placeholder: %v", err)
	}
	for file, want := range map[string]string{
		"/sys/fs/cgroup/memory/" + cgroupParent + "/cb/memory.limit_in_bytes": "268435456",
		"/sys/fs/cgroup/cpu/" + cgroupParent + "/cb/cpu.cfs_quota_us":         "50000",
	} {
		if b, err := os.ReadFile(file); err != nil || strings.TrimSpace(string(b)) != want {
			t.Errorf("%s = %q, %v; want %s", file, b, err, want)
		}
	}
	listen := pod("in1", []string{"/payload", "listen", "7071", "exit", "0"})
	listen.InPod = "cb"
	if err := rt.Start(ctx, listen); err != nil {
		t.Fatalf("Start inside: %v", err)
	}
	if _, err := os.Stat("/sys/fs/cgroup/memory/" + cgroupParent + "/cb/in1/c0"); err != nil {
		t.Errorf("the pod inside is not in the capbox's cgroup: %v", err)
	}
	dial := pod("in2", []string{"/payload", "dial", "7071", "hello in the capbox", "exit", "0"})
	dial.InPod = "cb"
	if err := rt.Start(ctx, dial); err != nil {
		t.Fatalf("Start inside: %v", err)
	}
	for _, id := range []string{"in1", "in2"} {
		e, err := rt.Wait(ctx, id)
		if err != nil || e.Code != 0 {
			t.Errorf("pod %s in the capbox: %+v, %v; want exit 0 (one network namespace)", id, e, err)
		}
		if err := rt.Remove(ctx, id); err != nil {
			t.Errorf("Remove %s: %v", id, err)
		}
	}
	nowhere := pod("in3", []string{"/payload", "exit", "0"})
	nowhere.InPod = "nope"
	if err := rt.Start(ctx, nowhere); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("Start in no capbox: %v, want ErrNotFound", err)
	}
	if st, err := rt.List(ctx); err != nil || len(st) != 1 || st[0].ID != "cb" || st[0].State != runtime.StateRunning {
		t.Errorf("List = %+v, %v; want the placeholder running", st, err)
	}
	if err := rt.Stop(ctx, "cb", time.Second); err != nil {
		t.Fatalf("Stop placeholder: %v", err)
	}
	e, err := rt.Wait(ctx, "cb")
	if err != nil || e.Err != nil || e.Code != 0 {
		t.Errorf("stopped placeholder: %+v, %v; want exit 0 (its sandbox ends on SIGTERM)", e, err)
	}
	if err := rt.Remove(ctx, "cb"); err != nil {
		t.Fatalf("Remove placeholder: %v", err)
	}
	for _, id := range []string{"cb", "in1", "in2", "in3"} {
		if l := leftovers(dir, id); len(l) > 0 {
			t.Errorf("pod %s left behind: %v", id, l)
		}
	}
}

// TestCapboxPlaceholderAdopted restarts the runtime under a running
// placeholder: the new one adopts it running, and can stop it.
func TestCapboxPlaceholderAdopted(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rt := newRuntime(t, dir)
	box := runtime.PodSpec{ID: "cba", Placeholder: true, Containers: []runtime.ContainerSpec{
		{Name: "capbox", Resources: runtime.Resources{MemoryBytes: 64 << 20}}}}
	if err := rt.Start(ctx, box); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	rt2 := newRuntime(t, dir)
	defer rt2.Close()
	if st, err := rt2.List(ctx); err != nil || len(st) != 1 || st[0].State != runtime.StateRunning {
		t.Fatalf("after a restart: %+v, %v; want the placeholder running", st, err)
	}
	if err := rt2.Stop(ctx, "cba", time.Second); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if _, err := rt2.Wait(ctx, "cba"); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if err := rt2.Remove(ctx, "cba"); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if l := leftovers(dir, "cba"); len(l) > 0 {
		t.Errorf("left behind: %v", l)
	}
}

// TestImageDenied starts pods whose images are outside the image roots,
// as named or through a link, or are the host's root, and checks that
// each fails as a bad spec and image denied and leaves nothing behind.
func TestImageDenied(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	rt := newRuntime(t, dir)
	defer rt.Close()
	ctx := context.Background()
	outside := t.TempDir() // holds a copy of nothing: refused before it is read
	links := map[string]string{"to-host": "/", "to-outside": outside, "up": "../"}
	for name, to := range links {
		link := filepath.Join(imageRoot, name)
		if err := os.Symlink(to, link); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(link)
	}
	cases := []struct {
		name, field string
		image       api.Image
	}{
		{"outside", "image.rootfs", api.Image{Rootfs: outside}},
		{"host root", "image.rootfs", api.Image{Rootfs: "/"}},
		{"dot-dot", "image.rootfs", api.Image{Rootfs: imageRoot + "/../" + filepath.Base(outside)}},
		{"link to host root", "image.rootfs", api.Image{Rootfs: filepath.Join(imageRoot, "to-host")}},
		{"link out", "image.rootfs", api.Image{Rootfs: filepath.Join(imageRoot, "to-outside")}},
		{"link up", "image.rootfs", api.Image{Rootfs: filepath.Join(imageRoot, "up")}},
		{"the root itself", "image.rootfs", api.Image{Rootfs: imageRoot}},
		{"layout outside", "image.oci_layout", api.Image{OCILayout: outside, Ref: "v1"}},
		{"layout link out", "image.oci_layout", api.Image{OCILayout: filepath.Join(imageRoot, "to-outside"), Ref: "v1"}},
	}
	for i, c := range cases {
		id := fmt.Sprintf("denied%d", i)
		spec := pod(id, []string{"/payload", "exit", "0"}, []string{"/payload", "exit", "0"})
		spec.Containers[1].Image = c.image
		err := rt.Start(ctx, spec)
		if !errors.Is(err, runtime.ErrImageDenied) || !errors.Is(err, runtime.ErrBadSpec) || !strings.Contains(err.Error(), "containers[1]."+c.field) {
			t.Errorf("%s: Start = %v, want image denied naming containers[1].%s", c.name, err, c.field)
			_ = rt.Stop(ctx, id, 0)
			_ = rt.Remove(ctx, id)
		}
		if l := leftovers(dir, id); len(l) > 0 {
			t.Errorf("%s: left behind %v", c.name, l)
		}
	}
	// The first container's image, below the root, still runs.
	if e, _ := runPod(t, pod("allowed", []string{"/payload", "exit", "0"})); e.Code != 0 {
		t.Errorf("allowed pod: exit %+v", e)
	}
	if _, err := container.New(container.Config{StateDir: dir, ImageRoots: []string{"/"}}); err == nil {
		t.Error("New with the image root / succeeded")
	}
}

// TestHostRootNeverContainerRoot checks the runtime's last line: an image
// below the image roots that is the host's root under another name (a
// read-only bind mount of "/") is refused when the container is made.
func TestHostRootNeverContainerRoot(t *testing.T) {
	needRoot(t)
	// A root of its own, removed only entry by entry (never recursively),
	// so that no cleanup can reach into the host's root through the
	// mount.
	root, err := os.MkdirTemp("", "sluice-hostroot-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(root)
	mnt := filepath.Join(root, "host")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(mnt)
	if err := unix.Mount("/", mnt, "", unix.MS_BIND, ""); err != nil {
		t.Skipf("bind mount of /: %v", err)
	}
	defer func() {
		if err := unix.Unmount(mnt, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", mnt, err)
		}
	}()
	if err := unix.Mount("", mnt, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""); err != nil {
		t.Fatalf("remount read-only: %v", err)
	}
	dir := t.TempDir()
	rt, err := container.New(container.Config{StateDir: dir, CgroupParent: cgroupParent, ImageDir: filepath.Join(dir, ".images"), ImageRoots: []string{root}})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	ctx := context.Background()
	spec := pod("hostroot", []string{"/proc"})
	spec.Containers[0].Image = api.Image{Rootfs: mnt}
	err = rt.Start(ctx, spec)
	if !errors.Is(err, runtime.ErrImageDenied) || !strings.Contains(err.Error(), "host's root") {
		t.Errorf("Start on a bind mount of / = %v, want image denied as the host's root", err)
		_ = rt.Stop(ctx, "hostroot", 0)
		_ = rt.Remove(ctx, "hostroot")
	}
	if l := leftovers(dir, "hostroot"); len(l) > 0 {
		t.Errorf("left behind %v", l)
	}
}
