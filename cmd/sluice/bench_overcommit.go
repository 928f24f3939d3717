package main

import (
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/bench/overcommitbench"
)

func newBenchOvercommitCmd() *cobra.Command {
	var (
		cfg                  overcommitbench.Config
		cpu, memory          string
		onlineCPU, onlineMem string
		offlineCPU, offMem   string
		asJSON, quiet        bool
		fl                   overcommitFleetFlags
	)
	c := &cobra.Command{
		Use:   "overcommit",
		Short: "Measure overcommit on real containers: allocation against capacity, and its cost to online work",
		Long: `Overcommit starts a one-replica dispatcher and a real nodelet in this process
(the container runtime, its overcommit loop on a cgroup tree of the run's own,
a pod network of its own through the CNI plugins) and runs, through the API:
--online-pods online pods that ask for --online-cpu and --online-memory each
and compute --online-duty of every period; a probe server, an online pod
whose mapped port this host asks at --probe-rate, first for --unloaded with
no offline work (the anchor), then for --loaded once offline pods that burn a
whole CPU each (asking --offline-cpu and --offline-memory) were submitted a
job of --offline-step at a time until placement refused them.

It reports the CPU allocated (both tiers' requests over the node's capacity;
Hippo reaches 115%, the target is 130%), the host's utilisation, the probe's
p99 against its unloaded p99 (target: within 10%), the online pods' CPU
throttling from their cgroups (target: none), offline pods killed for memory
and why, and a time series of allocation and utilisation (in --json).

It needs root, the CNI plugins (scripts/install-cni.sh) and a workload image
(--image, a directory holding the workload program as /workload; by default
built from examples/workload when run inside the source tree). Progress goes
to stderr.`,
		Example: `  sluice bench overcommit
  sluice bench overcommit --unloaded 5s --loaded 10s --json`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(c *cobra.Command, _ []string) error {
			if fl.fleet {
				return runBenchOvercommitFleet(c, &fl, asJSON, quiet)
			}
			var errs []string
			parse := func(name, v string, dst *int64, f func(string) (int64, error)) {
				if v == "" {
					return
				}
				n, err := f(v)
				if err != nil || n == 0 {
					errs = append(errs, fmt.Sprintf("--%s: want a positive quantity, got %q", name, v))
				}
				*dst = n
			}
			parse("cpu", cpu, &cfg.NodeCPU, api.ParseCPU)
			parse("memory", memory, &cfg.NodeMemory, api.ParseBytes)
			parse("online-cpu", onlineCPU, &cfg.OnlineCPU, api.ParseCPU)
			parse("online-memory", onlineMem, &cfg.OnlineMemory, api.ParseBytes)
			parse("offline-cpu", offlineCPU, &cfg.OfflineCPU, api.ParseCPU)
			parse("offline-memory", offMem, &cfg.OfflineMemory, api.ParseBytes)
			if len(errs) > 0 {
				return usageError{fmt.Errorf("%s", strings.Join(errs, "; "))}
			}
			if err := cfg.Validate(); err != nil {
				return usageError{err}
			}
			if !quiet {
				cfg.Logger = slog.New(slog.NewTextHandler(c.ErrOrStderr(), nil))
			}
			res, err := overcommitbench.Run(c.Context(), cfg)
			if err != nil {
				return err
			}
			return printBenchOvercommit(c.OutOrStdout(), res, asJSON)
		},
	}
	f := c.Flags()
	f.StringVar(&cpu, "cpu", "", `the node's CPU capacity, such as "2" (default: the host's)`)
	f.StringVar(&memory, "memory", "", `the node's memory capacity, such as "4Gi" (default: 4Gi, or the host's when less)`)
	f.IntVar(&cfg.OnlinePods, "online-pods", 2, "online pods that ask for much and use a duty cycle of it")
	f.StringVar(&onlineCPU, "online-cpu", "", "CPU each online pod asks for (default: 35% of the node's)")
	f.StringVar(&onlineMem, "online-memory", "", "memory each online pod asks for (default: 15% of the node's)")
	f.Float64Var(&cfg.OnlineDuty, "online-duty", 0.1, "share of every period an online pod computes")
	f.DurationVar(&cfg.OnlinePeriod, "online-period", 0, "an online pod's cycle (default 100ms)")
	f.Float64Var(&cfg.ProbeRate, "probe-rate", 50, "probe requests per second, one at a time")
	f.StringVar(&offlineCPU, "offline-cpu", "", "CPU each offline pod asks for (default 250m)")
	f.StringVar(&offMem, "offline-memory", "", "memory each offline pod asks for (default 256Mi)")
	f.IntVar(&cfg.OfflineStep, "offline-step", 2, "offline pods per job submitted during the fill")
	f.IntVar(&cfg.MaxOffline, "max-offline", 64, "most offline pods submitted")
	f.DurationVar(&cfg.Unloaded, "unloaded", 0, "length of the unloaded probe phase (default 10s)")
	f.DurationVar(&cfg.Loaded, "loaded", 0, "length of the loaded probe phase (default 20s)")
	f.DurationVar(&cfg.Timeout, "timeout", 0, "bound on the whole run (default 5m)")
	f.StringVar(&cfg.Image, "image", "", "workload image directory holding /workload (default: built from examples/workload)")
	f.StringVar(&cfg.WorkDir, "work-dir", "", "directory for the dispatcher's data, the pods' state and the image (default: a temporary one, removed)")
	f.BoolVar(&asJSON, "json", false, "print the result as one line of JSON, with the time series")
	f.BoolVar(&quiet, "quiet", false, "no progress on stderr")
	fl.addTo(c)
	return c
}

