package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/bench/podbench"
)

func newBenchPodstartCmd() *cobra.Command {
	var (
		cfg     podbench.Config
		asJSON  bool
		keepDir string
	)
	c := &cobra.Command{
		Use:   "podstart",
		Short: "Measure pod start latency against the runc CLI",
		Long: `Podstart starts --pods pods, --concurrency at a time, with Sluice's container
runtime on a generated rootfs (a tiny static program, built with the go
command), and then the same number with the runc CLI on the same rootfs and
limits, and reports request-to-running p50/p99 and starts per second of each.
It needs root. Without runc on PATH the runc side is skipped; install it with
scripts/install-runc.sh (apt-get install -y runc).

With --network bridge the Sluice pods run in bridge mode, attached through the
CNI plugins (scripts/install-cni.sh) to a bridge and subnet of the run's own;
the same run also measures the pods in none mode, and runc into a network
namespace the same plugins set up (namespace, ADD and runc run in a row).`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(c *cobra.Command, _ []string) error {
			cfg.WorkDir = keepDir
			res, err := podbench.Run(c.Context(), cfg)
			if err != nil {
				return err
			}
			return printPodstart(c.OutOrStdout(), res, asJSON)
		},
	}
	f := c.Flags()
	f.IntVar(&cfg.Pods, "pods", 50, "pods to start with each runtime")
	f.IntVar(&cfg.Concurrency, "concurrency", 1, "starts in flight at once")
	f.StringVar(&cfg.Runc, "runc", "", "runc binary (default: runc on PATH)")
	f.BoolVar(&cfg.NoRunc, "no-runc", false, "skip the runc side")
	f.Int64Var(&cfg.MilliCPU, "cpu", 500, "each pod's CPU limit, millicores")
	f.Int64Var(&cfg.MemoryBytes, "memory", 64<<20, "each pod's memory limit, bytes")
	f.StringVar(&cfg.Network, "network", "none", "the pods' network mode: none, or bridge (then also measured: none, and runc with the CNI plugins)")
	f.StringVar(&keepDir, "work-dir", "", "directory for the rootfs and state (default: a temporary one, removed)")
	f.BoolVar(&asJSON, "json", false, "print the result as JSON")
	return c
}

func printPodstart(w io.Writer, r podbench.Result, asJSON bool) error {
	if asJSON {
		return printJSON(w, r)
	}
	fmt.Fprintf(w, "pods %d, concurrency %d\n", r.Pods, r.Concurrency)
	fmt.Fprintf(w, "%-14s %9s %9s %9s\n", "runtime", "p50 ms", "p99 ms", "starts/s")
	row := func(name string, s podbench.Stats) {
		fmt.Fprintf(w, "%-14s %9.1f %9.1f %9.1f\n", name, s.P50Ms, s.P99Ms, s.StartsPerSec)
	}
	sluice, runc := "sluice", "runc"
	if r.Network == "bridge" {
		sluice, runc = "sluice bridge", "runc + cni"
	}
	row(sluice, r.Sluice)
	if r.SluiceNone != nil {
		row("sluice none", *r.SluiceNone)
	}
	if r.Runc != nil {
		row(runc, *r.Runc)
	} else {
		fmt.Fprintf(w, "%-14s skipped: %s\n", runc, r.RuncSkipped)
	}
	if r.SluiceNone != nil && r.SluiceNone.P50Ms > 0 {
		fmt.Fprintf(w, "bridge p50 / none p50: %.2f\n", r.Sluice.P50Ms/r.SluiceNone.P50Ms)
	}
	return nil
}
