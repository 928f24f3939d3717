package remote_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/nodelet"
	"github.com/sluicehq/sluice/nodelet/remote"
	"github.com/sluicehq/sluice/nodelet/remote/remotetest"
	"github.com/sluicehq/sluice/nodelet/runtime"
	"github.com/sluicehq/sluice/nodelet/runtime/sim"
)

// wait bounds every wait of these tests: generous, for a loaded machine
// under -race.
const wait = 20 * time.Second

func TestPodIDOfDispatcherTaskIDs(t *testing.T) {
	if got := remote.PodID("j12/0/5/1"); got != "j12.0.5.1" {
		t.Errorf("PodID(j12/0/5/1) = %q, want j12.0.5.1", got)
	}
	// Every task ID the dispatcher forms: j<job>/<group>/<index>/<attempt>
	// with a uint64 job, uint16 group and uint32 index and attempt.
	r := rand.New(rand.NewPCG(1, 2))
	edge64 := []uint64{1, 9, 10, 1<<64 - 1}
	edge32 := []uint64{0, 1, 10, 1<<32 - 1}
	seen := map[string]string{}
	check := func(task string) {
		t.Helper()
		id := remote.PodID(task)
		if msg := runtime.CheckName(id); msg != "" {
			t.Fatalf("PodID(%q) = %q: %s", task, id, msg)
		}
		if prev, ok := seen[id]; ok && prev != task {
			t.Fatalf("PodID(%q) = PodID(%q) = %q", task, prev, id)
		}
		seen[id] = task
	}
	for _, j := range edge64 {
		for _, g := range []uint64{0, 1, 1<<16 - 1} {
			for _, i := range edge32 {
				for _, a := range edge32 {
					check(fmt.Sprintf("j%d/%d/%d/%d", j, g, i, a))
				}
			}
		}
	}
	for range 20000 {
		check(fmt.Sprintf("j%d/%d/%d/%d", 1+r.Uint64N(1<<20), r.Uint64N(64), r.Uint64N(1<<16), r.Uint64N(100)))
	}
}

func TestPodIDOfAnyTaskID(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	alphabet := "aj09Z_/.-: é"
	seen := map[string]string{}
	tasks := []string{"", "/", "a/b", "a.b", "a..b", "-a", strings.Repeat("j", 64), strings.Repeat("j", 65), strings.Repeat("9/", 40)}
	for range 20000 {
		var b strings.Builder
		for range 1 + r.IntN(80) {
			b.WriteByte(alphabet[r.IntN(len(alphabet))])
		}
		tasks = append(tasks, b.String())
	}
	for _, task := range tasks {
		id := remote.PodID(task)
		if msg := runtime.CheckName(id); msg != "" {
			t.Fatalf("PodID(%q) = %q: %s", task, id, msg)
		}
		if prev, ok := seen[id]; ok && prev != task {
			t.Fatalf("PodID(%q) = PodID(%q) = %q", task, prev, id)
		}
		seen[id] = task
	}
}

// node is a registered nodelet's spec.
func nodeSpec(name string) api.NodeSpec {
	c := api.Capacity{CPU: 4000, Memory: 8 << 30}
	return api.NodeSpec{
		Name: name, Address: "127.0.0.1:1", Pool: "p", Labels: map[string]string{"zone": "a"},
		Capacity: c, Allocatable: api.Allocatable{Online: c, Offline: c},
	}
}

