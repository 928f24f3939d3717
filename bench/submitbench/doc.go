// Package submitbench measures the submit path end to end: concurrent
// clients post bulk bodies of jobs (JSON, optionally gzip or zstd) to a
// dispatcher cluster of real replicas (pebble on disk with fsync, raft over
// loopback TCP, the fasthttp API), and every request counts once the
// cluster acknowledged it, which it does only after the jobs are
// committed. It reports jobs committed per second and the requests'
// p50/p99 latency (`sluice bench submit`).
//
// Latency measures a single task's submit-to-running time through the same
// API on a one-replica cluster with simulated nodelets connected over HTTP
// (the `sluice dev` shape).
package submitbench
