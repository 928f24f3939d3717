package main

import (
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sluicehq/sluice/bench/overcommitbench"
)

// overcommitFleetFlags are `sluice bench overcommit`'s flags of its fleet
// mode: --fleet, and the --fleet-* flags it takes.
type overcommitFleetFlags struct {
	fleet       bool
	cfg         overcommitbench.FleetConfig
	cpu, memory string
}

// overcommitFleetHelp is the fleet mode's part of the command's help.
const overcommitFleetHelp = `With --fleet, it measures offline lending at fleet scale instead, on
simulated nodes whose pods use what their specs say ("sim": {"usage": ...}):
a dispatcher in process, --fleet-nodes simulated nodes (in --fleet-procs
processes of 'sluice loadgen fleet') sending their pods' usage every
--fleet-heartbeat, online tasks that ask for --fleet-online-share of the
capacity and use --fleet-online-base of it, --fleet-online-peak during the
first --fleet-peak of every --fleet-period (the whole fleet at once), and
offline jobs submitted continuously for --fleet-duration. Every second it
reads the allocated requests over the capacity, the used CPU over the
capacity, and the online usage configured, reported and estimated by the
dispatcher; for each shift of the online usage, how long the allocation
took to settle. With --json the last line is the result: allocation_ratio,
utilization, the time series and the follow times.`

// addTo gives the overcommit command c the fleet mode: its flags, and its
// part of the help. c's RunE runs runBenchOvercommitFleet when f.fleet is
// set.
func (f *overcommitFleetFlags) addTo(c *cobra.Command) {
	c.Long += "\n\n" + overcommitFleetHelp
	c.Example += "\n  sluice bench overcommit --fleet --fleet-nodes 10000 --fleet-procs 3 --json"
	f.add(c.Flags())
}

// add defines the flags on fs.
func (f *overcommitFleetFlags) add(fs *pflag.FlagSet) {
	c := &f.cfg
	fs.BoolVar(&f.fleet, "fleet", false, "measure at fleet scale, on simulated nodes, instead of on this host's containers")
	fs.IntVar(&c.Nodes, "fleet-nodes", overcommitbench.DefaultFleetNodes, "simulated nodes")
	fs.IntVar(&c.FleetProcs, "fleet-procs", 0, "run the fleet in this many child processes (sluice loadgen fleet): 10,000 nodes need more open files than one process may have")
	fs.IntVar(&c.Replicas, "fleet-replicas", overcommitbench.DefaultFleetReplicas, "dispatcher replicas")
	fs.StringVar(&f.cpu, "fleet-node-cpu", "8", "CPU of each simulated node")
	fs.StringVar(&f.memory, "fleet-node-memory", "32Gi", "memory of each simulated node")
	fs.DurationVar(&c.HeartbeatPeriod, "fleet-heartbeat", overcommitbench.DefaultFleetHeartbeatPeriod, "how often each node sends its usage")
	fs.IntVar(&c.OnlinePerNode, "fleet-online-per-node", overcommitbench.DefaultOnlinePerNode, "online tasks per node, on average")
	fs.Float64Var(&c.OnlineShare, "fleet-online-share", overcommitbench.DefaultOnlineShare, "share of the capacity the online tasks ask for")
	fs.Float64Var(&c.OnlineBase, "fleet-online-base", overcommitbench.DefaultOnlineBase, "share of its request an online task uses off its peak")
	fs.Float64Var(&c.OnlinePeak, "fleet-online-peak", overcommitbench.DefaultOnlinePeak, "share of its request an online task uses at its peak")
	fs.DurationVar(&c.Period, "fleet-period", overcommitbench.DefaultPeriod, "how often the online usage peaks (counted from the Unix epoch)")
	fs.DurationVar(&c.PeakLength, "fleet-peak", overcommitbench.DefaultPeakLength, "how long each peak holds")
	fs.DurationVar(&c.OfflineRunTime, "fleet-offline-run-time", overcommitbench.DefaultOfflineRunTime, "how long an offline task runs on average (each job's from half of it to one and a half)")
	fs.Float64Var(&c.OfflineUse, "fleet-offline-use", overcommitbench.DefaultOfflineUse, "share of its request an offline task uses")
	fs.IntVar(&c.Backlog, "fleet-backlog", 0, "offline tasks kept pending (default a tenth of the nodes)")
	fs.DurationVar(&c.Duration, "fleet-duration", 0, "how long offline work is offered and measured (default two periods)")
	fs.DurationVar(&c.Warmup, "fleet-warmup", 0, "first part of the duration the means leave out (default the offline run time)")
	fs.Uint64Var(&c.Seed, "fleet-seed", 1, "seed of the offline jobs' run times")
	fs.StringVar(&c.Dir, "fleet-work-dir", "", "directory for the replicas' data (default: a temporary one, removed)")
}

