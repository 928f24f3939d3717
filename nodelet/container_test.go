package nodelet_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/nodelet"
	"github.com/sluicehq/sluice/nodelet/cgroup"
	"github.com/sluicehq/sluice/nodelet/runtime"
	"github.com/sluicehq/sluice/nodelet/runtime/container"
)

// Environment of the child agent of TestContainerRecovery.
const (
	childStateEnv  = "SLUICE_NODELET_TEST_CHILD_STATE"
	childRootfsEnv = "SLUICE_NODELET_TEST_ROOTFS"
	testCgroupRoot = "sluicetest-nodelet"
)

func TestMain(m *testing.M) {
	container.Reexec()
	if dir := os.Getenv(childStateEnv); dir != "" {
		os.Exit(childAgent(dir, os.Getenv(childRootfsEnv)))
	}
	code := m.Run()
	if rootfsDir != "" {
		_ = os.RemoveAll(filepath.Dir(rootfsDir))
	}
	os.Exit(code)
}

var (
	rootfsOnce sync.Once
	rootfsDir  string
	rootfsErr  error
)

// payloadRootfs builds the container runtime's test payload into a
// temporary rootfs, once per test binary, in a directory of its own: the
// image root of the tests' runtimes (imageRoots).
func payloadRootfs(t testing.TB) string {
	t.Helper()
	rootfsOnce.Do(func() {
		root, err := os.MkdirTemp("", "sluice-nodelet-images-")
		if err != nil {
			rootfsErr = err
			return
		}
		_ = os.Chmod(root, 0o755)
		dir := filepath.Join(root, "rootfs")
		for _, d := range []string{"", "proc", "dev", "sys", "tmp", "etc"} {
			_ = os.Mkdir(filepath.Join(dir, d), 0o755)
		}
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "payload"), "./runtime/container/testdata/payload")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			rootfsErr = fmt.Errorf("building payload: %v\n%s", err, out)
			return
		}
		rootfsDir = dir
	})
	if rootfsErr != nil {
		t.Fatal(rootfsErr)
	}
	return rootfsDir
}

// imageRoots are the image roots of a runtime running the test image
// rootfs.
func imageRoots(rootfs string) []string { return []string{filepath.Dir(rootfs)} }

// newContainerRuntime is a container runtime with its state in dir,
// running images below rootfs's image root, through shim when it is not
// empty. When the test ends it is closed, and then the cgroups the tests'
// agents made are removed (removeTestCgroups).
func newContainerRuntime(tb testing.TB, rootfs, dir, shim string) *container.Runtime {
	tb.Helper()
	rt, err := container.New(container.Config{StateDir: dir, ImageDir: filepath.Join(dir, ".images"), ImageRoots: imageRoots(rootfs), Shim: shim})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(removeTestCgroups)
	tb.Cleanup(func() { _ = rt.Close() })
	return rt
}

// runContainerAgent runs an agent for node n1 over rt and d, with no
// network, the tests' cgroup root, a StopGrace of a second and what tweak
// changes. When the test ends the agent is closed and its Run checked,
// before the cleanups registered earlier (the runtime's) run.
func runContainerAgent(tb testing.TB, rt runtime.Runtime, d *fakeDispatcher, tweak func(*nodelet.Config)) *nodelet.Agent {
	tb.Helper()
	cfg := nodelet.Config{Node: "n1", Runtime: rt, Dispatcher: d, DefaultNetwork: runtime.NetworkNone, CgroupRoot: testCgroupRoot, StopGrace: time.Second}
	if tweak != nil {
		tweak(&cfg)
	}
	a, err := nodelet.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- a.Run(context.Background()) }()
	tb.Cleanup(func() {
		_ = a.Close()
		if err := <-errc; err != nil {
			tb.Errorf("Run: %v", err)
		}
	})
	return a
}

func sleeper(rootfs, id string) nodelet.DesiredPod {
	return nodelet.DesiredPod{ID: id, Generation: 1, Tier: cgroup.Offline, Pod: &api.PodSpec{Containers: []api.ContainerSpec{{
		Name: "main", Image: api.Image{Rootfs: rootfs}, Command: []string{"/payload", "sleep", "120s"},
		Resources: api.Resources{CPU: 100, Memory: 32 << 20},
	}}}}
}

