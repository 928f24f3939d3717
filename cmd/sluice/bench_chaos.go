package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/bench/chaosbench"
)

// errChaosBroken is returned when a chaos run broke a promise it checks.
var errChaosBroken = errors.New("bench chaos: a checked promise was broken")

func newBenchChaosCmd() *cobra.Command {
	var (
		cfg    chaosbench.Config
		faults string
		asJSON bool
		quiet  bool
	)
	c := &cobra.Command{
		Use:   "chaos",
		Short: "Inject faults into a cluster of real processes and check nothing acknowledged is lost",
		Long: `Chaos starts three 'sluice dispatcher' processes (this binary), each of
whose raft traffic to the others goes through a fault-injecting proxy of
this process, and --fleet-procs 'sluice loadgen fleet' processes running
--nodes simulated nodes between them. A client submits keyed jobs (resent
with the same idempotency key until acknowledged), reads them with
consistent reads and cancels some, at --rate operations per second, while
a schedule of faults drawn from --seed is injected one at a time:

  kill-leader, kill-follower   SIGKILL, restarted after the hold
  kill-all                     the three replicas at once, restarted after the hold
  disk-full                    the leader's tmpfs filled (root only)
  slow-disk                    every sync of the leader's store waits --sync-delay
  partition-follower           a follower's raft traffic dropped (minority side)
  partition-leader             the leader's raft traffic dropped (old leader's side)
  delay-follower               a follower's raft traffic delayed by --delay
  kill-fleet                   a fleet process SIGKILLed and restarted
  freeze-fleet                 a fleet process stopped (SIGSTOP) for longer
                               than the node TTL, then let go on
  kill-nodelet                 a real nodelet SIGKILLed and restarted (root)
  cut-nodelet                  a real nodelet cut off from every replica for
                               longer than the node TTL, then healed (root)

As root, two 'sluice nodelet' processes with the container runtime (their
containers created through a copy of sluice-shim: --shim, or the one
beside this binary, or one built from the source tree) run the four pods
of a job of their own, from a small static image built with the go
command; each pod appends its start and its stop to a file on a host_path
volume. Each nodelet reaches the replicas only through HTTP proxies of
this process, one per replica, which rewrite the replicas' redirects to
the leader into the proxy for it: cutting them cuts the nodelet off and
nothing else. Afterwards the job is cancelled and the pods' own records
checked: no pod started twice on its node (a killed nodelet adopts its
pods), the cut node's tasks ran again on the other, and the cut node
stopped its stale pods on its return. Where the nodelets cannot run (not
root, no go command, the runtime failing), their faults are skipped with
the reason.

The schedule is printed before the load starts; the same --seed with the
same sizes replays it. After it, every long job is cancelled, every key
read, and the run checked: every acknowledged job exists once per key
(lost, duplicates), every job reached a final state, no pod of an ended
job still runs (stale pods), and the history of submits, reads and
cancels is linearizable (porcupine). Each fault's unavailability is the
time from its injection to the first placement of a probe job (one every
50 ms) submitted after it; its worst wait, the longest submit to placement
of a probe submitted between the injection and the recovery after the
heal. The fleets log every pod's start and end, the real pods their own:
the longest time a task ran on two nodes at once is reported and held to
the longest cut-off past the node TTL plus 3 s. A run that
breaks a promise exits non-zero.`,
		Example: `  sluice bench chaos
  sluice bench chaos --seed 7 --rounds 3 --faults kill-leader,partition-leader --json`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(c *cobra.Command, _ []string) error {
			kinds, err := chaosbench.ParseKinds(faults)
			if err != nil {
				return usageError{err}
			}
			cfg.Kinds = kinds
			if cfg.Exe, err = os.Executable(); err != nil {
				return fmt.Errorf("bench chaos: find this binary for the child processes: %w", err)
			}
			if err := cfg.Validate(); err != nil {
				return usageError{err}
			}
			if !quiet {
				cfg.Log = c.ErrOrStderr()
			}
			res, err := chaosbench.Run(c.Context(), cfg)
			if err != nil {
				return err
			}
			if err := printBenchChaos(c.OutOrStdout(), res, asJSON); err != nil {
				return err
			}
			if !res.OK() {
				return errChaosBroken
			}
			return nil
		},
	}
	fs := c.Flags()
	fs.Uint64Var(&cfg.Seed, "seed", chaosbench.DefaultSeed, "seed of the schedule and the workload: the same seed and sizes replay a run")
	fs.StringVar(&faults, "faults", "all", "fault kinds, comma-separated, each once a round (all: every kind)")
	fs.IntVar(&cfg.Rounds, "rounds", chaosbench.DefaultRounds, "rounds of the schedule")
	fs.DurationVar(&cfg.Gap, "gap", chaosbench.DefaultGap, "least calm before each fault (up to twice it)")
	fs.DurationVar(&cfg.Hold, "hold", chaosbench.DefaultHold, "least time each fault lasts before it is healed (up to twice it)")
	fs.DurationVar(&cfg.Delay, "delay", chaosbench.DefaultDelay, "latency added by delay-follower")
	fs.DurationVar(&cfg.SyncDelay, "sync-delay", chaosbench.DefaultSyncDelay, "wait added to each sync of the store by slow-disk")
	fs.IntVar(&cfg.FleetProcs, "fleet-procs", chaosbench.DefaultFleetProcs, "fleet processes")
	fs.IntVar(&cfg.Nodes, "nodes", chaosbench.DefaultNodes, "simulated nodes, split between the fleet processes")
	fs.Float64Var(&cfg.Rate, "rate", chaosbench.DefaultRate, "operations per second of the client (submits, reads, cancels)")
	fs.IntVar(&cfg.Clients, "clients", chaosbench.DefaultClients, "concurrent clients sharing the rate")
	fs.Int64Var(&cfg.MaxTasks, "max-tasks", chaosbench.DefaultMaxTasks, "most tasks of a short job")
	fs.DurationVar(&cfg.RunTime, "run-time", chaosbench.DefaultRunTime, "mean simulated run time of a short job's tasks")
	fs.DurationVar(&cfg.Drain, "drain", chaosbench.DefaultDrain, "after the load, how long every job may take to reach a final state")
	fs.StringVar(&cfg.Host, "host", chaosbench.DefaultHost, "loopback address the replicas and proxies listen on (another, such as 127.0.0.2, when the ports of 127.0.0.1 run short)")
	fs.StringVar(&cfg.Shim, "shim", "", "sluice-shim binary of the real nodelets (default: the one beside this binary, else one built from the source tree)")
	fs.StringVar(&cfg.Dir, "dir", "", "directory of the data and logs (default a temporary one, removed after)")
	fs.BoolVar(&cfg.KeepDir, "keep", false, "keep the temporary directory of the data and logs")
	fs.BoolVar(&asJSON, "json", false, "print the result as one JSON object on the last line")
	fs.BoolVar(&quiet, "quiet", false, "do not print the schedule and progress on stderr")
	return c
}

