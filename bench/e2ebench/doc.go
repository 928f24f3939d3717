// Package e2ebench is the stepped end-to-end benchmark (`sluice bench
// e2e`): how many tasks per second a whole Sluice cluster places and
// starts, submit to running, before its latencies or its throughput give
// way.
//
// Run starts a dispatcher cluster in process (submitbench.StartCluster:
// real replicas, pebble on disk with fsync, raft over loopback TCP, the
// HTTP API), then a fleet of simulated nodes against every replica
// (bench/fleet: real nodelet agents speaking the real protocol over
// HTTP, each with its own connections), and waits until the dispatcher
// lists every node ready. Then it offers load in steps: each step runs a
// loadgen Driver, open loop, at a task rate (StartRate, then multiplied by
// StepFactor or increased by StepRate each step) for StepDuration, and
// takes the Driver's Result: the placed tasks per second achieved, the
// p99 of submit→placed (every task, from the watch stream) and of
// submit→running (the tasks of sampled jobs, listed every 20ms), and the
// failed requests.
//
// With Warmup, a Driver first offers StartRate for that long, unjudged,
// so that the steps measure processes that have been serving (grown
// heaps, filled caches) rather than ones touching memory for the first
// time.
//
// With MoveLeaderEvery, the leading replica hands its leadership to the
// next one that often, through the warm-up and the steps, and each step
// counts the moves (Step.LeaderMoves): the same judgement then says what
// the cluster sustains through elections, with submits redirected and
// every node's long-poll moving to the new leader while the old one still
// holds its connections.
//
// A step is sustained when it placed at least SustainedFraction (90%) of
// the tasks per second it offered, no request failed for good, some task
// was seen running, and both p99s are within their limits. Run stops at
// the first step that is not (the knee) or after Steps steps, and reports
// every step and the highest sustained one.
//
// # Soak
//
// RunSoak holds one rate for long (`sluice bench e2e --soak 10m`): with
// Soak set, it offers StartRate for that long in a single open-loop
// Driver (after the warm-up, if any), the leadership moved every
// MoveLeaderEvery from half a row in, and reads the run as rows of
// SoakInterval (a minute): the Driver's intervals (loadgen.Interval:
// arrivals by their arrival time, placements and latencies by when they
// were seen) with each process's peak resident set over the row (VmRSS,
// sampled every second: this process, holding the replicas and the load
// generator, and each fleet process), the CPU time per task and the
// leader moves. The soak holds when every row holds by the rule of a step
// (below), the whole soak does as one step and leaves no task unplaced,
// and no process's memory grows: the least-squares slope of its rows'
// peak RSS after the first SoakSettle rows (two) is at most
// RSSGrowthFraction (1%) of its mean a minute, at least RSSGrowthFloorMiB
// (see there for why).
//
// # Invariants
//
//   - Each step is one Driver with its own run ID, seed Seed+step and a
//     fresh watch stream; the tasks of earlier steps may still be running
//     (their simulated run time) while the next one starts, as in a
//     cluster under steady load.
//   - A task rate is turned into a job rate with the array size's mean, so
//     the offered task rate is the asked one on average; the comparison
//     with the achieved rate uses the tasks actually generated.
//   - Everything Run or RunSoak starts (cluster, fleet, drivers, the
//     leader mover, the memory sampler) has stopped when it returns, and
//     a temporary Dir is removed.
//   - A fleet process that exits early fails the step it exits in (or
//     the next one), with its exit as the error: without it the step's
//     figures would not be the whole run's.
//
// # Caveats
//
// The load generator, the fleet and the cluster share this machine's
// cores: the knee found is the whole system's on this host. A step's
// Driver opens its watch where the previous step's ended
// (loadgen.DriverConfig.WatchFrom): from the start, the events of every
// earlier step's job were replayed before the new ones, and the
// observation of a later step's first placements came late by the
// replay. Achieved rates are over the step's window or, when the
// cluster fell behind, until its last placement, so a drain that ends
// before the backlog does still shows as a shortfall.
//
// # Usage
//
//	res, err := e2ebench.Run(ctx, e2ebench.Config{Nodes: 2000, StartRate: 500, StepDuration: 10 * time.Second})
//	if err != nil { ... }
//	fmt.Println(res.MaxSustainedTasksPerSec, res.P99SubmitToPlacedMs)
//
//	soak, err := e2ebench.RunSoak(ctx, e2ebench.Config{StartRate: 100_000, Soak: 10 * time.Minute,
//		MoveLeaderEvery: time.Minute, FleetProcs: 3, FleetExec: "/usr/local/bin/sluice"})
//	for _, row := range soak.Rows { fmt.Println(row.Row, row.PlacedTasksPerSec, row.RSSMiB) }
package e2ebench