// childAgent is the first nodelet of TestContainerRecovery: it runs an
// agent that starts two pods, prints "ready" and waits to be SIGKILLed.
func childAgent(dir, rootfs string) int {
	rt, err := container.New(container.Config{StateDir: dir, ImageDir: filepath.Join(dir, ".images"), ImageRoots: imageRoots(rootfs)})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	d := newFakeDispatcher()
	d.setTarget(1, sleeper(rootfs, "rec-a"), sleeper(rootfs, "rec-b"))
	a, err := nodelet.New(nodelet.Config{Node: "child", Runtime: rt, Dispatcher: d, DefaultNetwork: runtime.NetworkNone, CgroupRoot: testCgroupRoot})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	go func() { _ = a.Run(context.Background()) }()
	var s nodelet.Stats
	if !poll(30*time.Second, 10*time.Millisecond, func() bool {
		s = a.Stats()
		return s.StartFailures > 0 || (s.Running == 2 && s.PendingReports == 0)
	}) {
		fmt.Fprintf(os.Stderr, "pods did not start within 30s: %+v\n", s)
		return 1
	}
	if s.StartFailures > 0 {
		fmt.Fprintf(os.Stderr, "pods failed to start: %+v\n", d.allReports())
		return 1
	}
	fmt.Println("ready")
	select {} // until SIGKILL
}

func sandboxPid(t *testing.T, dir, id string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, id, "sandbox.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rec struct{ Pid int }
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	return rec.Pid
}

// TestContainerRecovery starts an agent with the container runtime in a
// child process, SIGKILLs it once its pods run, and starts a new agent
// over the same state: the pods are adopted (same sandbox processes, no
// Start call), then stopped and removed when the target drops them.
func TestContainerRecovery(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the container runtime creates namespaces and cgroups")
	}
	rootfs := payloadRootfs(t) // removed by TestMain
	dir := t.TempDir()

	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), childStateEnv+"="+dir, childRootfsEnv+"="+rootfs)
	child.Stderr = os.Stderr
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	_ = child.Process.Signal(syscall.SIGKILL)
	_ = child.Wait()
	if line != "ready\n" {
		t.Fatalf("child agent said %q, want ready", line)
	}
	pids := map[string]int{"rec-a": sandboxPid(t, dir, "rec-a"), "rec-b": sandboxPid(t, dir, "rec-b")}

	rt := newContainerRuntime(t, rootfs, dir, "")
	crt := newCounting(rt)
	d := newFakeDispatcher()
	d.setTarget(1, sleeper(rootfs, "rec-a"), sleeper(rootfs, "rec-b"))
	a := runContainerAgent(t, crt, d, nil)
	eventually(t, 20*time.Second, "adoption reported", func() bool {
		return len(d.find("rec-a", api.TaskRunning)) == 1 && len(d.find("rec-b", api.TaskRunning)) == 1
	})
	if s := a.Stats(); s.Adopted != 2 || s.Running != 2 || len(crt.startCounts()) != 0 {
		t.Errorf("stats = %+v, starts = %v; want two adopted pods and no start", s, crt.startCounts())
	}
	for id, pid := range pids {
		if got := sandboxPid(t, dir, id); got != pid {
			t.Errorf("%s: sandbox pid %d, was %d: restarted", id, got, pid)
		}
		if err := syscall.Kill(pid, 0); err != nil {
			t.Errorf("%s: sandbox %d not alive: %v", id, pid, err)
		}
	}
	if _, err := os.Stat(filepath.Join("/sys/fs/cgroup/memory", testCgroupRoot, "offline", "rec-a")); err != nil {
		t.Errorf("pod cgroup not under the offline tier: %v", err)
	}

	d.setTarget(2)
	eventually(t, 30*time.Second, "pods stopped and removed", func() bool {
		s := a.Stats()
		return len(listed(t, rt)) == 0 && s.PendingReports == 0 && s.Removed == 2
	})
	for _, id := range []string{"rec-a", "rec-b"} {
		if r := d.find(id, api.TaskKilled); len(r) != 1 || r[0].Reason != api.ReasonStopped {
			t.Errorf("%s final reports = %+v", id, r)
		}
		if _, err := os.Stat(filepath.Join(dir, id)); err == nil {
			t.Errorf("%s state directory left behind", id)
		}
	}
}

