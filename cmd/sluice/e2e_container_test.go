package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/dispatcher/server"
	"github.com/sluicehq/sluice/nodelet/remote"
)

// TestContainerEndToEnd runs real containers through real servers: a
// dispatcher (server.Open) and two nodelets with the container runtime,
// driven through the Go API client. It submits a 3-task job, a pod of a
// server and a client talking over the pod's loopback, a long sleeper and
// a job whose images lie outside the nodes' image roots (named so, and
// through a link inside the root), which fails as image_denied unstarted,
// and a job whose pods run a container as 1000:1000 on a read-only image;
// watches the first two to completion; lists jobs; reads what the
// containers printed through the dispatcher's log proxy; and cancels the
// sleeper, whose container is then stopped and removed from the host.
//
// The sleeper runs alone on a node of its own pool that keeps no ended
// pods, so that its removal can be checked; the other node keeps ended
// pods for a minute, so that their logs can be read.
func TestContainerEndToEnd(t *testing.T) {
	needContainers(t)
	image := demoImage(t)

	ctx, srv, logger := startE2EDispatcher(t)

	// node-main runs the jobs whose output is read; node-cancel the one
	// that is cancelled.
	const mainPool, cancelPool = "main", "cancel"
	mainState, cancelState := t.TempDir(), t.TempDir()
	startNode := func(name, pool, stateDir string, retain time.Duration) {
		startE2ENodelet(ctx, t, srv, logger, nodeletConfig{
			name: name, runtime: "container", pool: pool, noPodNetwork: true,
			stateDir: stateDir, imageRoots: []string{filepath.Dir(image)}, cpu: 2000, memory: 1 << 30, removePods: true, retainExited: retain,
		}, func() { checkNoPods(t, name, stateDir) })
	}
	startNode("node-main", mainPool, mainState, time.Minute)
	startNode("node-cancel", cancelPool, cancelState, 0)
	client := e2eClient(ctx, t, srv, 2)

	w := startJobWatch(ctx, t, client)

	container := func(name string, args ...string) api.ContainerSpec {
		return api.ContainerSpec{
			Name: name, Image: api.Image{Rootfs: image}, Command: append([]string{"/workload"}, args...),
			Resources: api.Resources{CPU: 250, Memory: 32 << 20},
		}
	}
	once := api.RetryPolicy{MaxAttempts: 1} // a failure shows at once
	// A container that runs as 1000:1000 on its image mounted read-only.
	unprivileged := container("unprivileged", "id")
	unprivileged.Security = &api.ContainerSecurity{User: api.ContainerUser{UID: 1000, GID: 1000}, ReadOnlyRootfs: true}
	// A working image outside the image root, and a link to it inside.
	outside := filepath.Join(t.TempDir(), "copy")
	if err := os.CopyFS(outside, os.DirFS(image)); err != nil {
		t.Fatal(err)
	}
	escape := filepath.Join(filepath.Dir(image), "escape")
	if err := os.Symlink(outside, escape); err != nil {
		t.Fatal(err)
	}
	deniedPod := func(rootfs string) api.PodSpec {
		c := container("main", "primes", "1000")
		c.Image.Rootfs = rootfs
		return api.PodSpec{Containers: []api.ContainerSpec{c}}
	}
	res, err := client.Submit(ctx, []api.JobSpec{
		{Name: "primes", Pool: mainPool, Retry: once, Tasks: []api.TaskGroupSpec{{Count: 3, Pod: api.PodSpec{
			Containers: []api.ContainerSpec{container("main", "primes", "100000")},
		}}}},
		{Name: "ask-a-server", Pool: mainPool, Retry: once, Tasks: []api.TaskGroupSpec{{Count: 1, Pod: api.PodSpec{
			Containers: []api.ContainerSpec{
				container("server", "serve", "7070", "1"),
				container("client", "ask", "7070", "100000"),
			},
		}}}},
		{Name: "sleeper", Pool: cancelPool, Retry: once, Tasks: []api.TaskGroupSpec{{Count: 1, Pod: api.PodSpec{
			Containers: []api.ContainerSpec{container("main", "sleep", "300s")},
		}}}},
		{Name: "denied", Pool: mainPool, Retry: once, Tasks: []api.TaskGroupSpec{
			{Name: "outside", Count: 1, Pod: deniedPod(outside)},
			{Name: "escape", Count: 1, Pod: deniedPod(escape)},
		}},
		{Name: "identity", Pool: mainPool, Retry: once, Tasks: []api.TaskGroupSpec{{Name: "shards", Count: 2, Pod: api.PodSpec{
			Containers: []api.ContainerSpec{container("main", "env"), unprivileged},
		}}}},
	}, api.SubmitOptions{})
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	if len(res.Jobs) != 5 {
		t.Fatalf("submit answered %+v, want 5 jobs", res)
	}
	primesJob, podJob, sleepJob, deniedJob, identityJob := res.Jobs[0], res.Jobs[1], res.Jobs[2], res.Jobs[3], res.Jobs[4]

	// The watch is the completion signal of the three short jobs.
	w.waitFor(t, 60*time.Second, "jobs "+primesJob+", "+podJob+" and "+identityJob+" succeeded", func(last map[string]api.JobStatus) (bool, error) {
		for _, id := range []string{primesJob, podJob, identityJob} {
			if s := last[id].State; s == api.JobFailed || s == api.JobCancelled {
				return false, fmt.Errorf("job %s ended %s", id, s)
			}
		}
		return last[primesJob].State == api.JobSucceeded && last[podJob].State == api.JobSucceeded &&
			last[identityJob].State == api.JobSucceeded, nil
	})
	for id, total := range map[string]int64{primesJob: 3, podJob: 1} {
		w.checkHistory(t, id, api.JobSucceeded)
		want := api.TaskCounts{Total: total, Succeeded: total}
		if got := w.last(id).Tasks; got != want {
			t.Errorf("job %s: last watched task counts %+v, want %+v", id, got, want)
		}
	}

	// The images outside the root are refused, and nothing of them runs.
	w.waitFor(t, 60*time.Second, "job "+deniedJob+" failed", func(last map[string]api.JobStatus) (bool, error) {
		return last[deniedJob].State == api.JobFailed, nil
	})
	deniedTasks, err := client.Tasks(ctx, deniedJob, "", 0)
	if err != nil || len(deniedTasks.Tasks) != 2 {
		t.Fatalf("tasks of %s: %+v, %v; want 2", deniedJob, deniedTasks.Tasks, err)
	}
	for _, ts := range deniedTasks.Tasks {
		if ts.State != api.TaskFailed || ts.Reason != api.ReasonImageDenied || ts.Node != "node-main" {
			t.Errorf("task %+v: want failed on node-main with reason %s", ts, api.ReasonImageDenied)
		}
		if _, err := os.Stat(filepath.Join(mainState, "pods", remote.PodID(ts.ID))); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("task %s: the refused pod has state on the node: %v", ts.ID, err)
		}
	}

	// The sleeper runs.
	sleepTask := waitOneTask(ctx, t, client, sleepJob, func(ts api.TaskStatus) bool { return ts.State == api.TaskRunning })
	if sleepTask.Node != "node-cancel" {
		t.Errorf("task %s runs on %q, want node-cancel", sleepTask.ID, sleepTask.Node)
	}

	// Listing.
	list, err := client.Jobs(ctx, api.JobQuery{})
	if err != nil {
		t.Fatalf("list jobs: %v", err)
	}
	checkJobList(t, "all jobs", list, map[string]wantJob{
		primesJob:   {"primes", api.JobSucceeded, api.TaskCounts{Total: 3, Succeeded: 3}},
		podJob:      {"ask-a-server", api.JobSucceeded, api.TaskCounts{Total: 1, Succeeded: 1}},
		sleepJob:    {"sleeper", api.JobRunning, api.TaskCounts{Total: 1, Active: 1}},
		deniedJob:   {"denied", api.JobFailed, api.TaskCounts{Total: 2, Failed: 2}},
		identityJob: {"identity", api.JobSucceeded, api.TaskCounts{Total: 2, Succeeded: 2}},
	})
	list, err = client.Jobs(ctx, api.JobQuery{States: []api.JobState{api.JobSucceeded}})
	if err != nil {
		t.Fatalf("list succeeded jobs: %v", err)
	}
	checkJobList(t, "succeeded jobs", list, map[string]wantJob{
		primesJob:   {"primes", api.JobSucceeded, api.TaskCounts{Total: 3, Succeeded: 3}},
		podJob:      {"ask-a-server", api.JobSucceeded, api.TaskCounts{Total: 1, Succeeded: 1}},
		identityJob: {"identity", api.JobSucceeded, api.TaskCounts{Total: 2, Succeeded: 2}},
	})

	// What the containers printed, through the dispatcher's log proxy.
	primesTasks, err := client.Tasks(ctx, primesJob, "", 0)
	if err != nil {
		t.Fatalf("tasks of %s: %v", primesJob, err)
	}
	if len(primesTasks.Tasks) != 3 {
		t.Errorf("job %s lists tasks %+v, want 3", primesJob, primesTasks.Tasks)
	}
	for _, ts := range primesTasks.Tasks {
		if ts.State != api.TaskSucceeded || ts.Node != "node-main" || ts.Reason != api.ReasonExited || ts.ExitCode != 0 {
			t.Errorf("task %+v: want succeeded on node-main, exited with 0", ts)
		}
		checkTaskLogs(ctx, t, client, ts.ID, "main", "9592 primes up to 100000\n")
	}
	podTasks, err := client.Tasks(ctx, podJob, "", 0)
	if err != nil || len(podTasks.Tasks) != 1 {
		t.Fatalf("tasks of %s: %+v, %v; want 1", podJob, podTasks.Tasks, err)
	}
	podTask := podTasks.Tasks[0]
	if podTask.State != api.TaskSucceeded || podTask.Node != "node-main" {
		t.Errorf("task %+v: want succeeded on node-main", podTask)
	}
	checkTaskLogs(ctx, t, client, podTask.ID, "client", "the server counted 9592 primes up to 100000\n")
	checkTaskLogs(ctx, t, client, podTask.ID, "server", "serving on 127.0.0.1:7070\nanswered primes up to 100000\n")
	// Every container sees its task's identity, the node's name and the
	// dispatcher URLs the nodelet was given.
	identityTasks, err := client.Tasks(ctx, identityJob, "", 0)
	if err != nil || len(identityTasks.Tasks) != 2 {
		t.Fatalf("tasks of %s: %+v, %v; want 2", identityJob, identityTasks.Tasks, err)
	}
	for i, ts := range identityTasks.Tasks {
		checkTaskLogs(ctx, t, client, ts.ID, "main", fmt.Sprintf("SLUICE_ADDR=%s\nSLUICE_ATTEMPT=1\nSLUICE_GROUP=shards\nSLUICE_JOB_ID=%s\n"+
			"SLUICE_JOB_NAME=identity\nSLUICE_NODE=node-main\nSLUICE_TASK_COUNT=2\nSLUICE_TASK_ID=%s\nSLUICE_TASK_INDEX=%d\n",
			srv.Addr(), identityJob, ts.ID, i))
		checkTaskLogs(ctx, t, client, ts.ID, "unprivileged", "uid=1000 gid=1000 rootfs=read-only\n")
	}
	t.Run("default container", func(t *testing.T) {
		// A request that names no container gets the pod's first.
		for _, ts := range primesTasks.Tasks {
			checkTaskLogs(ctx, t, client, ts.ID, "", "9592 primes up to 100000\n")
		}
		checkTaskLogs(ctx, t, client, podTask.ID, "", "serving on 127.0.0.1:7070\nanswered primes up to 100000\n")
	})

	// Cancel the sleeper: its container is stopped, then removed.
	podID := remote.PodID(sleepTask.ID)
	podDir := filepath.Join(cancelState, "pods", podID)
	if _, err := os.Stat(podDir); err != nil {
		t.Errorf("running pod %s has no state directory: %v", podID, err)
	}
	podCgroups := func() []string {
		m, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", "sluice", "*", podID))
		m2, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "sluice", "*", podID)) // cgroup v2
		return append(m, m2...)
	}
	if len(podCgroups()) == 0 {
		t.Errorf("running pod %s has no cgroup under /sys/fs/cgroup/.../sluice/TIER/", podID)
	}
	cr, err := client.Cancel(ctx, sleepJob)
	if err != nil {
		t.Fatalf("cancel %s: %v", sleepJob, err)
	}
	if cr.ID != sleepJob || cr.Stopping != 1 || cr.Dropped != 0 {
		t.Errorf("cancel answered %+v, want 1 task stopping, none dropped", cr)
	}
	w.waitFor(t, 30*time.Second, "job "+sleepJob+" cancelled with its task killed", func(last map[string]api.JobStatus) (bool, error) {
		j := last[sleepJob]
		return j.State == api.JobCancelled && j.Tasks.Killed == 1 && j.Tasks.Active == 0, nil
	})
	w.checkHistory(t, sleepJob, api.JobCancelled)
	killed := waitOneTask(ctx, t, client, sleepJob, func(ts api.TaskStatus) bool { return ts.State.Done() })
	if killed.ID != sleepTask.ID || killed.State != api.TaskKilled || killed.Reason != api.ReasonStopped {
		t.Errorf("cancelled task %+v: want %s killed with reason %s", killed, sleepTask.ID, api.ReasonStopped)
	}
	j, err := client.Job(ctx, sleepJob)
	if err != nil || j.State != api.JobCancelled || j.Tasks != (api.TaskCounts{Total: 1, Killed: 1}) {
		t.Errorf("job %s after cancel: %s %+v, %v; want cancelled with 1 task killed", sleepJob, j.State, j.Tasks, err)
	}
	list, err = client.Jobs(ctx, api.JobQuery{States: []api.JobState{api.JobCancelled}})
	if err != nil {
		t.Fatalf("list cancelled jobs: %v", err)
	}
	checkJobList(t, "cancelled jobs", list, map[string]wantJob{
		sleepJob: {"sleeper", api.JobCancelled, api.TaskCounts{Total: 1, Killed: 1}},
	})
	// node-cancel keeps no ended pod: once the kill is reported the pod
	// is removed, its state directory and cgroups with it.
	pollUntil(t, 30*time.Second, "pod "+podID+" removed from the host", func() (bool, string) {
		_, err := os.Stat(podDir)
		cgs := podCgroups()
		return errors.Is(err, os.ErrNotExist) && len(cgs) == 0, fmt.Sprintf("state directory: %v; cgroups: %v", err, cgs)
	})
}

