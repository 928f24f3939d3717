package nodelet_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/internal/seedtest"
	"github.com/sluicehq/sluice/nodelet"
	"github.com/sluicehq/sluice/nodelet/cgroup"
	"github.com/sluicehq/sluice/nodelet/runtime"
	"github.com/sluicehq/sluice/nodelet/runtime/sim"
)

// simPod is a desired pod for the sim runtime: it runs forever when
// runFor is 0, else for runFor and then exits with code.
func simPod(id string, gen int64, runFor time.Duration, code int) nodelet.DesiredPod {
	p := api.PodSpec{Containers: []api.ContainerSpec{{
		Name:      "c0",
		Image:     api.Image{Rootfs: "/sim"},
		Command:   []string{"/bin/work"},
		Resources: api.Resources{CPU: 100, Memory: 64 << 20},
	}}}
	if runFor > 0 {
		p.Sim = &api.SimSpec{RunTime: api.Duration(runFor), ExitCode: int32(code)}
	}
	return nodelet.DesiredPod{ID: id, TaskID: "task-" + id, Generation: gen, Tier: cgroup.Offline, Pod: &p}
}

type harness struct {
	t     *testing.T
	host  *sim.Host
	rt    *countingRuntime
	disp  *fakeDispatcher
	agent *nodelet.Agent
	errc  chan error
	// resync is the agent's ResyncPeriod.
	resync time.Duration
}

func newHarness(t *testing.T, host *sim.Host, disp *fakeDispatcher, tweak func(*nodelet.Config)) *harness {
	t.Helper()
	h := &harness{t: t, host: host, rt: newCounting(sim.New(host)), disp: disp, errc: make(chan error, 1)}
	cfg := nodelet.Config{
		Node: "n1", Runtime: h.rt, Dispatcher: disp,
		StopGrace: time.Second, RetryMin: time.Millisecond, RetryMax: 10 * time.Millisecond,
		ResyncPeriod: 20 * time.Millisecond,
	}
	if tweak != nil {
		tweak(&cfg)
	}
	a, err := nodelet.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	h.agent, h.resync = a, cfg.ResyncPeriod
	go func() { h.errc <- a.Run(context.Background()) }()
	t.Cleanup(func() { h.close() })
	return h
}

// barrier returns once the agent's loop has settled what it took before:
// a kill of an unknown pod is answered by the loop between two of its
// settles. It does not wait for what the loop has not taken yet, nor for
// the runtime calls the loop handed to goroutines (a non-immediate
// runtime's Start): a check after it sees those only if they ran first.
func (h *harness) barrier() {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.agent.Kill(ctx, "no-such-pod", "barrier"); err != nil {
		h.t.Fatalf("barrier: %v", err)
	}
}

// resyncs moves clk, the agent's Clock, through n resync periods, each
// followed by a barrier, so that what a resync does (retry the runtime
// calls that failed) has been done when it returns. The loop may take a
// barrier's kill before a tick that waits beside it; the next period's
// barrier then covers that tick.
func (h *harness) resyncs(clk *clock.Manual, n int) {
	h.t.Helper()
	for range n {
		clk.Advance(h.resync)
		h.barrier()
	}
}

func (h *harness) close() {
	if h.agent == nil {
		return
	}
	_ = h.agent.Close()
	if err := <-h.errc; err != nil {
		h.t.Errorf("Run: %v", err)
	}
	h.agent = nil
}

