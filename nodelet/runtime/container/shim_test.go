package container_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// subreaper reports whether this process is a child subreaper.
func subreaper(t *testing.T) bool {
	t.Helper()
	var v int32
	if err := unix.Prctl(unix.PR_GET_CHILD_SUBREAPER, uintptr(unsafe.Pointer(&v)), 0, 0, 0); err != nil {
		t.Fatalf("PR_GET_CHILD_SUBREAPER: %v", err)
	}
	return v != 0
}

// initPid is the pid of the init of container name of pod id, from the
// pod's libcontainer state in dir.
func initPid(t *testing.T, dir, id, name string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, id, "libcontainer", name, "state.json"))
	if err != nil {
		t.Fatalf("container state: %v", err)
	}
	var st struct {
		Pid int `json:"init_process_pid"`
	}
	if err := json.Unmarshal(b, &st); err != nil || st.Pid == 0 {
		t.Fatalf("container state: no init pid (%v)", err)
	}
	return st.Pid
}

// initParent is the pid and command name of the parent of the init of
// container name of pod id.
func initParent(t *testing.T, dir, id, name string) (int, string) {
	t.Helper()
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(initPid(t, dir, id, name)) + "/stat")
	if err != nil {
		t.Fatalf("init process: %v", err)
	}
	// pid (comm) state ppid ...; comm may hold spaces and parentheses.
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	ppid, _ := strconv.Atoi(f[1])
	comm, _ := os.ReadFile("/proc/" + f[1] + "/comm")
	return ppid, strings.TrimSpace(string(comm))
}

// TestShimDiesExitsStillKnown: containers are the shim's children; when
// the shim is killed they are left to the runtime's process, which still
// learns their exit codes; the next start runs a new shim.
func TestShimDiesExitsStillKnown(t *testing.T) {
	rt, dir, ctx := startRuntime(t, shimBin)
	if err := rt.Start(ctx, pod("orphan", []string{"/payload", "sleep", "1s", "exit", "7"})); err != nil {
		t.Fatalf("Start: %v", err)
	}
	ppid, comm := initParent(t, dir, "orphan", "c0")
	if comm != "sluice-shim" {
		t.Fatalf("container init's parent is %q (pid %d), want the shim", comm, ppid)
	}
	if err := unix.Kill(ppid, unix.SIGKILL); err != nil {
		t.Fatalf("kill shim: %v", err)
	}
	e, err := rt.Wait(ctx, "orphan")
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if e.Code != 7 {
		t.Fatalf("exit after the shim died: %+v, want code 7", e)
	}
	if err := rt.Remove(ctx, "orphan"); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if l := leftovers(dir, "orphan"); len(l) > 0 {
		t.Errorf("left behind: %v", l)
	}
	// It lives a second, so that its parent can be read before it exits.
	if err := rt.Start(ctx, pod("after", []string{"/payload", "sleep", "1s", "exit", "3"})); err != nil {
		t.Fatalf("Start after the shim died: %v", err)
	}
	if ppid2, comm := initParent(t, dir, "after", "c0"); comm != "sluice-shim" || ppid2 == ppid {
		t.Errorf("after the shim died, a container's parent is %q (pid %d); want a new shim", comm, ppid2)
	}
	if e, err := rt.Wait(ctx, "after"); err != nil || e.Code != 3 {
		t.Fatalf("Wait after the shim died: %+v, %v; want code 3", e, err)
	}
	if err := rt.Remove(ctx, "after"); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if l := leftovers(dir, "after"); len(l) > 0 {
		t.Errorf("left behind: %v", l)
	}
}

// TestShimOutlivesInterrupt: an interrupt or hangup at the shim (a
// terminal's, sent to the nodelet's process group) leaves it serving, and
// the containers it starts still have SIGINT's default action.
func TestShimOutlivesInterrupt(t *testing.T) {
	rt, dir, ctx := startRuntime(t, shimBin)
	if err := rt.Start(ctx, pod("first", []string{"/payload", "sleep", "30s"})); err != nil {
		t.Fatalf("Start: %v", err)
	}
	shimPid, comm := initParent(t, dir, "first", "c0")
	if comm != "sluice-shim" {
		t.Fatalf("container init's parent is %q, want the shim", comm)
	}
	for _, sig := range []unix.Signal{unix.SIGINT, unix.SIGHUP} {
		if err := unix.Kill(shimPid, sig); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(200 * time.Millisecond)
	if err := rt.Start(ctx, pod("second", []string{"/payload", "sleep", "30s"})); err != nil {
		t.Fatalf("Start after SIGINT and SIGHUP at the shim: %v", err)
	}
	if p, _ := initParent(t, dir, "second", "c0"); p != shimPid {
		t.Errorf("second pod's parent is %d, want the same shim %d", p, shimPid)
	}
	status, err := os.ReadFile("/proc/" + strconv.Itoa(initPid(t, dir, "second", "c0")) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(status)) {
		if v, ok := strings.CutPrefix(line, "SigIgn:"); ok {
			mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			if mask&(1<<(unix.SIGINT-1)) != 0 || mask&(1<<(unix.SIGHUP-1)) != 0 {
				t.Errorf("the container ignores SIGINT or SIGHUP (SigIgn %s)", strings.TrimSpace(v))
			}
		}
	}
	for _, id := range []string{"first", "second"} {
		if err := rt.Stop(ctx, id, time.Second); err != nil {
			t.Fatalf("Stop(%s): %v", id, err)
		}
		if err := rt.Remove(ctx, id); err != nil {
			t.Fatalf("Remove(%s): %v", id, err)
		}
	}
}