// startE2EDispatcher starts a single-replica dispatcher for a container
// test, with a context that bounds the test and a logger whose output the
// test prints if it fails. Its cleanups remove the cgroups the test's
// nodelets leave (they run last, after the nodelets' own).
func startE2EDispatcher(t *testing.T) (context.Context, *server.Server, *slog.Logger) {
	t.Helper()
	return startE2EDispatcherWith(t, nil)
}

// startE2EDispatcherWith is startE2EDispatcher with the dispatcher's
// configuration changed by set (when not nil) first.
func startE2EDispatcherWith(t *testing.T, set func(*server.Config)) (context.Context, *server.Server, *slog.Logger) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	logs := &e2eLogBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cgroupsBefore := existingCgroups("sluice", "sluice/offline", "sluice/online")
	t.Cleanup(func() {
		removeNewCgroups(cgroupsBefore, "sluice/offline", "sluice/online", "sluice")
		if t.Failed() {
			t.Logf("logs of the dispatcher and the nodelets:\n%s", logs.String())
		}
	})
	cfg := server.Config{
		ID: 1, Peers: map[uint64]string{1: ""}, Dir: filepath.Join(t.TempDir(), "dispatcher"),
		HTTPAddr: "127.0.0.1:0", Logger: logger.With("part", "dispatcher"),
	}
	if set != nil {
		set(&cfg)
	}
	srv, err := server.Open(cfg)
	if err != nil {
		t.Fatalf("open the dispatcher: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("close the dispatcher: %v", err)
		}
	})
	return ctx, srv, logger
}