func TestConfigValidate(t *testing.T) {
	_, err := nodelet.New(nodelet.Config{CgroupRoot: "/abs", StopGrace: -1, RetryMin: time.Second, RetryMax: time.Millisecond,
		ReportBatch: api.MaxItemsPerRequest + 1})
	if err == nil {
		t.Fatal("New(bad config) succeeded")
	}
	for _, want := range []string{"Node is required", "Runtime is required", "Dispatcher is required", "CgroupRoot", "StopGrace", "RetryMin",
		fmt.Sprintf("ReportBatch %d", api.MaxItemsPerRequest+1)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	host := sim.NewHost()
	defer host.Close()
	if _, err := nodelet.New(nodelet.Config{Node: "n", Runtime: sim.New(host), Dispatcher: newFakeDispatcher(), ReportBatch: -1}); err == nil || !strings.Contains(err.Error(), "ReportBatch -1") {
		t.Errorf("New(ReportBatch -1) = %v, want an error naming it", err)
	}
}

func TestReconcileStartsStopsAndReports(t *testing.T) {
	host := sim.NewHost()
	defer host.Close()
	d := newFakeDispatcher()
	h := newHarness(t, host, d, nil)

	d.setTarget(1, simPod("a", 1, 0, 0), simPod("b", 1, 0, 0))
	eventually(t, 5*time.Second, "a and b running", func() bool {
		return slices.Equal(running(t, h.rt), []string{"a/1", "b/1"}) && len(d.find("b", api.TaskRunning)) == 1
	})
	if r := d.find("a", api.TaskRunning); len(r) != 1 || r[0].TaskID != "task-a" || r[0].Reason != api.ReasonStarted {
		t.Errorf("running reports of a = %+v", r)
	}

	// a goes, c comes and exits with 3, b moves to generation 2.
	d.setTarget(2, simPod("b", 2, 0, 0), simPod("c", 1, 5*time.Millisecond, 3))
	eventually(t, 5*time.Second, "a stopped, c exited and both removed, b restarted", func() bool {
		l := listed(t, h.rt)
		_, hasA := l["a"]
		_, hasC := l["c"]
		return !hasA && !hasC && slices.Equal(running(t, h.rt), []string{"b/2"}) && h.agent.Stats().PendingReports == 0
	})
	if r := d.find("a", api.TaskKilled); len(r) != 1 || r[0].Reason != api.ReasonStopped {
		t.Errorf("a's final reports = %+v, want killed/stopped", r)
	}
	if r := d.find("c", api.TaskFailed); len(r) != 1 || r[0].ExitCode != 3 || r[0].Reason != api.ReasonExited {
		t.Errorf("c's final reports = %+v, want failed with code 3", r)
	}
	if r := d.find("b", api.TaskKilled); len(r) != 1 || r[0].Generation != 1 {
		t.Errorf("b generation 1 final = %+v", r)
	}
	// c ended but is still desired: it must not start again.
	h.barrier()
	for k, n := range h.rt.startCounts() {
		if n != 1 {
			t.Errorf("%s started %d times", k, n)
		}
	}
	if s := h.agent.Stats(); s.Generation != 2 || s.Running != 1 || s.Starts != 4 || s.Removed != 3 {
		t.Errorf("stats = %+v", s)
	}
}

func TestStartFailuresReported(t *testing.T) {
	host := sim.NewHost()
	defer host.Close()
	d := newFakeDispatcher()
	clk := clock.NewManual(time.Time{})
	h := newHarness(t, host, d, func(c *nodelet.Config) { c.Clock = clk })
	h.rt.mu.Lock()
	h.rt.fail["boom"] = errors.New("disk on fire")
	denied := &runtime.SpecError{}
	denied.AddErr(runtime.ErrImageDenied, "containers[0].image.rootfs", "/etc is not below an image root")
	h.rt.fail["denied"] = fmt.Errorf("start pod %q: %w", "denied", denied.Err())
	h.rt.mu.Unlock()

	noContainers := simPod("empty", 1, 0, 0)
	noContainers.Pod.Containers = nil
	badTier := simPod("tier", 1, 0, 0)
	badTier.Tier = "gold"
	badID := simPod("../x", 1, 0, 0)
	d.setTarget(1, simPod("boom", 1, 0, 0), simPod("denied", 1, 0, 0), noContainers, badTier, badID, simPod("ok", 1, 0, 0), simPod("ok", 7, 0, 0))
	want := map[string]string{
		"boom":   "disk on fire",
		"denied": "containers[0].image.rootfs: /etc is not below an image root",
		"empty":  "containers",
		"tier":   `tier "gold"`,
		"../x":   "pod id",
		"ok":     "appears twice",
	}
	eventually(t, 5*time.Second, "every failure reported", func() bool {
		n := 0
		for id := range want {
			n += len(d.find(id, api.TaskFailed))
		}
		return n == len(want) && len(d.find("ok", api.TaskRunning)) == 1
	})
	for id, msg := range want {
		reason := api.ReasonStartFailed
		if id == "denied" {
			reason = api.ReasonImageDenied
		}
		r := d.find(id, api.TaskFailed)
		if len(r) != 1 || r[0].Reason != reason || !strings.Contains(r[0].Message, msg) {
			t.Errorf("%s: failure reports %+v, want one %s mentioning %q", id, r, reason, msg)
		}
	}
	// Failed pods are not retried while the target stays, resyncs
	// included. A retry of a pod refused before the runtime is counted in
	// the loop, which the barriers wait for; one of boom's would be
	// counted by a goroutine the loop starts, which they do not. The
	// second ok is refused with the target, not counted as a start.
	h.resyncs(clk, 3)
	if n, wantN := h.agent.Stats().StartFailures, uint64(len(want)-1); n != wantN {
		t.Errorf("%d start failures counted, want %d", n, wantN)
	}
	if n := h.rt.startCounts()["boom/1"]; n != 1 {
		t.Errorf("boom started %d times, want 1", n)
	}
	if got := running(t, h.rt); !slices.Equal(got, []string{"ok/1"}) {
		t.Errorf("running = %v", got)
	}
}

func TestReportsRetriedUntilAcknowledged(t *testing.T) {
	host := sim.NewHost()
	defer host.Close()
	d := newFakeDispatcher()
	d.failNext(5)
	h := newHarness(t, host, d, nil)
	d.setTarget(1, simPod("quick", 1, time.Millisecond, 0), simPod("long", 1, 0, 0))
	eventually(t, 5*time.Second, "reports delivered", func() bool {
		return len(d.find("quick", api.TaskSucceeded)) == 1 && len(d.find("long", api.TaskRunning)) == 1
	})
	eventually(t, 5*time.Second, "quick removed", func() bool {
		_, ok := listed(t, h.rt)["quick"]
		return !ok
	})
	if s := h.agent.Stats(); s.ReportErrors != 5 {
		t.Errorf("ReportErrors = %d, want 5", s.ReportErrors)
	}
	// In order: quick's running report comes before its exit.
	var seq []string
	for _, r := range d.allReports() {
		if r.PodID == "quick" {
			seq = append(seq, r.State.String())
		}
	}
	if !slices.Equal(seq, []string{"running", "succeeded"}) {
		t.Errorf("quick's reports = %v", seq)
	}
}

func TestEndedPodKeptUntilReported(t *testing.T) {
	host := sim.NewHost()
	defer host.Close()
	d := newFakeDispatcher()
	d.failNext(1 << 30)
	h := newHarness(t, host, d, nil)
	d.setTarget(1, simPod("quick", 1, time.Millisecond, 0))
	eventually(t, 5*time.Second, "quick exited", func() bool {
		s, ok := listed(t, h.rt)["quick"]
		return ok && s.State == runtime.StateExited
	})
	eventually(t, 5*time.Second, "reports failing", func() bool { return h.agent.Stats().ReportErrors >= 3 })
	h.barrier()
	if _, ok := listed(t, h.rt)["quick"]; !ok {
		t.Fatal("pod removed before its report was acknowledged")
	}
	d.failNext(0)
	eventually(t, 5*time.Second, "quick reported and removed", func() bool {
		_, ok := listed(t, h.rt)["quick"]
		return !ok && len(d.find("quick", api.TaskSucceeded)) == 1
	})
}

func TestKillAndPodSource(t *testing.T) {
	host := sim.NewHost()
	defer host.Close()
	d := newFakeDispatcher()
	h := newHarness(t, host, d, nil)
	on := simPod("on", 1, 0, 0)
	on.Tier = cgroup.Online
	off := simPod("off", 1, 0, 0)
	off.Priority = 3
	d.setTarget(1, on, off)
	eventually(t, 5*time.Second, "two pods listed", func() bool { return len(h.agent.Pods()) == 2 })
	pods := h.agent.Pods()
	if pods[0].ID != "off" || pods[0].Tier != cgroup.Offline || pods[0].Priority != 3 || pods[0].Request.CPUMillis != 100 ||
		pods[1].ID != "on" || pods[1].Tier != cgroup.Online || pods[0].StartedAt.IsZero() {
		t.Errorf("Pods() = %+v", pods)
	}
	ctx := context.Background()
	if err := h.agent.Kill(ctx, "off", "memory low: 3% available"); err != nil {
		t.Fatal(err)
	}
	if err := h.agent.Kill(ctx, "nosuch", "x"); err != nil {
		t.Errorf("Kill(unknown) = %v, want nil", err)
	}
	eventually(t, 5*time.Second, "kill reported", func() bool { return len(d.find("off", api.TaskKilled)) == 1 })
	r := d.find("off", api.TaskKilled)[0]
	if r.Reason != api.ReasonMemoryKiller || r.Message != "memory low: 3% available" {
		t.Errorf("kill report = %+v", r)
	}
	// Still desired, but killed: not started again.
	h.barrier()
	if got := running(t, h.rt); !slices.Equal(got, []string{"on/1"}) {
		t.Errorf("running = %v", got)
	}
	h.close()
	if err := h.agent; err != nil {
		t.Fatal("agent not cleared")
	}
}

func TestKillAfterClose(t *testing.T) {
	host := sim.NewHost()
	defer host.Close()
	h := newHarness(t, host, newFakeDispatcher(), nil)
	a := h.agent
	h.close()
	if err := a.Kill(context.Background(), "x", "y"); !errors.Is(err, nodelet.ErrNotRunning) {
		t.Errorf("Kill after Close = %v, want ErrNotRunning", err)
	}
	if err := a.Run(context.Background()); !errors.Is(err, nodelet.ErrAlreadyRun) {
		t.Errorf("second Run = %v", err)
	}
}

// TestRecoveryAdopts restarts the agent over the same sim host: running
// pods that are still desired are adopted (not started again), an
// undesired one is stopped, and one that ended while no agent ran is
// reported.
func TestRecoveryAdopts(t *testing.T) {
	host := sim.NewHost()
	defer host.Close()
	d := newFakeDispatcher()
	h1 := newHarness(t, host, d, nil)
	d.setTarget(1, simPod("keep", 1, 0, 0), simPod("drop", 1, 0, 0), simPod("away", 1, 100*time.Millisecond, 4))
	eventually(t, 5*time.Second, "three running", func() bool { return len(running(t, h1.rt)) == 3 })
	h1.close()
	eventually(t, 5*time.Second, "away ended, unobserved", func() bool {
		return listed(t, sim.New(host))["away"].State == runtime.StateExited
	})
	before := listed(t, sim.New(host))

	d.setTarget(2, simPod("keep", 1, 0, 0), simPod("away", 1, 100*time.Millisecond, 4))
	h2 := newHarness(t, host, d, nil)
	eventually(t, 5*time.Second, "drop stopped, away reported and removed", func() bool {
		l := listed(t, h2.rt)
		_, hasDrop := l["drop"]
		_, hasAway := l["away"]
		return !hasDrop && !hasAway && len(d.find("away", api.TaskFailed)) == 1
	})
	if n := len(h2.rt.startCounts()); n != 0 {
		t.Errorf("new agent started %v", h2.rt.startCounts())
	}
	after := listed(t, h2.rt)
	if !after["keep"].StartedAt.Equal(before["keep"].StartedAt) || after["keep"].State != runtime.StateRunning {
		t.Errorf("keep = %+v, want the same running pod as %+v", after["keep"], before["keep"])
	}
	if r := d.find("away", api.TaskFailed); r[0].ExitCode != 4 || r[0].TaskID != "task-away" {
		t.Errorf("away's report = %+v", r[0])
	}
	if r := d.find("keep", api.TaskRunning); len(r) != 2 || r[1].TaskID != "task-keep" {
		t.Errorf("keep's running reports = %+v, want the first and one after adoption", r)
	}
	if s := h2.agent.Stats(); s.Adopted != 2 || s.Running != 1 {
		t.Errorf("stats = %+v", s)
	}
	// The adopted pod's request comes from its target, as a started
	// pod's does: the overcommit loop and its resource file go by it.
	eventually(t, 5*time.Second, "keep's request known", func() bool {
		pods := h2.agent.Pods()
		return len(pods) == 1 && pods[0].Request.CPUMillis == 100 && pods[0].Request.MemoryBytes == 64<<20
	})
}

// TestRandomTargetsConverge applies random target sequences and checks
// that the running pods converge to the last target, that no pod
// (ID and generation) starts twice, and that every end is reported.
// TestRandomTargetsConverge runs random targets through an agent: whole
// or as changes since the last (a few of those with a wrong base, which
// the agent must answer by asking for the whole), over a runtime the agent
// waits on or one that calls back, called from goroutines or, for a
// runtime.Immediate, from the agent's loop.
func TestRandomTargetsConverge(t *testing.T) {
	r := seedtest.Rand(t)
	for _, tc := range []struct {
		name  string
		diffs bool
		rt    string
	}{
		{"whole targets, waits", false, "waits"},
		{"changes, waits", true, "waits"},
		{"whole targets, callbacks", false, "callbacks"},
		{"changes, callbacks", true, "callbacks"},
		{"changes, immediate, waits", true, "immediate waits"},
		{"whole targets, immediate, callbacks", false, "immediate callbacks"},
		{"changes, immediate, callbacks", true, "immediate callbacks"},
	} {
		t.Run(tc.name, func(t *testing.T) { randomTargetsConverge(t, r, tc.diffs, tc.rt) })
	}
}

func randomTargetsConverge(t *testing.T, r *rand.Rand, diffs bool, rt string) {
	host := sim.NewHost()
	defer host.Close()
	d := newFakeDispatcher()
	d.diffs = diffs
	if diffs {
		d.wrongBase = r.IntN(3)
	}
	h := newHarness(t, host, d, func(c *nodelet.Config) {
		c.MaxConcurrentStarts = 1 + r.IntN(8)
		counting := c.Runtime.(*countingRuntime)
		switch rt {
		case "callbacks":
			c.Runtime = notifyingRuntime{counting}
		case "immediate waits":
			c.Runtime = immediateRuntime{counting}
		case "immediate callbacks":
			c.Runtime = immediateNotifyingRuntime{notifyingRuntime{counting}}
		}
	})
	if r.IntN(2) == 0 {
		d.failNext(r.IntN(10))
	}
	const ids = 30
	gen := make([]int64, ids)
	in := make([]bool, ids)
	var last []nodelet.DesiredPod
	for round := 1; round <= 40; round++ {
		last = nil
		for i := range ids {
			want := r.IntN(3) == 0
			if want && (!in[i] || r.IntN(10) == 0) {
				gen[i]++ // new pod of the task, or a replacement
			}
			in[i] = want
			if !want {
				continue
			}
			var runFor time.Duration
			if i%5 == 0 {
				runFor = time.Duration(1+r.IntN(20)) * time.Millisecond
			}
			last = append(last, simPod(fmt.Sprintf("p%02d", i), gen[i], runFor, 0))
		}
		r.Shuffle(len(last), func(i, j int) { last[i], last[j] = last[j], last[i] })
		d.setTarget(uint64(round), last...)
		// The seeded choice of interleaving: the agent takes this target
		// before the next comes, or the target changes again while the
		// agent may still be at an older one.
		if r.IntN(2) == 0 {
			eventually(t, 10*time.Second, fmt.Sprintf("generation %d taken", round), func() bool {
				return h.agent.Stats().Generation >= uint64(round)
			})
		}
	}
	var want []string
	for _, p := range last {
		if p.Pod.Sim == nil {
			want = append(want, fmt.Sprintf("%s/%d", p.ID, p.Generation))
		}
	}
	slices.Sort(want)
	eventually(t, 20*time.Second, "convergence", func() bool {
		return slices.Equal(running(t, h.rt), want) && len(listed(t, h.rt)) == len(want) &&
			h.agent.Stats().PendingReports == 0 && h.agent.Stats().Generation == 40
	})
	if diffs {
		d.mu.Lock()
		sent, wrong := d.sentDiffs, d.sentWrong
		d.mu.Unlock()
		if sent == 0 || h.agent.Stats().TargetErrors != uint64(wrong) {
			t.Errorf("%d targets sent as changes, %d of them with a wrong base; the agent counted %d target errors", sent, wrong, h.agent.Stats().TargetErrors)
		}
	}
	// The pods published to the overcommit loop, kept up to date pod by
	// pod, are exactly the running ones.
	var published []string
	for _, p := range h.agent.Pods() {
		published = append(published, p.ID)
	}
	wantIDs := make([]string, 0, len(want))
	for _, k := range want {
		wantIDs = append(wantIDs, strings.Split(k, "/")[0])
	}
	if !slices.Equal(published, wantIDs) || h.agent.Stats().Running != len(want) {
		t.Errorf("published pods %v (Running %d), want %v", published, h.agent.Stats().Running, wantIDs)
	}
	for k, n := range h.rt.startCounts() {
		if n != 1 {
			t.Errorf("%s started %d times", k, n)
		}
	}
	// Every started pod that is gone has a final report.
	final := map[string]bool{}
	started := map[string]bool{}
	for _, rep := range d.allReports() {
		k := fmt.Sprintf("%s/%d", rep.PodID, rep.Generation)
		if rep.State == api.TaskRunning {
			started[k] = true
		} else {
			final[k] = true
		}
	}
	for k := range started {
		if !final[k] && !slices.Contains(want, k) {
			t.Errorf("%s ended without a final report", k)
		}
	}
	// A pod stopped before its start was seen to finish may go straight to
	// its final report; but no start goes unreported.
	for k := range h.rt.startCounts() {
		if !started[k] && !final[k] {
			t.Errorf("%s started without any report", k)
		}
	}
}

func TestEndedPodRetained(t *testing.T) {
	host := sim.NewHost()
	defer host.Close()
	d := newFakeDispatcher()
	clk := clock.NewManual(time.Time{})
	h := newHarness(t, host, d, func(c *nodelet.Config) {
		c.RetainExited = time.Minute
		c.Clock = clk
	})
	d.setTarget(1, simPod("quick", 1, time.Millisecond, 0))
	eventually(t, 5*time.Second, "quick reported", func() bool { return len(d.find("quick", api.TaskSucceeded)) == 1 })
	h.resyncs(clk, 3)
	if _, ok := listed(t, h.rt)["quick"]; !ok {
		t.Fatal("pod removed before RetainExited passed")
	}
	clk.Advance(time.Minute)
	eventually(t, 5*time.Second, "quick removed once retained long enough", func() bool {
		_, ok := listed(t, h.rt)["quick"]
		return !ok
	})
}

// TestMaxRunTime: a pod that outlives its MaxRunTime is stopped and
// reported killed for the time limit; one that ends in time is not; an
// adopted pod's limit counts from when the runtime started it, not from
// the adoption. The agents and the sim host share a manual clock.
func TestMaxRunTime(t *testing.T) {
	clk := clock.NewManual(time.Time{})
	host := sim.NewHostOn(clk)
	defer host.Close()
	d := newFakeDispatcher()
	limited := func(id string, runFor, limit time.Duration) nodelet.DesiredPod {
		p := simPod(id, 1, runFor, 0)
		p.Group = &nodelet.Group{MaxRunTime: limit}
		return p
	}
	onClock := func(c *nodelet.Config) { c.Clock = clk }
	// driven is cond, after moving the clock by 5ms: time passes as the
	// test waits.
	driven := func(cond func() bool) func() bool {
		return func() bool {
			clk.Advance(5 * time.Millisecond)
			return cond()
		}
	}
	h1 := newHarness(t, host, d, onClock)
	d.setTarget(1,
		limited("slow", time.Hour, 100*time.Millisecond),
		limited("quick", 10*time.Millisecond, time.Hour),
		limited("adopted", time.Hour, 1500*time.Millisecond),
		simPod("free", 1, time.Hour, 0))
	eventually(t, 5*time.Second, "four pods running", func() bool {
		return len(d.find("slow", api.TaskRunning)) == 1 && len(d.find("quick", api.TaskRunning)) == 1 &&
			len(d.find("adopted", api.TaskRunning)) == 1 && len(d.find("free", api.TaskRunning)) == 1
	})
	eventually(t, 5*time.Second, "slow killed for its time limit, quick succeeded", driven(func() bool {
		return len(d.find("slow", api.TaskKilled)) == 1 && len(d.find("quick", api.TaskSucceeded)) == 1
	}))
	r := d.find("slow", api.TaskKilled)[0]
	if r.Reason != api.ReasonTimeLimit || !strings.Contains(r.Message, "max run time of 100ms") {
		t.Errorf("slow's final report = %+v, want killed for time_limit naming the limit", r)
	}
	started := d.find("slow", api.TaskRunning)[0].Time
	if ran := r.Time.Sub(started); ran < 100*time.Millisecond || ran > 2*time.Second {
		t.Errorf("slow ran %v, want its 100ms limit (and a stop)", ran)
	}
	if len(d.find("quick", api.TaskKilled)) != 0 {
		t.Error("quick was killed")
	}

	// The agent restarts a second into "adopted"'s run; its limit still
	// ends 1.5s after its start, not 1.5s after the adoption.
	adoptedStart := d.find("adopted", api.TaskRunning)[0].Time
	clk.Advance(adoptedStart.Add(time.Second).Sub(clk.Now()))
	h1.close()
	adoptedAt := clk.Now()
	h2 := newHarness(t, host, d, onClock)
	eventually(t, 5*time.Second, "the adopted pod killed for its time limit", driven(func() bool {
		return len(d.find("adopted", api.TaskKilled)) == 1
	}))
	r = d.find("adopted", api.TaskKilled)[0]
	if r.Reason != api.ReasonTimeLimit {
		t.Errorf("adopted's final report = %+v", r)
	}
	// The pods started while the clock stood still: the running report's
	// time is the runtime's start time, from which the limit counts; a
	// limit counted from the adoption would make ran 2.5s.
	if ran, since := r.Time.Sub(adoptedStart), r.Time.Sub(adoptedAt); ran < 1500*time.Millisecond || since >= 1500*time.Millisecond {
		t.Errorf("adopted stopped %v after its start and %v after the adoption; want its limit counted from the start", ran, since)
	}
	if got := running(t, h2.rt); !slices.Equal(got, []string{"free/1"}) {
		t.Errorf("running = %v, want only the pod without a limit", got)
	}
}

// signalingDispatcher is a fakeDispatcher that says when a Report call
// has returned.
type signalingDispatcher struct {
	*fakeDispatcher
	reported chan error
}

func (s signalingDispatcher) Report(ctx context.Context, node string, rs []nodelet.PodReport) error {
	err := s.fakeDispatcher.Report(ctx, node, rs)
	s.reported <- err
	return err
}

// TestReportBackoff: failed Report calls are retried after RetryMin, then
// after twice the last wait up to RetryMax, on the agent's clock; a call
// that succeeds ends the retries.
func TestReportBackoff(t *testing.T) {
	host := sim.NewHost()
	defer host.Close()
	d := signalingDispatcher{fakeDispatcher: newFakeDispatcher(), reported: make(chan error, 16)}
	d.failNext(1 << 30)
	clk := clock.NewManual(time.Time{})
	newHarness(t, host, d.fakeDispatcher, func(c *nodelet.Config) {
		c.Dispatcher = d
		c.Clock = clk
		c.RetryMin, c.RetryMax = 10*time.Millisecond, 50*time.Millisecond
		c.ResyncPeriod = time.Hour // its ticker is never the earliest timer
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	next := func(what string) error {
		t.Helper()
		select {
		case err := <-d.reported:
			return err
		case <-ctx.Done():
			t.Fatalf("no Report call %s", what)
			return nil
		}
	}
	d.setTarget(1, simPod("a", 1, 0, 0))
	if err := next("for a's start"); err == nil {
		t.Fatal("the first Report call succeeded, want it to fail")
	}
	for i, want := range []time.Duration{10, 20, 40, 50, 50} {
		want *= time.Millisecond
		if err := clk.WaitTimers(ctx, 2); err != nil { // the resync ticker and the backoff
			t.Fatal(err)
		}
		if got, _ := clk.Next(); got != want {
			t.Fatalf("wait after failure %d = %v, want %v", i+1, got, want)
		}
		if i == 4 {
			d.failNext(0)
		}
		clk.Advance(want)
		if err := next("after the wait"); (err == nil) != (i == 4) {
			t.Fatalf("Report call %d = %v", i+2, err)
		}
	}
	eventually(t, 5*time.Second, "a's report acknowledged", func() bool { return len(d.find("a", api.TaskRunning)) == 1 })
	if n := clk.Timers(); n != 1 {
		t.Errorf("%d timers armed once reports went through, want only the resync ticker", n)
	}
}

// flakyRemove is a runtime whose first Remove calls fail.
type flakyRemove struct {
	runtime.Runtime
	fails atomic.Int64 // Remove calls left to fail
	calls atomic.Int64
}

func (f *flakyRemove) Remove(ctx context.Context, id string) error {
	f.calls.Add(1)
	if f.fails.Add(-1) >= 0 {
		return errors.New("fake: device busy")
	}
	return f.Runtime.Remove(ctx, id)
}

// TestResyncRetriesFailedRemove: a Remove that failed is tried again at
// the next resync, on the agent's clock, and not before.
func TestResyncRetriesFailedRemove(t *testing.T) {
	host := sim.NewHost()
	defer host.Close()
	d := newFakeDispatcher()
	clk := clock.NewManual(time.Time{})
	var rt *flakyRemove
	h := newHarness(t, host, d, func(c *nodelet.Config) {
		rt = &flakyRemove{Runtime: c.Runtime}
		rt.fails.Store(1)
		c.Runtime = rt
		c.Clock = clk
	})
	d.setTarget(1, simPod("quick", 1, time.Millisecond, 0))
	eventually(t, 5*time.Second, "quick's Remove failed", func() bool { return h.agent.Stats().OpErrors == 1 })
	h.barrier()
	if n := rt.calls.Load(); n != 1 {
		t.Fatalf("%d Remove calls before a resync, want the one that failed", n)
	}
	if _, ok := listed(t, h.rt)["quick"]; !ok {
		t.Fatal("quick is gone though its Remove failed")
	}
	clk.Advance(20 * time.Millisecond) // the harness's ResyncPeriod
	eventually(t, 5*time.Second, "quick removed at the resync", func() bool {
		_, ok := listed(t, h.rt)["quick"]
		return !ok
	})
	if n, s := rt.calls.Load(), h.agent.Stats(); n != 2 || s.Removed != 1 || s.OpErrors != 1 {
		t.Errorf("%d Remove calls, stats %+v; want 2 calls, 1 removed, 1 error", n, s)
	}
}
