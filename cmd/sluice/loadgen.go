package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/bench/fleet"
	"github.com/sluicehq/sluice/loadgen"
)

func newLoadgenCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "loadgen",
		Short: "Drive a cluster with a seeded workload, or run a fleet of simulated nodes",
		Args:  usageArgs(cobra.NoArgs),
		RunE:  func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	c.AddCommand(newLoadgenRunCmd(), newLoadgenFleetCmd())
	return c
}

// loadgenRunFlags are the settings of `sluice loadgen run` that are not
// the workload's.
type loadgenRunFlags struct {
	workloadFile string
	asJSON       bool
	arrival      string
	rate         float64
	burst        int64
	period       time.Duration
	duration     time.Duration
	runTime      string
	arraySize    string
	shapes       []string
	queues       []string
	priorities   []string
}

func newLoadgenRunCmd() *cobra.Command {
	var (
		f   loadgenRunFlags
		w   loadgen.Workload
		cfg loadgen.DriverConfig
	)
	cf := &clientFlags{output: outputTable}
	c := &cobra.Command{
		Use:   "run",
		Short: "Submit a seeded workload to a cluster and measure its latencies",
		Long: `Run submits the jobs of a seeded workload to the dispatcher at --addr at
their arrival times (open loop: a slow cluster does not slow the arrivals),
and measures each task from the submit to its commit (the reply), to its
placement (seen on the watch stream) and, for probed jobs, to running (its
tasks listed every --poll-interval). It prints the offered and achieved
throughput and the latency percentiles; --json prints the whole result.

The workload comes from --workload FILE (JSON; see the loadgen package) or
from the flags; flags given on the command line override the file. The jobs
are simulated (api.SimSpec): run them on simulated nodes, such as those of
'sluice loadgen fleet' or 'sluice dev --sim-nodes N' (pool "sim").`,
		Example: `  sluice loadgen run --rate 200 --duration 30s --array-size zipf:1.5,1000 --pool sim
  sluice loadgen run --workload bursty.json --json`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(c *cobra.Command, _ []string) error {
			client, err := cf.client(c)
			if err != nil {
				return err
			}
			defer client.Close()
			wl, err := loadgenWorkload(c.Flags(), f, w)
			if err != nil {
				return err
			}
			cfg.Workload, cfg.Client = wl, client
			return runLoadgen(c.Context(), cfg, f.asJSON, c.OutOrStdout(), c.ErrOrStderr())
		},
	}
	fs := c.Flags()
	fs.StringVar(&cf.addr, "addr", defaultAddr, "dispatcher base URLs, comma-separated")
	fs.StringVar(&cf.token, "token", "", "bearer token")
	fs.StringVar(&cf.tokenFile, "token-file", "", "file holding the bearer token (wins over --token)")
	fs.DurationVar(&cf.timeout, "timeout", api.DefaultClientTimeout, "timeout of each request")
	fs.StringVar(&f.workloadFile, "workload", "", "workload file (JSON); the flags below override its fields")
	fs.BoolVar(&f.asJSON, "json", false, "print the result as one JSON object")

	fs.Uint64Var(&w.Seed, "seed", 1, "seed of the workload: the same seed gives the same jobs at the same times")
	fs.StringVar(&f.arrival, "arrival", loadgen.ArrivalConstant, "arrival process: constant, poisson or bursts")
	fs.Float64Var(&f.rate, "rate", 100, "jobs per second (constant and poisson)")
	fs.Int64Var(&f.burst, "burst", 0, "jobs per burst (bursts)")
	fs.DurationVar(&f.period, "period", 0, "time between bursts (bursts)")
	fs.DurationVar(&f.duration, "duration", 10*time.Second, "submit jobs arriving within this time")
	fs.Int64Var(&w.Jobs, "jobs", 0, "stop after this many jobs (0: --duration only)")
	fs.StringVar(&f.arraySize, "array-size", "fixed:1", "tasks per job: fixed:N, uniform:A,B or zipf:S,MAX")
	fs.StringSliceVar(&f.shapes, "shape", nil, "task shape CPU/MEMORY[=WEIGHT], repeatable (default 100m/64Mi)")
	fs.StringVar(&f.runTime, "run-time", "1s", "simulated run time of a task: D, fixed:D or uniform:A,B")
	fs.Float64Var(&w.OnlineFraction, "online-fraction", 0, "share of jobs of QoS online")
	fs.StringSliceVar(&f.queues, "queue", nil, "queue NAME[=WEIGHT], repeatable (default: the default queue)")
	fs.StringSliceVar(&f.priorities, "priority", nil, "priority P[=WEIGHT], repeatable (default 0)")
	fs.StringVar(&w.Pool, "pool", "", "pool of the jobs (simulated nodes of 'sluice dev' are in pool \"sim\")")
	fs.StringVar(&w.Name, "name", loadgen.DefaultName, "name of the jobs")

	fs.IntVar(&cfg.Submitters, "submitters", loadgen.DefaultSubmitters, "requests in flight at once")
	fs.IntVar(&cfg.MaxBatch, "max-batch", loadgen.DefaultMaxBatch, "most jobs in one request")
	fs.StringVar(&cfg.Encoding, "encoding", "", "compress request bodies: gzip or zstd (default none)")
	fs.StringVar(&cfg.RunID, "run-id", "", "the run's ID in idempotency keys and the loadgen-run label (default random)")
	fs.IntVar(&cfg.ProbeEvery, "probe-every", 1, "measure running times of every Nth job (negative: none)")
	fs.IntVar(&cfg.MaxProbes, "max-probes", loadgen.DefaultMaxProbes, "jobs whose tasks are polled at once")
	fs.DurationVar(&cfg.PollInterval, "poll-interval", loadgen.DefaultPollInterval, "how often a probed job's tasks are listed")
	fs.DurationVar(&cfg.Drain, "drain", loadgen.DefaultDrain, "after the last submit, wait at most this long for placements")
	return c
}

