package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/appmaster"
)

// demoImagePath is where scripts/demo-image puts the demo image, as the
// example jobs name it.
const demoImagePath = "/var/lib/sluice/images/demo"

// amEvent is what the demo appmaster's handlers are told.
type amEvent struct {
	capbox  string // a capbox that runs, or ended
	task    string // a task that ended
	state   string
	node    string
	running bool
}

// amEvents forwards the appmaster's callbacks to a channel, so that the
// demo reacts on its own goroutine.
type amEvents chan amEvent

func (e amEvents) CapboxRunning(b api.CapboxStatus) {
	e <- amEvent{capbox: b.ID, node: b.Node, running: true}
}
func (e amEvents) CapboxCompleted(b api.CapboxStatus) {
	e <- amEvent{capbox: b.ID, state: b.State.String()}
}
func (e amEvents) TaskRunning(api.CapTaskStatus) {}
func (e amEvents) TaskCompleted(t api.CapTaskStatus) {
	e <- amEvent{task: t.ID, state: t.State.String()}
}

// runDemoAppmaster runs an appmaster in client mode through the SDK: it
// leases two capboxes and runs n tasks in them, each capbox running its
// share one after another (a capbox is reused, not asked for per task),
// then stops, which releases the capboxes. It returns a summary line.
func runDemoAppmaster(ctx context.Context, c *api.Client, n int) (string, error) {
	am, err := appmaster.Register(ctx, appmaster.Config{Client: c}, api.JobSpec{Name: "capbox-demo"})
	if err != nil {
		return "", err
	}
	runCtx, stopRun := context.WithCancel(ctx)
	runErr := make(chan error, 1)
	go func() { runErr <- am.Run(runCtx) }()
	defer func() {
		stopRun()
		<-runErr
	}()
	ev := make(amEvents, 64)
	const boxes = 2
	if _, err := am.CreateCapboxes(ctx, api.CapboxRequest{Name: "workers", Count: boxes,
		Resources: api.Resources{CPU: 1000, Memory: 256 << 20}}, ev); err != nil {
		return "", err
	}
	pod := api.PodSpec{
		Containers: []api.ContainerSpec{{Name: "main", Image: api.Image{Rootfs: demoImagePath},
			Command: []string{"/workload", "primes", "1000000"}, Resources: api.Resources{CPU: 500, Memory: 64 << 20}}},
		Sim: &api.SimSpec{RunTime: api.Duration(200 * time.Millisecond)},
	}
	started, ended := 0, map[string]int{}
	var nodes []string
	start := func(box string) error {
		if started == n {
			return nil
		}
		started++
		_, err := am.StartTask(ctx, box, fmt.Sprintf("step-%d", started), pod, ev)
		return err
	}
	taskBox := func(task string) string { return task[:strings.LastIndexByte(task, '/')] }
	for sum := 0; sum < n; {
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case e := <-ev:
			switch {
			case e.running:
				nodes = append(nodes, e.node)
				if err := start(e.capbox); err != nil {
					return "", err
				}
			case e.task != "":
				ended[e.state]++
				sum++
				if err := start(taskBox(e.task)); err != nil {
					return "", err
				}
			default:
				return "", fmt.Errorf("capbox %s ended %s before its tasks", e.capbox, e.state)
			}
		}
	}
	if err := am.Stop(ctx); err != nil {
		return "", err
	}
	return fmt.Sprintf("appmaster %s (client mode, appmaster SDK): leased %d capboxes on %s and ran %d tasks in them, each capbox one task after another: %s; then released them",
		am.Job(), boxes, nodeCounts(nodes), n, stateCounts(ended)), nil
}

// describeClusterAppmaster says what an appmaster job that ran in the
// cluster (a task group running examples/appmaster, say) did: how it
// ended, and the capboxes it leased and the tasks it ran in them, as the
// dispatcher has them.
func describeClusterAppmaster(ctx context.Context, c *api.Client, j api.JobStatus) string {
	head := fmt.Sprintf("appmaster %s %q (cluster mode, its program in a pod of the job, attached with its job token): %s",
		j.ID, j.Spec.Name, j.State)
	list, err := c.Capboxes(ctx, j.ID)
	if err != nil {
		return fmt.Sprintf("%s; its capboxes: %v", head, err)
	}
	if len(list.Capboxes) == 0 {
		if j.State == api.JobSucceeded {
			return head + "; it leased no capbox (on a simulated node its program does not run)"
		}
		return head + "; it leased no capbox (see its output below, or sluice logs)"
	}
	var nodes []string
	tasks := map[string]int{}
	n := 0
	for _, b := range list.Capboxes {
		if b.Node != "" {
			nodes = append(nodes, b.Node)
		}
		for _, t := range b.Tasks {
			tasks[t.State.String()]++
			n++
		}
	}
	return fmt.Sprintf("%s; it leased %d capboxes on %s and ran %d tasks in them: %s",
		head, len(list.Capboxes), nodeCounts(nodes), n, stateCounts(tasks))
}

// nodeCounts names each node once with how many of nodes name it.
func nodeCounts(nodes []string) string {
	slices.Sort(nodes)
	var where []string
	for i := 0; i < len(nodes); {
		k := i
		for k < len(nodes) && nodes[k] == nodes[i] {
			k++
		}
		where = append(where, fmt.Sprintf("%s (%d)", nodes[i], k-i))
		i = k
	}
	return strings.Join(where, ", ")
}

// stateCounts lists counts by state, in name order.
func stateCounts(m map[string]int) string {
	var states []string
	for _, s := range slices.Sorted(maps.Keys(m)) {
		states = append(states, fmt.Sprintf("%d %s", m[s], s))
	}
	return strings.Join(states, ", ")
}
