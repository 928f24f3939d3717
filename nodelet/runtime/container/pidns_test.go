package container_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/nodelet/runtime"
	"github.com/sluicehq/sluice/nodelet/runtime/container"
)

// hostProcs lists the host's processes whose arguments hold text.
func hostProcs(text string) []string {
	ents, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if args := strings.ReplaceAll(string(b), "\x00", " "); strings.Contains(args, text) {
			out = append(out, e.Name()+" "+args)
		}
	}
	return out
}

// waitLog polls container c's log of pod id until it holds text, for up to
// 20s, and returns it.
func waitLog(t *testing.T, ctx context.Context, rt *container.Runtime, id, c, text string) string {
	t.Helper()
	end := time.Now().Add(20 * time.Second)
	for {
		b := logsOf(ctx, t, rt, id, c)
		if strings.Contains(b, text) {
			return b
		}
		if time.Now().After(end) {
			t.Fatalf("log of %s never held %q: %q", c, text, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSharePID runs two containers in one PID namespace: the second sees
// the first's processes, and the pod's sandbox as PID 1; a container's
// end kills the processes it left, and only those; stopping and removing
// the pod leaves no process. Containers are created in the test's process
// and through the shim.
func TestSharePID(t *testing.T) {
	t.Run("in-process", func(t *testing.T) { testSharePID(t, "") })
	t.Run("shim", func(t *testing.T) { testSharePID(t, shimBin) })
}

func testSharePID(t *testing.T, shim string) {
	rt, dir, ctx := startRuntime(t, shim)
	// c0 leaves a process behind and ends once c1 saw it; c1 waits for
	// that process to be killed and reaped, lists the namespace and stays.
	spec := pod("pidns",
		[]string{"/payload", "fork", "orphan-c0", "listen", "7071", "exit", "3"},
		[]string{"/payload", "waitproc", "orphan-c0 sleep", "dial", "7071", "saw it",
			"waitgone", "orphan-c0 sleep", "ps", "print", "c1-alive", "sleep", "60s"},
	)
	spec.SharePID = true
	startPod(t, ctx, rt, spec)
	out := waitLog(t, ctx, rt, "pidns", "c1", "c1-alive")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if !strings.HasPrefix(lines[0], "1 ") || !strings.Contains(lines[0], "sluice-pause pidns") {
		t.Errorf("PID 1 of the namespace is %q, want the pod's sandbox", lines[0])
	}
	var self bool
	for _, l := range lines[:len(lines)-1] {
		pid, args, _ := strings.Cut(l, " ")
		if args == "" {
			t.Errorf("process %s has no arguments (an unreaped zombie?)", pid)
		}
		if strings.Contains(args, "print orphan-c0") {
			t.Errorf("c0's processes outlived it: %q", l)
		}
		self = self || strings.Contains(args, "c1-alive")
	}
	if !self {
		t.Errorf("c1 is not in its own listing:\n%s", out)
	}
	if l := hostProcs("print orphan-c0"); len(l) > 0 {
		t.Errorf("c0's orphan is still running on the host: %v", l)
	}
	st, err := rt.List(ctx)
	if err != nil || len(st) != 1 || st[0].State != runtime.StateRunning {
		t.Fatalf("List = %+v, %v; want the pod running on c1", st, err)
	}
	if err := rt.Stop(ctx, "pidns", 0); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	e, err := rt.Wait(ctx, "pidns")
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if e.Code != 3 || e.Containers[0].Code != 3 || e.Containers[1].Code != 137 {
		t.Errorf("exit = %+v, want 3 (c0) and 137 (c1, killed)", e)
	}
	if err := rt.Remove(ctx, "pidns"); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if l := leftovers(dir, "pidns"); len(l) > 0 {
		t.Errorf("left behind: %v", l)
	}
	for _, text := range []string{"c1-alive", "print orphan-c0", "sluice-pause pidns"} {
		if l := hostProcs(text); len(l) > 0 {
			t.Errorf("still running after Remove: %v", l)
		}
	}
}

// TestSharePIDStopKillsAll stops a shared-PID pod whose containers left
// processes of their own: none survives the pod.
func TestSharePIDStopKillsAll(t *testing.T) {
	rt, dir, ctx := startRuntime(t, "")
	spec := pod("pidstop",
		[]string{"/payload", "fork", "left-by-c0", "ignoreterm", "print", "c0-up", "sleep", "60s"},
		[]string{"/payload", "fork", "left-by-c1", "print", "c1-up", "sleep", "60s"},
	)
	spec.SharePID = true
	startPod(t, ctx, rt, spec)
	waitLog(t, ctx, rt, "pidstop", "c0", "c0-up")
	waitLog(t, ctx, rt, "pidstop", "c1", "c1-up")
	if err := rt.Stop(ctx, "pidstop", 200*time.Millisecond); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	e, err := rt.Wait(ctx, "pidstop")
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	// Not PID 1 of a namespace of its own, c1 has SIGTERM's default
	// action; c0 ignores it and is killed after the grace period.
	if e.Containers[0].Code != 137 || e.Containers[1].Code != 143 {
		t.Errorf("exit = %+v, want 137 (c0) and 143 (c1)", e)
	}
	if err := rt.Remove(ctx, "pidstop"); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	for _, text := range []string{"left-by-c0", "left-by-c1", "sluice-pause pidstop"} {
		if l := hostProcs(text); len(l) > 0 {
			t.Errorf("still running after Remove: %v", l)
		}
	}
	if l := leftovers(dir, "pidstop"); len(l) > 0 {
		t.Errorf("left behind: %v", l)
	}
}

// TestPrivatePID: without SharePID each container is alone in its PID
// namespace, as its PID 1, though the other runs meanwhile.
func TestPrivatePID(t *testing.T) {
	e, logs := runPod(t, pod("pidpriv",
		[]string{"/payload", "listen", "7072", "exit", "0"},
		[]string{"/payload", "ps", "dial", "7072", "done", "exit", "0"},
	))
	if e.Code != 0 || e.Containers[1].Code != 0 {
		t.Fatalf("exit = %+v; logs %q", e, logs)
	}
	if want := "1 /payload ps dial 7072 done exit 0\n"; logs[1] != want {
		t.Errorf("c1 sees %q, want only itself as PID 1 (%q)", logs[1], want)
	}
}

// TestSharePIDInCapboxRefused: a pod inside a capbox has no sandbox of its
// own to hold a PID namespace.
func TestSharePIDInCapboxRefused(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	rt := newRuntime(t, dir)
	defer rt.Close()
	spec := pod("pidcap", []string{"/payload", "exit", "0"})
	spec.SharePID, spec.InPod = true, "somecapbox"
	err := rt.Start(context.Background(), spec)
	if !errors.Is(err, runtime.ErrBadSpec) || !strings.Contains(err.Error(), "share_pid") {
		t.Fatalf("Start = %v, want a bad spec naming share_pid", err)
	}
	if l := leftovers(dir, "pidcap"); len(l) > 0 {
		t.Errorf("left behind: %v", l)
	}
}

// TestSharePIDAdopted: a shared-PID pod left running by a closed Runtime
// is adopted by the next, whose Stop and Remove leave no process.
func TestSharePIDAdopted(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rt := newRuntime(t, dir)
	spec := pod("pidadopt",
		[]string{"/payload", "fork", "adopted-c0", "print", "c0-up", "sleep", "60s"},
		[]string{"/payload", "print", "c1-up", "sleep", "60s"},
	)
	spec.SharePID = true
	if err := rt.Start(ctx, spec); err != nil {
		t.Fatalf("Start: %v", err)
	}
	waitLog(t, ctx, rt, "pidadopt", "c0", "c0-up")
	waitLog(t, ctx, rt, "pidadopt", "c1", "c1-up")
	if err := rt.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	rt = newRuntime(t, dir)
	defer rt.Close()
	defer func() { // after a failure: nothing is left running
		_ = rt.Stop(ctx, "pidadopt", 0)
		_ = rt.Remove(ctx, "pidadopt")
	}()
	if l := hostProcs("print adopted-c0"); len(l) != 1 {
		t.Fatalf("c0's child: %v, want it running", l)
	}
	if err := rt.Stop(ctx, "pidadopt", 0); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if _, err := rt.Wait(ctx, "pidadopt"); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if err := rt.Remove(ctx, "pidadopt"); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	for _, text := range []string{"adopted-c0", "c1-up", "sluice-pause pidadopt"} {
		if l := hostProcs(text); len(l) > 0 {
			t.Errorf("still running after Remove: %v", l)
		}
	}
	if l := leftovers(dir, "pidadopt"); len(l) > 0 {
		t.Errorf("left behind: %v", l)
	}
}