// runBenchOvercommitFleet runs the fleet mode and prints its result.
func runBenchOvercommitFleet(c *cobra.Command, f *overcommitFleetFlags, asJSON, quiet bool) error {
	cfg := f.cfg
	var err error
	if cfg.NodeCPU, cfg.NodeMemory, err = parseCapacity("--fleet-node-cpu", f.cpu, "--fleet-node-memory", f.memory); err != nil {
		return err
	}
	if cfg.FleetProcs > 0 {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("bench overcommit: find this binary for the fleet processes: %w", err)
		}
		cfg.FleetExec = exe
	}
	if err := cfg.Validate(); err != nil {
		return usageError{err}
	}
	if !quiet {
		cfg.Logger = slog.New(slog.NewTextHandler(c.ErrOrStderr(), nil))
	}
	res, err := overcommitbench.RunFleet(c.Context(), cfg)
	if err != nil && len(res.Series) == 0 {
		return err
	}
	if perr := printOvercommitFleet(c.OutOrStdout(), res, asJSON); perr != nil && err == nil {
		err = perr
	}
	return err
}

// printOvercommitFleet prints a fleet run's result: a row per shift and
// the summary, or one line of JSON.
func printOvercommitFleet(w io.Writer, r overcommitbench.FleetResult, asJSON bool) error {
	if asJSON {
		return printJSON(w, r)
	}
	fmt.Fprintf(w, "%d simulated nodes (%.0f cores), %d replica(s), heartbeats every %gs; online usage peaks %gs of every %gs; seed %d; %.0f s measured, load average %.2f\n",
		r.Nodes, float64(r.CapacityCPU)/1000, r.Replicas, r.HeartbeatSeconds, r.PeakSeconds, r.PeriodSeconds, r.Seed, r.Seconds, r.LoadAverage)
	t := newTable(w, "SHIFT AT S", "ONLINE USAGE", "ALLOCATED BEFORE", "SETTLED AT", "FOLLOW S", "PHASE")
	for _, s := range r.Shifts {
		dir, phase, follow := "falls", "complete", fmt.Sprintf("%.1f", s.FollowSeconds)
		if s.Up {
			dir = "rises"
		}
		if !s.Complete {
			phase = "cut by the end"
		}
		if s.FollowSeconds < 0 {
			follow = "did not settle"
		}
		t.row(fmt.Sprintf("%.0f", s.T), dir, pct(s.Before), pct(s.After), follow, phase)
	}
	if err := t.flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "allocation ratio %s (off peak %s, at peak %s), utilization %s; estimate over configured online usage %.2f off peak, %.2f at peak; follow %s up, %s down\n",
		pct(r.AllocationRatio), pct(r.AllocationRatioOffPeak), pct(r.AllocationRatioPeak), pct(r.Utilization),
		r.EstimateOverConfiguredOffPeak, r.EstimateOverConfiguredPeak, followText(r.FollowUpSeconds), followText(r.FollowDownSeconds))
	if err == nil && r.MinEstimatedNodes < r.Nodes {
		_, err = fmt.Fprintf(w, "warning: as few as %d of %d nodes had a fresh heartbeat: the others were lent their static offline capacity\n", r.MinEstimatedNodes, r.Nodes)
	}
	return err
}

// pct formats a share as a percentage.
func pct(v float64) string { return fmt.Sprintf("%.1f%%", 100*v) }

// followText formats a FleetResult follow time.
func followText(s float64) string {
	switch {
	case s < 0:
		return "did not settle"
	case s == 0:
		return "none measured"
	}
	return fmt.Sprintf("%.0f s", math.Ceil(s))
}
