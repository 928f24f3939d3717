package runtimetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/nodelet/runtime"
)

// Behavior is what one container of a test pod does: print Print (with a
// newline, if not empty), sleep for Sleep, then exit with Exit. With
// IgnoreTerm it ignores SIGTERM.
type Behavior struct {
	Print      string
	Sleep      time.Duration
	Exit       int
	IgnoreTerm bool
}

// Caps are what a runtime can do beyond the common contract.
type Caps struct {
	// Output: a container's logs hold what it printed.
	Output bool
	// Signals: containers are real processes, so Behavior.IgnoreTerm is
	// honoured and Stop needs the SIGKILL after grace.
	Signals bool
	// ExitAfterRestart: the exit of a pod that ended while no Runtime
	// value was open is known (else it must be reported with
	// runtime.ErrExitUnknown).
	ExitAfterRestart bool
}

// Harness is one test's view of a runtime over a fresh host.
type Harness struct {
	// Open returns a new Runtime value over the harness's host. Calling it
	// again, after closing the previous value, is a nodelet restart.
	Open func(t *testing.T) runtime.Runtime
	// Pod returns the spec of a pod with one container per behaviour.
	Pod func(id string, b ...Behavior) runtime.PodSpec
	// Leftovers lists what remains on the host of pod id (state
	// directories, cgroups, processes); nil when nothing does. Optional.
	Leftovers func(id string) []string
	// Caps are the runtime's capabilities.
	Caps Caps
	// Concurrency is how many pods the concurrency test starts at once.
	// Default 8.
	Concurrency int
}

// Factory builds a Harness for one test; it may register cleanups on t.
type Factory func(t *testing.T) Harness

const long = time.Minute

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Run runs the conformance suite.
func Run(t *testing.T, f Factory) {
	t.Run("StartWaitExitCodes", func(t *testing.T) { testExitCodes(t, f(t)) })
	t.Run("StopWithGrace", func(t *testing.T) { testStop(t, f(t)) })
	t.Run("StopIgnoringTerm", func(t *testing.T) { testStopIgnoringTerm(t, f(t)) })
	t.Run("AdoptAfterRestart", func(t *testing.T) { testAdopt(t, f(t)) })
	t.Run("Logs", func(t *testing.T) { testLogs(t, f(t)) })
	t.Run("BadSpecs", func(t *testing.T) { testBadSpecs(t, f(t)) })
	t.Run("Errors", func(t *testing.T) { testErrors(t, f(t)) })
	t.Run("ConcurrentStarts", func(t *testing.T) { testConcurrent(t, f(t)) })
	t.Run("Notify", func(t *testing.T) { testNotify(t, f(t)) })
}

// open opens a Runtime and closes it at cleanup.
func open(t *testing.T, h Harness) runtime.Runtime {
	rt := h.Open(t)
	t.Cleanup(func() { _ = rt.Close() })
	return rt
}

// start starts spec and arranges its stop and removal at cleanup.
func start(t *testing.T, ctx context.Context, rt runtime.Runtime, spec runtime.PodSpec) {
	t.Helper()
	if err := rt.Start(ctx, spec); err != nil {
		t.Fatalf("Start(%s): %v", spec.ID, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = rt.Stop(ctx, spec.ID, 0)
		_ = rt.Remove(ctx, spec.ID)
	})
}

func wait(t *testing.T, ctx context.Context, rt runtime.Runtime, id string) runtime.Exit {
	t.Helper()
	e, err := rt.Wait(ctx, id)
	if err != nil {
		t.Fatalf("Wait(%s): %v", id, err)
	}
	return e
}

func remove(t *testing.T, ctx context.Context, h Harness, rt runtime.Runtime, id string) {
	t.Helper()
	if err := rt.Remove(ctx, id); err != nil {
		t.Fatalf("Remove(%s): %v", id, err)
	}
	noLeftovers(t, h, id)
}

