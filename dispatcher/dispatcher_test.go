package dispatcher_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/dispatcher"
	"github.com/sluicehq/sluice/dispatcher/fsm"
	"github.com/sluicehq/sluice/raftkv"
)

func TestConfigValidate(t *testing.T) {
	_, err := dispatcher.New(dispatcher.Config{MaxTasks: -1, Period: -time.Second,
		QueueWeights: map[string]int64{"ok": 3, "zero": 0, "": 1, "huge": 1001}, EstimateHeadroom: -0.5,
		HistoryMax: dispatcher.MaxHistoryMax + 1})
	if !errors.Is(err, dispatcher.ErrConfig) {
		t.Fatalf("New: %v, want ErrConfig", err)
	}
	for _, want := range []string{"Raft is required", "FSM is required", "MaxTasks", "Period",
		`QueueWeights[""] = 1`, `QueueWeights["zero"] = 0`, `QueueWeights["huge"] = 1001`, "EstimateHeadroom -0.5", "HistoryMax 10000001"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestSubmitRunSucceed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := newCluster(t, 1, nil)
	led := &ledger{}
	for i := range 4 {
		c.startNode(ctx, nodeSpec(fmt.Sprint("n", i), 4000), led)
	}
	var specs []api.JobSpec
	for i := range 3 {
		specs = append(specs, jobSpec(fmt.Sprint("job", i), 50, 100, 0, 20*time.Millisecond))
	}
	r := c.leader()
	ids, _, err := r.d.Submit(ctx, specs)
	if err != nil {
		t.Fatalf("Submit: %v", err)
	}
	if len(ids) != 3 {
		t.Fatalf("ids %v", ids)
	}
	c.waitChange(t, 20*time.Second, "jobs to succeed", func() bool { return jobsIn(r.f, ids, fsm.JobSucceeded) })
	checkInvariants(t, r.f)
	led.mu.Lock()
	if len(led.started) != 150 {
		t.Errorf("%d tasks started, want 150", len(led.started))
	}
	for k, runs := range led.started {
		if len(runs) != 1 {
			t.Errorf("task %s started %d times: %v", k, len(runs), runs)
		}
	}
	led.mu.Unlock()
	s := r.d.RoundSummary()
	if s.Placed != 150 || s.Rounds == 0 {
		t.Errorf("summary %+v: want 150 placed", s)
	}
	t.Logf("rounds %d placed %d rejected %d p50 %v p99 %v solver share %.2f", s.Rounds, s.Placed, s.Rejected, s.P50, s.P99, s.SolverShare)
}

func TestTargetLongPoll(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := newCluster(t, 1, nil)
	r := c.leader()
	if err := r.d.Register(ctx, nodeSpec("n0", 1000)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.d.Target(ctx, "nope", 0); !errors.Is(err, dispatcher.ErrUnknownNode) {
		t.Errorf("Target of an unknown node: %v", err)
	}
	tg, err := r.d.Target(ctx, "n0", 99)
	if err != nil {
		t.Fatal(err)
	}
	if len(tg.Pods) != 0 {
		t.Fatalf("target %+v, want empty", tg)
	}
	got := make(chan dispatcher.Target, 1)
	go func() {
		tg, err := r.d.Target(ctx, "n0", tg.Generation)
		if err != nil {
			t.Error(err)
		}
		got <- tg
	}()
	select {
	case <-got:
		t.Fatal("Target returned before the target changed")
	case <-time.After(50 * time.Millisecond):
	}
	if _, _, err := r.d.Submit(ctx, []api.JobSpec{jobSpec("j", 2, 100, 0, time.Hour)}); err != nil {
		t.Fatal(err)
	}
	select {
	case tg := <-got:
		if len(tg.Pods) != 2 {
			t.Errorf("target %+v, want 2 pods", tg)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("long-poll did not wake on the placement")
	}
	pctx, pcancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer pcancel()
	if _, err := r.d.Target(pctx, "n0", 1<<60); err != nil {
		t.Fatal(err) // generation differs: at once
	}
}

// TestAbandonedPollDoesNotKeepANodeUp runs the leader on a manual clock:
// a long-poll its node opened and then abandoned (a cut network, whose
// connection the server still holds) ends at half the TTL and does not
// keep the node up; a node that polls again each time stays up with no
// other contact.
func TestAbandonedPollDoesNotKeepANodeUp(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const ttl, every, step = 300 * time.Millisecond, 20 * time.Millisecond, 30 * time.Millisecond
	cl := clock.NewManual(time.Time{})
	r := livenessLeader(ctx, t, ttl, every, 2000, cl, "cut", "polling")
	start := cl.Now()
	// The polls' context has no deadline: a poll that ends with
	// DeadlineExceeded ended at its bound.
	pctx, pcancel := context.WithCancel(context.Background())
	defer pcancel()
	// poll opens a long-poll of name that waits (its target is unchanged)
	// and returns its outcome's channel once the poll is armed on the
	// clock, whose only other timer is the leader's loop's.
	open := 0
	poll := func(name string) <-chan error {
		t.Helper()
		gen, _ := r.f.NodeGeneration(name)
		done := make(chan error, 1)
		go func() {
			_, err := r.d.Target(pctx, name, gen)
			done <- err
		}()
		open++
		settle(t, r.d)
		if err := cl.WaitTimers(ctx, 1+open); err != nil {
			t.Fatalf("the poll of %s is not armed: %v", name, err)
		}
		return done
	}
	// ended waits for the outcome of a poll whose bound went off.
	ended := func(name string, done <-chan error) {
		t.Helper()
		select {
		case err := <-done:
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("the poll of %s ended with %v, want DeadlineExceeded", name, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("the poll of %s did not end after its bound went off", name)
		}
	}
	state := func(name string) api.NodeState {
		for _, n := range r.f.Nodes() {
			if n.Spec.Name == name {
				return n.State
			}
		}
		return ""
	}
	settle(t, r.d)
	cutPoll := poll("cut") // the one poll of the cut node
	polling, pollStart := poll("polling"), start
	for elapsed := step; elapsed <= 4*ttl; elapsed += step {
		settle(t, r.d)
		cl.Advance(step)
		settle(t, r.d)
		// A bound goes off inside Advance: the timers still armed, the
		// loop's and those of the polls not yet due, say whether each
		// went off exactly when due.
		cutDue := elapsed == ttl/2
		pollingDue := cl.Now().Sub(pollStart) >= ttl/2
		if cutDue {
			open--
		}
		if pollingDue {
			open--
		}
		if n := cl.Timers(); n != 1+open {
			t.Fatalf("after %v, %d timers armed, want the loop's and %d polls' (the cut poll due %v, the polling one %v)",
				elapsed, n, open, cutDue, pollingDue)
		}
		if cutDue {
			ended("cut", cutPoll)
		}
		if pollingDue {
			ended("polling", polling)
			polling, pollStart = poll("polling"), cl.Now()
		}
		if s := state("polling"); s != api.NodeReady {
			t.Fatalf("after %v, the node that keeps polling is %s, want ready", elapsed, s)
		}
		// The cut node's last contact is its poll's start: down at the
		// first liveness check a TTL after it.
		switch cut := state("cut"); {
		case elapsed < ttl && cut != api.NodeReady:
			t.Fatalf("after %v, the cut node is %s before its TTL passed", elapsed, cut)
		case elapsed >= ttl+every && cut != api.NodeDown:
			t.Fatalf("after %v, the cut node is %s, want down a liveness check after its TTL", elapsed, cut)
		}
	}
}

func TestNodeDownTasksRetried(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := newCluster(t, 1, func(cfg *dispatcher.Config) {
		cfg.NodeTTL, cfg.NodeTTLPerNode, cfg.LivenessEvery = 300*time.Millisecond, -1, 20*time.Millisecond
	})
	led := &ledger{}
	var nodes []*fakeNode
	for i := range 3 {
		nodes = append(nodes, c.startNode(ctx, nodeSpec(fmt.Sprint("n", i), 2000), led))
	}
	r := c.leader()
	// 6 tasks of 500m on 3 nodes of 2000m: spread over the nodes.
	ids, _, err := r.d.Submit(ctx, []api.JobSpec{jobSpec("long", 6, 500, 0, time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	active := func() int64 { j, _ := r.f.Job(ids[0]); return j.Groups[0].Active }
	waitFor(t, 10*time.Second, "6 tasks started", func() bool {
		led.mu.Lock()
		defer led.mu.Unlock()
		return active() == 6 && len(led.started) == 6
	})
	victim := ""
	for _, n := range r.f.Nodes() {
		if n.Tasks > 0 {
			victim = n.Spec.Name
			break
		}
	}
	for _, n := range nodes {
		if n.name == victim {
			n.stop()
		}
	}
	state := func(name string) api.NodeState {
		for _, n := range r.f.Nodes() {
			if n.Spec.Name == name {
				return n.State
			}
		}
		return ""
	}
	c.waitChange(t, 5*time.Second, "the silent node to go down", func() bool { return state(victim) == api.NodeDown })
	for _, n := range r.f.Nodes() {
		if n.Spec.Name != victim && n.State != api.NodeReady {
			t.Errorf("node %s is %s, want ready", n.Spec.Name, n.State)
		}
	}
	waitFor(t, 10*time.Second, "the lost tasks to run elsewhere", func() bool {
		_, pods, _ := r.f.NodeTarget(victim)
		if active() != 6 || len(pods) != 0 {
			return false
		}
		// Placed again is not yet started again: wait for the nodes too.
		led.mu.Lock()
		defer led.mu.Unlock()
		for _, runs := range led.started {
			if len(runs) > 1 {
				return true
			}
		}
		return false
	})
	checkInvariants(t, r.f)
	led.mu.Lock()
	defer led.mu.Unlock()
	retried := 0
	for k, runs := range led.started {
		if len(runs) > 1 {
			retried++
			if len(runs) != 2 {
				t.Errorf("task %s started %d times: %v", k, len(runs), runs)
			}
		}
	}
	if retried == 0 {
		t.Error("no task was retried")
	}
}

// TestHeartbeatKeepsNodeAlive: a node that only heartbeats (no long-poll,
// no report) outlives its TTL, while a silent one goes down; the leader
// remembers the last usage and its time. The Dispatcher runs on a manual
// clock: the TTLs pass in steps, each checked once the loop settled.
func TestHeartbeatKeepsNodeAlive(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const ttl, step = 200 * time.Millisecond, 10 * time.Millisecond
	clk := clock.NewManual(time.Time{})
	c := newCluster(t, 1, func(cfg *dispatcher.Config) {
		cfg.NodeTTL, cfg.NodeTTLPerNode, cfg.LivenessEvery, cfg.Clock = ttl, -1, step, clk
	})
	r := c.leader()
	for _, name := range []string{"beating", "silent"} {
		if err := r.d.Register(ctx, nodeSpec(name, 1000)); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.d.Heartbeat(ctx, "nobody", api.NodeUsage{}); !errors.Is(err, dispatcher.ErrUnknownNode) {
		t.Errorf("Heartbeat of an unknown node: %v, want ErrUnknownNode", err)
	}
	if err := r.d.Heartbeat(ctx, "beating", api.NodeUsage{Total: api.Usage{CPU: -1}}); !errors.Is(err, api.ErrInvalid) {
		t.Errorf("Heartbeat with a negative usage: %v, want api.ErrInvalid", err)
	}
	if _, _, ok := r.d.NodeUsage("beating"); ok {
		t.Error("a usage was recorded before any valid heartbeat")
	}

	usage := func(i int) api.NodeUsage {
		on, off := api.Usage{CPU: 100, Memory: 1 << 20}, api.Usage{CPU: int64(i), Memory: 2 << 20}
		return api.NodeUsage{Total: api.Usage{CPU: on.CPU + off.CPU, Memory: on.Memory + off.Memory}, Online: on, Offline: off}
	}
	state := func(name string) api.NodeState {
		for _, n := range r.f.Nodes() {
			if n.Spec.Name == name {
				return n.State
			}
		}
		return ""
	}
	// Beat every 5 steps for three TTLs: the beating node stays ready
	// throughout, the silent one is down from the first check past its TTL.
	last := 0
	for i := 1; i <= int(3*ttl/step); i++ {
		if i%5 == 1 {
			if err := r.d.Heartbeat(ctx, "beating", usage(i)); err != nil {
				t.Fatalf("Heartbeat: %v", err)
			}
			last = i
		}
		clk.Advance(step)
		settle(t, r.d)
		if st := state("beating"); st != api.NodeReady {
			t.Fatalf("at %v the heartbeating node is %s, want ready", time.Duration(i)*step, st)
		}
		if want := api.NodeReady; time.Duration(i)*step >= ttl {
			want = api.NodeDown
			if st := state("silent"); st != want {
				t.Fatalf("at %v the silent node is %s, want %s", time.Duration(i)*step, st, want)
			}
		}
	}
	u, at, ok := r.d.NodeUsage("beating")
	if !ok || !reflect.DeepEqual(u, usage(last)) {
		t.Errorf("NodeUsage = %+v, %v; want the last sent %+v", u, ok, usage(last))
	}
	if want := clock.Epoch().Add(time.Duration(last-1) * step); !at.Equal(want) {
		t.Errorf("usage time %v, want %v (the last heartbeat's)", at, want)
	}
	if _, _, ok := r.d.NodeUsage("silent"); ok {
		t.Error("a usage for the node that sent none")
	}
}

func TestPrioritiesWhenCapacityShort(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := newCluster(t, 1, nil)
	r := c.leader()
	// Both jobs are pending before any capacity exists, so one round sees
	// them together.
	ids, _, err := r.d.Submit(ctx, []api.JobSpec{
		jobSpec("low", 4, 500, 1, time.Hour),
		jobSpec("high", 4, 500, 9, time.Hour),
	})
	if err != nil {
		t.Fatal(err)
	}
	led := &ledger{}
	c.startNode(ctx, nodeSpec("n0", 2000), led) // room for 4
	waitFor(t, 10*time.Second, "the high-priority job to run", func() bool {
		j, _ := r.f.Job(ids[1])
		return j.Groups[0].Active == 4
	})
	waitRounds(t, r.d, 2) // rounds that must not place the low job
	low, _ := r.f.Job(ids[0])
	if low.Groups[0].Active != 0 || low.Groups[0].Pending != 4 {
		t.Errorf("low-priority job placed while the high one needed the room: %+v", low.Groups[0])
	}
	diag := r.d.Diagnosis()
	if len(diag) == 0 || diag[0].Reason == "" {
		t.Errorf("no diagnosis for the low-priority job: %+v", diag)
	}
	checkInvariants(t, r.f)
}

// TestPreemption: a higher-priority offline job that cannot fit stops as
// few lower-priority tasks as make room, runs once the node reports them
// stopped, and the preempted tasks wait pending (requeued, not failed),
// while an equal-priority job preempts nothing.
func TestPreemption(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := newCluster(t, 1, nil)
	r := c.leader()
	led := &ledger{}
	c.startNode(ctx, nodeSpec("n0", 2000), led)
	low := jobSpec("low", 4, 500, 1, time.Hour)
	low.Retry.MaxAttempts = 1 // preemption is no failure: they come back anyway
	lowID := r.submit(t, ctx, low)
	waitFor(t, 10*time.Second, "the low-priority job to fill the node", func() bool {
		j, _ := r.f.Job(lowID)
		return j.Groups[0].Active == 4
	})
	equalID := r.submit(t, ctx, jobSpec("equal", 1, 1000, 1, time.Hour))
	waitRounds(t, r.d, 2) // rounds that must not preempt
	if tot := r.d.Totals(); tot.Preempted != 0 {
		t.Fatalf("an equal-priority job preempted %d tasks", tot.Preempted)
	}

	highID := r.submit(t, ctx, jobSpec("high", 1, 1000, 9, time.Hour))
	waitFor(t, 10*time.Second, "the high-priority job to run", func() bool {
		j, _ := r.f.Job(highID)
		return j.Groups[0].Active == 1
	})
	if tot := r.d.Totals(); tot.Preempted != 2 {
		t.Errorf("preempted %d tasks, want the 2 that make room for 1000m", tot.Preempted)
	}
	j, _ := r.f.Job(lowID)
	if g := j.Groups[0]; g.Active != 2 || g.Pending != 2 || g.Failed != 0 || g.Killed != 0 {
		t.Errorf("low job after preemption: %+v, want 2 running and 2 pending again", g)
	}
	tasks, _ := r.f.JobTasks(lowID, "", 0)
	preempted := 0
	for _, ti := range tasks {
		if ti.Reason == api.ReasonPreempted {
			preempted++
			if ti.State != api.TaskKilled {
				t.Errorf("preempted task %s is %s", ti.ID, ti.State)
			}
		}
	}
	if preempted != 2 {
		t.Errorf("%d of the low job's tasks say preempted, want 2: %+v", preempted, tasks)
	}
	if e, _ := r.f.Job(equalID); e.Groups[0].Active != 0 {
		t.Errorf("the equal-priority job took the room made for the high one: %+v", e.Groups[0])
	}
	checkInvariants(t, r.f)
}

// offsetClock is the system clock moved forward by hand: jobs submitted
// before a jump have waited that much longer.
type offsetClock struct{ off atomic.Int64 }

func (c *offsetClock) Now() time.Time { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *offsetClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	return time.AfterFunc(d, f)
}

// TestNoQueueStarves: a queue that arrives after another's hour-old
// backlog filled the node gets its fair share (half, at equal weights) as
// tasks end, not only once the backlog is done, and no more while the
// other queue is below its share.
func TestNoQueueStarves(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	clock := &offsetClock{}
	c := newCluster(t, 1, func(cfg *dispatcher.Config) {
		cfg.Clock, cfg.NodeTTL = clock, 3*time.Hour
	})
	r := c.leader()
	led := &ledger{}
	c.startNode(ctx, nodeSpec("n0", 4000), led) // room for 8
	old := jobSpec("backlog", 400, 500, 0, 100*time.Millisecond)
	old.Queue = "a"
	backlogID := r.submit(t, ctx, old)
	waitFor(t, 10*time.Second, "the backlog to fill the node", func() bool {
		j, _ := r.f.Job(backlogID)
		return j.Groups[0].Active == 8
	})
	clock.off.Store(int64(time.Hour)) // the backlog has waited an hour more
	late := jobSpec("late", 8, 500, 0, time.Hour)
	late.Queue = "b"
	lateID := r.submit(t, ctx, late)
	waitFor(t, 3*time.Second, "the late queue to reach its share", func() bool {
		j, _ := r.f.Job(lateID)
		return j.Groups[0].Active == 4
	})
	b, _ := r.f.Job(backlogID)
	ended := b.Groups[0].Succeeded
	waitFor(t, 5*time.Second, "a few more of the backlog's tasks to end", func() bool {
		b, _ := r.f.Job(backlogID)
		return b.Groups[0].Succeeded >= ended+8
	})
	j, _ := r.f.Job(lateID)
	b, _ = r.f.Job(backlogID)
	if j.Groups[0].Active != 4 || b.Groups[0].Pending == 0 {
		t.Errorf("late queue runs %d (want its share, 4) with the backlog's %d pending", j.Groups[0].Active, b.Groups[0].Pending)
	}
	checkInvariants(t, r.f)
}

// TestUsageEstimates: a node's offline capacity shrinks to what its online
// tasks leave idle by the estimates from its heartbeats (with the
// headroom), and returns to the node's static allocatable once the
// heartbeat is older than EstimateMaxAge.
func TestUsageEstimates(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := newCluster(t, 1, func(cfg *dispatcher.Config) { cfg.EstimateMaxAge = time.Second })
	r := c.leader()
	spec := nodeSpec("n0", 8000)
	spec.Allocatable.Offline = api.Capacity{CPU: 12000, Memory: 12000 << 20, Disk: 1 << 40, Ports: 1000} // 1.5× overcommit
	c.startNode(ctx, spec, &ledger{})
	online := jobSpec("online", 4, 1000, 0, time.Hour)
	online.QoS = api.QoSOnline
	onlineID := r.submit(t, ctx, online)
	waitFor(t, 10*time.Second, "the online tasks to run", func() bool {
		j, _ := r.f.Job(onlineID)
		return j.Groups[0].Active == 4
	})
	// They use 975m of their 1000m each: with 10% headroom, 4290m, which
	// leaves 3710m idle for offline work instead of the static 12000m.
	tasks, _ := r.f.JobTasks(onlineID, "", 0)
	usage := api.NodeUsage{Online: api.Usage{CPU: 3900, Memory: 400 << 20}}
	for _, ti := range tasks {
		usage.Tasks = append(usage.Tasks, api.TaskUsage{TaskID: ti.ID, QoS: api.QoSOnline, Usage: api.Usage{CPU: 975, Memory: 100 << 20}})
	}
	if err := r.d.Heartbeat(ctx, "n0", usage); err != nil {
		t.Fatal(err)
	}
	est, ok := r.d.EstimateTotals()
	if want := (dispatcher.EstimateTotals{Nodes: 1, OnlineUsage: usage.Online,
		OnlineEstimate: api.Capacity{CPU: 3900, Memory: 400 << 20}, OnlineAsked: api.Capacity{CPU: 4000, Memory: 4000 << 20}}); !ok || est != want {
		t.Errorf("EstimateTotals = %+v, %v; want %+v", est, ok, want)
	}
	offID := r.submit(t, ctx, jobSpec("offline", 12, 1000, 0, time.Hour))
	waitFor(t, 5*time.Second, "offline tasks in the idle room", func() bool {
		j, _ := r.f.Job(offID)
		return j.Groups[0].Active == 3
	})
	waitRounds(t, r.d, 2) // rounds that must not place more
	if j, _ := r.f.Job(offID); j.Groups[0].Active != 3 {
		t.Fatalf("%d offline tasks placed beside the estimated online usage, want 3", j.Groups[0].Active)
	}
	waitFor(t, 10*time.Second, "the static offline capacity once the heartbeat is old", func() bool {
		j, _ := r.f.Job(offID)
		return j.Groups[0].Active == 12
	})
	checkInvariants(t, r.f)
}

// TestCachedSlots: the resources of tasks that ended stay cached on their
// node for SlotTTL: a task of the same shape reuses a slot at once while a
// smaller task of another shape cannot take the room until the TTL ends.
func TestCachedSlots(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := newCluster(t, 1, func(cfg *dispatcher.Config) { cfg.SlotTTL = 2 * time.Second })
	r := c.leader()
	c.startNode(ctx, nodeSpec("n0", 2000), &ledger{})
	first := r.submit(t, ctx, jobSpec("first", 2, 1000, 0, 50*time.Millisecond))
	waitFor(t, 10*time.Second, "the first job to end", func() bool {
		j, _ := r.f.Job(first)
		return j.Groups[0].Succeeded == 2
	})
	ended := time.Now()
	other := r.submit(t, ctx, jobSpec("other-shape", 1, 500, 0, time.Hour))
	same := r.submit(t, ctx, jobSpec("same-shape", 1, 1000, 0, time.Hour))
	waitFor(t, 5*time.Second, "the same shape to reuse a slot", func() bool {
		j, _ := r.f.Job(same)
		return j.Groups[0].Active == 1
	})
	if j, _ := r.f.Job(other); j.Groups[0].Active != 0 && time.Since(ended) < 1900*time.Millisecond {
		t.Errorf("a task of another shape took a cached slot's room %v after the slots were cached", time.Since(ended))
	}
	waitFor(t, 10*time.Second, "the other shape placed once the TTL ends", func() bool {
		j, _ := r.f.Job(other)
		return j.Groups[0].Active == 1
	})
	if took := time.Since(ended); took < 1900*time.Millisecond { // ended is a poll after the slots' start
		t.Errorf("the other shape was placed %v after the slots were cached, before their 2s TTL", took)
	}
	checkInvariants(t, r.f)
}

func TestNotLeader(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := newCluster(t, 3, nil)
	l := c.leader()
	for _, r := range c.replicas {
		if r == l {
			continue
		}
		// A follower names the leader once it has heard from it (the
		// first heartbeat can still be on its way when the leader knows
		// it leads).
		waitFor(t, 5*time.Second, fmt.Sprintf("follower %d to hear from leader %d", r.id, l.id), func() bool {
			return r.kv.Status().Leader == l.id
		})
		_, _, err := r.d.Submit(ctx, []api.JobSpec{jobSpec("j", 1, 100, 0, time.Second)})
		var nle *raftkv.NotLeaderError
		if !errors.As(err, &nle) || nle.LeaderID != l.id {
			t.Errorf("follower %d Submit: %v, want NotLeaderError naming %d", r.id, err, l.id)
		}
		if err := r.d.Report(ctx, "n0", nil); !errors.Is(err, raftkv.ErrNotLeader) {
			t.Errorf("follower %d Report: %v", r.id, err)
		}
		if err := r.d.Heartbeat(ctx, "n0", api.NodeUsage{}); !errors.Is(err, raftkv.ErrNotLeader) {
			t.Errorf("follower %d Heartbeat: %v", r.id, err)
		}
		if _, _, ok := r.d.NodeUsage("n0"); ok {
			t.Errorf("follower %d knows a usage", r.id)
		}
		if _, ok := r.d.EstimateTotals(); ok {
			t.Errorf("follower %d has estimate totals", r.id)
		}
	}
}

// TestLeaderKilledUnderLoad kills the leading replica while jobs are being
// submitted and placed: the next leader's loop must run within 2s, every
// acknowledged job must complete, and no task may be started twice.
func TestLeaderKilledUnderLoad(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := newCluster(t, 3, nil)
	led := &ledger{}
	for i := range 6 {
		c.startNode(ctx, nodeSpec(fmt.Sprint("n", i), 8000), led)
	}
	var mu sync.Mutex
	var acked []string
	lctx, lcancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each worker offers a job per 10ms at most: a steady load
			// across the kill.
			pace := time.NewTicker(10 * time.Millisecond)
			defer pace.Stop()
			for i := 0; lctx.Err() == nil; i++ {
				var ids []string
				err := c.retry(lctx, func(d *dispatcher.Dispatcher) error {
					var err error
					ids, _, err = d.Submit(lctx, []api.JobSpec{jobSpec(fmt.Sprintf("w%d-%d", w, i), 20, 50, int32(i%3), 30*time.Millisecond)})
					return err
				})
				if err == nil {
					mu.Lock()
					acked = append(acked, ids...)
					mu.Unlock()
				}
				select {
				case <-lctx.Done():
				case <-pace.C:
				}
			}
		}()
	}
	waitFor(t, 10*time.Second, "placements under load", func() bool {
		l := c.leader()
		return l != nil && l.d.RoundSummary().Placed >= 200
	})
	old := c.leader()
	placedBefore := old.d.RoundSummary().Placed
	killed := time.Now()
	old.close()
	next := c.waitLeader(5 * time.Second)
	waitFor(t, 5*time.Second, "a round on the new leader", func() bool { return next.d.RoundSummary().Rounds > 0 })
	resumed := time.Since(killed)
	if resumed > 2*time.Second {
		t.Errorf("new leader's loop resumed %v after the kill, want ≤ 2s", resumed)
	}
	waitFor(t, 10*time.Second, "placements under load on the new leader", func() bool {
		return next.d.RoundSummary().Placed >= 200
	})
	lcancel()
	wg.Wait()
	mu.Lock()
	ids := append([]string(nil), acked...)
	mu.Unlock()
	t.Logf("leader %d killed after %d placements; replica %d resumed in %v; %d jobs acknowledged",
		old.id, placedBefore, next.id, resumed, len(ids))
	if placedBefore == 0 {
		t.Error("nothing placed before the kill")
	}
	dctx, dcancel := context.WithTimeout(ctx, 20*time.Second)
	defer dcancel()
	if !c.awaitChange(dctx, func() bool {
		l := c.leader()
		return l != nil && jobsIn(l.f, ids, fsm.JobSucceeded)
	}) {
		if l := c.leader(); l != nil {
			for _, id := range ids {
				j, ok := l.f.Job(id)
				if !ok || j.State != fsm.JobSucceeded {
					t.Errorf("job %s (found %v): %s %+v", id, ok, j.State, j.Groups)
				}
			}
			for _, n := range l.f.Nodes() {
				g, pods, _ := l.f.NodeTarget(n.Spec.Name)
				t.Logf("node %s %s tasks %d gen %d pods %d", n.Spec.Name, n.State, n.Tasks, g, len(pods))
			}
			for _, n := range c.nodes {
				n.mu.Lock()
				t.Logf("fake %s: seen %d outbox %d gen %d", n.name, len(n.seen), len(n.outbox), n.gen)
				n.mu.Unlock()
			}
			t.Logf("summary %+v diagnosis %+v", l.d.RoundSummary(), l.d.Diagnosis())
		}
		t.Fatal("the acknowledged jobs did not all succeed within 20s")
	}
	checkInvariants(t, c.leader().f)
	led.mu.Lock()
	defer led.mu.Unlock()
	if want := 20 * len(ids); len(led.started) < want {
		t.Errorf("%d tasks started, want ≥ %d", len(led.started), want)
	}
	for k, runs := range led.started {
		if len(runs) != 1 {
			t.Errorf("task %s started %d times: %v", k, len(runs), runs)
		}
	}
}

// TestFinishedJobsForgotten runs jobs to their end on three replicas with
// a short JobRetention: each replica forgets them (the leader proposed
// it), while a job still running is kept, and an idempotency key of a
// forgotten job makes a new job.
func TestFinishedJobsForgotten(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := newCluster(t, 3, func(cfg *dispatcher.Config) { cfg.JobRetention = 300 * time.Millisecond })
	led := &ledger{}
	c.startNode(ctx, nodeSpec("n0", 4000), led)
	short := jobSpec("short", 10, 100, 0, 20*time.Millisecond)
	short.IdempotencyKey = "once"
	long := jobSpec("long", 1, 100, 0, time.Hour)
	var ids []string
	if err := c.retry(ctx, func(d *dispatcher.Dispatcher) error {
		var err error
		ids, _, err = d.Submit(ctx, []api.JobSpec{short, jobSpec("other", 10, 100, 0, 20*time.Millisecond), long})
		return err
	}); err != nil {
		t.Fatalf("Submit: %v", err)
	}
	c.waitChange(t, 20*time.Second, "the finished jobs forgotten on every replica", func() bool {
		for _, r := range c.replicas {
			for _, id := range ids[:2] {
				if _, ok := r.f.Job(id); ok {
					return false
				}
			}
		}
		return true
	})
	for _, r := range c.replicas {
		if j, ok := r.f.Job(ids[2]); !ok || j.State != fsm.JobRunning {
			t.Errorf("replica %d: the running job %s: %+v, found %v", r.id, ids[2], j.State, ok)
		}
	}
	led.mu.Lock()
	if len(led.started) != 21 {
		t.Errorf("%d tasks started, want 21", len(led.started))
	}
	led.mu.Unlock()
	var again []string
	if err := c.retry(ctx, func(d *dispatcher.Dispatcher) error {
		var err error
		again, _, err = d.Submit(ctx, []api.JobSpec{short})
		return err
	}); err != nil {
		t.Fatalf("Submit again: %v", err)
	}
	if again[0] == ids[0] {
		t.Errorf("idempotency key of forgotten job %s answered with it", ids[0])
	}
}

// TestFinishedJobsBeyondMaxForgotten keeps finished jobs for ever but at
// most two: of five that finish, every replica keeps the two that finished
// last, and the running job.
func TestFinishedJobsBeyondMaxForgotten(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := newCluster(t, 3, func(cfg *dispatcher.Config) { cfg.JobRetention, cfg.JobRetentionMax = -1, 2 })
	led := &ledger{}
	c.startNode(ctx, nodeSpec("n0", 4000), led)
	var ids []string
	submit := func(js ...api.JobSpec) {
		t.Helper()
		var got []string
		if err := c.retry(ctx, func(d *dispatcher.Dispatcher) error {
			var err error
			got, _, err = d.Submit(ctx, js)
			return err
		}); err != nil {
			t.Fatalf("Submit: %v", err)
		}
		ids = append(ids, got...)
	}
	submit(jobSpec("long", 1, 100, 0, time.Hour))
	for i := range 5 {
		submit(jobSpec(fmt.Sprintf("short-%d", i), 1, 100, 0, 10*time.Millisecond))
		// One at a time, so that they finish in order.
		c.waitChange(t, 10*time.Second, "job "+ids[len(ids)-1]+" finished", func() bool {
			j, ok := c.replicas[0].f.Job(ids[len(ids)-1])
			return ok && j.State == fsm.JobSucceeded
		})
	}
	c.waitChange(t, 20*time.Second, "the three oldest finished jobs forgotten on every replica", func() bool {
		for _, r := range c.replicas {
			for _, id := range ids[1:4] {
				if _, ok := r.f.Job(id); ok {
					return false
				}
			}
		}
		return true
	})
	for _, r := range c.replicas {
		for _, id := range []string{ids[0], ids[4], ids[5]} {
			if _, ok := r.f.Job(id); !ok {
				t.Errorf("replica %d forgot job %s", r.id, id)
			}
		}
	}
}

// livenessLeader starts a one-replica cluster whose nodes live for a flat
// ttl (no per-node share), checked every livenessEvery, registers the named
// nodes with cpu millicores each, and returns its leader.
// waitRounds waits until d has run n more rounds that read pending work.
func waitRounds(t *testing.T, d *dispatcher.Dispatcher, n int64) {
	t.Helper()
	want := d.Totals().Rounds + n
	waitFor(t, 10*time.Second, fmt.Sprintf("%d more rounds", n), func() bool { return d.Totals().Rounds >= want })
}

func livenessLeader(ctx context.Context, t *testing.T, ttl, livenessEvery time.Duration, cpu int64, clk clock.Clock, names ...string) *replica {
	t.Helper()
	c := newCluster(t, 1, func(cfg *dispatcher.Config) {
		cfg.NodeTTL, cfg.NodeTTLPerNode, cfg.LivenessEvery, cfg.Clock = ttl, -1, livenessEvery, clk
	})
	r := c.leader()
	for _, name := range names {
		if err := r.d.Register(ctx, nodeSpec(name, cpu)); err != nil {
			t.Fatal(err)
		}
	}
	return r
}
