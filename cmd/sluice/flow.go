package main

import "github.com/spf13/cobra"

// newFlowCmd groups the min-cost flow tools: the solver on DIMACS files and
// the generator of scheduling-shaped instances for benchmarks.
func newFlowCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "flow",
		Short: "Min-cost flow tools: solve DIMACS instances, generate scheduling-shaped ones",
		Args:  usageArgs(cobra.NoArgs),
		RunE:  func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	c.AddCommand(newFlowSolveCmd(), newFlowGenCmd())
	return c
}
