// Package podbench measures pod start latency on this host: Sluice's
// container runtime (nodelet/runtime/container) side by side, in the same
// run, with the runc CLI on the same root filesystem and limits.
//
// Method: a tiny static Go program (it waits for SIGTERM, or exits 0 when
// given "exit") is built with CGO_ENABLED=0 into a fresh rootfs. Pods
// pods are started by workers at a time (the concurrency). For Sluice one
// start is runtime.Start of a one-container pod (sandbox + container),
// which returns once the process runs; for runc it is `runc run -d` of a
// bundle whose config.json comes from `runc spec`, edited to the same
// program, limits (CPU quota, memory, pids) and a read-only root, which
// returns once the process runs. Latency is request → running; starts/s is
// pods over the wall time of the whole phase. Stopping and deleting are
// not timed. Sluice's runtime creates its containers through sluice-shim
// when it is installed beside the binary (as `make build` puts it), as
// the nodelet does. Needs root. Keep the binary outside the work directory's
// ancestors (for example not in /tmp with the default work directory):
// libcontainer then copies the binary for every container start, which
// measures that copy, not the runtime.
//
// With Network "bridge" the pods run in bridge mode, attached through the
// CNI plugins (Debian's, in /usr/lib/cni) to a bridge and subnet of the
// run's own, and the same run also measures the same pods in none mode
// (Result.SluiceNone, loopback only, as without Network) and runc into a
// network namespace the same plugins set up: for each runc pod the
// namespace is made (unshare on a locked thread), pinned and attached by
// ADD (package cni, as the runtime does), and `runc run -d` joins it; its
// latency is all three, as `ip netns add`, `cnitool add` and `runc run`
// in a row would be.
//
// Both runtimes keep their state (Sluice's state directory with the pods'
// records and logs, runc's --root) on a tmpfs mounted for the run, as
// their defaults put it on a host: /run/sluice/containers and /run/runc,
// /run being a tmpfs. On a disk file system, metadata work (ext4 inode
// allocation among the directories the previous pods left) becomes a
// large part of every start, for both, which measures the disk, not the
// runtime. The rootfs and runc's bundles stay in the work directory.
package podbench
