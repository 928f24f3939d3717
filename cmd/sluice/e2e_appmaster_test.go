package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/dispatcher/server"
)

// TestContainerAppmasterClusterMode runs an appmaster in the cluster with
// real containers: the job's task runs examples/appmaster in a container,
// which attaches with the job token its node gave it, leases two
// capboxes, runs four tasks in them (real containers too), releases them
// and exits 0; the job succeeds. Another appmaster whose task fails says
// why and exits 1, and its job fails. The token is in the appmaster's
// environment and in no reply of the API, and dies with its job.
//
// The pod has a network namespace of its own with loopback alone, so the
// test lets it reach the dispatcher, which listens on the host's
// loopback, through podLoopbackProxy: a listener on the dispatcher's
// address inside the pod's namespace that relays to the dispatcher. With
// bridge networking (SLUICE_ADDR rewritten to the node's address) the
// proxy goes, and the dispatcher listens where pods reach it.
func TestContainerAppmasterClusterMode(t *testing.T) {
	needContainers(t)
	image := demoImage(t)
	build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", filepath.Join(image, "appmaster"), "./examples/appmaster")
	build.Dir = "../.."
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the appmaster into the image: %v\n%s", err, out)
	}
	keys, err := server.NewJobKeys([]byte(strings.Repeat("e2e-key-", 5)))
	if err != nil {
		t.Fatal(err)
	}
	// The API asks for no token, but the job token is held to its job.
	ctx, srv, logger := startE2EDispatcherWith(t, func(c *server.Config) { c.JobKeys = keys })
	state := t.TempDir()
	stop, err := startNodelet(ctx, nodeletConfig{
		dispatchers: []string{srv.Addr()}, name: "node-am", runtime: "container", noPodNetwork: true, stateDir: state, imageRoots: []string{filepath.Dir(image)},
		cpu: 2000, memory: 1 << 30, removePods: true, retainExited: time.Minute,
	}, logger.With("node", "node-am"))
	if err != nil {
		t.Fatalf("start the nodelet: %v", err)
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("stop the nodelet: %v", err)
		}
		if ents, err := os.ReadDir(filepath.Join(state, "pods")); err != nil || len(ents) != 0 {
			t.Errorf("the nodelet left pods behind: %v, %v", entryNames(ents), err)
		}
	})
	client, err := api.NewClient(api.ClientConfig{Addrs: []string{srv.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	if err := waitNodes(ctx, client, 1); err != nil {
		t.Fatal(err)
	}
	w := startJobWatch(ctx, t, client)

	appmasterJob := func(name string, args ...string) api.JobSpec {
		return api.JobSpec{Name: name, Appmaster: true, Retry: api.RetryPolicy{MaxAttempts: 1},
			Tasks: []api.TaskGroupSpec{{Name: "master", Count: 1, Pod: api.PodSpec{Containers: []api.ContainerSpec{{
				Name: "main", Image: api.Image{Rootfs: image}, Command: append([]string{"/appmaster", "-image", image}, args...),
				Resources: api.Resources{CPU: 100, Memory: 64 << 20},
			}}}}}}
	}
	// The second one's task fails: it says so, and exits non-zero.
	res, err := client.Submit(ctx, []api.JobSpec{
		appmasterJob("am-cluster", "-capboxes", "2", "-tasks", "4", "--", "/workload", "primes", "100000"),
		appmasterJob("am-failing", "-capboxes", "1", "-tasks", "1", "--", "/workload", "primes", "many"),
	}, api.SubmitOptions{})
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	job, failing := res.Jobs[0], res.Jobs[1]
	task := job + "/0/0/1"

	var token string
	for _, id := range res.Jobs {
		pid, env := findPodProcess(t, 60*time.Second, api.EnvTaskID+"="+id+"/0/0/1", api.EnvAddr+"="+srv.Addr())
		tok := envValue(env, api.EnvToken)
		if !strings.HasPrefix(tok, server.JobTokenPrefix) || !strings.Contains(tok, "."+id+".") {
			t.Fatalf("the appmaster's environment has %s=%q, want %s's job token", api.EnvToken, tok, id)
		}
		if id == job {
			token = tok
		}
		podLoopbackProxy(t, pid, srv.Addr())
	}

	w.waitFor(t, 90*time.Second, "the appmaster job to succeed", func(last map[string]api.JobStatus) (bool, error) {
		switch last[job].State {
		case api.JobFailed, api.JobCancelled:
			return false, fmt.Errorf("job %s ended %s", job, last[job].State)
		}
		return last[job].State == api.JobSucceeded, nil
	})
	w.checkHistory(t, job, api.JobSucceeded)
	w.waitFor(t, 60*time.Second, "the failing appmaster job to fail", func(last map[string]api.JobStatus) (bool, error) {
		return last[failing].State == api.JobFailed, nil
	})
	ft := waitOneTask(ctx, t, client, failing, func(ts api.TaskStatus) bool { return ts.State.Done() })
	if ft.State != api.TaskFailed || ft.ExitCode != 1 {
		t.Errorf("the failing appmaster's task: %s, exit code %d; want failed, 1", ft.State, ft.ExitCode)
	}
	var out bytes.Buffer
	if err := client.Logs(ctx, ft.ID, api.LogOptions{}, &out); err != nil ||
		!strings.HasPrefix(out.String(), "appmaster: 1 of 1 tasks did not succeed: ") || !strings.HasSuffix(out.String(), "/0/0/1/step-1 failed (exit code 1)\n") {
		t.Errorf("the failing appmaster's output %q, %v: want it to say its task failed", out.String(), err)
	}
	tasks, err := client.Tasks(ctx, job, "", 0)
	if err != nil || len(tasks.Tasks) != 1 || tasks.Tasks[0].State != api.TaskSucceeded || tasks.Tasks[0].ExitCode != 0 {
		t.Fatalf("the appmaster's task: %+v, %v; want it succeeded with exit code 0", tasks, err)
	}
	boxes, err := client.Capboxes(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	for _, b := range boxes.Capboxes {
		if b.State != api.CapboxReleased || b.Node != "node-am" {
			t.Errorf("capbox %s: %s on %q, want released from node-am", b.ID, b.State, b.Node)
		}
		for _, ct := range b.Tasks {
			ran++
			if ct.State != api.TaskSucceeded {
				t.Errorf("capbox task %s: %s (%s, exit code %d), want succeeded", ct.ID, ct.State, ct.Reason, ct.ExitCode)
			}
		}
	}
	if len(boxes.Capboxes) != 2 || ran != 4 {
		t.Errorf("%d capboxes ran %d tasks, want 2 and 4: %+v", len(boxes.Capboxes), ran, boxes.Capboxes)
	}
	checkTaskLogs(ctx, t, client, task, "", "appmaster "+job+" (cluster mode, in a container): leased 2 capboxes on node-am (2) and ran 4 tasks in them: 4 succeeded; then released them\n")
	// A capbox task's output, and no token anywhere the API shows.
	checkTaskLogs(ctx, t, client, boxes.Capboxes[0].Tasks[0].ID, "", "9592 primes up to 100000\n")
	for what, get := range map[string]func() (any, error){
		"job":      func() (any, error) { return client.Job(ctx, job) },
		"tasks":    func() (any, error) { return client.Tasks(ctx, job, "", 0) },
		"capboxes": func() (any, error) { return client.Capboxes(ctx, job) },
		"jobs":     func() (any, error) { return client.Jobs(ctx, api.JobQuery{}) },
	} {
		v, err := get()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if s := fmt.Sprintf("%+v", v); strings.Contains(s, token) || strings.Contains(s, server.JobTokenPrefix) {
			t.Errorf("the %s reply shows a job token", what)
		}
	}
	// The token died with the job.
	c2, err := api.NewClient(api.ClientConfig{Addrs: []string{srv.Addr()}, Token: token, Rounds: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, err := c2.Job(ctx, job); api.ErrorCode(err) != api.CodeUnauthorized {
		t.Errorf("the job token after its job ended: %v, want unauthorized", err)
	}
}

// findPodProcess finds, within timeout, a process whose environment holds
// every one of want (NAME=value), and returns its PID and environment.
// The test's own dispatcher address in want keeps it from finding another
// test's pod.
func findPodProcess(t *testing.T, timeout time.Duration, want ...string) (int, []string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ents, err := os.ReadDir("/proc")
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
			if err != nil {
				continue
			}
			env := strings.Split(string(bytes.TrimRight(b, "\x00")), "\x00")
			found := 0
			for _, kv := range want {
				for _, have := range env {
					if have == kv {
						found++
						break
					}
				}
			}
			if found == len(want) {
				return pid, env
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no process with %v after %v", want, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func envValue(env []string, name string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v
		}
	}
	return ""
}

// podLoopbackProxy listens on base's host and port (a loopback address)
// inside the network namespace of process pid, and relays every
// connection to base on the host's loopback, until the test ends. It is
// the test's stand-in for a pod network: the listening socket is made on
// a thread that enters the pod's namespace and returns to its own; the
// runtime starts no thread from a locked one, so no other goroutine ever
// runs in the pod's namespace.
func podLoopbackProxy(t *testing.T, pid int, base string) {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	addr := u.Host
	type result struct {
		ln  net.Listener
		err error
	}
	got := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // not unlocked unless the thread is back in its own namespace
		own, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			got <- result{err: err}
			return
		}
		defer own.Close()
		pod, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
		if err != nil {
			got <- result{err: err}
			return
		}
		defer pod.Close()
		if err := unix.Setns(int(pod.Fd()), unix.CLONE_NEWNET); err != nil {
			got <- result{err: fmt.Errorf("enter the pod's network namespace: %w", err)}
			return
		}
		ln, lerr := net.Listen("tcp", addr)
		if err := unix.Setns(int(own.Fd()), unix.CLONE_NEWNET); err != nil {
			got <- result{err: fmt.Errorf("return to the test's network namespace: %w", err)}
			return // the thread ends with its goroutine
		}
		runtime.UnlockOSThread()
		got <- result{ln, lerr}
	}()
	r := <-got
	if r.err != nil {
		t.Fatalf("listen on %s in the pod: %v", addr, r.err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns = map[net.Conn]bool{} // open, closed at the end
	)
	track := func(c net.Conn) bool {
		mu.Lock()
		defer mu.Unlock()
		if conns == nil {
			c.Close()
			return false
		}
		conns[c] = true
		return true
	}
	t.Cleanup(func() {
		r.ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		conns = nil
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			in, err := r.ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				if !track(in) {
					return
				}
				defer in.Close()
				out, err := net.DialTimeout("tcp", addr, 5*time.Second)
				if err != nil || !track(out) {
					return
				}
				defer out.Close()
				done := make(chan struct{})
				go func() {
					_, _ = io.Copy(out, in)
					out.(*net.TCPConn).CloseWrite()
					close(done)
				}()
				_, _ = io.Copy(in, out)
				in.(*net.TCPConn).CloseWrite()
				<-done
			}()
		}
	}()
}