func printBenchOvercommit(w io.Writer, r overcommitbench.Result, asJSON bool) error {
	if asJSON {
		return printJSON(w, r)
	}
	fmt.Fprintf(w, "node %dm CPU, %d MiB memory; %d online pods and a probe server asking %.0f%% of the CPU\n",
		r.NodeCPU, r.NodeMemory>>20, r.OnlinePods, 100*r.OnlineRequestRatio)
	fmt.Fprintf(w, "offline: %d placed, %d pending (%s)\n", r.OfflinePlaced, r.OfflinePending, orNone(r.RefusedReason))
	fmt.Fprintf(w, "%-30s %-28s %-22s %s\n", "measure", "value", "target", "met")
	for _, ch := range r.Checks() {
		met := "no"
		if ch.Met {
			met = "yes"
		}
		fmt.Fprintf(w, "%-30s %-28s %-22s %s\n", ch.Name, ch.Value, ch.Target, met)
	}
	fmt.Fprintf(w, "%-30s %.0f%%\n", "allocated / capacity (memory)", 100*r.MemoryAllocationRatio)
	fmt.Fprintf(w, "%-30s %.0f%% loaded, %.0f%% unloaded (%.0fm of it outside the pods)\n", "host CPU utilisation",
		100*r.Utilization, 100*r.UtilizationUnloaded, r.BackgroundCPUMillis)
	fmt.Fprintf(w, "%-30s online %.0fm, offline %.0fm\n", "CPU used (loaded)", r.OnlineCPUMillis, r.OfflineCPUMillis)
	fmt.Fprintf(w, "%-30s %.1f / %.1f ms (unloaded %.1f / %.1f ms), %d requests, %d failed\n", "probe p50 / p99",
		r.ProbeP50Ms, r.ProbeP99Ms, r.ProbeP50UnloadedMs, r.ProbeP99UnloadedMs, r.ProbeRequests, r.ProbeErrors)
	fmt.Fprintf(w, "%-30s %d %v, %d earlier attempts\n", "offline killed for memory", r.OfflineKilled, r.OfflineKilledBy, r.OfflineRetried)
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
