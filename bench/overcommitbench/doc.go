// Package overcommitbench measures Hippo-style overcommit end to end: how
// much more than a node's capacity Sluice allocates when offline work
// borrows what online work asks for and leaves idle, and what that costs
// the online work.
//
// It owns the scenario and its figures; the mechanisms it measures are the
// dispatcher's usage estimates (package dispatcher) and the nodelet's
// overcommit loop (nodelet/overcommit), used as they are.
//
// # Real containers on this host (Run)
//
// Run starts, in this process, a one-replica dispatcher (pebble on disk,
// the fasthttp API on loopback) and a real nodelet: the container runtime
// (libcontainer), its overcommit loop on a cgroup tree of the run's own,
// heartbeats every second, and a pod network of the run's own (a bridge
// and a free subnet of 10.216.0.0/16, attached through the CNI plugins).
// Then, through the API:
//
//  1. online pods that ask for much CPU and memory and use a duty cycle
//     of it (`workload burn -duty 0.1`), and a probe server, an online pod
//     in bridge mode with a mapped port (`workload http-serve`);
//  2. the unloaded phase: the probe is asked from this host at the node's
//     host IP and the server's mapped port at a fixed rate, for p50/p99;
//  3. the fill: offline pods that burn a whole CPU each and keep memory
//     resident are submitted a job at a time until placement refuses
//     (tasks stay pending with a reason);
//  4. the loaded phase: the same probe, with everything running.
//
// All along it samples, every second, the allocation (what the node's
// tasks ask for, both tiers, over its capacity), the host's CPU
// utilisation and the offline quota as the overcommit loop saw them. At
// the end it reads the online pods' CPU throttling from their cgroups'
// cpu.stat and counts the offline tasks killed, by reason.
//
// The workload runs from an image: Config.Image, or one built from this
// module's source (examples/workload) with the go command.
//
// # Fleet mode
//
// RunFleet (`sluice bench overcommit --fleet`) measures offline lending at
// fleet scale, with simulated pods that use what their specs say
// (api.SimUsage) instead of real processes. It starts a dispatcher cluster
// in process (submitbench.StartCluster: pebble on disk, raft over loopback
// TCP, the HTTP API) and Nodes simulated nodes (bench/fleet, in this
// process or in FleetProcs processes of `sluice loadgen fleet`), each
// sending its pods' usage every HeartbeatPeriod as a real node sends what
// its cgroups measure. Every node's online and offline tiers may allocate
// its whole capacity: what lets offline work past it is the dispatcher's
// usage estimates alone.
//
// It places OnlinePerNode online tasks per node on average (spread over
// the nodes), which ask for OnlineShare of the fleet's capacity and use
// OnlineBase of what they ask, and OnlinePeak of it from every multiple of
// Period (counted from the Unix epoch) for PeakLength: the whole fleet's
// online usage shifts at once, at known times. Then it submits offline
// jobs of OfflineArray tasks continuously, keeping about Backlog offline
// tasks pending, each asking for OfflineCPU and OfflineMemory, using
// OfflineUse of it and running for OfflineRunTime; and every SampleEvery
// for Duration it reads the leader's state in process: the requests of
// both tiers over the capacity (the allocation ratio), what the
// heartbeats report used over the capacity (the utilization), and what
// the online pods are configured to use, what the heartbeats report they
// use and what the dispatcher estimates they use.
//
// For each shift of the online usage whose phase the run saw to its end,
// it reports how fast offline capacity followed: the seconds from the
// shift until the allocation ratio stays within SettleBand of the level
// it holds at the phase's end (the mean of the phase's last fifth). A
// rise is followed as fast as a heartbeat and the offline run time allow
// (an estimate rises with its first larger sample, but running offline
// tasks are not stopped for it: they end on their own); a fall as fast as
// the estimates decay (smaller samples lower one by a fifth of the
// difference every heartbeat period: about ten to come within a tenth).
//
// The fleet mode's figures come from the leader's memory and FSM, not from
// the HTTP API: a list of 10,000 nodes every second would cost the cores
// the run is measured on.
//
// # Invariants
//
//   - Everything Run starts it stops before returning, on failure too: the
//     pods, the nodelet, the dispatcher, the cgroup tree and the pod
//     network; a temporary work directory is removed. Likewise RunFleet:
//     the cluster, the fleet and the submitter, and a temporary Dir.
//   - Every wait is bounded by a deadline; every goroutine Run starts
//     returns before Run does.
//   - The unloaded anchor and the loaded figures come from the same run,
//     the same probe server and the same client.
//
// # Usage
//
//	res, err := overcommitbench.Run(ctx, overcommitbench.Config{})
//	for _, c := range res.Checks() {
//		fmt.Println(c.Name, c.Value, c.Target, c.Met)
//	}
package overcommitbench
