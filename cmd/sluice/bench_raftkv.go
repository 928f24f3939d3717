package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/bench/storebench"
)

func newBenchRaftkvCmd() *cobra.Command {
	var (
		cfg    storebench.CompareConfig
		asJSON bool
	)
	c := &cobra.Command{
		Use:   "raftkv",
		Short: "Measure the replicated store against etcd",
		Long: `Raftkv starts --replicas raftkv replicas on loopback (separate pebble
directories, fsync on) and drives --writers concurrent writers of
--value-bytes values for --duration after --warmup, printing committed
writes per second and p50/p99 latency; then it does the same with an etcd
cluster of as many members (the Debian etcd-server binary, one process per
member), side by side. Without etcd on PATH the etcd side is skipped;
install it with scripts/install-etcd.sh (apt-get install -y etcd-server).
The etcd side is driven by the etcd load driver, a binary of its own
(make etcdload puts it in bin/etcdload beside bin/sluice), so that the sluice
binary does not carry etcd's client.
With --value-bytes of a few hundred KB it measures the throughput of large
commands, as the dispatcher proposes them (one round, one command); with
--failover it also stops the raftkv leader under load and times the first
write of the new leader. With --peer-tls the raftkv replicas speak mutual
TLS 1.3 among themselves (throwaway certificates made in the work
directory; etcd stays plaintext): to see its cost, alternate runs with and
without it, one process each (a second cluster in one process runs slower
than the first, which would blur the difference).`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(c *cobra.Command, _ []string) error {
			res, err := storebench.Compare(c.Context(), cfg)
			if err != nil {
				return err
			}
			return printStoreBench(c.OutOrStdout(), res, asJSON)
		},
	}
	f := c.Flags()
	f.IntVar(&cfg.Writers, "writers", 256, "concurrent writers, each with one write in flight")
	f.IntVar(&cfg.ValueBytes, "value-bytes", 256, "bytes per value")
	f.DurationVar(&cfg.Duration, "duration", 10*time.Second, "how long to measure")
	f.DurationVar(&cfg.Warmup, "warmup", 2*time.Second, "how long to write before measuring")
	f.IntVar(&cfg.Replicas, "replicas", 3, "replicas (and etcd members)")
	f.BoolVar(&cfg.NoEtcd, "no-etcd", false, "skip the etcd side")
	f.StringVar(&cfg.EtcdDriver, "etcd-driver", "", "the etcd load driver (default: etcdload beside this binary, or on PATH)")
	f.BoolVar(&cfg.Failover, "failover", false, "also time a raftkv leader failover under load")
	f.BoolVar(&cfg.PeerTLS, "peer-tls", false, "raftkv's replicas speak mutual TLS among themselves")
	f.StringVar(&cfg.Dir, "work-dir", "", "directory for the data (default: a temporary one, removed)")
	f.BoolVar(&asJSON, "json", false, "print the result as one JSON object")
	return c
}

func printStoreBench(w io.Writer, r storebench.Comparison, asJSON bool) error {
	if asJSON {
		return printJSON(w, r)
	}
	fmt.Fprintf(w, "%d replicas, %d writers, %d-byte values\n", r.Replicas, r.Writers, r.ValueBytes)
	fmt.Fprintf(w, "%-10s %12s %10s %9s %9s %8s\n", "store", "writes/s", "MB/s", "p50 ms", "p99 ms", "errors")
	row := func(name string, x storebench.Result) {
		fmt.Fprintf(w, "%-10s %12.0f %10.1f %9.2f %9.2f %8d\n", name, x.WritesPerSec, x.MBPerSec, x.P50Ms, x.P99Ms, x.Errors)
	}
	name := "sluice"
	if r.PeerTLS {
		name = "sluice+tls"
	}
	row(name, r.Sluice)
	if r.Etcd != nil {
		row("etcd", *r.Etcd)
		if r.Etcd.WritesPerSec > 0 {
			fmt.Fprintf(w, "sluice/etcd writes/s: %.2fx\n", r.Sluice.WritesPerSec/r.Etcd.WritesPerSec)
		}
	}
	if r.FailoverMs > 0 {
		fmt.Fprintf(w, "failover: first write of the new leader %.0f ms after the old one stopped\n", r.FailoverMs)
	}
	return nil
}
