// Command appmaster is an appmaster that runs in the cluster (cluster
// mode): the program of an appmaster job's task (examples/appmaster.json),
// built static (CGO_ENABLED=0) into the demo image. It attaches to its job
// from the environment its node gives it (SLUICE_ADDR, SLUICE_TOKEN,
// SLUICE_JOB_ID), leases -capboxes capboxes, runs -tasks tasks in them,
// each capbox running its share one after another, releases them and
// prints what it did. It exits 0 when every task succeeded, 1 with the
// reason when one did not or something failed, 2 on a usage error.
//
//	appmaster [-capboxes 2] [-tasks 4] [-image DIR] [-timeout 5m] [-- COMMAND...]
//
// The tasks run COMMAND (default: /workload primes 300000) in the image
// DIR (default: the demo image).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/appmaster"
)

// settings are the command line's.
type settings struct {
	capboxes, tasks int
	image           string
	command         []string
	timeout         time.Duration
	connect         time.Duration
}

func main() {
	s, err := parse(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "appmaster:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	line, err := run(ctx, s)
	if err != nil {
		fmt.Fprintln(os.Stderr, "appmaster:", strings.TrimPrefix(err.Error(), "appmaster: "))
		os.Exit(1)
	}
	fmt.Println(line)
}

func parse(args []string) (settings, error) {
	var s settings
	fl := flag.NewFlagSet("appmaster", flag.ContinueOnError)
	fl.IntVar(&s.capboxes, "capboxes", 2, "capboxes to lease")
	fl.IntVar(&s.tasks, "tasks", 4, "tasks to run in them")
	fl.StringVar(&s.image, "image", "/var/lib/sluice/images/demo", "the tasks' image (a root filesystem on the nodes)")
	fl.DurationVar(&s.timeout, "timeout", 5*time.Minute, "give up after this long")
	fl.DurationVar(&s.connect, "connect-wait", 30*time.Second, "keep trying to reach the dispatcher this long at start")
	if err := fl.Parse(args); err != nil {
		return s, err
	}
	s.command = fl.Args()
	if len(s.command) == 0 {
		s.command = []string{"/workload", "primes", "300000"}
	}
	switch {
	case s.capboxes < 1 || s.tasks < 1:
		return s, errors.New("-capboxes and -tasks: want at least 1")
	case s.timeout <= 0 || s.connect < 0:
		return s, errors.New("-timeout: want a positive duration; -connect-wait: not negative")
	}
	return s, nil
}

// event is what the handlers are told, forwarded to run's goroutine.
type event struct {
	capbox, node string // a capbox that runs, or ended
	task         string // a task that ended
	state        string
	exitCode     int32
	running      bool
}

type events chan event

func (e events) CapboxRunning(b api.CapboxStatus) {
	e <- event{capbox: b.ID, node: b.Node, running: true}
}
func (e events) CapboxCompleted(b api.CapboxStatus) {
	e <- event{capbox: b.ID, state: b.State.String()}
}
func (e events) TaskRunning(api.CapTaskStatus) {}
func (e events) TaskCompleted(t api.CapTaskStatus) {
	e <- event{task: t.ID, state: t.State.String(), exitCode: t.ExitCode}
}

// attach attaches from the environment, trying again while the dispatcher
// cannot be reached (no answer at all) for up to s.connect.
func attach(ctx context.Context, s settings) (*appmaster.Appmaster, error) {
	deadline := time.Now().Add(s.connect)
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		am, err := appmaster.AttachFromEnv(ctx, appmaster.Config{}, nil)
		if err == nil || errors.Is(err, appmaster.ErrNoEnv) || api.ErrorCode(err) != "" || time.Now().After(deadline) {
			return am, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(wait):
		}
	}
}

