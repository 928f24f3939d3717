package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/dispatcher/server"
	"github.com/sluicehq/sluice/nodelet/runtime/container/cni"
)

// devImageRoot is the default image root of `sluice dev`'s container
// nodes: the directory of the demo image the examples name
// (scripts/demo-image).
const devImageRoot = "/var/lib/sluice/images"

// devFlags are the settings of `sluice dev`.
type devFlags struct {
	httpAddr, addrFile string
	data               string
	runtime            string
	imageRoots         []string
	volumeRoots        []string
	disk               string
	nodes, simNodes    int
	nodeCPU, nodeMem   string
	ports              string
	simCPU, simMem     string
	submit             []string
	exit               bool
	appmasterTasks     int
	logLevel           string
	podCIDR            string
	allowHostNetwork   bool
}

func newDevCmd() *cobra.Command {
	var f devFlags
	var gc gcSetting
	c := &cobra.Command{
		Use:   "dev",
		Short: "Run a whole Sluice cluster in this process, for trying Sluice",
		Long: `Run a whole cluster in one process: a dispatcher (single-replica raft in a
temporary directory) serving the HTTP API, --nodes nodelets in the default
pool and --sim-nodes simulated nodelets in the pool "sim". The nodes of the
default pool run real containers when --runtime is container (the default
as root) and are simulated otherwise; they run images only from below
--image-roots (where 'make demo' builds the examples' image), and mount
host paths only from below --volume-roots. Each container node has a pod
network of its own: a bridge with the N-th /24 of --pod-cidr for node N
(from 0), removed at exit. The API listens on --http (loopback by
default); each container node's bridge-mode pods reach it at their
gateway, on the same port, where the cluster forwards it to the API, so
their SLUICE_ADDR works and the API is exposed no further than the host and
its pods. --allow-host-network lets pods use the host's network.

With --submit it submits the job files given (files, or directories whose
*.json and *.ndjson files are taken) through the HTTP API and shows their
progress; with --exit it then prints a summary and stops once every
submitted job has ended. That is what 'make demo' runs.`,
		Example: `  sluice dev
  sluice dev --runtime sim --sim-nodes 20
  sluice dev --submit examples --exit`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(c *cobra.Command, _ []string) error {
			if err := applySettings(c); err != nil {
				return err
			}
			if err := gc.apply(c); err != nil {
				return err
			}
			return runDev(c.Context(), f, c.OutOrStdout(), c.ErrOrStderr())
		},
	}
	defRuntime := "sim"
	if os.Geteuid() == 0 {
		defRuntime = "container"
	}
	fl := c.Flags()
	fl.StringVar(&f.httpAddr, "http", "127.0.0.1:8080", "address the HTTP API listens on (port 0: any free port)")
	fl.StringVar(&f.addrFile, "addr-file", "", "write the API's base URL to this file once it serves")
	fl.StringVar(&f.data, "data", "", "data directory (default: a temporary directory, removed at exit)")
	fl.StringVar(&f.runtime, "runtime", defRuntime, "runtime of the default pool's nodes: container or sim")
	fl.StringSliceVar(&f.imageRoots, "image-roots", []string{devImageRoot}, "with --runtime container: directories pods' images must lie below, comma-separated")
	fl.StringSliceVar(&f.volumeRoots, "volume-roots", nil, "host directories the default pool's pods may mount host paths from, comma-separated: PATH read-only, PATH:rw writable (default: none, every host path refused)")
	fl.StringVar(&f.disk, "disk", "", `disk of each default-pool node for scratch volumes and disk requests, such as "10Gi" (default: the free space of its state directory's filesystem)`)
	fl.IntVar(&f.nodes, "nodes", 2, "nodes in the default pool")
	fl.IntVar(&f.simNodes, "sim-nodes", 4, "simulated nodes in the pool \"sim\"")
	fl.StringVar(&f.nodeCPU, "node-cpu", "2", "CPU of each default-pool node")
	fl.StringVar(&f.nodeMem, "node-memory", "2Gi", "memory of each default-pool node")
	fl.StringVar(&f.ports, "ports", api.DefaultPortRange.String(), "range LO-HI each default-pool node assigns pods' dynamic ports from")
	fl.StringVar(&f.simCPU, "sim-cpu", "64", "CPU of each simulated node")
	fl.StringVar(&f.simMem, "sim-memory", "256Gi", "memory of each simulated node")
	fl.StringSliceVar(&f.submit, "submit", nil, "job files or directories to submit once the cluster runs")
	fl.BoolVar(&f.exit, "exit", false, "with --submit: print a summary and stop when every submitted job has ended")
	fl.IntVar(&f.appmasterTasks, "appmaster", 0, "with --submit --exit: also run an appmaster that leases two capboxes and runs this many tasks in them")
	fl.StringVar(&f.podCIDR, "pod-cidr", defaultDevPodCIDR.String(), "with --runtime container: a /16 to /23 whose n-th /24 is the pod subnet of node n, each free on the host")
	fl.BoolVar(&f.allowHostNetwork, "allow-host-network", false, "let pods run in the host's network namespace (network mode host); without it they fail as network_denied")
	gc.addFlag(c)
	fl.StringVar(&f.logLevel, "log-level", "warn", "debug, info, warn or error")
	return c
}