// loadgenWorkload builds the workload: the file's, if any, with the flags
// given on the command line applied over it; else the flags'.
func loadgenWorkload(fs *pflag.FlagSet, f loadgenRunFlags, flagW loadgen.Workload) (loadgen.Workload, error) {
	w := flagW
	set := func(name string) bool { return f.workloadFile == "" || fs.Changed(name) }
	if f.workloadFile != "" {
		var err error
		if w, err = loadgen.ReadWorkload(f.workloadFile); err != nil {
			return w, usageError{fmt.Errorf("--workload: %w", err)}
		}
		for name, apply := range map[string]func(){
			"seed": func() { w.Seed = flagW.Seed }, "jobs": func() { w.Jobs = flagW.Jobs },
			"online-fraction": func() { w.OnlineFraction = flagW.OnlineFraction },
			"pool":            func() { w.Pool = flagW.Pool }, "name": func() { w.Name = flagW.Name },
		} {
			if fs.Changed(name) {
				apply()
			}
		}
	}
	if set("arrival") {
		w.Arrival.Process = f.arrival
	}
	if set("rate") && w.Arrival.Process != loadgen.ArrivalBursts {
		w.Arrival.Rate = f.rate
	}
	if set("burst") {
		w.Arrival.Burst = f.burst
	}
	if set("period") {
		w.Arrival.Period = api.Duration(f.period)
	}
	if set("duration") {
		w.Duration = api.Duration(f.duration)
	}
	var errs []string
	if set("array-size") {
		d, err := loadgen.ParseIntDist(f.arraySize)
		if err != nil {
			errs = append(errs, "--array-size: "+err.Error())
		}
		w.ArraySize = d
	}
	if set("run-time") {
		d, err := loadgen.ParseDurationDist(f.runTime)
		if err != nil {
			errs = append(errs, "--run-time: "+err.Error())
		}
		w.RunTime = d
	}
	if fs.Changed("shape") {
		w.Shapes = nil
		for _, s := range f.shapes {
			sh, err := loadgen.ParseShape(s)
			if err != nil {
				errs = append(errs, "--shape: "+err.Error())
			}
			w.Shapes = append(w.Shapes, sh)
		}
	}
	if fs.Changed("queue") {
		w.Queues = nil
		for _, s := range f.queues {
			q, err := loadgen.ParseQueue(s)
			if err != nil {
				errs = append(errs, "--queue: "+err.Error())
			}
			w.Queues = append(w.Queues, q)
		}
	}
	if fs.Changed("priority") {
		w.Priorities = nil
		for _, s := range f.priorities {
			p, err := loadgen.ParsePriority(s)
			if err != nil {
				errs = append(errs, "--priority: "+err.Error())
			}
			w.Priorities = append(w.Priorities, p)
		}
	}
	if len(errs) > 0 {
		return w, usageError{fmt.Errorf("%s", strings.Join(errs, "\n"))}
	}
	if err := w.Validate(); err != nil {
		return w, usageError{err}
	}
	return w, nil
}

// runLoadgen runs the driver, shows its progress on stderr and prints the
// result. An interrupted run still prints what it measured.
func runLoadgen(ctx context.Context, cfg loadgen.DriverConfig, asJSON bool, stdout, stderr io.Writer) error {
	d, err := loadgen.NewDriver(cfg)
	if err != nil {
		return usageError{err}
	}
	w := cfg.Workload.WithDefaults()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { showLoadgenProgress(d, w, stderr, stop) })
	res, runErr := d.Run(ctx)
	close(stop)
	wg.Wait()
	if asJSON {
		if err := printJSON(stdout, res); err != nil {
			return err
		}
	} else {
		printLoadgenSummary(stdout, res)
	}
	if runErr != nil {
		return fmt.Errorf("loadgen: %w", runErr)
	}
	if res.Errors > 0 && res.CommittedTasks == 0 {
		return fmt.Errorf("loadgen: every submit failed: %s", strings.Join(res.ErrorSamples, "; "))
	}
	return nil
}