// BenchmarkAgentRSS100ContainerPods runs the agent with the container
// runtime and 100 running container pods, and reports the whole benchmark
// process's resident set (the agent, the runtime's per-pod watchers and
// records, the test binary's own), after a GC, as MB; the nodelet target
// is 30 MB. With shim=sluice-shim the containers are created through the
// shim, whose resident set it reports too (shim-MB-rss). Needs root.
func BenchmarkAgentRSS100ContainerPods(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root: the container runtime creates namespaces and cgroups")
	}
	b.Run("shim=none", func(b *testing.B) { benchAgentRSS(b, "") })
	b.Run("shim=sluice-shim", func(b *testing.B) {
		shim := filepath.Join(b.TempDir(), "sluice-shim")
		if out, err := exec.Command("go", "build", "-o", shim, "../cmd/sluice-shim").CombinedOutput(); err != nil {
			b.Fatalf("build sluice-shim: %v\n%s", err, out)
		}
		benchAgentRSS(b, shim)
	})
}

// shimPid is the pid of this process's child sluice-shim.
func shimPid(b *testing.B) string {
	b.Helper()
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range stats {
		raw, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		s := string(raw)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		f := strings.Fields(s[end+1:])
		if s[open+1:end] == "sluice-shim" && len(f) > 1 && f[1] == strconv.Itoa(os.Getpid()) {
			return strings.TrimSpace(s[:open])
		}
	}
	b.Fatal("no sluice-shim child")
	return ""
}

func benchAgentRSS(b *testing.B, shim string) {
	rootfs := payloadRootfs(b)
	dir := b.TempDir()
	rt := newContainerRuntime(b, rootfs, dir, shim)
	d := newFakeDispatcher()
	var pods []nodelet.DesiredPod
	for i := range 100 {
		pods = append(pods, sleeper(rootfs, fmt.Sprintf("rss-%03d", i)))
	}
	d.setTarget(1, pods...)
	a := runContainerAgent(b, rt, d, nil)
	b.Cleanup(func() { // before the agent's: stop and remove every pod before the agent goes
		d.setTarget(2)
		if !poll(60*time.Second, 50*time.Millisecond, func() bool { s := a.Stats(); return s.Running == 0 && s.Removed >= 100 }) {
			b.Errorf("pods not removed within 60s: %+v", a.Stats())
		}
	})
	var s nodelet.Stats
	if !poll(120*time.Second, 50*time.Millisecond, func() bool {
		s = a.Stats()
		return s.StartFailures > 0 || (s.Running == 100 && s.PendingReports == 0)
	}) || s.StartFailures > 0 {
		b.Fatalf("pods did not start: %+v", s)
	}
	var rss int64
	for b.Loop() {
		goruntime.GC()
		debug.FreeOSMemory()
		rss = vmRSS(b)
	}
	b.ReportMetric(float64(rss)/(1<<20), "MB-rss")
	if shim != "" {
		b.ReportMetric(float64(procRSS(b, shimPid(b)))/(1<<20), "shim-MB-rss")
	}
}

// TestContainerImageDenied runs an agent with the container runtime and
// three pods: one whose image is below the runtime's image root, which
// runs, one whose image is a working rootfs outside it, and one naming a
// link inside the root that leads to that rootfs. The last two are
// reported failed with api.ReasonImageDenied and never run: no running
// report, nothing in the runtime, no state left.
func TestContainerImageDenied(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the container runtime creates namespaces and cgroups")
	}
	rootfs := payloadRootfs(t)
	outside := t.TempDir()
	for _, d := range []string{"proc", "dev", "sys", "tmp", "etc"} {
		if err := os.Mkdir(filepath.Join(outside, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	payload, err := os.ReadFile(filepath.Join(rootfs, "payload"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "payload"), payload, 0o755); err != nil {
		t.Fatal(err)
	}
	escape := filepath.Join(filepath.Dir(rootfs), "escape")
	if err := os.Symlink(outside, escape); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(escape) })

	dir := t.TempDir()
	rt := newContainerRuntime(t, rootfs, dir, "")
	crt := newCounting(rt)
	d := newFakeDispatcher()
	d.setTarget(1, sleeper(rootfs, "allowed"), sleeper(outside, "outside"), sleeper(escape, "escape"))
	a := runContainerAgent(t, crt, d, nil)
	eventually(t, 20*time.Second, "the allowed pod running and the others failed", func() bool {
		return len(d.find("allowed", api.TaskRunning)) == 1 &&
			len(d.find("outside", api.TaskFailed)) == 1 && len(d.find("escape", api.TaskFailed)) == 1
	})
	for _, id := range []string{"outside", "escape"} {
		r := d.find(id, api.TaskFailed)
		if r[0].Reason != api.ReasonImageDenied || !strings.Contains(r[0].Message, "image.rootfs") {
			t.Errorf("%s: failure %+v, want %s naming image.rootfs", id, r[0], api.ReasonImageDenied)
		}
		if n := len(d.find(id, api.TaskRunning)); n != 0 {
			t.Errorf("%s: %d running reports", id, n)
		}
		if _, ok := listed(t, rt)[id]; ok {
			t.Errorf("%s: in the runtime", id)
		}
		if _, err := os.Stat(filepath.Join(dir, id)); err == nil {
			t.Errorf("%s: state directory left behind", id)
		}
		if n := crt.startCounts()[id+"/1"]; n != 1 {
			t.Errorf("%s: started %d times, want one refused start", id, n)
		}
	}

	d.setTarget(2)
	eventually(t, 30*time.Second, "the allowed pod stopped and removed", func() bool {
		return len(listed(t, rt)) == 0 && a.Stats().PendingReports == 0
	})
}

