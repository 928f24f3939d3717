package appmaster_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/appmaster"
	"github.com/sluicehq/sluice/dispatcher"
	"github.com/sluicehq/sluice/dispatcher/server"
	"github.com/sluicehq/sluice/internal/porttest"
	"github.com/sluicehq/sluice/nodelet"
	"github.com/sluicehq/sluice/nodelet/remote"
	"github.com/sluicehq/sluice/nodelet/runtime/sim"
)

// wait bounds every wait: generous, for a loaded machine under -race.
const wait = 20 * time.Second

// cluster starts a single-replica dispatcher on loopback and n nodelets
// with the sim runtime joined to it over HTTP, and returns a client.
func cluster(t *testing.T, n int) *api.Client {
	t.Helper()
	c, _ := clusterKeys(t, n, nil)
	return c
}

// clusterKeys is cluster whose dispatcher makes job tokens with keys (nil:
// none), and returns it too.
func clusterKeys(t *testing.T, n int, keys *server.JobKeys) (*api.Client, *server.Server) {
	t.Helper()
	addr := porttest.Addrs(t, 1)[0]
	s, err := server.Open(server.Config{
		ID: 1, Peers: map[uint64]string{1: ""}, PeerHTTP: map[uint64]string{1: "http://" + addr},
		Dir: t.TempDir(), HTTPAddr: addr, TickInterval: 20 * time.Millisecond, WatchKeepAlive: 200 * time.Millisecond,
		Dispatcher: dispatcher.Config{MaxWait: 2 * time.Millisecond, Period: 50 * time.Millisecond},
		JobKeys:    keys,
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	c, err := api.NewClient(api.ClientConfig{Addrs: []string{s.Addr()}, Timeout: wait})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	for i := range n {
		name := "n" + string(rune('1'+i))
		cap := api.Capacity{CPU: 4000, Memory: 8 << 30, Ports: 100}
		d, err := remote.New(remote.Config{Client: c, Node: api.NodeSpec{Name: name, Address: "127.0.0.1:1",
			Capacity: cap, Allocatable: api.Allocatable{Online: cap, Offline: cap}},
			PollWait: time.Second, RetryMin: 10 * time.Millisecond, RetryMax: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		a, err := nodelet.New(nodelet.Config{Node: name, Runtime: sim.New(sim.NewHost()), Dispatcher: d,
			StopGrace: time.Millisecond, RetryMin: 10 * time.Millisecond, RetryMax: 100 * time.Millisecond,
			ResyncPeriod: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		errc := make(chan error, 1)
		go func() { errc <- a.Run(context.Background()) }()
		t.Cleanup(func() {
			_ = a.Close()
			if err := <-errc; err != nil {
				t.Errorf("nodelet %s: %v", name, err)
			}
		})
	}
	eventually(t, "the nodes to join", func() bool {
		l, err := c.Nodes(context.Background())
		return err == nil && len(l.Nodes) == n
	})
	return c, s
}

// eventually tests cond every 10ms until it holds, and fails t if wait
// passes first. It polls because its conditions span components that
// talk over loopback HTTP (the dispatcher, the nodelets' long-polls and
// the appmaster's watch), none of which signals what the others did: a
// handler's call, the appmaster's view and the dispatcher's state each
// move on their own.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", wait, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// recorder is a Handler that keeps what it was told.
type recorder struct {
	mu        sync.Mutex
	running   []string
	completed map[string]api.CapboxState
}

func newRecorder() *recorder { return &recorder{completed: map[string]api.CapboxState{}} }

func (r *recorder) CapboxRunning(b api.CapboxStatus) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.running = append(r.running, b.ID)
}

func (r *recorder) CapboxCompleted(b api.CapboxStatus) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.completed[b.ID]; ok {
		panic("completed twice: " + b.ID)
	}
	r.completed[b.ID] = b.State
}

func (r *recorder) counts() (running, completed int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.running), len(r.completed)
}

func run(t *testing.T, am *appmaster.Appmaster) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- am.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("run: %v", err)
		}
	})
}