func noLeftovers(t *testing.T, h Harness, id string) {
	t.Helper()
	if h.Leftovers == nil {
		return
	}
	if l := h.Leftovers(id); len(l) > 0 {
		t.Errorf("pod %s left behind: %v", id, l)
	}
}

func testExitCodes(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	rt := open(t, h)
	codes := []int{0, 3, 255}
	for i, code := range codes {
		start(t, ctx, rt, h.Pod(fmt.Sprintf("exit-%d", i), Behavior{Sleep: 50 * time.Millisecond, Exit: code}))
	}
	for i, code := range codes {
		id := fmt.Sprintf("exit-%d", i)
		e := wait(t, ctx, rt, id)
		if e.Code != code || e.Err != nil || e.OOMKilled {
			t.Errorf("Wait(%s) = %+v, want code %d", id, e, code)
		}
		if len(e.Containers) != 1 || e.Containers[0].Code != code {
			t.Errorf("Wait(%s).Containers = %+v, want one with code %d", id, e.Containers, code)
		}
		e2 := wait(t, ctx, rt, id)
		if e2.Code != e.Code {
			t.Errorf("second Wait(%s) = %+v, first %+v", id, e2, e)
		}
		st := status(t, ctx, rt, id)
		if st.State != runtime.StateExited || st.Exit == nil || st.Exit.Code != code || st.FinishedAt.IsZero() {
			t.Errorf("List: %s = %+v, want exited with %d", id, st, code)
		}
		remove(t, ctx, h, rt, id)
	}
	// A pod whose containers differ: the pod's code is the first's.
	start(t, ctx, rt, h.Pod("multi", Behavior{Exit: 7, Sleep: 100 * time.Millisecond}, Behavior{Exit: 0}))
	e := wait(t, ctx, rt, "multi")
	if e.Code != 7 || len(e.Containers) != 2 {
		t.Errorf("Wait(multi) = %+v, want code 7 and 2 containers", e)
	}
	remove(t, ctx, h, rt, "multi")
}

// testNotify checks a runtime.Notifier: each callback is called once, with
// the exit Wait returns, for a pod that ends by itself, one that is
// stopped and one that had ended before Notify; an unknown pod is
// ErrNotFound.
func testNotify(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	rt := open(t, h)
	n, ok := rt.(runtime.Notifier)
	if !ok {
		t.Skip("runtime is not a runtime.Notifier")
	}
	if err := n.Notify("no-such-pod", func(runtime.Exit) {}); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("Notify(unknown) = %v, want ErrNotFound", err)
	}
	start(t, ctx, rt, h.Pod("exits", Behavior{Sleep: 100 * time.Millisecond, Exit: 3}))
	start(t, ctx, rt, h.Pod("stopped", Behavior{Sleep: long}))
	start(t, ctx, rt, h.Pod("ended", Behavior{Exit: 4}))
	wait(t, ctx, rt, "ended")
	type note struct {
		id   string
		exit runtime.Exit
	}
	notes := make(chan note, 8)
	for _, id := range []string{"exits", "stopped", "ended"} {
		if err := n.Notify(id, func(e runtime.Exit) { notes <- note{id, e} }); err != nil {
			t.Fatalf("Notify(%s): %v", id, err)
		}
	}
	if err := rt.Stop(ctx, "stopped", time.Second); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	got := map[string]runtime.Exit{}
	for range 3 {
		select {
		case nt := <-notes:
			if _, dup := got[nt.id]; dup {
				t.Fatalf("Notify(%s) called back twice", nt.id)
			}
			got[nt.id] = nt.exit
		case <-ctx.Done():
			t.Fatalf("called back for %d pods of 3", len(got))
		}
	}
	for id, e := range got {
		if w := wait(t, ctx, rt, id); !reflect.DeepEqual(e, w) {
			t.Errorf("Notify(%s) gave %+v, Wait %+v", id, e, w)
		}
	}
	select {
	case nt := <-notes:
		t.Errorf("a callback more, for %s", nt.id)
	case <-time.After(100 * time.Millisecond):
	}
}