// showLoadgenProgress shows a progress bar on a terminal, and a line every
// 5 seconds elsewhere, until stop closes.
func showLoadgenProgress(d *loadgen.Driver, w loadgen.Workload, stderr io.Writer, stop <-chan struct{}) {
	var bar *progressbar.ProgressBar
	if isTerminal(stderr) {
		// Over jobs when the workload counts them, else over its time.
		total := w.Jobs
		if total == 0 {
			total = w.Duration.Std().Milliseconds()
		}
		bar = progressbar.NewOptions64(total, progressbar.OptionSetWriter(stderr),
			progressbar.OptionSetWidth(30), progressbar.OptionThrottle(100*time.Millisecond))
		defer func() {
			_ = bar.Finish()
			fmt.Fprintln(stderr)
		}()
	}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	last := time.Now()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		p := d.Progress()
		line := fmt.Sprintf("%d jobs, %d tasks submitted; %d committed, %d placed, %d running (probed)",
			p.Jobs, p.Tasks, p.Committed, p.Placed, p.Running)
		if p.Draining {
			line += "; draining"
		}
		if bar != nil {
			bar.Describe(line)
			if w.Jobs > 0 {
				_ = bar.Set64(p.Jobs)
			} else {
				_ = bar.Set64(min(p.Elapsed.Milliseconds(), w.Duration.Std().Milliseconds()))
			}
		} else if time.Since(last) >= 5*time.Second {
			fmt.Fprintf(stderr, "%.0fs: %s\n", p.Elapsed.Seconds(), line)
			last = time.Now()
		}
	}
}

// printLoadgenSummary prints a run's result on one screen.
func printLoadgenSummary(w io.Writer, r loadgen.Result) {
	wl := r.Workload
	arrival := fmt.Sprintf("%s %g jobs/s", wl.Arrival.Process, wl.Arrival.Rate)
	if wl.Arrival.Process == loadgen.ArrivalBursts {
		arrival = fmt.Sprintf("bursts of %d jobs every %v", wl.Arrival.Burst, wl.Arrival.Period)
	}
	fmt.Fprintf(w, "run %s: %s, array size %s, run time %s, seed %d\n", r.RunID, arrival, wl.ArraySize, wl.RunTime, wl.Seed)
	if r.Interrupted {
		fmt.Fprintln(w, "INTERRUPTED: the numbers cover the run so far")
	}
	fmt.Fprintf(w, "submitted   %d jobs, %d tasks in %.1f s (%d requests, %d retries, %d errors)\n",
		r.Jobs, r.Tasks, r.SubmitSeconds, r.Requests, r.Retries, r.Errors)
	fmt.Fprintf(w, "offered     %.1f jobs/s, %.0f tasks/s\n", r.Offered.JobsPerSec, r.Offered.TasksPerSec)
	fmt.Fprintf(w, "committed   %.0f tasks/s (%d tasks)\n", r.Committed.TasksPerSec, r.CommittedTasks)
	fmt.Fprintf(w, "placed      %.0f tasks/s (%d tasks; %d not placed within the drain)\n", r.Placed.TasksPerSec, r.PlacedTasks, r.UnplacedTasks)
	fmt.Fprintf(w, "%-26s %9s %9s %9s %9s %9s\n", "latency (ms)", "p50", "p90", "p99", "max", "count")
	for _, l := range []struct {
		name string
		s    loadgen.LatencyStats
	}{
		{"send lag (per job)", r.Latency.Lag}, {"submit → committed", r.Latency.Committed},
		{"submit → placed", r.Latency.Placed}, {"submit → running (probed)", r.Latency.Running},
	} {
		fmt.Fprintf(w, "%-26s %9.1f %9.1f %9.1f %9.1f %9d\n", l.name, l.s.P50Ms, l.s.P90Ms, l.s.P99Ms, l.s.MaxMs, l.s.Count)
	}
	for _, e := range r.ErrorSamples {
		fmt.Fprintf(w, "error: %s\n", e)
	}
	if r.WatchReconnects > 0 || r.ProbeErrors > 0 {
		fmt.Fprintf(w, "watch reconnects %d, probe errors %d\n", r.WatchReconnects, r.ProbeErrors)
	}
}