// startE2ENodelet starts a nodelet of cfg for a container test, as a
// node of srv's, its logs tagged with its name; in a cleanup it stops it,
// then runs after (when not nil) to check what the node left.
func startE2ENodelet(ctx context.Context, t *testing.T, srv *server.Server, logger *slog.Logger, cfg nodeletConfig, after func()) {
	t.Helper()
	cfg.dispatchers = []string{srv.Addr()}
	stop, err := startNodelet(ctx, cfg, logger.With("node", cfg.name))
	if err != nil {
		t.Fatalf("start nodelet %s: %v", cfg.name, err)
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("stop nodelet %s: %v", cfg.name, err)
		}
		if after != nil {
			after()
		}
	})
}

// checkNoPods checks that a stopped nodelet with removePods left nothing
// of its pods in its state directory.
func checkNoPods(t *testing.T, name, stateDir string) {
	t.Helper()
	if ents, err := os.ReadDir(filepath.Join(stateDir, "pods")); err != nil || len(ents) != 0 {
		t.Errorf("nodelet %s left pods behind: %v, %v", name, entryNames(ents), err)
	}
}

// e2eClient returns a client of srv, closed in a cleanup, once n nodes
// have registered.
func e2eClient(ctx context.Context, t *testing.T, srv *server.Server, n int) *api.Client {
	t.Helper()
	client, err := api.NewClient(api.ClientConfig{Addrs: []string{srv.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	if err := waitNodes(ctx, client, n); err != nil {
		t.Fatal(err)
	}
	return client
}

// needContainers skips the test unless it can run containers: as root,
// with a cgroup file system mounted (v1 hierarchies or v2).
func needContainers(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the container runtime creates namespaces and cgroups")
	}
	for _, p := range []string{"/sys/fs/cgroup/cgroup.controllers", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		if _, err := os.Stat(p); err == nil {
			return
		}
	}
	t.Skip("needs cgroups: neither cgroup v2 nor a v1 memory hierarchy is mounted at /sys/fs/cgroup")
}

// needCNI skips the test unless the CNI plugins a pod network needs are
// installed.
func needCNI(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/usr/lib/cni/bridge"); err != nil {
		t.Skip("needs the CNI plugins in /usr/lib/cni (scripts/install-cni.sh)")
	}
}

// demoImage builds the demo image as scripts/demo-image does, in a
// temporary directory of its own, the image root to give nodelets
// (filepath.Dir of the path), and returns its path.
func demoImage(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "demo")
	for _, d := range []string{"", "proc", "dev", "sys", "tmp", "etc"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	buildStatic(t, filepath.Join(dir, "workload"), "./examples/workload")
	return dir
}

// buildStatic builds the package pkg, a path from the module's root such
// as ./examples/workload, into the program out, static (CGO_ENABLED=0) and
// stripped, as a container image holds it.
func buildStatic(t *testing.T, out, pkg string) {
	t.Helper()
	build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, pkg)
	build.Dir = "../.."
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build %s into %s: %v\n%s", pkg, out, err, b)
	}
}