func status(t *testing.T, ctx context.Context, rt runtime.Runtime, id string) runtime.PodStatus {
	t.Helper()
	l, err := rt.List(ctx)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	for _, s := range l {
		if s.ID == id {
			return s
		}
	}
	t.Fatalf("List has no pod %s: %+v", id, l)
	return runtime.PodStatus{}
}

func testStop(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	rt := open(t, h)
	start(t, ctx, rt, h.Pod("stop", Behavior{Sleep: long}))
	if st := status(t, ctx, rt, "stop"); st.State != runtime.StateRunning {
		t.Fatalf("status = %+v, want running", st)
	}
	// Let the process install its signal handlers: a container's first
	// process is PID 1 of its namespace and has no default actions.
	time.Sleep(300 * time.Millisecond)
	if err := rt.Remove(ctx, "stop"); !errors.Is(err, runtime.ErrRunning) {
		t.Errorf("Remove(running) = %v, want ErrRunning", err)
	}
	t0 := time.Now()
	if err := rt.Stop(ctx, "stop", 20*time.Second); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if d := time.Since(t0); d > 10*time.Second {
		t.Errorf("Stop of a pod that obeys SIGTERM took %v", d)
	}
	e := wait(t, ctx, rt, "stop")
	if e.Code != 128+15 {
		t.Errorf("Wait after Stop = %+v, want code 143 (SIGTERM)", e)
	}
	if err := rt.Stop(ctx, "stop", time.Second); err != nil {
		t.Errorf("Stop of an ended pod: %v", err)
	}
	remove(t, ctx, h, rt, "stop")
}

func testStopIgnoringTerm(t *testing.T, h Harness) {
	if !h.Caps.Signals {
		t.Skip("runtime does not run real processes (Caps.Signals)")
	}
	ctx := ctxFor(t)
	rt := open(t, h)
	start(t, ctx, rt, h.Pod("stubborn", Behavior{Sleep: long, IgnoreTerm: true}))
	// Let the process install its signal handler.
	time.Sleep(300 * time.Millisecond)
	const grace = 700 * time.Millisecond
	t0 := time.Now()
	if err := rt.Stop(ctx, "stubborn", grace); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if d := time.Since(t0); d < grace {
		t.Errorf("Stop returned after %v, before the grace of %v", d, grace)
	}
	e := wait(t, ctx, rt, "stubborn")
	if e.Code != 128+9 {
		t.Errorf("Wait = %+v, want code 137 (SIGKILL)", e)
	}
	remove(t, ctx, h, rt, "stubborn")
}

