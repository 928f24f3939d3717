package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/bench/submitbench"
)

func newBenchSubmitCmd() *cobra.Command {
	var (
		cfg    submitbench.Config
		asJSON bool
	)
	var gc gcSetting
	c := &cobra.Command{
		Use:   "submit",
		Short: "Measure bulk submission: jobs committed per second through the HTTP API",
		Long: `Submit starts a dispatcher cluster of --replicas replicas in process (pebble
on disk with fsync, raft over loopback TCP, the fasthttp API) and has
--clients clients post --requests bodies of --jobs-per-request jobs each
(optionally --encoding gzip or zstd) to the leader. A request counts once
it is acknowledged, which happens only after its jobs are committed. It
prints jobs committed per second and the requests' p50/p99 latency.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(c *cobra.Command, _ []string) error {
			if err := gc.apply(c); err != nil {
				return err
			}
			res, err := submitbench.Run(c.Context(), cfg)
			if err != nil {
				return err
			}
			return printSubmitBench(c.OutOrStdout(), res, asJSON)
		},
	}
	f := c.Flags()
	f.IntVar(&cfg.Replicas, "replicas", 3, "dispatcher replicas")
	f.IntVar(&cfg.Clients, "clients", 8, "concurrent clients")
	f.IntVar(&cfg.JobsPerRequest, "jobs-per-request", 1000, "jobs in each request body")
	f.IntVar(&cfg.Requests, "requests", 200, "requests in all")
	f.StringVar(&cfg.Encoding, "encoding", "", "compress the bodies: gzip or zstd (default none)")
	f.DurationVar(&cfg.Timeout, "timeout", 5*time.Minute, "give up after this long")
	f.StringVar(&cfg.Dir, "work-dir", "", "directory for the data (default: a temporary one, removed)")
	f.BoolVar(&asJSON, "json", false, "print the result as one JSON object")
	gc.addFlag(c)
	return c
}

func printSubmitBench(w io.Writer, r submitbench.Result, asJSON bool) error {
	if asJSON {
		return printJSON(w, r)
	}
	enc := r.Encoding
	if enc == "" {
		enc = "none"
	}
	fmt.Fprintf(w, "%d replicas, %d clients, %d jobs per request (%d-byte body, encoding %s)\n",
		r.Replicas, r.Clients, r.JobsPerRequest, r.BodyBytes, enc)
	fmt.Fprintf(w, "jobs committed/s    %.0f (%d jobs in %.2f s)\n", r.JobsPerSec, r.Jobs, r.Seconds)
	_, err := fmt.Fprintf(w, "request p50 / p99   %.1f / %.1f ms\n", r.P50Ms, r.P99Ms)
	return err
}

func newBenchLatencyCmd() *cobra.Command {
	var (
		cfg    submitbench.LatencyConfig
		asJSON bool
	)
	var gc gcSetting
	c := &cobra.Command{
		Use:   "latency",
		Short: "Measure a single task's submit-to-running time in a sluice dev cluster",
		Long: `Latency starts the 'sluice dev' shape in process (one dispatcher replica
with the HTTP API, --nodes nodelet agents on simulated hosts connected over
HTTP) and submits --samples single-task jobs one at a time through the API,
timing each from the submit request to the dispatcher's state showing the
task running (placed, started by its nodelet, and that report committed).
It prints the p50, p99 and worst times.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(c *cobra.Command, _ []string) error {
			if err := gc.apply(c); err != nil {
				return err
			}
			res, err := submitbench.Latency(c.Context(), cfg)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(c.OutOrStdout(), res)
			}
			_, err = fmt.Fprintf(c.OutOrStdout(), "%d samples, %d simulated nodes\nsubmit to running p50 / p99 / max   %.1f / %.1f / %.1f ms\n",
				res.Samples, res.Nodes, res.P50Ms, res.P99Ms, res.MaxMs)
			return err
		},
	}
	f := c.Flags()
	f.IntVar(&cfg.Nodes, "nodes", 4, "simulated nodelets")
	f.IntVar(&cfg.Samples, "samples", 200, "single-task jobs, submitted one at a time")
	f.DurationVar(&cfg.Timeout, "timeout", 2*time.Minute, "give up after this long")
	f.StringVar(&cfg.Dir, "work-dir", "", "directory for the data (default: a temporary one, removed)")
	f.BoolVar(&asJSON, "json", false, "print the result as one JSON object")
	gc.addFlag(c)
	return c
}