// TestCapboxLifecycle leases capboxes in client mode on real sim
// nodelets over HTTP: they run, a released one completes, stopping the
// appmaster releases the rest, and each handler call comes once.
func TestCapboxLifecycle(t *testing.T) {
	c := cluster(t, 2)
	ctx := context.Background()
	am, err := appmaster.Register(ctx, appmaster.Config{Client: c}, api.JobSpec{Name: "am", Queue: "q"})
	if err != nil {
		t.Fatal(err)
	}
	run(t, am)
	workers, gang := newRecorder(), newRecorder()
	res := api.Resources{CPU: 1000, Memory: 1 << 30}
	if _, err := am.CreateCapboxes(ctx, api.CapboxRequest{Name: "workers", Count: 3, Resources: res}, workers); err != nil {
		t.Fatal(err)
	}
	if _, err := am.CreateCapboxes(ctx, api.CapboxRequest{Name: "ps", Count: 2, Resources: res, AllOrNothing: true, DistinctNodes: true}, gang); err != nil {
		t.Fatal(err)
	}
	// Too big for the cluster as a gang: stays pending, whole.
	big := newRecorder()
	if _, err := am.CreateCapboxes(ctx, api.CapboxRequest{Name: "big", Count: 3, Resources: api.Resources{CPU: 3000, Memory: 1 << 30}, AllOrNothing: true}, big); err != nil {
		t.Fatal(err)
	}
	eventually(t, "5 capboxes running", func() bool {
		w, _ := workers.counts()
		g, _ := gang.counts()
		return w == 3 && g == 2
	})
	boxes, err := am.Capboxes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var nodes []string
	for _, b := range boxes {
		switch b.Request {
		case "ps":
			nodes = append(nodes, b.Node)
		case "big":
			if b.State != api.CapboxPending {
				t.Errorf("capbox %s of the gang that cannot fit is %s", b.ID, b.State)
			}
		}
	}
	if len(nodes) != 2 || nodes[0] == nodes[1] {
		t.Errorf("distinct-node gang on nodes %v", nodes)
	}
	if err := am.Release(ctx, workers.running[0]); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the released capbox to complete", func() bool { _, n := workers.counts(); return n == 1 })
	if st := workers.completed[workers.running[0]]; st != api.CapboxReleased {
		t.Errorf("released capbox completed %s", st)
	}
	if err := am.Release(ctx, "j1/0/0/1"); !api.IsConflict(err) {
		t.Errorf("release a task ID that is not a capbox's: %v, want conflict", err)
	}
	if err := am.Release(ctx, "j2/0/9/1"); !api.IsNotFound(err) {
		t.Errorf("release a capbox the set does not have: %v, want not found", err)
	}
	if err := am.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, "every capbox to complete", func() bool {
		_, w := workers.counts()
		_, g := gang.counts()
		_, b := big.counts()
		return w == 3 && g == 2 && b == 3
	})
	if r, _ := big.counts(); r != 0 {
		t.Errorf("the gang that could not fit ran %d capboxes", r)
	}
	eventually(t, "the nodes to free everything", func() bool {
		l, err := c.Nodes(ctx)
		if err != nil {
			return false
		}
		for _, n := range l.Nodes {
			if n.Used.Offline != (api.Capacity{}) || n.Used.Online != (api.Capacity{}) {
				return false
			}
		}
		return true
	})
}