func runDev(ctx context.Context, f devFlags, stdout, stderr io.Writer) (err error) {
	switch {
	case f.runtime != "container" && f.runtime != "sim":
		return usageError{fmt.Errorf("--runtime: want container or sim, got %q", f.runtime)}
	case f.nodes < 0 || f.simNodes < 0 || f.nodes+f.simNodes == 0:
		return usageError{errors.New("--nodes and --sim-nodes: want at least one node, and no negative count")}
	case f.exit && len(f.submit) == 0:
		return usageError{errors.New("--exit needs --submit")}
	case f.appmasterTasks < 0 || f.appmasterTasks > 0 && !f.exit:
		return usageError{errors.New("--appmaster: want a number of tasks, with --submit and --exit")}
	}
	files, err := jobFiles(f.submit)
	if err != nil {
		return err
	}
	logger, err := newTextLogger(stderr, f.logLevel)
	if err != nil {
		return err
	}
	dir := f.data
	if dir == "" {
		if dir, err = os.MkdirTemp("", "sluice-dev-"); err != nil {
			return fmt.Errorf("dev: %w", err)
		}
		defer os.RemoveAll(dir)
	}
	// A key of this run's alone: the cluster has one replica, and its job
	// tokens die with it. The API asks for no token, but an appmaster's
	// pods get their job's and are held to it, as in a cluster with
	// authentication.
	key := make([]byte, server.MinJobKeyLen)
	if _, err := rand.Read(key); err != nil {
		return fmt.Errorf("dev: job token key: %w", err)
	}
	jobKeys, err := server.NewJobKeys(key)
	if err != nil {
		return fmt.Errorf("dev: %w", err)
	}
	s, err := server.Open(server.Config{
		ID: 1, Peers: map[uint64]string{1: ""}, Dir: filepath.Join(dir, "dispatcher"),
		HTTPAddr: f.httpAddr, JobKeys: jobKeys, Logger: logger,
	})
	if err != nil {
		return fmt.Errorf("dev: dispatcher: %w", err)
	}
	defer func() {
		if cerr := s.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("dev: close the dispatcher: %w", cerr)
		}
	}()
	client, err := api.NewClient(api.ClientConfig{Addrs: []string{s.Addr()}})
	if err != nil {
		return fmt.Errorf("dev: %w", err)
	}
	defer client.Close()
	if err := waitLeading(ctx, s); err != nil {
		return err
	}
	stopNodes, err := startDevNodes(ctx, f, dir, s.Addr(), logger)
	defer func() {
		if cerr := stopNodes(); cerr != nil && err == nil {
			err = fmt.Errorf("dev: stop the nodes: %w", cerr)
		}
	}()
	if err != nil {
		return err
	}
	if err := waitNodes(ctx, client, f.nodes+f.simNodes); err != nil {
		return err
	}
	if f.addrFile != "" {
		if err := os.WriteFile(f.addrFile, []byte(s.Addr()+"\n"), 0o644); err != nil {
			return fmt.Errorf("dev: --addr-file: %w", err)
		}
	}
	fmt.Fprintf(stdout, "Sluice dev cluster: API at %s, web UI at %s%s, %d %s node(s) in the default pool, %d simulated node(s) in pool \"sim\".\n",
		s.Addr(), s.Addr(), api.PathUI, f.nodes, f.runtime, f.simNodes)
	if len(files) == 0 {
		fmt.Fprintf(stdout, "Try:\n  export SLUICE_ADDR=%s\n  sluice submit examples/single.json\n  sluice jobs\n  sluice nodes\n  sluice watch\nStop with Ctrl-C.\n", s.Addr())
		<-ctx.Done()
		return ctx.Err()
	}
	start := time.Now()
	ids, err := submitFiles(ctx, client, files, stdout)
	if err != nil {
		return err
	}
	if !f.exit {
		<-ctx.Done()
		return ctx.Err()
	}
	type amResult struct {
		line string
		err  error
	}
	am := make(chan amResult, 1)
	if f.appmasterTasks > 0 {
		go func() {
			line, err := runDemoAppmaster(ctx, client, f.appmasterTasks)
			am <- amResult{line, err}
		}()
	}
	jobs, err := followJobs(ctx, client, ids, stderr)
	if err != nil {
		return err
	}
	printSummary(stdout, jobs, time.Since(start), s)
	for _, j := range jobs {
		if j.Spec.Appmaster && len(j.Spec.Tasks) > 0 {
			fmt.Fprintln(stdout, describeClusterAppmaster(ctx, client, j))
		}
	}
	if f.appmasterTasks > 0 {
		r := <-am
		if r.err != nil {
			return fmt.Errorf("dev: appmaster: %w", r.err)
		}
		fmt.Fprintln(stdout, r.line)
	}
	printOutputs(ctx, stdout, client, jobs)
	return nil
}

