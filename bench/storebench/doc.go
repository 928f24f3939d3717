// Package storebench measures replicated stores the same way, so that
// Sluice's raftkv and its anchor, etcd, are compared side by side in one
// run: Drive runs a fixed number of concurrent writers of fixed-size values
// against a Store for a set time and reports committed writes per second
// and latency percentiles; Etcd starts a local etcd cluster (the Debian
// etcd-server binary, one process per member on loopback, each with its own
// data directory and fsync on) and wraps a client as a Store. StartRaftKV
// starts raftkv's side, with mutual TLS between its replicas on request
// (throwaway certificates), so that its cost is measured in the same run.
//
// # Invariants
//
//   - A write counts only once the store has acknowledged it as committed;
//     a failed write is counted as an error, never as throughput.
//   - Every process and goroutine Drive or Etcd starts is stopped by the
//     time Drive returns or Close returns.
package storebench
