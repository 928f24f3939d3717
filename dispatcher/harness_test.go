package dispatcher_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/dispatcher"
	"github.com/sluicehq/sluice/dispatcher/fsm"
	"github.com/sluicehq/sluice/dispatcher/placement"
	"github.com/sluicehq/sluice/dispatcher/roundinput"
	"github.com/sluicehq/sluice/internal/porttest"
	"github.com/sluicehq/sluice/raftkv"
)

func quiet() *slog.Logger {
	if os.Getenv("DISPATCHER_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// replica is one raftkv replica with its FSM and Dispatcher.
type replica struct {
	id     uint64
	kv     *raftkv.Node
	f      *fsm.FSM
	d      *dispatcher.Dispatcher
	closed atomic.Bool
}

// submit submits one job through r and returns its ID.
func (r *replica) submit(t *testing.T, ctx context.Context, spec api.JobSpec) string {
	t.Helper()
	ids, _, err := r.d.Submit(ctx, []api.JobSpec{spec})
	if err != nil {
		t.Fatal(err)
	}
	return ids[0]
}

func (r *replica) close() {
	if r.closed.Swap(true) {
		return
	}
	_ = r.d.Close()
	_ = r.kv.Close()
}

// cluster is n replicas on loopback TCP (or one without transport), pebble
// on disk.
type cluster struct {
	t        testing.TB
	replicas []*replica
	nodes    []*fakeNode
}

func newCluster(t *testing.T, n int, tweak func(*dispatcher.Config)) *cluster {
	return newClusterTB(t, n, tweak)
}

func newClusterTB(t testing.TB, n int, tweak func(*dispatcher.Config)) *cluster {
	t.Helper()
	dir := t.TempDir()
	c := &cluster{t: t}
	peers := map[uint64]string{}
	if n > 1 {
		for i, a := range porttest.Addrs(t, n) {
			peers[uint64(i+1)] = a
		}
	} else {
		peers[1] = ""
	}
	for i := range n {
		id := uint64(i + 1)
		var tr raftkv.Transport
		if n > 1 {
			tt, err := raftkv.NewTCPTransport(raftkv.TCPConfig{ID: id, ListenAddr: peers[id], Peers: peers, Logger: quiet()})
			if err != nil {
				t.Fatalf("transport %d: %v", id, err)
			}
			tr = tt
		}
		f := fsm.New()
		kv, err := raftkv.Open(raftkv.Config{
			ID: id, Dir: filepath.Join(dir, fmt.Sprint("r", id)), Peers: peers, Transport: tr,
			StateMachine: f, TickInterval: 20 * time.Millisecond, Logger: quiet(),
		})
		if err != nil {
			t.Fatalf("open replica %d: %v", id, err)
		}
		cfg := dispatcher.Config{
			Raft: kv, FSM: f, MaxWait: 2 * time.Millisecond, Period: 100 * time.Millisecond,
			Logger: quiet(),
		}
		if tweak != nil {
			tweak(&cfg)
		}
		d, err := dispatcher.New(cfg)
		if err != nil {
			t.Fatalf("dispatcher %d: %v", id, err)
		}
		c.replicas = append(c.replicas, &replica{id: id, kv: kv, f: f, d: d})
	}
	t.Cleanup(func() {
		for _, r := range c.replicas {
			r.close()
		}
	})
	c.waitLeader(10 * time.Second)
	return c
}

// leader returns the replica whose scheduling loop runs, or nil.
func (c *cluster) leader() *replica {
	for _, r := range c.replicas {
		if r.closed.Load() {
			continue
		}
		if _, ok := r.d.Leading(); ok {
			return r
		}
	}
	return nil
}

// waitLeader waits until a replica's scheduling loop runs, and returns it.
func (c *cluster) waitLeader(timeout time.Duration) *replica {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if !c.awaitChange(ctx, func() bool { return c.leader() != nil }) {
		c.t.Fatalf("no leading dispatcher within %v", timeout)
	}
	return c.leader()
}

// awaitChange waits until cond holds, testing it again at each change an
// open replica's Dispatcher.Changed signals (an applied entry, a change
// of leadership), so cond must read only such state: the FSMs and
// Leading. It reports false if ctx ends first.
func (c *cluster) awaitChange(ctx context.Context, cond func() bool) bool {
	for {
		cases := []reflect.SelectCase{{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())}}
		for _, r := range c.replicas {
			if !r.closed.Load() {
				cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(r.d.Changed())})
			}
		}
		if cond() {
			return true
		}
		if i, _, _ := reflect.Select(cases); i == 0 {
			return cond()
		}
	}
}