func newLoadgenFleetCmd() *cobra.Command {
	var (
		cfg         fleet.Config
		cpu, memory string
		every       time.Duration
		podLog      string
	)
	cf := &clientFlags{output: outputTable}
	var gc gcSetting
	c := &cobra.Command{
		Use:   "fleet",
		Short: "Run simulated nodes against a dispatcher until interrupted",
		Long: `Fleet runs --nodes simulated nodes in this process, each a real nodelet agent
speaking the nodelet protocol over HTTP to the dispatcher at --addr, with a
simulated runtime (a pod runs for its job's sim run time). It registers them
--register-concurrency at a time, then runs until interrupted, printing the
fleet's counters every --every.`,
		Example: `  sluice loadgen fleet --nodes 1000 --addr http://10.0.0.1:8080 --pool sim`,
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(c *cobra.Command, _ []string) error {
			if err := gc.apply(c); err != nil {
				return err
			}
			client, err := cf.client(c) // applies the environment, checks --addr
			if err != nil {
				return err
			}
			client.Close()
			if cfg.CPU, cfg.Memory, err = parseCapacity("--cpu", cpu, "--memory", memory); err != nil {
				return err
			}
			cfg.Addrs, cfg.Token, cfg.Timeout = splitAddrs(cf.addr), cf.token, cf.timeout
			if cf.tokenFile != "" {
				if cfg.Token, err = readToken(cf.tokenFile); err != nil {
					return err
				}
			}
			if podLog != "" {
				f, err := os.OpenFile(podLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
				if err != nil {
					return fmt.Errorf("--pod-log: %w", err)
				}
				defer f.Close()
				cfg.PodLog = f
			}
			return runFleet(c.Context(), cfg, every, c.OutOrStdout())
		},
	}
	fs := c.Flags()
	fs.StringVar(&cf.addr, "addr", defaultAddr, "dispatcher base URLs, comma-separated")
	fs.StringVar(&cf.token, "token", "", "bearer token")
	fs.StringVar(&cf.tokenFile, "token-file", "", "file holding the bearer token (wins over --token)")
	fs.DurationVar(&cf.timeout, "timeout", api.DefaultClientTimeout, "timeout of each request")
	fs.IntVar(&cfg.Nodes, "nodes", 100, "simulated nodes")
	fs.StringVar(&cfg.NamePrefix, "name-prefix", fleet.DefaultNamePrefix, "node names are this prefix, 1..N and --name-suffix")
	fs.StringVar(&cfg.NameSuffix, "name-suffix", "", "node names end with this")
	fs.StringVar(&cfg.Pool, "pool", "sim", "pool of the nodes")
	fs.StringVar(&cpu, "cpu", "64", "CPU of each node")
	fs.StringVar(&memory, "memory", "256Gi", "memory of each node")
	fs.IntVar(&cfg.RegisterConcurrency, "register-concurrency", fleet.DefaultRegisterConcurrency, "registrations in flight at once")
	gc.addFlag(c)
	fs.DurationVar(&cfg.PollWait, "poll-wait", 0, "longest target long-poll of a node (default 30s)")
	fs.DurationVar(&cfg.HeartbeatPeriod, "heartbeat", 0, "send each node's usage, what its pods' sim usage says, this often (0: never)")
	fs.DurationVar(&every, "every", 10*time.Second, "print the fleet's counters this often")
	fs.StringVar(&podLog, "pod-log", "", "append a line per pod start and end to this file: "+fleet.PodLog+" (default none)")
	return c
}

// splitAddrs splits a comma-separated --addr as the client commands do.
func splitAddrs(s string) []string {
	var out []string
	for a := range strings.SplitSeq(s, ",") {
		if a = strings.TrimSpace(a); a == "" {
			continue
		}
		if !strings.Contains(a, "://") {
			a = "http://" + a
		}
		out = append(out, a)
	}
	return out
}

func runFleet(ctx context.Context, cfg fleet.Config, every time.Duration, stdout io.Writer) error {
	if every <= 0 {
		return usageError{fmt.Errorf("--every %v: want a positive duration", every)}
	}
	start := time.Now()
	f, err := fleet.Start(ctx, cfg)
	if err != nil {
		return err
	}
	defer f.Close()
	fmt.Fprintf(stdout, "%d simulated nodes registered in %.1f s; stop with Ctrl-C\n", cfg.Nodes, time.Since(start).Seconds())
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		s := f.Stats()
		fmt.Fprintf(stdout, "%d nodes: %d pods running; %d started, %d exited; %d reports acked, %d pending; %d heartbeats; errors: %d target, %d report, %d heartbeat\n",
			s.Registered, s.Running, s.Starts, s.Exits, s.ReportsAcked, s.PendingReports, s.Heartbeats, s.TargetErrors, s.ReportErrors, s.HeartbeatErrors)
	}
}

// readToken reads a --token-file as the client commands do.
func readToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read token: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}
