package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

func newBenchCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "bench",
		Short: "Run benchmarks on this host",
		Args:  usageArgs(cobra.NoArgs),
		RunE:  func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	c.AddCommand(newBenchPodstartCmd(), newBenchRaftkvCmd(), newBenchSchedCmd(), newBenchSubmitCmd(), newBenchLatencyCmd(), newBenchE2ECmd(), newBenchSuiteCmd(), newBenchBodiesCmd(), newBenchOvercommitCmd(), newBenchChaosCmd())
	return c
}

// printJSON writes v as one line of JSON, for --json outputs.
func printJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode result: %w", err)
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