// waitChange is awaitChange bounded by timeout: it fails t if timeout
// passes before cond holds.
func (c *cluster) waitChange(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if !c.awaitChange(ctx, cond) {
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
}

// pause waits d, the pace of a fake node's retries, or until ctx ends.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// retry calls fn on the leading dispatcher until it does not fail with a
// leadership error.
func (c *cluster) retry(ctx context.Context, fn func(d *dispatcher.Dispatcher) error) error {
	for {
		r := c.leader()
		if r != nil {
			err := fn(r.d)
			if err == nil || !(errors.Is(err, raftkv.ErrNotLeader) || errors.Is(err, raftkv.ErrStopped) ||
				errors.Is(err, raftkv.ErrProposalDropped) || errors.Is(err, dispatcher.ErrClosed)) {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func nodeSpec(name string, cpu int64) api.NodeSpec {
	c := api.Capacity{CPU: cpu, Memory: cpu << 20, Disk: 1 << 40, Ports: 1000}
	return api.NodeSpec{Name: name, Capacity: c, Allocatable: api.Allocatable{Online: c, Offline: c}}
}

// jobSpec is an array of count tasks of cpu millicores running for run.
func jobSpec(name string, count, cpu int64, prio int32, run time.Duration) api.JobSpec {
	return api.JobSpec{
		Name: name, Priority: prio,
		Retry: api.RetryPolicy{MaxAttempts: 5, Backoff: api.Duration(10 * time.Millisecond), MaxBackoff: api.Duration(50 * time.Millisecond)},
		Tasks: []api.TaskGroupSpec{{Count: count, Pod: api.PodSpec{
			Containers: []api.ContainerSpec{{Image: api.Image{Rootfs: "/rootfs"}, Command: []string{"/bin/true"},
				Resources: api.Resources{CPU: cpu, Memory: cpu << 20}}},
			Sim: &api.SimSpec{RunTime: api.Duration(run)},
		}}},
	}
}

// taskKey strips the attempt from a task ID: "<job>/<group>/<index>".
func taskKey(id string) string {
	i := strings.LastIndexByte(id, '/')
	if i < 0 {
		return id
	}
	return id[:i]
}

// ledger records, across all fake nodes, every task attempt started.
type ledger struct {
	mu      sync.Mutex
	started map[string][]string // task key → "node:attempt ID"
}

func (l *ledger) start(node, id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.started == nil {
		l.started = map[string][]string{}
	}
	l.started[taskKey(id)] = append(l.started[taskKey(id)], node+":"+id)
}

// fakeNode pulls its target from whichever dispatcher leads and runs the
// pods in simulated time: running at once, then succeeded (or the sim
// exit code) after the pod's Sim.RunTime; a running pod that leaves the
// target is stopped and reported killed.
type fakeNode struct {
	name   string
	c      *cluster
	led    *ledger
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	seen    map[string]bool
	running map[string]*time.Timer // task ID → its end
	gen     uint64
	outbox  []api.TaskReport
}

func (c *cluster) startNode(ctx context.Context, spec api.NodeSpec, led *ledger) *fakeNode {
	c.t.Helper()
	if err := c.retry(ctx, func(d *dispatcher.Dispatcher) error { return d.Register(ctx, spec) }); err != nil {
		c.t.Fatalf("register %s: %v", spec.Name, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	n := &fakeNode{name: spec.Name, c: c, led: led, cancel: cancel, seen: map[string]bool{}, running: map[string]*time.Timer{}}
	n.wg.Add(2)
	go n.poll(ctx)
	go n.report(ctx)
	c.t.Cleanup(n.stop)
	c.nodes = append(c.nodes, n)
	return n
}

// stop ends the node as if its host died: no more polls or reports.
func (n *fakeNode) stop() {
	n.cancel()
	n.wg.Wait()
	n.mu.Lock()
	for _, t := range n.running {
		t.Stop()
	}
	n.mu.Unlock()
}

func (n *fakeNode) push(r api.TaskReport) {
	n.mu.Lock()
	n.outbox = append(n.outbox, r)
	n.mu.Unlock()
}

func (n *fakeNode) poll(ctx context.Context) {
	defer n.wg.Done()
	var gen uint64
	for ctx.Err() == nil {
		r := n.c.leader()
		if r == nil {
			n.c.awaitChange(ctx, func() bool { return n.c.leader() != nil })
			continue
		}
		tg, err := r.d.Target(ctx, n.name, gen)
		if err != nil {
			pause(ctx, 5*time.Millisecond)
			continue
		}
		gen = tg.Generation
		n.mu.Lock()
		n.gen = gen
		want := map[string]bool{}
		for _, p := range tg.Pods {
			want[p.TaskID] = true
		}
		for id, t := range n.running {
			if !want[id] {
				t.Stop()
				delete(n.running, id)
				n.outbox = append(n.outbox, api.TaskReport{TaskID: id, State: api.TaskKilled, Reason: api.ReasonStopped, Time: time.Now()})
			}
		}
		n.mu.Unlock()
		for _, p := range tg.Pods {
			n.mu.Lock()
			seen := n.seen[p.TaskID]
			n.seen[p.TaskID] = true
			n.mu.Unlock()
			if seen {
				continue
			}
			n.led.start(n.name, p.TaskID)
			n.push(api.TaskReport{TaskID: p.TaskID, State: api.TaskRunning, Time: time.Now()})
			var run time.Duration
			var code int32
			if p.Pod.Sim != nil {
				run, code = time.Duration(p.Pod.Sim.RunTime), p.Pod.Sim.ExitCode
			}
			id := p.TaskID
			n.mu.Lock()
			n.running[id] = time.AfterFunc(run, func() {
				st := api.TaskSucceeded
				if code != 0 {
					st = api.TaskFailed
				}
				n.mu.Lock()
				defer n.mu.Unlock()
				if _, ok := n.running[id]; ok { // not stopped first
					delete(n.running, id)
					n.outbox = append(n.outbox, api.TaskReport{TaskID: id, State: st, ExitCode: code, Reason: api.ReasonExited, Time: time.Now()})
				}
			})
			n.mu.Unlock()
		}
	}
}

// report sends the outbox (or a heartbeat) every 5ms, in order, until
// acknowledged.
func (n *fakeNode) report(ctx context.Context) {
	defer n.wg.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(5 * time.Millisecond):
		}
		n.mu.Lock()
		batch := append([]api.TaskReport(nil), n.outbox...)
		n.mu.Unlock()
		r := n.c.leader()
		if r == nil {
			continue
		}
		if err := r.d.Report(ctx, n.name, batch); err != nil {
			if ctx.Err() == nil && testing.Verbose() {
				fmt.Println("report", n.name, err)
			}
			continue
		}
		n.mu.Lock()
		n.outbox = n.outbox[len(batch):]
		n.mu.Unlock()
	}
}

// checkInvariants checks the properties that hold after every run: no node
// above its allocatable in any dimension of either tier, no task active on
// two nodes, and every pending task either placeable or given a reason by
// placement's diagnosis.
func checkInvariants(t *testing.T, f *fsm.FSM) {
	t.Helper()
	where := map[string]string{}
	for _, n := range f.Nodes() {
		for tier, c := range map[string]api.Capacity{"online": n.Free.Online, "offline": n.Free.Offline} {
			if c.CPU < 0 || c.Memory < 0 || c.GPUs < 0 || c.Disk < 0 || c.Ports < 0 {
				t.Errorf("node %s over its %s allocatable: free %+v", n.Spec.Name, tier, c)
			}
		}
		_, pods, _ := f.NodeTarget(n.Spec.Name)
		for _, p := range pods {
			k := taskKey(p.TaskID)
			if other, dup := where[k]; dup {
				t.Errorf("task %s on %s and %s", k, other, n.Spec.Name)
			}
			where[k] = n.Spec.Name
		}
	}
	in := roundinput.Build(f, time.Now(), 0)
	plan, err := placement.New(nil).Place(context.Background(), in)
	if err != nil {
		t.Fatalf("place: %v", err)
	}
	got := map[placement.GroupKey]int64{}
	for _, a := range plan.Assignments {
		got[a.Group] += a.Count
	}
	for _, p := range plan.Pending {
		if p.Reason == "" {
			t.Errorf("group %s: %d tasks pending without a reason", p.Group, p.Count)
		}
		got[p.Group] += p.Count
	}
	for _, g := range in.Groups {
		if got[g.Key] != g.Pending {
			t.Errorf("group %s: %d pending, placed or diagnosed %d", g.Key, g.Pending, got[g.Key])
		}
	}
}

// waitFor tests cond every 5ms until it holds, and fails t if timeout
// passes first: the cluster runs raft over loopback TCP on real ticks and
// fake nodes on real timers, whose progress nothing signals as a whole.
// cluster.waitChange waits without polling for what the replicas' FSMs
// and leadership alone decide.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func jobsIn(f *fsm.FSM, ids []string, st fsm.JobState) bool {
	for _, id := range ids {
		j, ok := f.Job(id)
		if !ok || j.State != st {
			return false
		}
	}
	return true
}