func newClient(t testing.TB, url, token string) *api.Client {
	t.Helper()
	c, err := api.NewClient(api.ClientConfig{Addrs: []string{url}, Token: token, Timeout: wait})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func newDispatcher(t testing.TB, client remote.Client, name string) *remote.Dispatcher {
	t.Helper()
	d, err := remote.New(remote.Config{
		Client: client, Node: nodeSpec(name),
		PollWait: time.Second, RetryMin: 10 * time.Millisecond, RetryMax: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// simPod is a target pod for the sim runtime: it runs for run (forever
// when 0) and exits with code.
func simPod(task string, qos api.QoS, run time.Duration, code int32) api.TargetPod {
	p := api.TargetPod{
		TaskID: task, Job: strings.Split(task, "/")[0], Group: "g0", QoS: qos, Priority: 7,
		Pod: api.PodSpec{Containers: []api.ContainerSpec{{
			Name: "main", Image: api.Image{Rootfs: "/img"}, Command: []string{"work"},
			Resources: api.Resources{CPU: 100, Memory: 64 << 20},
		}}},
	}
	if run > 0 {
		p.Pod.Sim = &api.SimSpec{RunTime: api.Duration(run), ExitCode: code}
	}
	return p
}

// hasReport reports whether reports hold one for task in state.
func hasReport(reports []api.TaskReport, task string, state api.TaskState) bool {
	return slices.ContainsFunc(reports, func(r api.TaskReport) bool { return r.TaskID == task && r.State == state })
}

// startAgent runs an agent over rt and d until the test ends.
func startAgent(t *testing.T, name string, rt runtime.Runtime, d nodelet.Dispatcher) *nodelet.Agent {
	t.Helper()
	a, err := nodelet.New(nodelet.Config{
		Node: name, Runtime: rt, Dispatcher: d,
		StopGrace: time.Millisecond, RetryMin: 10 * time.Millisecond, RetryMax: 100 * time.Millisecond,
		ResyncPeriod: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- a.Run(context.Background()) }()
	t.Cleanup(func() {
		_ = a.Close()
		if err := <-errc; err != nil {
			t.Errorf("agent: %v", err)
		}
	})
	return a
}

func joined(t *testing.T, d *remote.Dispatcher) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := d.Join(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestAgentConvergesOverHTTP(t *testing.T) {
	const name = "n1"
	stub := remotetest.Start(t, "secret")
	d := newDispatcher(t, newClient(t, stub.URL, "secret"), name)
	joined(t, d)
	spec, regs, ok := stub.Node(name)
	if !ok || regs != 1 || !equalSpec(spec, nodeSpec(name)) {
		t.Fatalf("registered %+v (%d times, %v), want %+v once", spec, regs, ok, nodeSpec(name))
	}

	host := sim.NewHost()
	t.Cleanup(host.Close)
	rt := sim.New(host)
	startAgent(t, name, rt, d)

	stub.SetTarget(name,
		simPod("j1/0/0/0", api.QoSOnline, 0, 0),
		simPod("j1/0/1/0", api.QoSOffline, 0, 0),
		simPod("j2/0/0/3", api.QoSOffline, 30*time.Millisecond, 3),
	)
	stub.Await(t, wait, "running, running and failed reports", func() bool {
		r := stub.Reports(name)
		return hasReport(r, "j1/0/0/0", api.TaskRunning) && hasReport(r, "j1/0/1/0", api.TaskRunning) &&
			slices.ContainsFunc(r, func(r api.TaskReport) bool {
				return r.TaskID == "j2/0/0/3" && r.State == api.TaskFailed && r.ExitCode == 3 && r.Reason == api.ReasonExited
			})
	})
	pods, err := rt.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]runtime.PodStatus{}
	for _, p := range pods {
		byID[p.ID] = p
	}
	if p, ok := byID["j1.0.0.0"]; !ok || p.CgroupParent != "sluice/online" || p.State != runtime.StateRunning {
		t.Errorf("pod j1.0.0.0 = %+v (%v), want running under sluice/online", p, ok)
	}
	if p, ok := byID["j1.0.1.0"]; !ok || p.CgroupParent != "sluice/offline" {
		t.Errorf("pod j1.0.1.0 = %+v (%v), want it under sluice/offline", p, ok)
	}
	if d.FirstContainer("j1/0/0/0") != "main" {
		t.Errorf("FirstContainer = %q, want main", d.FirstContainer("j1/0/0/0"))
	}

	// Dropping a pod from the target stops it; the target arrives as a
	// difference from the one the agent has.
	stub.SetTarget(name, simPod("j1/0/0/0", api.QoSOnline, 0, 0))
	stub.Await(t, wait, "the stopped pod's report", func() bool {
		return slices.ContainsFunc(stub.Reports(name), func(r api.TaskReport) bool {
			return r.TaskID == "j1/0/1/0" && r.State == api.TaskKilled && r.Reason == api.ReasonStopped
		})
	})
	// A pod added by a difference starts, and the one kept still runs.
	stub.SetTarget(name, simPod("j1/0/0/0", api.QoSOnline, 0, 0), simPod("j3/0/0/0", api.QoSOffline, 0, 0))
	stub.Await(t, wait, "the added pod's report", func() bool { return hasReport(stub.Reports(name), "j3/0/0/0", api.TaskRunning) })
	if stub.Diffs() < 2 {
		t.Errorf("%d targets came as differences, want every one after the first", stub.Diffs())
	}
	pods, err = rt.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var live []string
	for _, p := range pods {
		if p.State == runtime.StateRunning {
			live = append(live, p.ID)
		}
	}
	slices.Sort(live)
	if !slices.Equal(live, []string{"j1.0.0.0", "j3.0.0.0"}) {
		t.Errorf("running pods %v, want j1.0.0.0 and j3.0.0.0", live)
	}
	// The job's run-time limit travels with the pod: the agent stops it.
	limited := simPod("j4/0/0/1", api.QoSOffline, time.Hour, 0)
	limited.MaxRunTime = api.Duration(50 * time.Millisecond)
	stub.SetTarget(name, simPod("j1/0/0/0", api.QoSOnline, 0, 0), simPod("j3/0/0/0", api.QoSOffline, 0, 0), limited)
	stub.Await(t, wait, "the limited pod killed for its time limit", func() bool {
		return slices.ContainsFunc(stub.Reports(name), func(r api.TaskReport) bool {
			return r.TaskID == "j4/0/0/1" && r.State == api.TaskKilled && r.Reason == api.ReasonTimeLimit
		})
	})
	// So do the job's name and the group's count: the pods' containers
	// get them, the two pods of one group alike.
	named := func(task string) api.TargetPod {
		p := simPod(task, api.QoSOffline, time.Hour, 0)
		p.JobName, p.Count, p.Group = "render", 3, "frames"
		return p
	}
	stub.SetTarget(name, named("j5/0/1/1"), named("j5/0/2/1"))
	stub.Await(t, wait, "the named pods running", func() bool {
		r := stub.Reports(name)
		return hasReport(r, "j5/0/1/1", api.TaskRunning) && hasReport(r, "j5/0/2/1", api.TaskRunning)
	})
	for _, task := range []string{"j5/0/1/1", "j5/0/2/1"} {
		spec, err := rt.Spec(remote.PodID(task))
		if err != nil {
			t.Fatal(err)
		}
		for _, kv := range []string{"SLUICE_JOB_ID=j5", "SLUICE_JOB_NAME=render", "SLUICE_GROUP=frames", "SLUICE_TASK_ID=" + task,
			"SLUICE_TASK_INDEX=" + task[5:6], "SLUICE_TASK_COUNT=3", "SLUICE_ATTEMPT=1", "SLUICE_NODE=" + name} {
			if !slices.Contains(spec.Env, kv) {
				t.Errorf("pod of %s: env %q lacks %s", task, spec.Env, kv)
			}
		}
	}
}

func TestReregistersWhenForgotten(t *testing.T) {
	const name = "n2"
	stub := remotetest.Start(t, "")
	d := newDispatcher(t, newClient(t, stub.URL, ""), name)
	joined(t, d)
	host := sim.NewHost()
	t.Cleanup(host.Close)
	rt := sim.New(host)
	startAgent(t, name, rt, d)
	stub.SetTarget(name, simPod("j1/0/0/0", api.QoSOffline, 0, 0))
	stub.Await(t, wait, "the pod running", func() bool { return hasReport(stub.Reports(name), "j1/0/0/0", api.TaskRunning) })

	// The dispatcher loses its state: the open long-poll gets not_found,
	// the Dispatcher registers again and the agent gets the new target,
	// although the dispatcher counts generations from 0 again and the
	// new target has the generation (1) the agent already knows.
	stub.Forget(name)
	stub.Await(t, wait, "a new registration", func() bool { _, regs, ok := stub.Node(name); return ok && regs == 1 })
	stub.SetTarget(name, simPod("j3/0/0/0", api.QoSOffline, 0, 0))
	stub.Await(t, wait, "reports after re-registration", func() bool {
		r := stub.Reports(name)
		return hasReport(r, "j3/0/0/0", api.TaskRunning) && hasReport(r, "j1/0/0/0", api.TaskKilled)
	})
}

func TestReportReregisters(t *testing.T) {
	const name = "n3"
	stub := remotetest.Start(t, "")
	d := newDispatcher(t, newClient(t, stub.URL, ""), name)
	joined(t, d)
	stub.Forget(name)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	now := time.Now()
	reports := []nodelet.PodReport{
		{PodID: "j1.0.0.0", TaskReport: api.TaskReport{TaskID: "j1/0/0/0", State: api.TaskRunning, Reason: api.ReasonStarted, Time: now}},
		// Cut to size rather than refused.
		{PodID: "j1.0.1.0", TaskReport: api.TaskReport{TaskID: "j1/0/1/0", State: api.TaskFailed, Reason: api.ReasonStartFailed,
			Message: strings.Repeat("é", api.MaxStringLen), Time: now}},
		// Invalid (no time): dropped, not sent.
		{PodID: "j1.0.2.0", TaskReport: api.TaskReport{TaskID: "j1/0/2/0", State: api.TaskRunning, Reason: api.ReasonStarted}},
		// Exit code -1 (unknown) clamped.
		{PodID: "j1.0.3.0", TaskReport: api.TaskReport{TaskID: "j1/0/3/0", State: api.TaskLost, Reason: api.ReasonLost, ExitCode: -1, Time: now}},
	}
	if err := d.Report(ctx, name, reports); err != nil {
		t.Fatal(err)
	}
	_, regs, ok := stub.Node(name)
	if !ok || regs != 1 {
		t.Fatalf("node registered %d times (%v) after the report, want 1", regs, ok)
	}
	got := stub.Reports(name)
	var tasks []string
	for _, r := range got {
		tasks = append(tasks, r.TaskID)
	}
	if want := []string{"j1/0/0/0", "j1/0/1/0", "j1/0/3/0"}; !slices.Equal(tasks, want) {
		t.Fatalf("reported tasks %v, want %v", tasks, want)
	}
	if n := len(got[1].Message); n > api.MaxStringLen || n < api.MaxStringLen-1 {
		t.Errorf("message cut to %d bytes, want about %d", n, api.MaxStringLen)
	}
}

func TestTargetRetriesAndContext(t *testing.T) {
	stub := remotetest.Start(t, "")
	d := newDispatcher(t, newClient(t, stub.URL, ""), "n4")
	joined(t, d)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	// The first call answers at once, even with the empty target of
	// generation 0, which a plain long-poll from 0 would wait on.
	tg, err := d.Target(ctx, "n4", 0)
	if err != nil || tg.Generation != 0 || len(tg.Pods) != 0 {
		t.Fatalf("first target %+v, %v, want the empty generation 0", tg, err)
	}
	gen, _ := stub.SetTarget("n4", simPod("j1/0/0/0", api.QoSOnline, 0, 0))
	tg, err = d.Target(ctx, "n4", 0)
	if err != nil {
		t.Fatal(err)
	}
	if tg.Generation != gen || len(tg.Pods) != 1 {
		t.Fatalf("target %+v, want generation %d with one pod", tg, gen)
	}
	p := tg.Pods[0]
	if p.ID != "j1.0.0.0" || p.TaskID != "j1/0/0/0" || p.Tier != "online" || p.Priority != 7 || p.Pod.Containers[0].Name != "main" {
		t.Errorf("desired pod %+v", p)
	}
	// Nothing changes: Target keeps polling past PollWait until ctx ends.
	short, cancel2 := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel2()
	if tg, err := d.Target(short, "n4", gen); err == nil {
		t.Fatalf("Target returned %+v without a change", tg)
	}
}

func TestJoinGivesUpWithContext(t *testing.T) {
	// Nothing listens at the address: Join retries until ctx ends.
	c, err := api.NewClient(api.ClientConfig{Addrs: []string{"http://127.0.0.1:1"}, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	d := newDispatcher(t, c, "n5")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := d.Join(ctx); err == nil {
		t.Fatal("Join succeeded without a dispatcher")
	}
}

// refusingClient is a remote.Client whose RegisterNode fails while fail
// is set, saying on calls when it was called.
type refusingClient struct {
	remote.Client
	fail  atomic.Bool
	calls chan struct{}
}

func (c *refusingClient) RegisterNode(ctx context.Context, spec api.NodeSpec) error {
	c.calls <- struct{}{}
	if c.fail.Load() {
		return errors.New("fake: dispatcher unavailable")
	}
	return nil
}

// TestJoinBacksOff: failed registrations are retried after RetryMin, then
// after twice the last wait up to RetryMax, on the Dispatcher's clock.
func TestJoinBacksOff(t *testing.T) {
	c := &refusingClient{calls: make(chan struct{}, 16)}
	c.fail.Store(true)
	clk := clock.NewManual(time.Time{})
	d, err := remote.New(remote.Config{Client: c, Node: nodeSpec("n6"), RetryMin: 10 * time.Millisecond, RetryMax: 30 * time.Millisecond, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	joined := make(chan error, 1)
	go func() { joined <- d.Join(ctx) }()
	for i, want := range []time.Duration{10, 20, 30, 30} {
		want *= time.Millisecond
		select {
		case <-c.calls:
		case <-ctx.Done():
			t.Fatalf("registration %d never came", i+1)
		}
		if err := clk.WaitTimers(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if got, _ := clk.Next(); got != want {
			t.Fatalf("wait after failure %d = %v, want %v", i+1, got, want)
		}
		if i == 3 {
			c.fail.Store(false)
		}
		clk.Advance(want)
	}
	<-c.calls
	if err := <-joined; err != nil {
		t.Fatalf("Join = %v once the dispatcher took the registration", err)
	}
}

func TestConfigValidate(t *testing.T) {
	_, err := remote.New(remote.Config{Node: api.NodeSpec{Name: "bad name"}, PollWait: -1})
	if err == nil {
		t.Fatal("New accepted a bad config")
	}
	for _, want := range []string{"Client", "Node", "PollWait"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}

func equalSpec(a, b api.NodeSpec) bool {
	return fmt.Sprintf("%+v", a) == fmt.Sprintf("%+v", b)
}

func TestHeartbeat(t *testing.T) {
	const name = "n6"
	stub := remotetest.Start(t, "tok")
	d := newDispatcher(t, newClient(t, stub.URL, "tok"), name)
	joined(t, d)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	u := api.NodeUsage{
		Total:   api.Usage{CPU: 1250, Memory: 3 << 30},
		Online:  api.Usage{CPU: 1000, Memory: 2 << 30},
		Offline: api.Usage{CPU: 250, Memory: 1 << 30},
	}
	if err := d.Heartbeat(ctx, name, u); err != nil {
		t.Fatal(err)
	}
	if got := stub.Usages(name); len(got) != 1 || !reflect.DeepEqual(got[0], u) {
		t.Fatalf("usages at the stub %+v, want [%+v]", got, u)
	}
	if r := stub.Reports(name); len(r) != 0 {
		t.Errorf("a heartbeat carried reports: %+v", r)
	}

	// Invalid usage is not sent.
	bad := u
	bad.Offline.Memory = -1
	if err := d.Heartbeat(ctx, name, bad); !errors.Is(err, api.ErrInvalid) || !strings.Contains(err.Error(), "offline.memory") {
		t.Errorf("Heartbeat with negative memory: %v, want an api.ErrInvalid naming offline.memory", err)
	}

	// A dispatcher that forgot the node: register again, send once more.
	stub.Forget(name)
	u.Online.CPU, u.Total.CPU = 2000, 2250
	if err := d.Heartbeat(ctx, name, u); err != nil {
		t.Fatal(err)
	}
	if _, regs, ok := stub.Node(name); !ok || regs != 1 {
		t.Fatalf("node registered %d times (%v) after the heartbeat, want 1", regs, ok)
	}
	if got := stub.Usages(name); len(got) != 1 || !reflect.DeepEqual(got[0], u) {
		t.Fatalf("usages at the stub after registering again %+v, want [%+v]", got, u)
	}
}

// TestTargetChangesSinceTheLast checks that a Dispatcher asked with the
// generation it returned last gives the changes since, that they make the
// whole target when applied, and that any other known generation gets the
// whole target; FirstContainer follows both.
func TestTargetChangesSinceTheLast(t *testing.T) {
	const name = "n7"
	stub := remotetest.Start(t, "")
	d := newDispatcher(t, newClient(t, stub.URL, ""), name)
	joined(t, d)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	get := func(known uint64) nodelet.Target {
		t.Helper()
		tg, err := d.Target(ctx, name, known)
		if err != nil {
			t.Fatal(err)
		}
		return tg
	}
	stub.SetTarget(name, simPod("j1/0/0/0", api.QoSOnline, 0, 0), simPod("j1/0/1/0", api.QoSOnline, 0, 0), simPod("j2/0/0/0", api.QoSOffline, 0, 0))
	first := get(0)
	if first.Base != 0 || len(first.Pods) != 3 {
		t.Fatalf("first target %+v, want the whole of 3 pods", first)
	}
	held := map[string]nodelet.DesiredPod{}
	for _, p := range first.Pods {
		held[p.ID] = p
	}
	kept := simPod("j2/0/0/0", api.QoSOffline, 0, 0)
	stub.SetTarget(name, simPod("j1/0/1/0", api.QoSOnline, 0, 0), kept, simPod("j3/0/0/0", api.QoSOffline, 0, 0))
	next := get(first.Generation)
	if next.Base != first.Generation || len(next.Pods) != 1 || next.Pods[0].ID != "j3.0.0.0" || !slices.Equal(next.Removed, []string{"j1.0.0.0"}) {
		t.Fatalf("next target %+v, want j3.0.0.0 added and j1.0.0.0 removed since %d", next, first.Generation)
	}
	for _, id := range next.Removed {
		delete(held, id)
	}
	for _, p := range next.Pods {
		held[p.ID] = p
	}
	if c := d.FirstContainer("j1/0/0/0"); c != "main" {
		t.Errorf("FirstContainer of the pod just removed = %q, want main", c)
	}
	if c := d.FirstContainer("j3/0/0/0"); c != "main" {
		t.Errorf("FirstContainer of the pod just added = %q, want main", c)
	}
	// Another known generation than the last returned: the whole target,
	// which the changes applied must equal.
	stub.SetTarget(name, simPod("j1/0/1/0", api.QoSOnline, 0, 0), kept, simPod("j3/0/0/0", api.QoSOffline, 0, 0), simPod("j4/0/0/0", api.QoSOffline, 0, 0))
	whole := get(first.Generation)
	if whole.Base != 0 || len(whole.Pods) != 4 {
		t.Fatalf("target asked from an older generation %+v, want the whole of 4 pods", whole)
	}
	for _, p := range whole.Pods {
		if p.ID == "j4.0.0.0" {
			continue
		}
		if h, ok := held[p.ID]; !ok || !reflect.DeepEqual(h, p) {
			t.Errorf("pod %s: changes applied give %+v, the whole target %+v", p.ID, h, p)
		}
		delete(held, p.ID)
	}
	if len(held) != 0 {
		t.Errorf("changes applied keep pods the whole target has not: %v", slices.Collect(maps.Keys(held)))
	}
	if c := d.FirstContainer("j1/0/0/0"); c != "" {
		t.Errorf("FirstContainer of a pod two targets gone = %q, want none", c)
	}
}
