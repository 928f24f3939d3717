package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime/pprof"

	"github.com/spf13/cobra"
)

func newBenchCmd() *cobra.Command {
	var cpuProfile string
	var stopProfile func() error
	c := &cobra.Command{
		Use:   "bench",
		Short: "Run benchmarks on this host",
		Args:  usageArgs(cobra.NoArgs),
		RunE:  func(c *cobra.Command, _ []string) error { return c.Help() },
		PersistentPreRunE: func(c *cobra.Command, _ []string) error {
			if cpuProfile == "" {
				return nil
			}
			f, err := os.Create(cpuProfile)
			if err != nil {
				return usageError{fmt.Errorf("--cpuprofile: %w", err)}
			}
			if err := pprof.StartCPUProfile(f); err != nil {
				f.Close()
				return fmt.Errorf("--cpuprofile: %w", err)
			}
			stopProfile = func() error {
				pprof.StopCPUProfile()
				return f.Close()
			}
			return nil
		},
		PersistentPostRunE: func(c *cobra.Command, _ []string) error {
			if stopProfile == nil {
				return nil
			}
			return stopProfile()
		},
	}
	c.PersistentFlags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the benchmark to this file")
	c.AddCommand(newBenchPodstartCmd(), newBenchRaftkvCmd(), newBenchSchedCmd(), newBenchSubmitCmd(), newBenchLatencyCmd())
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