func testAdopt(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	rt1 := h.Open(t)
	spec := h.Pod("adopt-long", Behavior{Sleep: long})
	spec.Generation, spec.CgroupParent = 7, "sluicetest/online"
	if err := rt1.Start(ctx, spec); err != nil {
		t.Fatalf("Start: %v", err)
	}
	short := h.Pod("adopt-short", Behavior{Sleep: 100 * time.Millisecond, Exit: 4})
	if err := rt1.Start(ctx, short); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if err := rt1.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := rt1.List(ctx); !errors.Is(err, runtime.ErrClosed) {
		t.Errorf("List after Close = %v, want ErrClosed", err)
	}
	time.Sleep(500 * time.Millisecond)
	rt2 := open(t, h)
	t.Cleanup(func() {
		_ = rt2.Stop(context.Background(), "adopt-long", 0)
		_ = rt2.Remove(context.Background(), "adopt-long")
		_ = rt2.Remove(context.Background(), "adopt-short")
	})
	st := status(t, ctx, rt2, "adopt-long")
	if st.State != runtime.StateRunning || st.Generation != 7 || st.CgroupParent != "sluicetest/online" || st.StartedAt.IsZero() {
		t.Errorf("adopted pod status = %+v, want running, generation 7, parent sluicetest/online", st)
	}
	e := wait(t, ctx, rt2, "adopt-short")
	if h.Caps.ExitAfterRestart {
		if e.Code != 4 || e.Err != nil {
			t.Errorf("Wait(adopt-short) = %+v, want code 4", e)
		}
	} else if e.Code != 4 && !errors.Is(e.Err, runtime.ErrExitUnknown) {
		t.Errorf("Wait(adopt-short) = %+v, want code 4 or ErrExitUnknown", e)
	}
	if st := status(t, ctx, rt2, "adopt-short"); st.State != runtime.StateExited || st.Exit == nil {
		t.Errorf("status of pod that ended while away = %+v, want exited", st)
	}
	if err := rt2.Stop(ctx, "adopt-long", 5*time.Second); err != nil {
		t.Fatalf("Stop(adopted): %v", err)
	}
	e = wait(t, ctx, rt2, "adopt-long")
	if e.Code != 143 && !errors.Is(e.Err, runtime.ErrExitUnknown) {
		t.Errorf("Wait(adopted, stopped) = %+v, want 143 or ErrExitUnknown", e)
	}
	remove(t, ctx, h, rt2, "adopt-long")
	remove(t, ctx, h, rt2, "adopt-short")
	if l, err := rt2.List(ctx); err != nil || len(l) != 0 {
		t.Errorf("List after removing all = %+v, %v; want empty", l, err)
	}
}

func testLogs(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	rt := open(t, h)
	spec := h.Pod("logs", Behavior{Print: "hello from sluice", Sleep: 500 * time.Millisecond})
	start(t, ctx, rt, spec)
	name := spec.Containers[0].Name
	if _, err := rt.Logs(ctx, "logs", "nope", runtime.LogOptions{}); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("Logs(unknown container) = %v, want ErrNotFound", err)
	}
	// Follow from the start: the reader ends when the container does.
	rc, err := rt.Logs(ctx, "logs", name, runtime.LogOptions{Follow: true})
	if err != nil {
		t.Fatalf("Logs(follow): %v", err)
	}
	b, err := io.ReadAll(rc)
	_ = rc.Close()
	if err != nil {
		t.Fatalf("reading followed logs: %v", err)
	}
	wait(t, ctx, rt, "logs")
	if h.Caps.Output && !strings.Contains(string(b), "hello from sluice") {
		t.Errorf("followed logs = %q, want the printed line", b)
	}
	rc, err = rt.Logs(ctx, "logs", name, runtime.LogOptions{})
	if err != nil {
		t.Fatalf("Logs: %v", err)
	}
	b, _ = io.ReadAll(rc)
	_ = rc.Close()
	if h.Caps.Output && string(b) != "hello from sluice\n" {
		t.Errorf("logs = %q, want the printed line", b)
	}
	remove(t, ctx, h, rt, "logs")
	if _, err := rt.Logs(ctx, "logs", name, runtime.LogOptions{}); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("Logs after Remove = %v, want ErrNotFound", err)
	}
}

