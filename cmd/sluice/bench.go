package main

import "github.com/spf13/cobra"

func newBenchCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "bench",
		Short: "Run benchmarks on this host",
		Args:  usageArgs(cobra.NoArgs),
		RunE:  func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	c.AddCommand(newBenchPodstartCmd(), newBenchRaftkvCmd())
	return c
}