// TestContainerIdentityEnv: the real containers of a pod, every one of
// them, see the node's identity of the pod in their environment (read
// from /proc/self/environ), beside their own Env.
func TestContainerIdentityEnv(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the container runtime creates namespaces and cgroups")
	}
	rootfs := payloadRootfs(t)
	rt := newContainerRuntime(t, rootfs, t.TempDir(), "")
	printEnv := func(name string) api.ContainerSpec {
		return api.ContainerSpec{Name: name, Image: api.Image{Rootfs: rootfs}, Command: []string{"/payload", "cat", "/proc/self/environ"},
			Env: map[string]string{"OWN": name}, Resources: api.Resources{CPU: 100, Memory: 32 << 20}}
	}
	pod := nodelet.DesiredPod{ID: "j7-1-5-3", TaskID: "j7/1/5/3", Generation: 3, Tier: cgroup.Offline,
		Group: &nodelet.Group{Job: "j7", JobName: "render", Name: "frames", Count: 24},
		Pod:   &api.PodSpec{Containers: []api.ContainerSpec{printEnv("main"), printEnv("side")}}}
	d := newFakeDispatcher()
	d.setTarget(1, pod)
	const addr = "http://127.0.0.1:7001"
	t.Cleanup(func() { // after the agent's
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := rt.Remove(ctx, pod.ID); err != nil {
			t.Errorf("Remove: %v", err)
		}
	})
	runContainerAgent(t, rt, d, func(c *nodelet.Config) { c.Addr, c.RetainExited = addr, time.Minute })
	eventually(t, 20*time.Second, "the pod succeeded", func() bool { return len(d.find(pod.ID, api.TaskSucceeded)) == 1 })

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, c := range pod.Pod.Containers {
		rc, err := rt.Logs(ctx, pod.ID, c.Name, runtime.LogOptions{})
		if err != nil {
			t.Fatalf("Logs of %s: %v", c.Name, err)
		}
		out, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatalf("Logs of %s: %v", c.Name, err)
		}
		env := map[string]string{}
		for kv := range strings.SplitSeq(strings.TrimRight(string(out), "\x00"), "\x00") {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
		for k, v := range map[string]string{
			"OWN": c.Name, api.EnvJobID: "j7", api.EnvJobName: "render", api.EnvGroup: "frames", api.EnvTaskID: "j7/1/5/3",
			api.EnvTaskIndex: "5", api.EnvTaskCount: "24", api.EnvAttempt: "3", api.EnvNode: "n1", api.EnvAddr: addr,
		} {
			if got, ok := env[k]; !ok || got != v {
				t.Errorf("container %s: %s = %q (set: %v), want %q; environment %q", c.Name, k, got, ok, v, out)
			}
		}
	}
}

// removeTestCgroups removes the cgroups the tests' agents made under
// testCgroupRoot, in every mounted hierarchy, leaves first.
func removeTestCgroups() {
	for _, p := range []string{testCgroupRoot + "/offline", testCgroupRoot + "/online", testCgroupRoot} {
		dirs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", p))
		for _, d := range dirs {
			_ = os.Remove(d)
		}
	}
}
