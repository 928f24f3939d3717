package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/dispatcher/server"
	"github.com/sluicehq/sluice/nodelet/runtime/container/cni"
)

// TestContainerAppmasterClusterMode runs an appmaster in the cluster with
// real containers: the job's task runs examples/appmaster in a container,
// which attaches with the job token its node gave it, leases two
// capboxes, runs four tasks in them (real containers too), releases them
// and exits 0; the job succeeds. Another appmaster whose task fails says
// why and exits 1, and its job fails. The token is in the appmaster's
// environment and in no reply of the API, and dies with its job.
//
// The pods are on a bridge network of the test's own: the appmaster's
// SLUICE_ADDR names the bridge's gateway for the dispatcher's loopback
// address, and the test forwards the gateway's port to the dispatcher, as
// `sluice dev` does.
func TestContainerAppmasterClusterMode(t *testing.T) {
	needContainers(t)
	needCNI(t)
	image := demoImage(t)
	buildStatic(t, filepath.Join(image, "appmaster"), "./examples/appmaster")
	keys, err := server.NewJobKeys([]byte(strings.Repeat("e2e-key-", 5)))
	if err != nil {
		t.Fatal(err)
	}
	// The API asks for no token, but the job token is held to its job.
	ctx, srv, logger := startE2EDispatcherWith(t, func(c *server.Config) { c.JobKeys = keys })
	state := t.TempDir()
	sub, bridge := testPodNetwork(t)
	gateway := sub.Addr().Next()
	startE2ENodelet(ctx, t, srv, logger, nodeletConfig{
		name: "node-am", runtime: "container", podCIDR: sub.String(), podBridge: bridge,
		stateDir: state, imageRoots: []string{filepath.Dir(image)},
		cpu: 2000, memory: 1 << 30, removePods: true, retainExited: time.Minute,
	}, func() {
		if err := cni.RemoveNetwork(bridge, sub); err != nil {
			t.Errorf("remove the pod network: %v", err)
		}
		checkNoPods(t, "node-am", state)
	})
	fw, err := forwardAPI(gateway, srv.Addr(), logger)
	if err != nil {
		t.Fatal(err)
	}
	// Runs before the nodelet's cleanup: cleanups run last first.
	t.Cleanup(func() {
		if err := fw.close(); err != nil {
			t.Errorf("stop the forwarder: %v", err)
		}
	})
	u, err := url.Parse(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	u.Host = net.JoinHostPort(gateway.String(), u.Port())
	podAddr := u.String() // the pods' SLUICE_ADDR: loopback is the pod itself
	client := e2eClient(ctx, t, srv, 1)
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
		_, env := findPodProcess(t, 60*time.Second, api.EnvTaskID+"="+id+"/0/0/1", api.EnvAddr+"="+podAddr)
		tok := envValue(env, api.EnvToken)
		if !strings.HasPrefix(tok, server.JobTokenPrefix) || !strings.Contains(tok, "."+id+".") {
			t.Fatalf("the appmaster's environment has %s=%q, want %s's job token", api.EnvToken, tok, id)
		}
		if id == job {
			token = tok
		}
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
	// A capbox is released once its node has stopped it, which may come
	// after the appmaster, having asked for it, has ended its job.
	var boxes api.CapboxList
	pollUntil(t, 30*time.Second, "the capboxes released", func() (bool, string) {
		if boxes, err = client.Capboxes(ctx, job); err != nil {
			t.Fatal(err)
		}
		for _, b := range boxes.Capboxes {
			if b.State != api.CapboxReleased {
				return false, fmt.Sprintf("capbox %s %s", b.ID, b.State)
			}
		}
		return true, ""
	})
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

// testPodNetwork returns a pod subnet, a /24 of testPodCIDR's, and a
// bridge name of the test's own, so that runs at once on one host share
// neither.
func testPodNetwork(t *testing.T) (netip.Prefix, string) {
	t.Helper()
	sub, rng := testPodCIDR(t, 24)
	return sub, fmt.Sprintf("stest%d", rng.IntN(1e9))
}

// testPodCIDR returns a /bits (9 to 24) of 10.128.0.0/9 at random, so that
// runs at once on one host do not share subnets, and the generator it was
// drawn from, for the test's other draws; the seed is logged.
func testPodCIDR(t *testing.T, bits int) (netip.Prefix, *rand.Rand) {
	t.Helper()
	seed := time.Now().UnixNano()
	t.Logf("pod subnet seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	a := netip.AddrFrom4([4]byte{10, byte(128 + rng.IntN(128)), byte(rng.IntN(256)), 0})
	return netip.PrefixFrom(a, bits).Masked(), rng
}
