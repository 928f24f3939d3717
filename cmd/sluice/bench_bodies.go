package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/bench/bodybench"
)

func newBenchBodiesCmd() *cobra.Command {
	var (
		cfg    bodybench.Config
		asJSON bool
	)
	c := &cobra.Command{
		Use:   "bodies",
		Short: "Measure a dispatcher's memory under slow and compressed hostile bodies",
		Long: `Bodies starts a fresh single-replica dispatcher process for each phase (the
dispatcher command of --exec, by default this binary, with a token file)
and reads its resident memory (VmRSS) every 10ms while it applies a load:

  slow  --conns connections declaring a 64 MiB body, sending 64 KiB of it
        and stalling, half without a token and half with an admin's, held
        for --hold while /healthz is timed;
  gzip  --bombs gzip bodies of about 130 KB that decompress to 128 MiB,
        sent at once;
  zstd  the same with zstd bodies of about 13 KB.

It prints the memory before the load, its peak, and --settle after the
load ended, the answers by status, and the slowest /healthz. Point --exec
at a build of another commit to measure it under the same load.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(c *cobra.Command, _ []string) error {
			res, err := bodybench.Run(c.Context(), cfg)
			if err != nil {
				return err
			}
			return printBodiesBench(c.OutOrStdout(), res, asJSON)
		},
	}
	f := c.Flags()
	f.StringVar(&cfg.Exec, "exec", "", "sluice binary to run as the dispatcher (default: this one)")
	f.IntVar(&cfg.Conns, "conns", 20, "slow connections")
	f.IntVar(&cfg.Bombs, "bombs", 20, "bombs of each encoding, sent at once")
	f.DurationVar(&cfg.Hold, "hold", 3*time.Second, "how long the slow connections stay open")
	f.DurationVar(&cfg.Settle, "settle", 5*time.Second, "how long after a load the memory is read again")
	f.StringSliceVar(&cfg.Phases, "phases", nil, "phases to run: slow, gzip, zstd (default all)")
	f.StringVar(&cfg.Dir, "work-dir", "", "directory for the data (default: a temporary one, removed)")
	f.BoolVar(&asJSON, "json", false, "print the result as one JSON object")
	return c
}

func printBodiesBench(w io.Writer, r bodybench.Result, asJSON bool) error {
	if asJSON {
		return printJSON(w, r)
	}
	fmt.Fprintf(w, "dispatcher %s\n", r.Exec)
	fmt.Fprintf(w, "%-6s %5s %10s %9s %9s %11s  %s\n", "phase", "n", "before MB", "peak MB", "after MB", "healthz ms", "statuses")
	for _, p := range r.Phases {
		fmt.Fprintf(w, "%-6s %5d %10.1f %9.1f %9.1f %11.1f  %s\n", p.Name, p.Requests, p.BeforeMB, p.PeakMB, p.AfterMB, p.HealthzMaxMs, bodybench.StatusText(p.Statuses))
	}
	return nil
}
