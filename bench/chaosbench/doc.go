// Package chaosbench runs a cluster of real `sluice dispatcher` processes,
// simulated-node fleet processes and, as root, two real `sluice nodelet`
// processes with the container runtime through a seeded schedule of
// faults (kill -9 of replicas, a full disk, raft partitions, a fleet
// process killed, a real nodelet killed or cut off from the network) while a client submits, reads and cancels keyed jobs, and then
// checks what the cluster promised: every acknowledged job exists once,
// every task reached a final state, and the history of operations is
// linearizable.
//
// # Files and what each owns
//
//   - chaos.go: Config, Result and Run, which owns every process, proxy
//     and goroutine it starts and stops them all before it returns.
//   - procs.go: the replica and fleet processes: start, kill -9,
//     restart on the same data directory, the leader's identity, the
//     tmpfs a replica's data directory lives on and filling it.
//   - proxy.go: the fault-injecting TCP proxy that carries the raft
//     traffic of one direction between two replicas (pass, drop, delay).
//   - schedule.go: the fault kinds and the seeded schedule.
//   - workload.go: the client that submits, reads and cancels jobs and
//     records each operation with its call and return times, and the
//     prober, whose one-task jobs (one every 50 ms, each followed until
//     placed) time each fault's unavailability: from the injection to
//     the first placement of a probe submitted after it.
//   - checks.go: the checks after a schedule, among them porcupine's
//     linearizability check over the recorded history.
//   - nodelets.go: the real nodelets: the payload image, the run's own
//     copy of sluice-shim, the job whose pods they run, the pods' evidence
//     (each pod appends its start and its stop to a file on a host_path
//     volume) and what it shows, and the cleanup of whatever outlived
//     them (their cgroups, shims and volume mounts).
//   - cutproxy.go: the HTTP proxies a real nodelet reaches the replicas
//     through, which cut it off.
//   - overlap.go: the fleets' pod logs (bench/fleet's PodLog, and the
//     bench's mark when it killed a fleet process): how long a task ran
//     on two nodes at once.
//
// # Invariants
//
//   - Replica i reaches replica j only through the proxy (i→j) the bench
//     owns: each replica is started with its own --peers in which every
//     other replica's address is that of a proxy, so cutting or delaying
//     the proxies of a replica partitions its raft traffic and nothing
//     else (clients and nodes reach every replica directly).
//   - A real nodelet reaches the replicas only through its own HTTP
//     proxies, one per replica, and is given only their addresses; a
//     proxy rewrites a redirect to the leader into the address of the
//     same nodelet's proxy for the leader. Cutting a nodelet's proxies
//     cuts it off from every replica and nothing else. The replicas
//     advertise their own addresses (--peer-http) as ever: the client,
//     the fleets and the other nodelet are not routed through them.
//   - The real pods are the bench's own job, in a pool of their own
//     (NodeletPool), outside the run's label: the workload's checks do
//     not see them; their own are read from their evidence.
//   - The schedule is a function of the seed and the configuration
//     alone: the same Config gives the same faults in the same order with
//     the same holds; which replica a fault hits is resolved when it is
//     injected (the leader then) and printed with it.
//   - Faults are injected one at a time: each is healed (processes
//     restarted, proxies passing again) and the cluster seen ready
//     (a leader agreed by every replica) before the next.
//   - Every submit carries an idempotency key and is resent with the same
//     key until acknowledged or the run ends; an operation whose outcome
//     is unknown is recorded as such (porcupine then lets it take effect
//     at any time after its call, or never).
//   - A task may run on two nodes at once only while a node (a frozen
//     fleet, a real nodelet cut off) is cut off past the node TTL (a node does not stop its pods when it loses
//     contact; the dispatcher runs them again elsewhere) and until the
//     node, back, stops them: the run checks the longest double run
//     against the longest cut-off beyond the TTL plus 3 s.
//   - The replicas keep every finished job (--job-retention 0,
//     --job-retention-max 0): a job missing at the end was lost, not
//     forgotten.
//   - Reads in the history are consistent reads (?consistent=1, a raft
//     ReadIndex), so linearizability is what the API promises of them.
//
// # Limits
//
// The fleet's pods are simulated: a fleet process killed loses its pods
// (the dispatcher fails them over to other nodes), it does not adopt them
// as a nodelet with a container runtime does; kill-nodelet tests that on
// the real nodelets. A real nodelet cut off is marked down only once its
// open target long-poll has ended (the dispatcher does not see the poll's
// connection drop) and the node TTL has passed: the real nodelets run
// with a 2 s poll wait (nodelet --poll-wait) rather than the default
// 30 s, and a cut lasts that plus 5/4 of the TTL plus the hold. The real
// pods run without a pod network.
package chaosbench
