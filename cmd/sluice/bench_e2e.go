package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/bench/e2ebench"
)

func newBenchE2ECmd() *cobra.Command {
	var (
		cfg     e2ebench.Config
		asJSON  bool
		quiet   bool
		metrics bool
	)
	var gc gcSetting
	c := &cobra.Command{
		Use:   "e2e",
		Short: "Find the task rate a whole cluster sustains, submit to running, in steps",
		Long: `E2e starts a dispatcher cluster of --replicas replicas in process (pebble on
disk with fsync, raft over loopback TCP, the HTTP API) and a fleet of --nodes
simulated nodes against it (real nodelet agents speaking the nodelet protocol
over HTTP), and waits until every node is ready. Then it offers load in
steps of --step-duration: a seeded open-loop workload (loadgen) of jobs of
--array-size tasks each running for --run-time, at --start-rate tasks/s,
then multiplied by --step-factor (or increased by --step-rate) each step.

For each step it measures the placed tasks/s achieved, the p99 of submit to
placed (every task) and of submit to running (sampled jobs), and failed
requests. It stops at the first step that places less than 90% of the tasks
offered per second, fails requests, or exceeds --p99-placed-limit or
--p99-running-limit (the knee), or after --steps steps, and prints every
step and the highest sustained one. Progress goes to stderr.

With --soak D it holds one rate instead: --start-rate for D in one run (the
step flags do not apply), read as rows of --soak-interval (a minute). Each
row says the offered and placed tasks/s, the p99s, failed requests, leader
moves (--move-leader-every; the first comes half a row in) and the peak
resident memory of each process (this one, holding the replicas and the
load generator, and each --fleet-procs process). The soak holds when every
row holds by the rule of a step, the whole soak does, and no process's
memory grows after the first --soak-settle rows: the least-squares slope of
its rows' peak RSS is at most 1% of its mean a minute (at least 4 MiB).
With --json the last line is the soak's result, its rows included.

Everything runs on this host: the numbers are those of the cluster, the
fleet and the load generator sharing its cores.`,
		Example: `  sluice bench e2e --nodes 2000 --start-rate 500 --step-factor 2 --step-duration 10s
  sluice bench e2e --replicas 1 --start-rate 1000 --step-rate 1000 --steps 8 --json
  sluice bench e2e --nodes 10000 --fleet-procs 3 --start-rate 100000 --soak 10m --move-leader-every 1m`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(c *cobra.Command, _ []string) error {
			// The fleet processes and this one share the host's
			// memory: each gets its part as its soft limit.
			limit, err := gc.applyShared(c, 1+max(cfg.FleetProcs, 0))
			if err != nil {
				return err
			}
			if cfg.Soak != 0 {
				// A soak is one rate: the steps' flags do not apply.
				var steps []string
				for _, name := range []string{"step-factor", "step-rate", "steps", "step-duration"} {
					if c.Flags().Changed(name) {
						steps = append(steps, "--"+name)
					}
				}
				if len(steps) > 0 {
					return usageError{fmt.Errorf("bench e2e: --soak holds one rate (--start-rate): %s do not apply", strings.Join(steps, ", "))}
				}
				cfg.StepFactor, cfg.StepRate, cfg.Steps, cfg.StepDuration = 0, 0, 0, 0
			}
			if c.Flags().Changed("step-rate") && !c.Flags().Changed("step-factor") {
				cfg.StepFactor = 0 // --step-rate replaces the default factor
			}
			cfg.NoMetrics = !metrics
			if cfg.JobRetention, err = jobRetention(cfg.JobRetention); err != nil {
				return err
			}
			if cfg.FleetProcs > 0 {
				exe, err := os.Executable()
				if err != nil {
					return fmt.Errorf("bench e2e: find this binary for the fleet processes: %w", err)
				}
				cfg.FleetExec, cfg.FleetMemoryLimit = exe, limit
			}
			if err := cfg.Validate(); err != nil {
				return usageError{err}
			}
			if !quiet {
				cfg.Logger = slog.New(slog.NewTextHandler(c.ErrOrStderr(), nil))
			}
			if cfg.Soak > 0 {
				res, err := e2ebench.RunSoak(c.Context(), cfg)
				if err != nil && len(res.Rows) == 0 {
					return err
				}
				if perr := printBenchSoak(c.OutOrStdout(), res, asJSON); perr != nil && err == nil {
					err = perr
				}
				return err
			}
			res, err := e2ebench.Run(c.Context(), cfg)
			if err != nil && len(res.Steps) == 0 {
				return err
			}
			if perr := printBenchE2E(c.OutOrStdout(), res, asJSON); perr != nil && err == nil {
				err = perr
			}
			return err
		},
	}
	f := c.Flags()
	f.IntVar(&cfg.Replicas, "replicas", e2ebench.DefaultReplicas, "dispatcher replicas")
	f.IntVar(&cfg.Nodes, "nodes", e2ebench.DefaultNodes, "simulated nodes")
	f.Float64Var(&cfg.StartRate, "start-rate", e2ebench.DefaultStartRate, "tasks per second offered in the first step")
	f.Float64Var(&cfg.StepFactor, "step-factor", e2ebench.DefaultStepFactor, "multiply the rate by this each step")
	f.Float64Var(&cfg.StepRate, "step-rate", 0, "add this many tasks per second each step, instead of --step-factor")
	f.IntVar(&cfg.Steps, "steps", e2ebench.DefaultSteps, "most steps")
	f.DurationVar(&cfg.StepDuration, "step-duration", e2ebench.DefaultStepDuration, "how long each step offers load")
	f.DurationVar(&cfg.Warmup, "warmup", 0, "offer --start-rate for this long before the first step, measured but not judged, so that the steps find the processes warm (0: none)")
	f.StringVar(&cfg.ArraySize, "array-size", e2ebench.DefaultArraySize, "tasks per job: fixed:N, uniform:A,B or zipf:S,MAX")
	f.StringVar(&cfg.RunTime, "run-time", e2ebench.DefaultRunTime, "simulated run time of a task: D, fixed:D or uniform:A,B")
	f.DurationVar(&cfg.P99PlacedLimit, "p99-placed-limit", e2ebench.DefaultP99PlacedLimit, "a sustained step's largest p99 of submit to placed")
	f.DurationVar(&cfg.P99RunningLimit, "p99-running-limit", e2ebench.DefaultP99RunningLimit, "a sustained step's largest p99 of submit to running")
	f.Uint64Var(&cfg.Seed, "seed", 1, "seed of the workloads (step i uses seed+i)")
	f.DurationVar(&cfg.Timeout, "timeout", 0, "give up after this long (0: 30m, or the warm-up and the soak and 15m more)")
	f.IntVar(&cfg.FleetProcs, "fleet-procs", 0, "run the fleet in this many child processes (sluice loadgen fleet) instead of in this one: each process holds its nodes' connections, and 10,000 nodes need more open files than one process may have")
	f.StringVar(&cfg.Dir, "work-dir", "", "directory for the data (default: a temporary one, removed)")
	f.DurationVar(&cfg.JobRetention, "job-retention", e2ebench.DefaultJobRetention, "how long the dispatchers keep a finished job (0: for ever)")
	f.DurationVar(&cfg.MoveLeaderEvery, "move-leader-every", 0, "have the leading replica hand its leadership to the next this often, through the warm-up and the steps (0: never)")
	f.DurationVar(&cfg.Soak, "soak", 0, "hold --start-rate for this long instead of stepping, judged per --soak-interval (0: steps)")
	f.DurationVar(&cfg.SoakInterval, "soak-interval", e2ebench.DefaultSoakInterval, "the length of a soak's rows")
	f.IntVar(&cfg.SoakSettle, "soak-settle", e2ebench.DefaultSoakSettle, "the first rows of a soak its memory trend leaves out")
	f.BoolVar(&metrics, "metrics", true, fmt.Sprintf("the replicas count and serve Prometheus metrics, scraped every %v (false: off, to measure what they cost)", e2ebench.ScrapeInterval))
	f.BoolVar(&asJSON, "json", false, "print the result as one JSON object, on the last line")
	f.BoolVar(&quiet, "quiet", false, "do not log progress to stderr")
	gc.addFlag(c)
	return c
}

