package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/bench/schedbench"
)

func newBenchSchedCmd() *cobra.Command {
	var (
		cfg    schedbench.Config
		asJSON bool
	)
	var gc gcSetting
	c := &cobra.Command{
		Use:   "sched",
		Short: "Measure the scheduler: placements committed per second",
		Long: `Sched runs the dispatcher in process on --replicas raftkv replicas
(pebble on disk, fsync on, loopback TCP), registers --nodes simulated
nodes of 64 cores and submits --tasks pending tasks in realistic jobs
(arrays of 1 to 10,000 tasks of four shapes, both QoS classes), then waits
until every task is placed. It prints committed placements per second, the
scheduling rounds' p50/p99 latency with placement's share of it, and the
heap the submit added per pending task.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(c *cobra.Command, _ []string) error {
			if err := gc.apply(c); err != nil {
				return err
			}
			res, err := schedbench.Run(c.Context(), cfg)
			if err != nil {
				return err
			}
			return printSchedBench(c.OutOrStdout(), res, asJSON)
		},
	}
	f := c.Flags()
	f.IntVar(&cfg.Nodes, "nodes", 10_000, "simulated nodes")
	f.IntVar(&cfg.Tasks, "tasks", 100_000, "pending tasks to place")
	f.IntVar(&cfg.Replicas, "replicas", 3, "raftkv replicas")
	f.Uint64Var(&cfg.Seed, "seed", 1, "workload seed")
	f.DurationVar(&cfg.Timeout, "timeout", 5*time.Minute, "give up after this long")
	f.StringVar(&cfg.Dir, "work-dir", "", "directory for the data (default: a temporary one, removed)")
	f.BoolVar(&asJSON, "json", false, "print the result as one JSON object")
	gc.addFlag(c)
	return c
}

func printSchedBench(w io.Writer, r schedbench.Result, asJSON bool) error {
	if asJSON {
		return printJSON(w, r)
	}
	fmt.Fprintf(w, "%d nodes, %d tasks in %d jobs, %d replicas\n", r.Nodes, r.Tasks, r.Jobs, r.Replicas)
	fmt.Fprintf(w, "placements/s        %.0f\n", r.PlacementsPerSec)
	fmt.Fprintf(w, "rounds              %d in %.2f s\n", r.Rounds, r.Seconds)
	fmt.Fprintf(w, "round p50 / p99     %.1f / %.1f ms (placement %.0f%% of round time)\n", r.RoundP50Ms, r.RoundP99Ms, 100*r.SolverShare)
	_, err := fmt.Fprintf(w, "heap per pending    %.1f B\n", r.BytesPerPendingTask)
	return err
}
