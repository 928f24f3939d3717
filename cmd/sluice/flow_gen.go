package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/bench/flowgen"
	"github.com/sluicehq/sluice/flowsolver"
)

// newFlowGenCmd returns the "gen" subcommand of "flow".
func newFlowGenCmd() *cobra.Command {
	var (
		cfg      flowgen.Config
		jobSizes string
		out      string
	)
	c := &cobra.Command{
		Use:   "gen",
		Short: "Generate a scheduling-shaped min-cost flow problem in DIMACS format",
		Long: `Gen builds a seeded min-cost flow problem shaped like a cluster scheduler's
(Quincy/Firmament: tasks, per-job unscheduled nodes, a cluster aggregator,
racks, machines, data-local preference arcs, and with --aggregated task
groups and equivalence classes) and writes it in DIMACS format, the input of
"sluice flow solve" and of other solvers. The same flags and seed always
give the same file. The configuration and the seed are written as "c" lines
at the top of the file and the sizes are printed on stderr.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(c *cobra.Command, _ []string) error {
			var err error
			if cfg.JobSizes, err = flowgen.ParseJobSizes(jobSizes); err != nil {
				return usageError{err}
			}
			if cfg.LocalShare == 0 {
				cfg.LocalShare = -1 // flowgen reads 0 as its default, -1 as none
			}
			return runFlowGen(c.OutOrStdout(), c.ErrOrStderr(), cfg, out)
		},
	}
	f := c.Flags()
	f.IntVar(&cfg.Machines, "machines", flowgen.DefaultMachines, "machines in the cluster")
	f.IntVar(&cfg.Racks, "racks", 0, fmt.Sprintf("racks, at least 2 machines each (default: machines/%d rounded up, at least 2)", flowgen.DefaultMachinesPerRack))
	f.IntVar(&cfg.Slots, "slots", flowgen.DefaultSlots, "task slots per machine; each machine has 0 to this many free")
	f.IntVar(&cfg.Tasks, "tasks", 0, fmt.Sprintf("pending tasks in all (default: %d per machine)", flowgen.DefaultTasksPerMachine))
	f.IntVar(&cfg.Jobs, "jobs", 0, fmt.Sprintf("jobs the tasks belong to (default: one per %d tasks)", flowgen.DefaultTasksPerJob))
	f.StringVar(&jobSizes, "job-sizes", flowgen.SkewedJobs.String(), "how tasks are split among jobs: skewed or even")
	f.BoolVar(&cfg.Aggregated, "aggregated", false, "one node per group of identical tasks, with equivalence classes, instead of one per task")
	f.Float64Var(&cfg.LocalShare, "local-share", flowgen.DefaultLocalShare, "fraction of tasks that read a data set and prefer its machines, 0 to 1")
	f.Uint64Var(&cfg.Seed, "seed", 0, "seed of every random choice")
	f.StringVarP(&out, "output", "o", "-", `file to write ("-": stdout)`)
	return c
}

// runFlowGen generates the problem cfg describes and writes it to the file
// out ("-": stdout), with its sizes on stderr.
func runFlowGen(stdout, stderr io.Writer, cfg flowgen.Config, out string) error {
	in, err := flowgen.Generate(cfg)
	if errors.Is(err, flowgen.ErrBadConfig) {
		return usageError{err}
	}
	if err != nil {
		return err
	}
	s := in.Shape()
	fmt.Fprintf(stderr, "flow gen: seed %d: %d nodes, %d arcs, %d tasks (%d data-local) in %d groups\n",
		in.Config().Seed, in.Graph.Nodes(), in.Graph.Arcs(), s.Tasks, s.LocalTasks, s.Groups)

	if out == "-" {
		if err := writeFlowGen(stdout, in); err != nil {
			return fmt.Errorf("flow gen: write stdout: %w", err)
		}
		return nil
	}
	f, err := os.Create(out)
	if err != nil {
		return fmt.Errorf("flow gen: %w", err)
	}
	err = writeFlowGen(f, in)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(out)
		return fmt.Errorf("flow gen: write %s: %w", out, err)
	}
	return nil
}

// writeFlowGen writes in's graph in DIMACS format, after comment lines
// with its configuration (as flags that regenerate it) and its shape.
func writeFlowGen(w io.Writer, in *flowgen.Instance) error {
	cfg, s := in.Config(), in.Shape()
	_, err := fmt.Fprintf(w, "c sluice flow gen --machines %d --racks %d --slots %d --tasks %d --jobs %d --job-sizes %s --aggregated=%t --local-share %g --seed %d\n"+
		"c %d tasks (%d data-local) in %d groups of %d jobs; %d classes; %d free slots\n",
		cfg.Machines, cfg.Racks, cfg.Slots, cfg.Tasks, cfg.Jobs, cfg.JobSizes, cfg.Aggregated, max(0, cfg.LocalShare), cfg.Seed,
		s.Tasks, s.LocalTasks, s.Groups, s.Jobs, s.Classes, s.FreeSlots)
	if err != nil {
		return err
	}
	return flowsolver.WriteDIMACS(w, in.Graph)
}
