package main

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/appmaster"
)

// capboxEvents records what an appmaster's handlers are told.
type capboxEvents struct {
	mu      sync.Mutex
	running []string
	ended   map[string]string // ID → final state
}

func (e *capboxEvents) CapboxRunning(b api.CapboxStatus) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.running = append(e.running, b.ID)
}

func (e *capboxEvents) CapboxCompleted(b api.CapboxStatus) { e.end(b.ID, b.State.String()) }
func (e *capboxEvents) TaskRunning(api.CapTaskStatus)      {}
func (e *capboxEvents) TaskCompleted(t api.CapTaskStatus)  { e.end(t.ID, t.State.String()) }

func (e *capboxEvents) end(id, state string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ended[id] = state
}

func (e *capboxEvents) state(id string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ended[id]
}

// TestContainerCapboxes leases a capbox on a nodelet with the container
// runtime through the appmaster SDK and runs two of the appmaster's own
// tasks in it, real containers that talk over the capbox's shared
// network namespace, and reads their output through the dispatcher; then
// the appmaster stops, its capbox is released, and nothing of it is left
// on the host.
func TestContainerCapboxes(t *testing.T) {
	needContainers(t)
	image := demoImage(t)
	ctx, srv, logger := startE2EDispatcher(t)
	state := t.TempDir()
	// removePods: the capbox and its tasks leave nothing behind.
	startE2ENodelet(ctx, t, srv, logger, nodeletConfig{
		name: "node-cb", runtime: "container", noPodNetwork: true, stateDir: state, imageRoots: []string{filepath.Dir(image)},
		cpu: 2000, memory: 1 << 30, removePods: true, retainExited: time.Minute,
	}, func() { checkNoPods(t, "node-cb", state) })
	client := e2eClient(ctx, t, srv, 1)

	am, err := appmaster.Register(ctx, appmaster.Config{Client: client}, api.JobSpec{Name: "am"})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stopRun := context.WithCancel(ctx)
	runErr := make(chan error, 1)
	go func() { runErr <- am.Run(runCtx) }()
	t.Cleanup(func() {
		stopRun()
		if err := <-runErr; err != nil {
			t.Errorf("appmaster run: %v", err)
		}
	})
	ev := &capboxEvents{ended: map[string]string{}}
	if _, err := am.CreateCapboxes(ctx, api.CapboxRequest{Name: "box", Count: 1,
		Resources: api.Resources{CPU: 1000, Memory: 256 << 20}}, ev); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, 60*time.Second, "the capbox to run", func() (bool, string) {
		ev.mu.Lock()
		defer ev.mu.Unlock()
		return len(ev.running) == 1, "no capbox running"
	})
	box := ev.running[0]
	task := func(args ...string) api.PodSpec {
		return api.PodSpec{Containers: []api.ContainerSpec{{Name: "main", Image: api.Image{Rootfs: image},
			Command: append([]string{"/workload"}, args...), Resources: api.Resources{CPU: 250, Memory: 32 << 20}}}}
	}
	serve, err := am.StartTask(ctx, box, "serve", task("serve", "7070", "1"), ev)
	if err != nil {
		t.Fatal(err)
	}
	ask, err := am.StartTask(ctx, box, "ask", task("ask", "7070", "100000"), ev)
	if err != nil {
		t.Fatal(err)
	}
	pollUntil(t, 60*time.Second, "both tasks to end", func() (bool, string) {
		return ev.state(serve) != "" && ev.state(ask) != "", "serve " + ev.state(serve) + ", ask " + ev.state(ask)
	})
	for _, id := range []string{serve, ask} {
		if st := ev.state(id); st != "succeeded" {
			t.Errorf("task %s ended %s, want succeeded (the two share the capbox's network)", id, st)
		}
	}
	// Their output, through the dispatcher's log proxy.
	checkTaskLogs(ctx, t, client, ask, "", "the server counted 9592 primes up to 100000\n")
	checkTaskLogs(ctx, t, client, serve, "main", "serving on 127.0.0.1:7070\nanswered primes up to 100000\n")
	if err := am.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, 30*time.Second, "the capbox released", func() (bool, string) {
		return ev.state(box) == "released", fmt.Sprintf("capbox %q", ev.state(box))
	})
}