// printBenchChaos prints the faults and the verdict, or with asJSON the
// result as one JSON line.
func printBenchChaos(w io.Writer, r chaosbench.Result, asJSON bool) error {
	if asJSON {
		return printJSON(w, r)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "#\tfault\tvictim\tat (s)\theld (s)\tunavailable (ms)\tworst wait (ms)\trecovered (ms)\t\n")
	for i, f := range r.Sched {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%.1f\t%.1f\t%d\t%d\t%d\t%s%s\n", i+1, f.Kind, f.Victim, float64(f.AtMs)/1000, float64(f.HeldMs)/1000,
			f.UnavailableMs, f.WorstWaitMs, f.RecoverMs, f.Skipped, f.Note)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "faults\tacked\tlost\tduplicates\tnot final\tworst unavailability (ms)\tlinearizable\tran twice (tasks)\tlongest twice (ms)\tstale pods\t\n")
	fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%d\t%s\t%d\t%d\t%d\t\n", r.Faults, r.Acked, r.Lost, r.Duplicates, r.NotFinal, r.MaxUnavailableMs, r.Linearizable,
		r.DoubleRun.Tasks, r.DoubleRun.MaxMs, len(r.StalePods))
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "worst wait of a probe submitted during a fault: %d ms\n", r.MaxWaitMs)
	if n := r.Nodelets; n == nil {
		fmt.Fprintf(w, "a task ran on two nodes at once for at most %d ms (simulated nodes; bound %d ms: the longest cut-off past the node TTL, plus 3 s)\n",
			r.DoubleRun.MaxMs, r.DoubleRunBoundMs)
	} else {
		fmt.Fprintf(w, "a task ran on two nodes at once for at most %d ms on the real nodelets, a node cut off from the network (bound %d ms: the longest cut-off past the node TTL, plus 3 s)\n",
			n.DoubleRun.MaxMs, r.DoubleRunBoundMs)
		fmt.Fprintf(w, "  and %d ms on the simulated nodes, a fleet process frozen\n", r.DoubleRun.MaxMs)
		fmt.Fprintf(w, "real nodelets: %d pod runs, %d started twice on their node, %d tasks of a node cut off run again on the other (%d cuts), %d stale pods,\n",
			n.Pods, len(n.StartedTwice), n.Moved, n.Cuts, len(n.StalePods))
		fmt.Fprintf(w, "  stale pods stopped at most %d ms after the cut was healed\n", n.StaleStopMs)
		for _, p := range n.StartedTwice {
			fmt.Fprintf(w, "problem: pod %s started twice on its node\n", p)
		}
		for _, p := range n.StalePods {
			fmt.Fprintf(w, "problem: stale real pod %s still runs\n", p)
		}
		if n.Cuts > 0 && n.Moved == 0 {
			fmt.Fprintf(w, "problem: no task of a node cut off ran again elsewhere\n")
		}
	}
	fmt.Fprintf(w, "seed %d, run %s: %d operations, %d unknown submits, %d failed requests (retried), %.0f s\n",
		r.Seed, r.RunID, r.Ops, r.Unknown, r.FailedRequests, r.DurationS)
	for _, s := range r.Skipped {
		fmt.Fprintf(w, "skipped %s\n", s)
	}
	for _, e := range r.Examples {
		fmt.Fprintf(w, "problem: %s\n", e)
	}
	for i, p := range r.StalePods {
		if i == 10 {
			fmt.Fprintf(w, "problem: %d more stale pods\n", len(r.StalePods)-i)
			break
		}
		fmt.Fprintf(w, "problem: stale pod %s still runs\n", p)
	}
	return nil
}
