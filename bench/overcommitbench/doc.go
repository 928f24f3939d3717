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
// A fleet-scale mode (simulated nodes reporting configured usage) belongs
// beside Run as a function of its own, sharing Result and its Checks.
//
// # Invariants
//
//   - Everything Run starts it stops before returning, on failure too: the
//     pods, the nodelet, the dispatcher, the cgroup tree and the pod
//     network; a temporary work directory is removed.
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