// jobWatch follows the watch stream from index 0 and keeps every job's
// states in order.
type jobWatch struct {
	changed chan struct{} // one token after each event
	done    chan struct{} // closed when the goroutine ends

	mu struct {
		sync.Mutex
		states map[string][]api.JobState // every state seen, by job ID
		last   map[string]api.JobStatus  // the last status seen, by job ID
		errs   []error                   // the watch's failures
	}
}

// startJobWatch starts following the watch stream, resuming it when it
// ends, until the test ends.
func startJobWatch(ctx context.Context, t *testing.T, c *api.Client) *jobWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &jobWatch{changed: make(chan struct{}, 1), done: make(chan struct{})}
	w.mu.states = map[string][]api.JobState{}
	w.mu.last = map[string]api.JobStatus{}
	go func() {
		defer close(w.done)
		var from uint64
		for ctx.Err() == nil {
			err := c.Watch(ctx, from, func(ev api.WatchEvent) error {
				w.mu.Lock()
				w.mu.states[ev.Job.ID] = append(w.mu.states[ev.Job.ID], ev.Job.State)
				w.mu.last[ev.Job.ID] = ev.Job
				w.mu.Unlock()
				// Resume from the index before: another job may share it.
				from = max(ev.Index, 1) - 1
				select {
				case w.changed <- struct{}{}:
				default:
				}
				return nil
			})
			if ctx.Err() != nil {
				return
			}
			w.mu.Lock()
			w.mu.errs = append(w.mu.errs, fmt.Errorf("watch from %d ended: %v", from, err))
			w.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-w.done
	})
	return w
}