// printOutputs shows what the first tasks of the jobs that ran outside
// the simulated pool printed, a few lines of each container, through the
// logs API (the dispatcher proxies the nodelet that ran the task).
func printOutputs(ctx context.Context, w io.Writer, c *api.Client, jobs []api.JobStatus) {
	const tasksPerJob, linesPerContainer = 2, 3
	header := false
	for _, j := range jobs {
		if j.Spec.Pool == "sim" {
			continue
		}
		tasks, err := c.Tasks(ctx, j.ID, "", tasksPerJob)
		if err != nil {
			fmt.Fprintf(w, "%s: tasks: %v\n", j.ID, err)
			continue
		}
		for _, t := range tasks.Tasks {
			for _, ct := range j.Spec.Tasks[0].Pod.Containers {
				var out strings.Builder
				err := c.Logs(ctx, t.ID, api.LogOptions{Container: ct.Name, Tail: linesPerContainer}, &out)
				text := strings.TrimSpace(out.String())
				if err != nil || text == "" {
					continue
				}
				if !header {
					fmt.Fprintln(w, "\nWhat the containers printed (sluice logs TASK):")
					header = true
				}
				for _, line := range strings.Split(text, "\n") {
					fmt.Fprintf(w, "  %s %s/%s: %s\n", j.Spec.Name, t.ID, ct.Name, line)
				}
			}
		}
	}
}

// jobFiles expands the --submit arguments: files as given, directories to
// their *.json and *.ndjson files in name order.
func jobFiles(args []string) ([]string, error) {
	var files []string
	for _, a := range args {
		st, err := os.Stat(a)
		if err != nil {
			return nil, usageError{fmt.Errorf("--submit: %w", err)}
		}
		if !st.IsDir() {
			files = append(files, a)
			continue
		}
		var found []string
		for _, pat := range []string{"*.json", "*.ndjson"} {
			m, _ := filepath.Glob(filepath.Join(a, pat))
			found = append(found, m...)
		}
		if len(found) == 0 {
			return nil, usageError{fmt.Errorf("--submit: no *.json or *.ndjson files in %s", a)}
		}
		slices.Sort(found)
		files = append(files, found...)
	}
	return files, nil
}