// printBenchE2E prints a run's result: a row per step and the summary, or
// one line of JSON.
func printBenchE2E(w io.Writer, r e2ebench.Result, asJSON bool) error {
	if asJSON {
		return printJSON(w, r)
	}
	fmt.Fprintf(w, "%d replicas, %d simulated nodes; jobs of %s tasks running %s; steps of %s\n",
		r.Replicas, r.Nodes, r.ArraySize, strings.TrimPrefix(r.RunTime, "fixed:"), time.Duration(r.StepSeconds*float64(time.Second)))
	t := newTable(w, "STEP", "TARGET/S", "OFFERED/S", "PLACED/S", "PLACED%",
		"PLACED P50/P99 MS", "RUNNING P50/P99 MS", "TASKS", "ERRORS", "CPU µS/TASK BENCH+FLEET", "SUSTAINED")
	rows := r.Steps
	if r.Warmup != nil {
		rows = append([]e2ebench.Step{*r.Warmup}, rows...)
	}
	for _, s := range rows {
		pct := 0.0
		if s.OfferedTasksPerSec > 0 {
			pct = 100 * s.PlacedTasksPerSec / s.OfferedTasksPerSec
		}
		name, verdict := fmt.Sprint(s.Step), "yes"
		switch {
		case s.Step == 0:
			name, verdict = "warm-up", "not judged"
		case !s.Sustained && len(s.Reasons) == 0:
			verdict = "interrupted"
		case !s.Sustained:
			verdict = "no: " + strings.Join(s.Reasons, "; ")
		}
		t.row(name, fmt.Sprintf("%.0f", s.TargetTasksPerSec), fmt.Sprintf("%.0f", s.OfferedTasksPerSec),
			fmt.Sprintf("%.0f", s.PlacedTasksPerSec), fmt.Sprintf("%.0f%%", pct),
			fmt.Sprintf("%.1f / %.1f", s.P50SubmitToPlacedMs, s.P99SubmitToPlacedMs),
			fmt.Sprintf("%.1f / %.1f", s.P50SubmitToRunningMs, s.P99SubmitToRunningMs),
			fmt.Sprint(s.Tasks), fmt.Sprint(s.Errors), fmt.Sprintf("%.0f + %.0f", s.BenchCPUPerTaskUs, s.FleetCPUPerTaskUs), verdict)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if r.SustainedStep == 0 {
		fmt.Fprintln(w, "max sustained: none (the first step did not hold)")
	} else {
		fmt.Fprintf(w, "max sustained: %.0f tasks/s (step %d); p99 submit→placed %.1f ms, submit→running %.1f ms\n",
			r.MaxSustainedTasksPerSec, r.SustainedStep, r.P99SubmitToPlacedMs, r.P99SubmitToRunningMs)
	}
	var err error
	if r.KneeStep > 0 {
		_, err = fmt.Fprintf(w, "knee: step %d (%.0f tasks/s offered)\n", r.KneeStep, r.Steps[r.KneeStep-1].TargetTasksPerSec)
	} else {
		_, err = fmt.Fprintf(w, "no knee within %d steps\n", len(r.Steps))
	}
	return err
}

// printBenchSoak prints a soak's result: a row per row, the whole soak,
// each process's memory trend and the verdict; or one line of JSON.
func printBenchSoak(w io.Writer, r e2ebench.SoakResult, asJSON bool) error {
	if asJSON {
		return printJSON(w, r)
	}
	dur := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
	fmt.Fprintf(w, "%d replicas, %d simulated nodes; jobs of %s tasks running %s; %.0f tasks/s for %s in rows of %s",
		r.Replicas, r.Nodes, r.ArraySize, strings.TrimPrefix(r.RunTime, "fixed:"), r.TargetTasksPerSec, dur(r.SoakSeconds), dur(r.RowSeconds))
	if r.MoveLeaderEverySeconds > 0 {
		fmt.Fprintf(w, "; the leadership moved every %s", dur(r.MoveLeaderEverySeconds))
	}
	fmt.Fprintln(w)
	if r.Warmup != nil {
		fmt.Fprintf(w, "warm-up (not judged): %s of %.0f tasks/s placed, p99 submit→placed %.1f ms, →running %.1f ms, %d errors\n",
			dur(r.WarmupSeconds), r.Warmup.PlacedTasksPerSec, r.Warmup.P99SubmitToPlacedMs, r.Warmup.P99SubmitToRunningMs, r.Warmup.Errors)
	}
	t := newTable(w, "ROW", "FROM", "OFFERED/S", "PLACED/S", "PLACED%", "PLACED P50/P99 MS", "RUNNING P50/P99 MS",
		"ERRORS", "MOVES", "CPU µS/TASK BENCH+FLEET", "RSS MIB "+strings.Join(r.Processes, "/"), "HELD")
	for _, row := range r.Rows {
		pct := 0.0
		if row.OfferedTasksPerSec > 0 {
			pct = 100 * row.PlacedTasksPerSec / row.OfferedTasksPerSec
		}
		held := "yes"
		if !row.Holds {
			held = "no: " + strings.Join(row.Reasons, "; ")
		}
		rss := make([]string, len(row.RSSMiB))
		for i, v := range row.RSSMiB {
			rss[i] = fmt.Sprintf("%.0f", v)
		}
		t.row(fmt.Sprint(row.Row), dur(row.StartSeconds).String(), fmt.Sprintf("%.0f", row.OfferedTasksPerSec),
			fmt.Sprintf("%.0f", row.PlacedTasksPerSec), fmt.Sprintf("%.0f%%", pct),
			fmt.Sprintf("%.1f / %.1f", row.P50SubmitToPlacedMs, row.P99SubmitToPlacedMs),
			fmt.Sprintf("%.1f / %.1f", row.P50SubmitToRunningMs, row.P99SubmitToRunningMs),
			fmt.Sprint(row.Errors), fmt.Sprint(row.LeaderMoves),
			fmt.Sprintf("%.0f + %.0f", row.BenchCPUPerTaskUs, row.FleetCPUPerTaskUs), strings.Join(rss, " / "), held)
	}
	if err := t.flush(); err != nil {
		return err
	}
	tot := r.Total
	fmt.Fprintf(w, "whole soak: %.0f of %.0f tasks/s placed, p99 submit→placed %.1f ms, →running %.1f ms; %d tasks, %d unplaced; %d errors, %d retries; %d leader moves\n",
		tot.PlacedTasksPerSec, tot.OfferedTasksPerSec, tot.P99SubmitToPlacedMs, tot.P99SubmitToRunningMs, tot.Tasks, tot.UnplacedTasks,
		tot.Errors, tot.Retries, tot.LeaderMoves)
	if len(r.MemoryLimitMiB) == len(r.Processes) {
		limits := make([]string, len(r.Processes))
		for i, l := range r.MemoryLimitMiB {
			limits[i] = r.Processes[i] + " none"
			if l > 0 {
				limits[i] = fmt.Sprintf("%s %.0f MiB", r.Processes[i], l)
			}
		}
		fmt.Fprintf(w, "soft memory limits: %s\n", strings.Join(limits, ", "))
	}
	for _, m := range r.Memory {
		if !m.Judged {
			continue // the notes say so
		}
		verdict := "flat"
		if !m.Flat {
			verdict = "grows"
		}
		fmt.Fprintf(w, "memory of %s, rows %d to %d: %.0f to %.0f MiB, slope %+.1f MiB/min (limit %.1f): %s\n",
			m.Process, m.FromRow, m.FromRow+m.Rows-1, m.FirstMiB, m.LastMiB, m.SlopeMiBPerMin, m.LimitMiBPerMin, verdict)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	var err error
	if r.Holds {
		_, err = fmt.Fprintln(w, "soak: held")
	} else {
		_, err = fmt.Fprintf(w, "soak: did not hold: %s\n", strings.Join(r.Reasons, "; "))
	}
	return err
}