func run(ctx context.Context, s settings) (string, error) {
	am, err := attach(ctx, s)
	if err != nil {
		if api.ErrorCode(err) == "" && !errors.Is(err, appmaster.ErrNoEnv) && loopback(os.Getenv(api.EnvAddr)) {
			err = fmt.Errorf("%w (%s names a loopback address, which inside a pod is the pod itself: the pod needs a network that reaches the dispatcher)", err, api.EnvAddr)
		}
		return "", err
	}
	defer am.Close()
	ev := make(events, 64)
	runCtx, stopRun := context.WithCancel(ctx)
	runErr := make(chan error, 1)
	go func() { runErr <- am.Run(runCtx) }()
	// Run calls the handlers on its own goroutine: what they send once no
	// one reads ev (the release's capboxes, or all after an error) is
	// drained until Run returns, or a full ev would hold Run for ever.
	defer func() {
		stopRun()
		for {
			select {
			case <-ev:
			case <-runErr:
				return
			}
		}
	}()
	if _, err := am.CreateCapboxes(ctx, api.CapboxRequest{Name: "workers", Count: int64(s.capboxes),
		Resources: api.Resources{CPU: 500, Memory: 128 << 20}}, ev); err != nil {
		return "", err
	}
	// The capboxes may be on simulated nodes (sluice dev's pool "sim"),
	// which run a pod for its sim run time and one without a sim spec
	// until it is stopped; a container node ignores the sim spec.
	pod := api.PodSpec{Containers: []api.ContainerSpec{{Name: "main", Image: api.Image{Rootfs: s.image},
		Command: s.command, Resources: api.Resources{CPU: 500, Memory: 64 << 20}}},
		Sim: &api.SimSpec{RunTime: api.Duration(300 * time.Millisecond)}}
	started, ended := 0, map[string]int{}
	var nodes, failures []string
	var boxes []string
	start := func(box string) error {
		if started == s.tasks {
			return nil
		}
		started++
		_, err := am.StartTask(ctx, box, fmt.Sprintf("step-%d", started), pod, ev)
		return err
	}
	taskBox := func(task string) string { return task[:strings.LastIndexByte(task, '/')] }
	for done := 0; done < s.tasks; {
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("%d of %d tasks ended: %w", done, s.tasks, ctx.Err())
		case e := <-ev:
			switch {
			case e.running:
				nodes, boxes = append(nodes, e.node), append(boxes, e.capbox)
				if err := start(e.capbox); err != nil {
					return "", err
				}
			case e.task != "":
				done++
				ended[e.state]++
				if e.state != api.TaskSucceeded.String() {
					failures = append(failures, fmt.Sprintf("%s %s (exit code %d)", e.task, e.state, e.exitCode))
				}
				if err := start(taskBox(e.task)); err != nil {
					return "", err
				}
			default:
				return "", fmt.Errorf("capbox %s ended %s before its tasks", e.capbox, e.state)
			}
		}
	}
	if err := am.Release(ctx, boxes...); err != nil {
		return "", err
	}
	var states []string
	for _, st := range slices.Sorted(maps.Keys(ended)) {
		states = append(states, fmt.Sprintf("%d %s", ended[st], st))
	}
	if len(failures) > 0 {
		return "", fmt.Errorf("%d of %d tasks did not succeed: %s", len(failures), s.tasks, strings.Join(failures, "; "))
	}
	return fmt.Sprintf("appmaster %s (cluster mode, in a container): leased %d capboxes on %s and ran %d tasks in them: %s; then released them",
		am.Job(), len(boxes), placesOf(nodes), s.tasks, strings.Join(states, ", ")), nil
}

// loopback reports whether every URL of addrs (comma-separated) names a
// loopback host.
func loopback(addrs string) bool {
	n := 0
	for a := range strings.SplitSeq(addrs, ",") {
		u, err := url.Parse(strings.TrimSpace(a))
		if err != nil {
			return false
		}
		ip := net.ParseIP(u.Hostname())
		if u.Hostname() != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return false
		}
		n++
	}
	return n > 0
}

// placesOf names each node once with how many capboxes it held.
func placesOf(nodes []string) string {
	slices.Sort(nodes)
	var where []string
	for i := 0; i < len(nodes); {
		j := i
		for j < len(nodes) && nodes[j] == nodes[i] {
			j++
		}
		where = append(where, fmt.Sprintf("%s (%d)", nodes[i], j-i))
		i = j
	}
	return strings.Join(where, ", ")
}