// waitLeading waits until the dispatcher has elected itself and its
// scheduling loop runs.
func waitLeading(ctx context.Context, s *server.Server) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		if _, ok := s.Dispatcher().Leading(); ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("dev: the dispatcher does not lead after 30s: %w", ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// waitNodes waits until n nodes are ready.
func waitNodes(ctx context.Context, c *api.Client, n int) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		l, err := c.Nodes(ctx)
		ready := 0
		if err == nil {
			for _, nd := range l.Nodes {
				if nd.State == api.NodeReady {
					ready++
				}
			}
			if ready >= n {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("dev: %d of %d nodes ready after 30s (last error: %v)", ready, n, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// submitFiles submits each file as one request and returns the job IDs.
func submitFiles(ctx context.Context, c *api.Client, files []string, stdout io.Writer) ([]string, error) {
	var ids []string
	for _, name := range files {
		body, err := os.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("dev: %w", err)
		}
		ct := "application/json"
		if strings.HasSuffix(name, ".ndjson") {
			ct = "application/x-ndjson"
		}
		res, err := c.SubmitBody(ctx, body, ct, api.SubmitOptions{})
		if err != nil {
			return nil, fmt.Errorf("dev: submit %s: %w", name, err)
		}
		fmt.Fprintf(stdout, "submitted %s: %s\n", name, strings.Join(res.Jobs, " "))
		ids = append(ids, res.Jobs...)
	}
	return ids, nil
}

// followJobs shows the progress of the jobs until every one has ended and
// returns their final status.
func followJobs(ctx context.Context, c *api.Client, ids []string, stderr io.Writer) ([]api.JobStatus, error) {
	var bar *progressbar.ProgressBar
	defer func() {
		if bar != nil {
			_ = bar.Finish()
			fmt.Fprintln(stderr)
		}
	}()
	lastLine := time.Time{}
	for {
		jobs := make([]api.JobStatus, 0, len(ids))
		var sum api.TaskCounts
		ended := 0
		for _, id := range ids {
			j, err := c.Job(ctx, id)
			if err != nil {
				return nil, fmt.Errorf("dev: job %s: %w", id, err)
			}
			jobs = append(jobs, j)
			sum.Add(j.Tasks)
			if j.State == api.JobSucceeded || j.State == api.JobFailed || j.State == api.JobCancelled {
				ended++
			}
		}
		done := sum.Succeeded + sum.Failed + sum.Killed
		if bar == nil && isTerminal(stderr) {
			bar = progressbar.NewOptions64(sum.Total, progressbar.OptionSetWriter(stderr),
				progressbar.OptionSetDescription("tasks done"), progressbar.OptionShowCount(),
				progressbar.OptionSetWidth(30), progressbar.OptionThrottle(100*time.Millisecond))
		}
		if bar != nil {
			_ = bar.Set64(done)
		} else if time.Since(lastLine) >= time.Second || ended == len(ids) {
			fmt.Fprintf(stderr, "tasks: %d/%d done, %d running, %d pending\n", done, sum.Total, sum.Active, sum.Pending)
			lastLine = time.Now()
		}
		if ended == len(ids) {
			return jobs, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// isTerminal reports whether w is a character device.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func printSummary(w io.Writer, jobs []api.JobStatus, took time.Duration, s *server.Server) {
	fmt.Fprintf(w, "\nSummary, %.1f s from the first submit:\n", took.Seconds())
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tNAME\tQOS\tSTATE\tTASKS\tSUCCEEDED\tFAILED\tKILLED")
	var sum api.TaskCounts
	for _, j := range jobs {
		sum.Add(j.Tasks)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\n", j.ID, j.Spec.Name, j.Spec.QoS, j.State,
			j.Tasks.Total, j.Tasks.Succeeded, j.Tasks.Failed, j.Tasks.Killed)
	}
	_ = tw.Flush()
	rs := s.Dispatcher().RoundSummary()
	fmt.Fprintf(w, "placed %d tasks in %d rounds (round p50 %s, p99 %s); %d succeeded, %d failed, %d killed; %.0f tasks/s\n",
		rs.Placed, rs.Rounds, rs.P50.Round(time.Microsecond), rs.P99.Round(time.Microsecond),
		sum.Succeeded, sum.Failed, sum.Killed, float64(sum.Succeeded+sum.Failed+sum.Killed)/took.Seconds())
}

// startDevNodes starts the dev cluster's nodelets and returns what stops
// them all; it is safe to call even when starting failed.
func startDevNodes(ctx context.Context, f devFlags, dir, addr string, logger *slog.Logger) (stop func() error, err error) {
	var stops []func() error
	stop = func() error {
		var errs []error
		for i := len(stops) - 1; i >= 0; i-- {
			errs = append(errs, stops[i]())
		}
		stops = nil
		return errors.Join(errs...)
	}
	cpu, mem, err := parseCapacity("--node-cpu", f.nodeCPU, "--node-memory", f.nodeMem)
	if err != nil {
		return stop, err
	}
	simCPU, simMem, err := parseCapacity("--sim-cpu", f.simCPU, "--sim-memory", f.simMem)
	if err != nil {
		return stop, err
	}
	var disk int64
	if f.disk != "" {
		if disk, err = api.ParseBytes(f.disk); err != nil || disk <= 0 {
			return stop, usageError{fmt.Errorf("--disk: %q is not a positive byte quantity", f.disk)}
		}
	}
	ports, err := api.ParsePortRange(f.ports)
	if err != nil {
		return stop, usageError{fmt.Errorf("--ports: %w", err)}
	}
	type node struct {
		name, runtime, pool string
		cpu, mem, disk      int64
		volumeRoots         []string
		ports               api.PortRange // zero: the default
	}
	var nodes []node
	for i := range f.nodes {
		nodes = append(nodes, node{fmt.Sprintf("node-%d", i+1), f.runtime, "", cpu, mem, disk, f.volumeRoots, ports})
	}
	for i := range f.simNodes {
		nodes = append(nodes, node{fmt.Sprintf("sim-%d", i+1), "sim", "sim", simCPU, simMem, 0, nil, api.PortRange{}})
	}
	podCIDR, err := netip.ParsePrefix(f.podCIDR)
	if err != nil {
		return stop, usageError{fmt.Errorf("--pod-cidr: want a subnet such as %s, got %q", defaultDevPodCIDR, f.podCIDR)}
	}
	for i, n := range nodes {
		cfg := nodeletConfig{
			dispatchers: []string{addr}, name: n.name, runtime: n.runtime, pool: n.pool,
			stateDir: filepath.Join(dir, n.name), volumeRoots: n.volumeRoots,
			cpu: n.cpu, memory: n.mem, disk: n.disk, ports: n.ports, removePods: true,
			retainExited: 10 * time.Minute, allowHostNetwork: f.allowHostNetwork,
		}
		var gateway netip.Addr
		if n.runtime == "container" {
			cfg.imageRoots = f.imageRoots
			sub, bridge, err := devPodNetwork(podCIDR, i)
			if err != nil {
				return stop, usageError{err}
			}
			cfg.podCIDR, cfg.podBridge, gateway = sub.String(), bridge, sub.Addr().Next()
			// The cluster's bridges go with it, after their nodes (stops
			// run last first) have removed their pods.
			stops = append(stops, func() error { return cni.RemoveNetwork(bridge, sub) })
		}
		s, err := startNodelet(ctx, cfg, logger)
		if err != nil {
			return stop, fmt.Errorf("dev: node %s: %w", n.name, err)
		}
		stops = append(stops, s)
		if gateway.IsValid() {
			// The node's bridge-mode pods reach the API at their gateway
			// (SLUICE_HOST_IP); the API itself stays on loopback.
			fw, err := forwardAPI(gateway, addr, logger)
			if err != nil {
				return stop, fmt.Errorf("dev: node %s: %w", n.name, err)
			}
			stops = append(stops, fw.close)
		}
	}
	return stop, nil
}

// parseCapacity parses a CPU quantity ("2", "500m") and a memory one
// ("2Gi") given to the named flags.
func parseCapacity(cpuFlag, cpu, memFlag, mem string) (int64, int64, error) {
	c, err := api.ParseCPU(cpu)
	if err != nil || c <= 0 {
		return 0, 0, usageError{fmt.Errorf("%s: %q is not a positive CPU quantity", cpuFlag, cpu)}
	}
	m, err := api.ParseBytes(mem)
	if err != nil || m <= 0 {
		return 0, 0, usageError{fmt.Errorf("%s: %q is not a positive memory quantity", memFlag, mem)}
	}
	return c, m, nil
}