// waitFor waits until cond, given the last status of every job watched,
// holds; it fails the test when cond returns an error or within timeout.
func (w *jobWatch) waitFor(t *testing.T, timeout time.Duration, what string, cond func(last map[string]api.JobStatus) (bool, error)) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		w.mu.Lock()
		ok, err := cond(w.mu.last)
		w.mu.Unlock()
		switch {
		case err != nil:
			t.Fatalf("watching for %s: %v\n%s", what, err, w.dump())
		case ok:
			return
		}
		select {
		case <-w.changed:
		case <-deadline.C:
			t.Fatalf("watching for %s: not seen after %v\n%s", what, timeout, w.dump())
		}
	}
}

// last returns the last status the watch saw of job id.
func (w *jobWatch) last(id string) api.JobStatus {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.mu.last[id]
}

// checkHistory checks that the states the watch saw of job id go forward
// (pending, running, then the end) and stay at end once there.
func (w *jobWatch) checkHistory(t *testing.T, id string, end api.JobState) {
	t.Helper()
	w.mu.Lock()
	states := slices.Clone(w.mu.states[id])
	w.mu.Unlock()
	rank := map[api.JobState]int{api.JobPending: 0, api.JobRunning: 1, end: 2}
	prev := 0
	for i, s := range states {
		r, ok := rank[s]
		if !ok || r < prev {
			t.Errorf("job %s: watched states %v: %s at %d is out of order (want pending, running, %s)", id, states, s, i, end)
			return
		}
		prev = r
	}
	if len(states) == 0 || states[len(states)-1] != end {
		t.Errorf("job %s: watched states %v, want them to end with %s", id, states, end)
	}
}