// TestAttachRecovers restarts an appmaster session: a recovered capbox's
// set keeps a handler, one recover declines is released, and Attach
// without a job and without SLUICE_JOB_ID says so.
func TestAttachRecovers(t *testing.T) {
	c := cluster(t, 1)
	ctx := context.Background()
	am, err := appmaster.Register(ctx, appmaster.Config{Client: c}, api.JobSpec{Name: "am"})
	if err != nil {
		t.Fatal(err)
	}
	res := api.Resources{CPU: 500, Memory: 1 << 28}
	keep, err := am.CreateCapboxes(ctx, api.CapboxRequest{Name: "keep", Count: 2, Resources: res}, newRecorder())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := am.CreateCapboxes(ctx, api.CapboxRequest{Name: "drop", Count: 1, Resources: res}, newRecorder()); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the capboxes to run", func() bool {
		bs, err := am.Capboxes(ctx)
		return err == nil && len(bs) == 3 && !slices.ContainsFunc(bs, func(b api.CapboxStatus) bool { return b.State != api.CapboxRunning })
	})

	// The appmaster restarts.
	rec := newRecorder()
	var offered []string
	am2, err := appmaster.Attach(ctx, appmaster.Config{Client: c}, am.Job(), func(b api.CapboxStatus) appmaster.Handler {
		offered = append(offered, b.Set)
		if b.Set == keep {
			return rec
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(offered) != 2 {
		t.Errorf("recover offered sets %v, want one call per set", offered)
	}
	run(t, am2)
	eventually(t, "the dropped capbox to be released", func() bool {
		bs, err := am2.Capboxes(ctx)
		return err == nil && bs[2].State == api.CapboxReleased && bs[0].State == api.CapboxRunning
	})
	bs, _ := am2.Capboxes(ctx)
	if err := am2.Release(ctx, bs[0].ID); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the recovered handler to hear of the release", func() bool { _, n := rec.counts(); return n == 1 })
	if r, _ := rec.counts(); r != 0 {
		t.Errorf("recovered handler told %d capboxes running again", r)
	}

	t.Setenv(appmaster.EnvJob, "")
	if _, err := appmaster.Attach(ctx, appmaster.Config{Client: c}, "", nil); !errors.Is(err, appmaster.ErrNoJob) {
		t.Errorf("Attach with no job: %v", err)
	}
	t.Setenv(appmaster.EnvJob, am.Job())
	if a, err := appmaster.Attach(ctx, appmaster.Config{Client: c}, "", func(api.CapboxStatus) appmaster.Handler { return rec }); err != nil || a.Job() != am.Job() {
		t.Errorf("Attach from %s: %v", appmaster.EnvJob, err)
	}
	if _, err := appmaster.Attach(ctx, appmaster.Config{Client: c}, "j99", nil); !api.IsNotFound(err) {
		t.Errorf("Attach to j99: %v, want not found", err)
	}
	plain, err := c.Submit(ctx, []api.JobSpec{{Name: "plain", Tasks: []api.TaskGroupSpec{{Count: 1, Pod: api.PodSpec{
		Containers: []api.ContainerSpec{{Image: api.Image{Rootfs: "/img"}, Command: []string{"/x"}, Resources: res}}}}}}}, api.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateCapboxes(ctx, plain.Jobs[0], []api.CapboxRequest{{Name: "x", Count: 1, Resources: res}}); !api.IsConflict(err) {
		t.Errorf("capboxes for a job that is not an appmaster: %v, want conflict", err)
	}
	if _, err := c.CreateCapboxes(ctx, am.Job(), []api.CapboxRequest{{Name: "x", Count: 0, Resources: res}}); !errors.Is(err, api.ErrInvalid) {
		t.Errorf("a capbox request of count 0: %v, want invalid", err)
	}
}

// taskRecorder is a TaskHandler that keeps what it was told.
type taskRecorder struct {
	mu        sync.Mutex
	running   map[string]bool
	completed map[string]api.CapTaskStatus
}

func newTaskRecorder() *taskRecorder {
	return &taskRecorder{running: map[string]bool{}, completed: map[string]api.CapTaskStatus{}}
}

func (r *taskRecorder) TaskRunning(t api.CapTaskStatus) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.running[t.ID] {
		panic("running twice: " + t.ID)
	}
	r.running[t.ID] = true
}

func (r *taskRecorder) TaskCompleted(t api.CapTaskStatus) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.completed[t.ID]; ok {
		panic("completed twice: " + t.ID)
	}
	r.completed[t.ID] = t
}

func (r *taskRecorder) done(id string) (api.CapTaskStatus, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.completed[id]
	return t, ok
}

func simTask(cpu int64, run time.Duration, code int32) api.PodSpec {
	return api.PodSpec{
		Containers: []api.ContainerSpec{{Image: api.Image{Rootfs: "/img"}, Command: []string{"/bin/work"},
			Resources: api.Resources{CPU: cpu, Memory: 64 << 20}}},
		Sim: &api.SimSpec{RunTime: api.Duration(run), ExitCode: code},
	}
}

// TestTasksInCapboxes runs an appmaster's own tasks in its capboxes on
// sim nodelets: they run and end with their exit codes, one is stopped,
// one that does not fit is refused, and releasing the capbox ends the
// rest.
func TestTasksInCapboxes(t *testing.T) {
	c := cluster(t, 1)
	ctx := context.Background()
	am, err := appmaster.Register(ctx, appmaster.Config{Client: c}, api.JobSpec{Name: "am"})
	if err != nil {
		t.Fatal(err)
	}
	run(t, am)
	boxes := newRecorder()
	if _, err := am.CreateCapboxes(ctx, api.CapboxRequest{Name: "w", Count: 1, Resources: api.Resources{CPU: 2000, Memory: 1 << 30}}, boxes); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the capbox to run", func() bool { n, _ := boxes.counts(); return n == 1 })
	box := boxes.running[0]

	tasks := newTaskRecorder()
	// The short tasks run for a second: long enough to still hold their
	// room when "big" asks for it three commits later, each of which may
	// wait for the replicas' spaced log syncs.
	ok, err := am.StartTask(ctx, box, "ok", simTask(500, time.Second, 0), tasks)
	if err != nil {
		t.Fatal(err)
	}
	bad, err := am.StartTask(ctx, box, "bad", simTask(500, time.Second, 3), tasks)
	if err != nil {
		t.Fatal(err)
	}
	long, err := am.StartTask(ctx, box, "long", simTask(1000, time.Hour, 0), tasks)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := am.StartTask(ctx, box, "ok", simTask(500, time.Hour, 0), tasks); err != nil || again != ok {
		t.Errorf("starting a taken name: %s, %v; want %s", again, err, ok)
	}
	if _, err := am.StartTask(ctx, box, "big", simTask(1000, time.Hour, 0), tasks); !api.IsConflict(err) {
		t.Errorf("a task beyond the capbox's room: %v, want conflict", err)
	}
	if _, err := am.StartTask(ctx, "j9/0/0/1", "x", simTask(1, time.Hour, 0), tasks); !api.IsNotFound(err) {
		t.Errorf("a task in no capbox: %v, want not found", err)
	}
	eventually(t, "the short tasks to end", func() bool {
		_, a := tasks.done(ok)
		_, b := tasks.done(bad)
		return a && b
	})
	if st, _ := tasks.done(ok); st.State != api.TaskSucceeded {
		t.Errorf("task ok ended %s", st.State)
	}
	if st, _ := tasks.done(bad); st.State != api.TaskFailed || st.ExitCode != 3 {
		t.Errorf("task bad ended %s with %d", st.State, st.ExitCode)
	}
	// Room freed by the ended tasks holds a new one.
	more, err := am.StartTask(ctx, box, "more", simTask(1000, time.Hour, 0), tasks)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the long tasks to run", func() bool {
		tasks.mu.Lock()
		defer tasks.mu.Unlock()
		return tasks.running[long] && tasks.running[more]
	})
	if err := am.StopTasks(ctx, long); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the stopped task to end", func() bool { _, d := tasks.done(long); return d })
	if st, _ := tasks.done(long); st.State != api.TaskKilled {
		t.Errorf("stopped task ended %s", st.State)
	}
	if err := am.Release(ctx, box); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the capbox and its last task to end", func() bool {
		_, d := tasks.done(more)
		_, n := boxes.counts()
		return d && n == 1
	})
	if st, _ := tasks.done(more); st.State != api.TaskKilled {
		t.Errorf("task of a released capbox ended %s", st.State)
	}
	if _, err := am.StartTask(ctx, box, "late", simTask(1, time.Hour, 0), tasks); !api.IsConflict(err) {
		t.Errorf("a task in a released capbox: %v, want conflict", err)
	}
	ts, err := am.Tasks(ctx, box)
	if err != nil || len(ts) != 4 {
		t.Fatalf("tasks of the capbox: %+v, %v", ts, err)
	}
}
