// Package shim is sluice-shim (cmd/sluice-shim): a small helper process
// through which the container runtime creates its containers.
//
// libcontainer starts a container's first process by re-executing the
// binary of the process that creates the container ("init"), which joins
// the namespaces, sets up the root filesystem and execs the program. In
// the nodelet that binary would be the whole sluice binary, whose Go
// runtime and package initialization cost each container several
// milliseconds of CPU and hundreds of page faults; the shim links
// libcontainer and little else, so an init that re-executes it is cheap.
//
// The runtime starts one shim (ServeArg) with a SOCK_SEQPACKET socket on
// descriptor ConnFd. Each Request is one JSON message carrying one
// descriptor, the container's log file; the shim creates the container,
// starts its init up to the exec of the program, and answers with a
// Message giving the init's pid or the error. The runtime then loads the
// container from its state directory and does everything else itself
// (exec, signals, destroy).
//
// # Invariants
//
//   - The shim is the parent of every init it started and reaps only those
//     (libcontainer waits for its own helper processes); each exit is sent
//     once, as a Message with Exited, the code 128+signal for a signalled
//     process and -1 when the status is unknown.
//   - The shim exits when the runtime closes its socket. The inits it
//     started are then left to the runtime's process, a subreaper, which
//     reaps them itself; so a container's exit status is known whether or
//     not its shim outlives it.
//   - Nothing in the shim depends on Sluice's other packages: the lint
//     test TestShimBinaryDeps keeps it small.
package shim