// dump describes what the watch saw, for failures.
func (w *jobWatch) dump() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var b strings.Builder
	ids := make([]string, 0, len(w.mu.last))
	for id := range w.mu.last {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		j := w.mu.last[id]
		fmt.Fprintf(&b, "job %s (%s): states %v, tasks %+v, pending %+v\n", id, j.Spec.Name, w.mu.states[id], j.Tasks, j.Pending)
	}
	for _, err := range w.mu.errs {
		fmt.Fprintf(&b, "%v\n", err)
	}
	return b.String()
}

// wantJob is what checkJobList expects of a listed job.
type wantJob struct {
	name  string
	state api.JobState
	tasks api.TaskCounts
}

func checkJobList(t *testing.T, what string, list api.JobList, want map[string]wantJob) {
	t.Helper()
	if len(list.Jobs) != len(want) || list.Next != "" {
		t.Errorf("%s: listed %d jobs (next %q), want %d: %+v", what, len(list.Jobs), list.Next, len(want), list.Jobs)
	}
	for _, j := range list.Jobs {
		wj, ok := want[j.ID]
		if !ok {
			t.Errorf("%s: unexpected job %s (%s, %s)", what, j.ID, j.Spec.Name, j.State)
			continue
		}
		if j.Spec.Name != wj.name || j.State != wj.state || j.Tasks != wj.tasks {
			t.Errorf("%s: job %s is %s %s %+v, want %s %s %+v", what, j.ID, j.Spec.Name, j.State, j.Tasks, wj.name, wj.state, wj.tasks)
		}
	}
}

// waitOneTask polls the single task of job until ok holds and returns it.
func waitOneTask(ctx context.Context, t *testing.T, c *api.Client, job string, ok func(api.TaskStatus) bool) api.TaskStatus {
	t.Helper()
	var last api.TaskStatus
	pollUntil(t, 30*time.Second, "the task of job "+job, func() (bool, string) {
		l, err := c.Tasks(ctx, job, "", 0)
		if err != nil || len(l.Tasks) != 1 {
			return false, fmt.Sprintf("tasks %+v, %v", l.Tasks, err)
		}
		last = l.Tasks[0]
		return ok(last), fmt.Sprintf("task %+v", last)
	})
	return last
}

// pollUntil polls cond until it holds, failing the test with cond's last
// description after timeout.
func pollUntil(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: not done after %v; last: %s", what, timeout, state)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkTaskLogs reads a container's output through the dispatcher and
// compares it with want.
func checkTaskLogs(ctx context.Context, t *testing.T, c *api.Client, task, container, want string) {
	t.Helper()
	var out bytes.Buffer
	if err := c.Logs(ctx, task, api.LogOptions{Container: container}, &out); err != nil {
		t.Errorf("logs of %s container %q: %v (read %q)", task, container, err, out.String())
		return
	}
	if out.String() != want {
		t.Errorf("logs of %s container %q = %q, want %q", task, container, out.String(), want)
	}
}

// existingCgroups returns which of the cgroups (relative to each
// hierarchy's root) exist.
func existingCgroups(rel ...string) map[string]bool {
	have := map[string]bool{}
	for _, r := range rel {
		m, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", r))
		if st, err := os.Stat(filepath.Join("/sys/fs/cgroup", r)); err == nil && st.IsDir() {
			m = append(m, filepath.Join("/sys/fs/cgroup", r))
		}
		for _, p := range m {
			have[p] = true
		}
	}
	return have
}

// removeNewCgroups removes the cgroups among rel, in order, that did not
// exist before; a cgroup still in use is left alone (rmdir fails).
func removeNewCgroups(before map[string]bool, rel ...string) {
	for _, r := range rel {
		for p := range existingCgroups(r) {
			if !before[p] {
				_ = os.Remove(p)
			}
		}
	}
}

func entryNames(ents []os.DirEntry) []string {
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	return names
}

// e2eLogBuffer is a bytes.Buffer safe for concurrent writes.
type e2eLogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *e2eLogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *e2eLogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
