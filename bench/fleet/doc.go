// Package fleet runs many simulated nodes in one process, for load tests
// of a real dispatcher: each node is a real nodelet.Agent with the sim
// runtime, speaking the real nodelet protocol (register, target
// long-poll, reports) over HTTP through nodelet/remote, with its own
// api.Client and so its own connections, as separate hosts would.
//
// StartProcs runs a fleet in child processes of `sluice loadgen fleet`
// instead (10,000 nodes' connections need more open files than one
// process may have), for the benchmarks that share it.
//
// # Invariants
//
//   - Each node has its own sim.Host. A Host lists every pod it holds, and
//     an agent adopts what its runtime lists when it starts: on a shared
//     Host a node started late would adopt, and report, the pods of the
//     others. A Host is a map and a timer per pod, so one per node costs
//     nothing that matters.
//   - Start registers the nodes at most RegisterConcurrency at a time (a
//     registration is a raft commit), each with remote's retries, and
//     starts each agent once its node registered; it returns when every
//     node has, or stops them all on failure.
//   - Close stops every agent and waits for its goroutines, then ends the
//     simulated pods and closes the connections; nothing outlives it.
//   - The processes StartProcs starts die with the calling process, and
//     its stop waits for each of them.
//
// # Usage
//
//	f, err := fleet.Start(ctx, fleet.Config{Addrs: []string{addr}, Nodes: 1000, Pool: "sim"})
//	if err != nil { ... }
//	defer f.Close()
//	fmt.Println(f.Stats().Running)
package fleet
