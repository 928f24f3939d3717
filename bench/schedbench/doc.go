// Package schedbench is the scheduler benchmark behind "sluice bench
// sched": a dispatcher in process on a raftkv cluster (pebble on disk, fsync
// on, replicas over loopback TCP), a number of registered nodes that never
// report (the benchmark measures placements, not runs), and a number of
// pending tasks in realistic jobs (arrays of 1 to 10,000 tasks of a few
// shapes, both QoS classes, priorities 0 to 4). It reports committed
// placements per second from the first submit to the last placement, the
// scheduling rounds' latency percentiles and placement's share of them, and
// the heap the submit added per pending task.
//
// # Invariants
//
//   - Every replica, transport and goroutine Run starts is stopped before
//     it returns, and its data directory removed unless the caller gave
//     one.
//   - The workload is a function of Config.Seed alone.
package schedbench