func testBadSpecs(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	rt := open(t, h)
	good := func(id string) runtime.PodSpec { return h.Pod(id, Behavior{Sleep: 10 * time.Millisecond}) }
	cases := []struct {
		name  string
		field string
		mut   func(*runtime.PodSpec)
	}{
		{"empty id", "id", func(s *runtime.PodSpec) { s.ID = "" }},
		{"bad id", "id", func(s *runtime.PodSpec) { s.ID = "../etc" }},
		{"no containers", "containers", func(s *runtime.PodSpec) { s.Containers = nil }},
		{"empty command", "containers[0].args", func(s *runtime.PodSpec) { s.Containers[0].Args = nil }},
		{"empty program", "containers[0].args[0]", func(s *runtime.PodSpec) { s.Containers[0].Args = []string{""} }},
		{"negative memory", "containers[0].resources.memory", func(s *runtime.PodSpec) { s.Containers[0].Resources.MemoryBytes = -1 }},
		{"duplicate names", "containers[1].name", func(s *runtime.PodSpec) {
			s.Containers = append(s.Containers, s.Containers[0])
		}},
		{"bad cgroup parent", "cgroup_parent", func(s *runtime.PodSpec) { s.CgroupParent = "../../x" }},
	}
	for i, c := range cases {
		id := fmt.Sprintf("bad-%d", i)
		spec := good(id)
		spec.Containers[0].Args = append([]string(nil), spec.Containers[0].Args...)
		c.mut(&spec)
		err := rt.Start(ctx, spec)
		var se *runtime.SpecError
		if !errors.Is(err, runtime.ErrBadSpec) || !errors.As(err, &se) {
			t.Errorf("%s: Start = %v, want a *SpecError", c.name, err)
			_ = rt.Stop(ctx, spec.ID, 0)
			_ = rt.Remove(ctx, spec.ID)
			continue
		}
		if !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: error %q does not name field %q", c.name, err, c.field)
		}
		if spec.ID != "" && runtime.CheckName(spec.ID) == "" {
			noLeftovers(t, h, spec.ID)
		}
	}
	if l, err := rt.List(ctx); err != nil || len(l) != 0 {
		t.Errorf("List after rejected specs = %+v, %v; want empty", l, err)
	}
}

func testErrors(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	rt := open(t, h)
	if _, err := rt.Wait(ctx, "ghost"); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("Wait(ghost) = %v, want ErrNotFound", err)
	}
	if err := rt.Stop(ctx, "ghost", time.Second); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("Stop(ghost) = %v, want ErrNotFound", err)
	}
	if err := rt.Remove(ctx, "ghost"); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("Remove(ghost) = %v, want ErrNotFound", err)
	}
	if _, err := rt.Logs(ctx, "ghost", "c0", runtime.LogOptions{}); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("Logs(ghost) = %v, want ErrNotFound", err)
	}
	start(t, ctx, rt, h.Pod("twice", Behavior{Sleep: long}))
	if err := rt.Start(ctx, h.Pod("twice", Behavior{Sleep: long})); !errors.Is(err, runtime.ErrExists) {
		t.Errorf("Start(existing) = %v, want ErrExists", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := rt.Wait(wctx, "twice"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait with expiring ctx = %v, want DeadlineExceeded", err)
	}
	if err := rt.Stop(ctx, "twice", 5*time.Second); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	remove(t, ctx, h, rt, "twice")
}

func testConcurrent(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	rt := open(t, h)
	n := h.Concurrency
	if n == 0 {
		n = 8
	}
	// n distinct pods, each also started by a second goroutine: exactly
	// one Start of each ID succeeds.
	var wg sync.WaitGroup
	errs := make([]error, 2*n)
	for i := range 2 * n {
		wg.Go(func() {
			errs[i] = rt.Start(ctx, h.Pod(fmt.Sprintf("conc-%d", i%n), Behavior{Sleep: 200 * time.Millisecond, Exit: i % n}))
		})
	}
	wg.Wait()
	for i := range n {
		a, b := errs[i], errs[i+n]
		ok := (a == nil) != (b == nil) && (errors.Is(a, runtime.ErrExists) || errors.Is(b, runtime.ErrExists))
		if !ok {
			t.Errorf("conc-%d: the two Starts returned %v and %v; want one success and one ErrExists", i, a, b)
		}
	}
	for i := range n {
		id := fmt.Sprintf("conc-%d", i)
		t.Cleanup(func() {
			_ = rt.Stop(context.Background(), id, 0)
			_ = rt.Remove(context.Background(), id)
		})
	}
	for i := range n {
		id := fmt.Sprintf("conc-%d", i)
		if e := wait(t, ctx, rt, id); e.Code != i {
			t.Errorf("Wait(%s) = %+v, want code %d", id, e, i)
		}
		remove(t, ctx, h, rt, id)
	}
}
